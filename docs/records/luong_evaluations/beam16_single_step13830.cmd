2026-11-26T05:53:53Z memnmt evaluate --model runs/luong --checkpoint step13830 --data-dir $MEMNMT_DATA --beam 16 --length-penalty average --quiet
