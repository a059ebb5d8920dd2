"""Luong et al. (2015) global attention with input feeding, as in MetaMind's WMT16 system
(Bradbury & Socher 2016, §2): stacked-LSTM encoder and decoder."""

from __future__ import annotations

import keras

from keras_memnmt.layers.luong import LuongCell
from keras_memnmt.models.registry import register_model
from keras_memnmt.models.stacked import StackedSeq2Seq


@register_model("luong")
class LuongNMT(StackedSeq2Seq):
    """:class:`~keras_memnmt.layers.StackedLSTMEncoder` + :class:`~keras_memnmt.layers.LuongCell`.

    Args (beyond :class:`~keras_memnmt.models.StackedSeq2Seq`):
        num_layers: LSTM layers of each stack (Bradbury & Socher: 4; default 4).
        score: the source attention's score, "dot" (default; Bradbury & Socher's "Global
            attention (dot)"), "general" or "concat"; "dot" needs
            ``encoder_units == decoder_units``.
        input_feeding: feed ``h̃_{t-1}`` to the decoder's bottom layer (default True);
            False: Luong's model without input feeding (his Table 1 ablation).

    Of the base's options, ``layer_dropout`` is Luong's dropout between layers (Bradbury &
    Socher: 0.2) and ``readout_units`` the size of ``h̃_t``.

    See :class:`~keras_memnmt.layers.LuongCell` for every paper decision.
    """

    tiny_options = dict(
        embedding_dim=8, encoder_units=10, decoder_units=10, readout_units=7, num_layers=1, output_dropout=0.0
    )

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        num_layers: int = 4,
        score: str = "dot",
        input_feeding: bool = True,
        **kwargs,
    ):
        self.input_feeding = input_feeding
        super().__init__(source_vocab_size, target_vocab_size, num_layers=num_layers, score=score, **kwargs)

    def make_cell(self) -> keras.layers.Layer:
        return LuongCell(**self.stacked_cell_arguments(), input_feeding=self.input_feeding, name="luong_cell")

    def matmul_macs(self) -> tuple[int, int]:
        h, d, r = self.encoder_units, self.decoder_units, self.readout_units
        fed = r if self.cell.input_feeding else 0  # h~_{t-1}
        decoder = self.decoder_stack_macs(fed) + (d + h) * r  # h~_t = tanh(W_att [h_t; k_t])
        return self.stacked_encoder_macs(), decoder + r * self.target_vocab_size  # W_out h~_t

    def get_config(self) -> dict:
        return {**super().get_config(), "input_feeding": self.input_feeding}
