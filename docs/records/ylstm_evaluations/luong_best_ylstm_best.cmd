2026-11-26T06:04:38Z memnmt evaluate --model runs/luong --model runs/ylstm --data-dir $MEMNMT_DATA --beam 5 --quiet
