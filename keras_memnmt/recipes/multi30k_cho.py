"""The Cho et al. encoder–decoder baseline on Multi30k en→de (same pipeline and sizes as RNNsearch).

memnmt train multi30k_cho --data-dir $MEMNMT_DATA --out runs/cho
"""

from keras_memnmt.recipes.multi30k_rnnsearch import CONFIG as RNNSEARCH

# A fixed context vector instead of attention; the RNNsearch options Cho does not have
# (attention_units, feedback_attention) are dropped with the change of model.
CONFIG = RNNSEARCH.replace(model="cho")
