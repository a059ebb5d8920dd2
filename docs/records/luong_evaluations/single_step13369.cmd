2026-11-26T05:44:39Z memnmt evaluate --model runs/luong --checkpoint step13369 --data-dir $MEMNMT_DATA --beam 5 --quiet
