"""The Y-LSTM (Bradbury & Socher 2016, §2.1) on Multi30k en→de: encoder and decoder are
language models joined only by attention between their tracker LSTMs.

    memnmt train multi30k_ylstm --data-dir $MEMNMT_DATA --out runs/ylstm

Its vocabularies are multi30k_luong's (the same data and settings), so the two ensemble:
`memnmt evaluate --model runs/luong --model runs/ylstm ...`. Results: docs/results.md.
"""

from recipes.multi30k_rnnsearch import CONFIG as RNNSEARCH

# The data, vocabulary, batches, optimizer, label smoothing, schedule and 30-epoch budget of
# multi30k_rnnsearch, with its embedding size and dropout on the embeddings (0.2) and before the
# softmax (0.5). The paper's shape, smaller: 5 LSTM layers in each stack with the tracker on
# layer 3, of 256 units (the paper's sizes are not given; 256 = the embedding size, so the
# softmax reads the top layer through the tied target embedding), dropout 0.2 between layers
# (the paper's 0.2), and the encoder's language-model loss at weight 1 (the paper's sum).
CONFIG = RNNSEARCH.replace(model="ylstm", num_layers=5, tracker_layer=3, tracker_units=256, encoder_units=256,
                           decoder_units=256, score="dot", layer_dropout=0.2, encoder_lm_weight=1.0)
