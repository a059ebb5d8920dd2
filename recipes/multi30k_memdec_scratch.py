"""MemDec on Multi30k en→de trained from scratch (no RNNsearch pre-training).

    memnmt train multi30k_memdec_scratch --data-dir ../shared/data/multi30k --out runs/memdec_scratch
"""

import dataclasses

from recipes.multi30k_memdec import CONFIG as MEMDEC

CONFIG = dataclasses.replace(MEMDEC, pretrain_run=None, pretrain_epochs=0, epochs=20)
