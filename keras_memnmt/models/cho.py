"""The Cho et al. (2014) encoder–decoder: no attention, one fixed context vector."""

from __future__ import annotations

import keras

from keras_memnmt.layers.cho import ChoDecoderCell
from keras_memnmt.models.recurrent import RecurrentEncoderDecoder
from keras_memnmt.models.registry import register_model


@register_model("cho")
class ChoEncoderDecoder(RecurrentEncoderDecoder):
    """The Cho et al. (2014) encoder–decoder: one fixed context vector for every step
    (Eq. 13–15 of Yum & Mu), computed from the bidirectional encoder's final states.

    A :class:`~keras_memnmt.models.RecurrentEncoderDecoder`, not a
    :class:`~keras_memnmt.models.Seq2Seq`: no attention, so none of the source attention's
    options; the decoder reads the encoder's summary alone.

    Args (beyond :class:`~keras_memnmt.models.RecurrentEncoderDecoder`):
        readout_units: size of the deep-output layer.
    """

    tiny_options = dict(embedding_dim=8, encoder_units=6, decoder_units=10, readout_units=7, output_dropout=0.0)
    panels = ()  # no attention: its pictures show the target probabilities alone
    picture_note = "no attention: one fixed context"

    def __init__(self, source_vocab_size: int, target_vocab_size: int, readout_units: int = 256, **kwargs):
        self.readout_units = readout_units
        super().__init__(source_vocab_size, target_vocab_size, **kwargs)

    def make_cell(self) -> keras.layers.Layer:
        return ChoDecoderCell(
            self.decoder_units,
            self.target_vocab_size,
            readout_units=self.readout_units,
            annotation_units=self.encoder.annotation_units,
            output_dropout=self.output_dropout,
            tied_output=self.tie_embeddings,
            name="cho_cell",
        )

    def matmul_macs(self) -> tuple[int, int]:
        e, h, d = self.embedding_dim, self.encoder_units, self.decoder_units
        decoder = 3 * d * (e + 2 * h + d)  # GRU on [e; c] with the fixed context c
        return self.gru_encoder_macs(), decoder + self.deep_output_macs(d + 2 * h + e)

    def get_config(self) -> dict:
        return {**super().get_config(), "readout_units": self.readout_units}
