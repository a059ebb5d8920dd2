2026-11-26T05:44:59Z memnmt evaluate --model runs/luong --checkpoint step13830 --data-dir $MEMNMT_DATA --beam 5 --quiet
