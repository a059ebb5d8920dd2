2026-11-27T16:12:01Z memnmt compare docs/records/ylstm docs/records/ylstm_same_step --data-dir $MEMNMT_DATA --json docs/records/compare_ylstm_same_step.json
