2026-11-26T05:53:10Z memnmt evaluate --model runs/luong --checkpoint step13369 --data-dir $MEMNMT_DATA --beam 16 --length-penalty average --quiet
