2026-11-26T05:46:23Z memnmt evaluate --model runs/luong --checkpoint runs/luong/average_last4.keras --data-dir $MEMNMT_DATA --beam 5 --quiet
