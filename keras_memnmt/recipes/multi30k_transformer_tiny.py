"""A small Transformer on Multi30k en→de at the command published for this data size:
Wu et al. 2021's Transformer-tiny (41.02 tokenized BLEU on test_2016 with fairseq, the
average of the last 10 checkpoints).

    memnmt train multi30k_transformer_tiny --data-dir $MEMNMT_DATA --out runs/transformer_tiny
    memnmt average --model runs/transformer_tiny --last 10 --out runs/transformer_tiny_last10.keras

Results: docs/results.md.
"""

from keras_memnmt.recipes.multi30k_transformer import CONFIG as TRANSFORMER

# The published command (`train.py --arch transformer_tiny --share-all-embeddings
# --dropout 0.3 --warmup-updates 2000 --lr 0.005 --max-tokens 4096 --max-update 8000
# --patience 10` on two GPUs) and the defaults of the fairseq fork it runs in, setting by
# setting:
# - 4 layers, d 128, FFN 256, 4 heads, dropout 0.3, every embedding shared (one joint
#   vocabulary, the lookups scaled by sqrt(d)), sine positions.
# - 8,192 tokens per update: --max-tokens 4096 on each of two GPUs, whose gradients are
#   summed over both batches' tokens, as one batch of 8,192 is.
# - Adam (0.9, 0.98), epsilon 1e-8 (the fork's defaults), 5e-3 after 2,000 linear warm-up
#   updates and 1/sqrt(step) after (inverse_sqrt; the warm-up starts at 0 here, at 1e-7
#   there); gradients clipped at a global norm of 25 (the fork's --clip-norm default).
# - No dropout on the attention weights (--attention-dropout 0, fairseq's
#   base_architecture) nor inside the FFN (this library's Transformer has none there).
# - Label smoothing 0: the command names no --criterion, so fairseq's default
#   label_smoothed_cross_entropy trains, with its --label-smoothing default of 0.
# - The search: beam 5, the score divided by the length (--lenpen 1; "average", eos
#   counted as fairseq counts it); the length bound stays this library's 1.5 x source + 10
#   (fairseq's 0 x source + 200 only matters to a translation that runs on).
# What differs, decided here: pre-norm layers (the published are post-norm: pre-norm
# trains without depending on the warm-up, docs/decisions.md), the joint vocabulary's
# kind and size (10,000 SentencePiece unigram pieces, about the two 8,000-piece sides'
# union; the published is BPE), and no early stop: fairseq's patience counts the
# validation loss, which falls throughout, while this library's counts the greedy
# validation BLEU, which swings by 2-3 points between epochs at this rate; with patience
# 10 a run stopped after 5,754 of its 8,000 updates (docs/results.md). BLEU: the
# published is fairseq's on lowercased Moses tokens, which sacreBLEU's lowercased 13a
# (the records' "lc") gives to the hundredth on this data (docs/results.md).
CONFIG = TRANSFORMER.replace(
    joint_vocab=True,
    vocab_size=10000,
    batch_by="tokens",
    batch_size=8192,  # padded tokens of the longer side per batch, as fairseq's --max-tokens
    num_layers=4,
    embedding_dim=128,
    num_heads=4,
    feedforward_units=256,
    dropout=0.3,
    attention_dropout=0.0,
    tie_embeddings=True,
    share_embeddings=True,  # fairseq's --share-all-embeddings
    learning_rate=5e-3,
    warmup_steps=2000,
    adam_beta_2=0.98,
    adam_epsilon=1e-8,
    clipnorm=25.0,
    label_smoothing=0.0,
    length_penalty="average",
    max_steps=8000,
    epochs=400,  # max_steps decides: 8,000 updates are about 117 epochs of 69 batches
    patience=0,
    keep_checkpoints=True,  # a checkpoint per epoch, for `memnmt average --last 10`
)
