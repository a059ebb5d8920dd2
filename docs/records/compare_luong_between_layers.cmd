2026-11-27T19:30:07Z memnmt compare docs/records/rnnsearch docs/records/luong_between_layers --data-dir $MEMNMT_DATA --json docs/records/compare_luong_between_layers.json
