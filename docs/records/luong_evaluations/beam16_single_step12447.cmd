2026-11-26T05:51:41Z memnmt evaluate --model runs/luong --checkpoint step12447 --data-dir $MEMNMT_DATA --beam 16 --length-penalty average --quiet
