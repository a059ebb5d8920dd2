"""The Cho et al. encoder–decoder baseline on Multi30k en→de (same pipeline and sizes as RNNsearch).

    memnmt train multi30k_cho --data-dir ../shared/data/multi30k --out runs/cho
"""

import dataclasses

from recipes.multi30k_rnnsearch import CONFIG as RNNSEARCH

CONFIG = dataclasses.replace(RNNSEARCH, model="cho")  # fixed context vector instead of attention
