2026-11-26T05:44:18Z memnmt evaluate --model runs/luong --checkpoint step12908 --data-dir $MEMNMT_DATA --beam 5 --quiet
