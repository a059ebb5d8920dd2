2026-11-26T09:51:58Z memnmt compare docs/records/rnnsearch docs/records/memdec_scratch --data-dir $MEMNMT_DATA --json docs/records/compare_rnnsearch_memdec_scratch.json
