"""The initializer of the source and target embeddings of every model."""

from __future__ import annotations

import keras


def embedding_initializer(lookup_scale: float = 1.0) -> keras.initializers.Initializer:
    """N(0, 1), as PyTorch's ``nn.Embedding``, for source and target embeddings.

    ``lookup_scale``: the factor the lookups are multiplied by (a tied target embedding's
    ``sqrt(E)``); the rows start at ``N(0, 1 / lookup_scale^2)``, so the lookups are N(0, 1).

    Decision: Keras's default ``uniform(-0.05, 0.05)`` makes ``e_{y_{t-1}}`` about
    20× smaller than the attention context in the decoder's GRU and deep-output
    inputs; on Multi30k (6,000 pairs, 2 epochs, comparison size) it left the
    training loss at 5.76 against 4.20 with N(0, 1).
    """
    return keras.initializers.RandomNormal(stddev=1.0 / lookup_scale)
