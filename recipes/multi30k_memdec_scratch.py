"""MemDec on Multi30k en→de trained from scratch (no RNNsearch pre-training).

    memnmt train multi30k_memdec_scratch --data-dir ../shared/data/multi30k --out runs/memdec_scratch
"""

import dataclasses

from recipes.multi30k_memdec import CONFIG as MEMDEC

# From random weights MemDec trains at the RNNsearch rate, not the fine-tuning one.
CONFIG = dataclasses.replace(MEMDEC, pretrain_run=None, pretrain_epochs=0, epochs=20,
                             learning_rate=MEMDEC.pretrain_learning_rate, pretrain_learning_rate=None)
