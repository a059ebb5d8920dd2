2026-12-02, AMD EPYC, 2 CPU cores (shared with a niced training run), KERAS_BACKEND=tensorflow, code at eed62aa:
python benchmarks/mbr.py --run runs/rnnsearch_1000steps --data-dir $MEMNMT_DATA --candidates 16 --out docs/records/mbr_rnnsearch_1000steps
