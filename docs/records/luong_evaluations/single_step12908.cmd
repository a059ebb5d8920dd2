2026-11-26T05:44:18Z memnmt evaluate --model runs/luong --checkpoint step12908 --data-dir ../shared/data/multi30k --beam 5 --quiet
