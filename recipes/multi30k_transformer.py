"""The Transformer (Vaswani et al. 2017) on Multi30k en→de, sized for a 2-core CPU.

    memnmt train multi30k_transformer --data-dir $MEMNMT_DATA --out runs/transformer
"""

from recipes.multi30k_rnnsearch import CONFIG as RNNSEARCH

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
    # Adam with the plateau schedule of the other recipes, at half their rate: the config has no
    # warm-up + inverse-square-root schedule (the paper's). The layers are pre-norm, which
    # trains without a warm-up (Xiong et al. 2020); the post-norm layers of the paper need one.
    learning_rate=5e-4,
    lr_decay=0.5,  # halve the rate after lr_patience validations without a BLEU gain
    lr_patience=2,
)
