2026-11-26T05:43:58Z memnmt evaluate --model runs/luong --checkpoint step12447 --data-dir $MEMNMT_DATA --beam 5 --quiet
