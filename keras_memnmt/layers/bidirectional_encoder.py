"""The bidirectional GRU encoder (RNNsearch §3.1), the recurrent models' default, and
``bidirectional``, the ``keras.layers.Bidirectional`` that the encoders build."""

from __future__ import annotations

import keras
from keras import ops
from keras.src.backend.common import global_state

from keras_memnmt.layers.base import EncoderOutput
from keras_memnmt.layers.embedding import embedding_initializer
from keras_memnmt.layers.gru import GRUCell
from keras_memnmt.tokens import PAD_ID

_SHARING_MAPS = ("shared_objects/id_to_obj_map", "shared_objects/id_to_config_map")


def bidirectional(layer: keras.layers.Layer, **kwargs) -> keras.layers.Bidirectional:
    """``keras.layers.Bidirectional(layer, **kwargs)``, safe to build while a model loads.

    Why not Keras's alone: ``Bidirectional`` clones ``layer`` twice by serializing it, and
    while ``keras.saving.load_model`` runs, Keras's object-sharing scope keys every
    serialized object by ``id()``. ``layer`` and its cell are freed once the clones exist,
    so a later encoder in the same load (an ensemble's next member) can get the same
    addresses and be handed the earlier member's layers: two members silently share a
    GRU, or the constructor fails with "should have different `go_backwards` value".
    Building with the scope suspended makes the clones as they are outside a load.
    """
    saved = {key: global_state.get_global_attribute(key) for key in _SHARING_MAPS}
    try:
        for key in _SHARING_MAPS:
            global_state.set_global_attribute(key, None)
        return keras.layers.Bidirectional(layer, **kwargs)
    finally:
        for key, value in saved.items():
            global_state.set_global_attribute(key, value)


@keras.saving.register_keras_serializable(package="keras_memnmt")
class BidirectionalEncoder(keras.layers.Layer):
    """Embedding + bidirectional GRU, masked over source padding.

    Annotations ``h_j = [→h_j; ←h_j]`` (Bahdanau et al. 2014, §3.1).

    Args:
        vocab_size: source vocabulary size.
        embedding_dim: source embedding size.
        units: GRU units per direction (annotations have ``2 * units``).
        dropout: dropout on the embeddings (training only).
        annotation_dropout: dropout on the annotations ``h_j`` (training only; our
            option, not in the papers: nmtpytorch's ``dropout_ctx``, which its
            Multi30k baselines set to 0.5). The attention keys, the context vectors
            and MemDec's memory initialization all see the dropped annotations; the
            ``summary`` (the decoder's initial state, and the Cho decoder's only view
            of the source, which it therefore leaves unchanged) does not.

    Call arguments:
        source_ids: ``(B, Tx)`` int ids, ``0`` = padding.

    Returns:
        an :class:`~keras_memnmt.layers.EncoderOutput`: ``annotations (B, Tx, 2·units)``,
        ``mask (B, Tx)`` float 1/0, ``summary (B, 2·units)`` = ``[→h_last; ←h_first]``,
        and ``final_states = ([→h_last, ←h_first],)`` (one layer, two directions).
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 256,
        units: int = 256,
        dropout: float = 0.0,
        annotation_dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (("vocab_size", vocab_size), ("embedding_dim", embedding_dim), ("units", units)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, rate in (("dropout", dropout), ("annotation_dropout", annotation_dropout)):
            if not 0.0 <= rate < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {rate}")
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.units = units
        self.dropout = dropout
        self.annotation_dropout = annotation_dropout
        self.embedding = keras.layers.Embedding(
            vocab_size, embedding_dim, name="source_embedding", embeddings_initializer=embedding_initializer()
        )
        self.embedding_dropout = keras.layers.Dropout(dropout)
        self.annotation_dropout_layer = keras.layers.Dropout(annotation_dropout)
        self.birnn = bidirectional(
            # keras.layers.GRU's cell, split by ops.split (layers/gru.py); same weights.
            keras.layers.RNN(GRUCell(units), return_sequences=True, return_state=True, name="gru"),
            name="birnn",
        )

    @property
    def annotation_units(self) -> int:
        """Size of one annotation ``h_j``: both directions."""
        return 2 * self.units

    def build(self, input_shape):
        self.embedding.build(input_shape)
        self.birnn.build(tuple(input_shape) + (self.embedding_dim,))

    def call(self, source_ids, training=False):
        mask = ops.not_equal(source_ids, PAD_ID)  # (B, Tx) bool
        x = self.embedding_dropout(self.embedding(source_ids), training=training)  # (B, Tx, E)
        annotations, forward_h, backward_h = self.birnn(x, mask=mask, training=training)
        summary = ops.concatenate([forward_h, backward_h], axis=-1)  # (B, 2u)
        annotations = self.annotation_dropout_layer(annotations, training=training)  # rate 0: a no-op
        return EncoderOutput(
            annotations, ops.cast(mask, annotations.dtype), summary, final_states=([forward_h, backward_h],)
        )

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "dropout": self.dropout,
            "annotation_dropout": self.annotation_dropout,
        }
