2026-11-26T13:51:04Z memnmt compare docs/records/rnnsearch docs/records/rmr docs/records/rmn_context_input --data-dir $MEMNMT_DATA --json docs/records/compare_rnnsearch_rmr_rmn.json
