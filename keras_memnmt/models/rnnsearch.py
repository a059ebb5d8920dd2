"""RNNsearch (Bahdanau et al. 2014)."""

from __future__ import annotations

import keras

from keras_memnmt.layers.rnnsearch import RNNsearchCell
from keras_memnmt.models.recurrent import Seq2Seq
from keras_memnmt.models.registry import register_model


@register_model("rnnsearch")
class RNNsearch(Seq2Seq):
    """Bidirectional GRU encoder + :class:`RNNsearchCell` decoder (additive attention).

    Args (beyond :class:`Seq2Seq`):
        attention_units: size of the additive attention's hidden layer.
        readout_units: size of the deep-output layer (Eq. 9 of the MemDec paper).
        feedback_attention: query the attention with ``s̃ = tanh(W s_{t-1} + W' e_{y_{t-1}})``
            (MemDec §2.1, default) instead of Bahdanau's ``s_{t-1}``.

    Example:
        >>> model = RNNsearch(8000, 8000, embedding_dim=256, encoder_units=256,
        ...                   decoder_units=512)  # doctest: +SKIP
        >>> logits = model((source_ids, target_in_ids))  # doctest: +SKIP
    """

    tiny_options = dict(
        embedding_dim=8, encoder_units=6, decoder_units=10, attention_units=9, readout_units=7, output_dropout=0.0
    )
    fast_tier = True  # the attention-GRU family

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        attention_units: int = 512,
        readout_units: int = 256,
        feedback_attention: bool = True,
        **kwargs,
    ):
        self.attention_units = attention_units
        self.readout_units = readout_units
        self.feedback_attention = feedback_attention
        super().__init__(source_vocab_size, target_vocab_size, **kwargs)

    def make_cell(self) -> keras.layers.Layer:
        return RNNsearchCell(
            self.decoder_units,
            self.target_vocab_size,
            attention_units=self.attention_units,
            readout_units=self.readout_units,
            annotation_units=self.encoder.annotation_units,
            feedback_attention=self.feedback_attention,
            output_dropout=self.output_dropout,
            tied_output=self.tie_embeddings,
            attention_remat=self.attention_remat,
            name="rnnsearch_cell",
        )

    def matmul_macs(self) -> tuple[int, int]:
        e, h, d, a = self.embedding_dim, self.encoder_units, self.decoder_units, self.attention_units
        keys = 2 * h * a  # U_a h_j, per source token
        decoder = 3 * d * (e + 2 * h + d)  # GRU on [e; c] with state d
        decoder += d * d + e * d  # the feedback-attention query s~ (counted with or without it)
        decoder += a * d  # W_a s~
        return self.gru_encoder_macs() + keys, decoder + self.deep_output_macs(d + 2 * h + e)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "attention_units": self.attention_units,
            "readout_units": self.readout_units,
            "feedback_attention": self.feedback_attention,
        }


def __getattr__(name: str):
    # The Cho encoder-decoder's former module: imported on first use, so that importing
    # this module does not register it before RNNsearch.
    if name == "ChoEncoderDecoder":
        from keras_memnmt.models.cho import ChoEncoderDecoder

        return ChoEncoderDecoder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
