"""Attentive NMT (Salton, Ross & Kelleher 2017): a stacked-LSTM encoder and a stacked-LSTM
decoder that attends over its own past states and over the source."""

from __future__ import annotations

import keras

from keras_memnmt.layers.attentive import AttentiveCell
from keras_memnmt.models.panels import SOURCE_ATTENTION, Panel
from keras_memnmt.models.registry import register_model
from keras_memnmt.models.stacked import StackedSeq2Seq


@register_model("attentive")
class AttentiveNMT(StackedSeq2Seq):
    """:class:`~keras_memnmt.layers.StackedLSTMEncoder` + :class:`~keras_memnmt.layers.AttentiveCell`.

    Args (beyond :class:`~keras_memnmt.models.StackedSeq2Seq`):
        num_layers: LSTM layers of the encoder and of the decoder (the paper: 4; default 2).
        score: the source attention's score (Eq. 7-9), "dot", "general" (default) or
            "concat"; "dot" needs ``encoder_units == decoder_units``.
        self_score: the past-state score, "single" (default; Eq. 13 as printed, reads
            ``h_i`` only) or "combined" (adds ``U_s h_t`` inside the tanh).
        self_attention_units: size of ``W_s h_i`` (Eq. 13); None (default): ``decoder_units``.
        history_length: the past-states buffer's length: the decoder attends over its most
            recent ``history_length`` top states (default 100).

    Of the base's options, ``layer_dropout`` is the paper's dropout on the non-recurrent
    connections (0.5) and ``readout_units`` the size of ``h†_t`` (Eq. 16; the paper ties,
    Eq. 15).

    See :class:`~keras_memnmt.layers.AttentiveCell` for every paper decision.
    """

    tiny_options = dict(
        embedding_dim=8,
        encoder_units=10,
        decoder_units=10,
        readout_units=7,
        num_layers=1,
        history_length=6,
        output_dropout=0.0,
    )
    # The past states start with the previous step's (lag 1).
    panels = (
        SOURCE_ATTENTION,
        Panel(
            "past_attention",
            "window",
            "attention over the past decoder states (window {size})",
            "past state, by the word its step read",
            lag=1,
        ),
    )

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        num_layers: int = 2,
        score: str = "general",
        self_score: str = "single",
        self_attention_units: int | None = None,
        history_length: int = 100,
        **kwargs,
    ):
        self.self_score = self_score
        self.self_attention_units = self_attention_units
        self.history_length = history_length
        super().__init__(source_vocab_size, target_vocab_size, num_layers=num_layers, score=score, **kwargs)

    def make_cell(self) -> keras.layers.Layer:
        return AttentiveCell(
            **self.stacked_cell_arguments(),
            self_score=self.self_score,
            self_attention_units=self.self_attention_units,
            history_length=self.history_length,
            name="attentive_cell",
        )

    def matmul_macs(self) -> tuple[int, int]:
        h, d, cell = self.encoder_units, self.decoder_units, self.cell
        decoder = self.decoder_stack_macs()
        decoder += d * cell.self_attention_units * (2 if cell.self_score == "combined" else 1)  # W_s h_t (and U_s h_t)
        decoder += 2 * d * d + (d + h) * d  # the Eq. 14 and Eq. 10 merges
        return self.stacked_encoder_macs(), decoder + self.deep_output_macs(2 * d)  # Eq. 16 reads [h''_t; h'_t]

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "self_score": self.self_score,
            "self_attention_units": self.self_attention_units,
            "history_length": self.history_length,
        }
