"""Luong et al. (2015) global "dot" attention with input feeding, MetaMind's WMT16 single
system (Bradbury & Socher 2016, §2), on Multi30k en→de.

    memnmt train multi30k_luong --data-dir $MEMNMT_DATA --out runs/luong

Every validation's weights are kept (``checkpoints/step{N}.keras``) for ensembles of
checkpoints and checkpoint averaging (``memnmt average``). Results: docs/results.md.
"""

from keras_memnmt.recipes.multi30k_rnnsearch import CONFIG as RNNSEARCH

# The data, vocabulary, batches, optimizer, label smoothing, schedule and 30-epoch budget of
# multi30k_rnnsearch, with its embedding, readout and output settings (tied output, embedding
# dropout 0.2, output dropout 0.5 on h~_t). The paper's 4 layers do not
# train in three hours on this 2-core CPU: 2 layers of 384 in each stack, the encoder's bottom
# layer bidirectional (192 + 192), the decoder's layers started from the encoder's; the size and
# the 0.3 dropout between layers (the paper: 0.2 with WMT's 4.4M pairs) are the Attentive NMT
# recipes', so that the two differ only in their decoders. h~_t has 256 features: the softmax
# reads it through the tied target embedding. Dropout is placed as Luong et al. and OpenNMT-py
# place it: between the layers only (layer_dropout_on_top=False: the dot attention's query is
# never dropped, so training and test see dot scores of one scale) and no dropout on the
# annotations. At 300 steps of width 128 (benchmarks/source_gain.py) this placement gave a
# teacher-forced validation cross-entropy of 4.62 and a source gain of 0.35 nats per token,
# against 4.67 and 0.30 with the top output and the annotations dropped (docs/decisions.md).
CONFIG = RNNSEARCH.replace(
    model="luong",
    score="dot",
    input_feeding=True,
    num_layers=2,
    encoder_units=384,
    decoder_units=384,
    readout_units=256,
    bidirectional_bottom=True,
    layer_dropout=0.3,
    layer_dropout_on_top=False,
    annotation_dropout=0.0,
    keep_checkpoints=True,
)
