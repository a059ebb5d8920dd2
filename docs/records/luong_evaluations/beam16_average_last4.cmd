2026-11-26T05:54:36Z memnmt evaluate --model runs/luong --checkpoint runs/luong/average_last4.keras --data-dir $MEMNMT_DATA --beam 16 --length-penalty average --quiet
