"""Luong et al. (2015) global "dot" attention with input feeding, MetaMind's WMT16 single
system (Bradbury & Socher 2016, §2), on Multi30k en→de.

    memnmt train multi30k_luong --data-dir $MEMNMT_DATA --out runs/luong

Every validation's weights are kept (``checkpoints/step{N}.keras``) for ensembles of
checkpoints and checkpoint averaging (``memnmt average``). Results: docs/results.md.
"""

from recipes.multi30k_rnnsearch import CONFIG as RNNSEARCH

# The data, vocabulary, batches, optimizer, label smoothing, schedule and 30-epoch budget of
# multi30k_rnnsearch, with its embedding, readout and dropout settings (tied output, embedding
# dropout 0.2, annotation dropout 0.2, output dropout 0.5 on h~_t). The paper's 4 layers do not
# train in three hours on this 2-core CPU: 2 layers of 384 in each stack, the encoder's bottom
# layer bidirectional (192 + 192), the decoder's layers started from the encoder's; the size and
# the 0.3 dropout between layers (the paper: 0.2 with WMT's 4.4M pairs) are the Attentive NMT
# recipes', so that the two differ only in their decoders. h~_t has 256 features: the softmax
# reads it through the tied target embedding.
CONFIG = RNNSEARCH.replace(model="luong", score="dot", input_feeding=True, num_layers=2, encoder_units=384,
                           decoder_units=384, readout_units=256, bidirectional_bottom=True, layer_dropout=0.3,
                           keep_checkpoints=True)
