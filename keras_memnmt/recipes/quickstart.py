"""The README's main job: a small RNNsearch trained for a few minutes on this CPU.

Uses Multi30k en→de when a local copy is given (or the download works), otherwise
the synthetic corpus; the log says which.

    memnmt train quickstart --out runs/quickstart
"""

from keras_memnmt.config import TrainConfig

CONFIG = TrainConfig(
    corpus="auto",  # Multi30k if available, else synthetic
    train_limit=10000,  # the first 10k Multi30k pairs keep the demo short
    val_limit=200,  # validate on 200 sentences
    synthetic_size=10000,
    vocab_size=4000,
    max_length=40,
    batch_size=64,
    model="rnnsearch",
    model_options=dict(
        embedding_dim=128,
        encoder_units=128,
        decoder_units=256,
        attention_units=256,
        readout_units=128,
        output_dropout=0.2,
    ),
    learning_rate=2e-3,
    epochs=100,  # bounded by max_steps
    max_steps=600,  # about 5 minutes here
    validate_every=200,
    patience=0,  # no early stop
    beam_size=5,
)
