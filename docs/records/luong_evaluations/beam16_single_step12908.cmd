2026-11-26T05:52:26Z memnmt evaluate --model runs/luong --checkpoint step12908 --data-dir $MEMNMT_DATA --beam 16 --length-penalty average --quiet
