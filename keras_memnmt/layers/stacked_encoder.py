"""The stacked-LSTM encoder of the Luong and Attentive NMT models (Luong et al. 2015)."""

from __future__ import annotations

import keras
from keras import ops

from keras_memnmt.layers.base import EncoderOutput
from keras_memnmt.layers.bidirectional_encoder import bidirectional
from keras_memnmt.layers.embedding import embedding_initializer
from keras_memnmt.tokens import PAD_ID


@keras.saving.register_keras_serializable(package="keras_memnmt")
class StackedLSTMEncoder(keras.layers.Layer):
    """Embedding + ``num_layers`` unidirectional LSTMs, masked over source padding (Luong
    et al. 2015; Salton et al. 2017 use 4 layers of 1,000).

    Every layer's final ``[h, c]`` is handed over (``final_states``, bottom first), so a
    stacked decoder can start layer ``l`` from encoder layer ``l``. Keras's
    ``keras.layers.LSTM`` runs each layer.

    Args:
        vocab_size: source vocabulary size.
        embedding_dim: source embedding size.
        units: LSTM units of every layer (annotations have ``units``).
        num_layers: stacked layers.
        dropout: dropout on the embeddings (training only).
        layer_dropout: dropout on each layer's output sequence that feeds the layer above
            (the non-recurrent connections; training only).
        annotation_dropout: dropout on the top layer's outputs, the annotations (training
            only; as in :class:`~keras_memnmt.layers.BidirectionalEncoder`).
        bidirectional_bottom: the bottom layer reads the sentence both ways, ``units // 2``
            per direction (GNMT's encoder); its hand-off is ``[h_fwd; h_bwd]``,
            ``[c_fwd; c_bwd]``. ``units`` must then be even.

    Call arguments:
        source_ids: ``(B, Tx)`` int ids, ``0`` = padding.

    Returns:
        an :class:`~keras_memnmt.layers.EncoderOutput`: the top layer's outputs as
        annotations ``(B, Tx, units)``, ``mask (B, Tx)``, ``summary`` = the top layer's
        final ``h``, and ``final_states`` = ``([h_1, c_1], ..., [h_L, c_L])``.
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 256,
        units: int = 256,
        num_layers: int = 2,
        dropout: float = 0.0,
        layer_dropout: float = 0.0,
        annotation_dropout: float = 0.0,
        bidirectional_bottom: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (
            ("vocab_size", vocab_size),
            ("embedding_dim", embedding_dim),
            ("units", units),
            ("num_layers", num_layers),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, rate in (
            ("dropout", dropout),
            ("layer_dropout", layer_dropout),
            ("annotation_dropout", annotation_dropout),
        ):
            if not 0.0 <= rate < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {rate}")
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.units = units
        self.num_layers = num_layers
        self.dropout = dropout
        self.layer_dropout = layer_dropout
        if bidirectional_bottom and units % 2:
            raise ValueError(f"bidirectional_bottom needs an even units (units // 2 per direction), got {units}")
        self.bidirectional_bottom = bool(bidirectional_bottom)
        self.embedding = keras.layers.Embedding(
            vocab_size, embedding_dim, name="source_embedding", embeddings_initializer=embedding_initializer()
        )
        self.embedding_dropout = keras.layers.Dropout(dropout)
        self.annotation_dropout = annotation_dropout
        self.layer_dropouts = [keras.layers.Dropout(layer_dropout) for _ in range(num_layers - 1)]
        self.layer_dropouts.append(keras.layers.Dropout(annotation_dropout))  # on the annotations
        self.lstms = [
            keras.layers.LSTM(units, return_sequences=True, return_state=True, name=f"lstm_{i}")
            for i in range(num_layers)
        ]
        if self.bidirectional_bottom:
            self.lstms[0] = bidirectional(
                keras.layers.LSTM(units // 2, return_sequences=True, return_state=True), name="lstm_0"
            )

    @property
    def annotation_units(self) -> int:
        return self.units

    def build(self, input_shape):
        self.embedding.build(input_shape)
        for i, lstm in enumerate(self.lstms):
            lstm.build(tuple(input_shape) + (self.embedding_dim if i == 0 else self.units,))

    def call(self, source_ids, training=False):
        mask = ops.not_equal(source_ids, PAD_ID)  # (B, Tx) bool
        x = self.embedding_dropout(self.embedding(source_ids), training=training)  # (B, Tx, E)
        final_states = []
        for lstm, dropout in zip(self.lstms, self.layer_dropouts):
            if isinstance(lstm, keras.layers.Bidirectional):
                x, h_fwd, c_fwd, h_bwd, c_bwd = lstm(x, mask=mask, training=training)
                h, c = ops.concatenate([h_fwd, h_bwd], axis=-1), ops.concatenate([c_fwd, c_bwd], axis=-1)
            else:
                x, h, c = lstm(x, mask=mask, training=training)  # (B, Tx, U), (B, U), (B, U)
            final_states.append([h, c])
            x = dropout(x, training=training)
        return EncoderOutput(x, ops.cast(mask, x.dtype), final_states[-1][0], tuple(final_states))

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "num_layers": self.num_layers,
            "dropout": self.dropout,
            "layer_dropout": self.layer_dropout,
            "annotation_dropout": self.annotation_dropout,
            "bidirectional_bottom": self.bidirectional_bottom,
        }
