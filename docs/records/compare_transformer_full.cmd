2026-11-27T22:05:52Z memnmt compare docs/records/rnnsearch docs/records/transformer_full --data-dir $MEMNMT_DATA --json docs/records/compare_transformer_full.json
