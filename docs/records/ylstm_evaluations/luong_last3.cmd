2026-11-26T06:05:17Z memnmt evaluate --model runs/luong --checkpoint step12908 --checkpoint step13369 --checkpoint step13830 --data-dir $MEMNMT_DATA --beam 5 --quiet
