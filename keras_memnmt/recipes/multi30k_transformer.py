"""The Transformer (Vaswani et al. 2017) on Multi30k en→de, sized for a 2-core CPU.

memnmt train multi30k_transformer --data-dir $MEMNMT_DATA --out runs/transformer
"""

from keras_memnmt.recipes.multi30k_rnnsearch import CONFIG as RNNSEARCH

# The data, vocabulary (8,000 pieces a side), batches of 64 sentences, gradient clipping at 1.0,
# label smoothing 0.1 (the paper's), beam 5 and the 30-epoch budget with its early stop of
# multi30k_rnnsearch; the RNN options that the Transformer does not have are dropped with the
# change of model.
CONFIG = RNNSEARCH.replace(
    model="transformer",
    # The paper's base model halved in depth, width and feed-forward size (6 layers, d 512, 8 heads,
    # FFN 2048 were sized for WMT's 4.5M pairs; Multi30k has 29k and this CPU 2 cores): the size
    # of the small Transformers that do well on IWSLT-sized corpora.
    num_layers=3,
    embedding_dim=256,  # d_model
    num_heads=4,  # 64 features per head, as in the paper
    feedforward_units=1024,  # 4 d_model, as in the paper
    dropout=0.1,  # the paper's P_drop for the base model
    tie_embeddings=True,  # the output projection is the target embedding (§3.4)
    # Adam with the paper's schedule (§5.3): a linear warm-up over 1,000 updates (about two
    # epochs of 461 batches) to a peak of 1e-3, then 1/sqrt(step), ending near 2.7e-4 after 30
    # epochs. The paper's own peak, d^-0.5 · 4000^-0.5 = 9.9e-4 for d 256, is about the same;
    # its 4,000 warm-up updates of 25k tokens are far more data than 4,000 of Multi30k's
    # 64-sentence batches. The plateau decay is off: the schedule sets the rate.
    learning_rate=1e-3,
    warmup_steps=1000,
    lr_decay=1.0,
)
