2026-11-26T17:25:36Z memnmt compare docs/records/rnnsearch docs/records/attentive_dot docs/records/attentive_general --data-dir $MEMNMT_DATA --json docs/records/compare_rnnsearch_attentive.json
