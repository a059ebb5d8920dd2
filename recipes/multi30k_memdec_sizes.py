"""The memory-size study of the MemDec paper (Table 2): one MemDec run per n, then a
results table in OUT/results.md. RNNsearch is pre-trained once, in
OUT/pretrain_rnnsearch, and every run warm-starts from it; pass --set
pretrain_run=RUN_DIR to warm-start every run from an existing RNNsearch run instead.

    memnmt train multi30k_memdec_sizes --data-dir ../shared/data/multi30k --out runs/memdec_sizes
"""

from recipes.multi30k_memdec import CONFIG  # noqa: F401  (the shared config)

STUDY = {"memory_size": [4, 6, 8, 10, 12]}  # paper Table 2
