"""The base of the stacked-LSTM models (Luong, Attentive NMT): a stacked-LSTM encoder whose
layers hand their final states to the decoder's, layer by layer."""

from __future__ import annotations

import keras

from keras_memnmt.layers.stacked_encoder import StackedLSTMEncoder
from keras_memnmt.models.recurrent import Seq2Seq


class StackedSeq2Seq(Seq2Seq):
    """:class:`~keras_memnmt.layers.StackedLSTMEncoder` + a stacked-LSTM decoder cell
    (a :class:`~keras_memnmt.layers.stacked.StackedLSTMCell`), built by the subclass's
    ``make_cell`` from :meth:`stacked_cell_arguments` and its own.

    Args (beyond :class:`~keras_memnmt.models.Seq2Seq`):
        num_layers: LSTM layers of the encoder and of the decoder (default 2).
        score: the source attention's score, "dot", "general" (default) or "concat"
            (Luong et al. 2015, Eq. 8); "dot" needs ``encoder_units == decoder_units``.
        concat_units: the "concat" score's hidden size: required with "concat", None
            (default) with "dot" and "general".
        layer_dropout: dropout between the layers of both stacks and on the decoder's top
            output (the non-recurrent connections; one mask per sequence, training only);
            ``annotation_dropout`` acts on the encoder's top output. Default 0.
        readout_units: size of the vector the softmax reads (default 256); equal to
            ``embedding_dim`` for tying.
        init_state: how the decoder's LSTMs start: "encoder" (default; layer ``l`` from the
            encoder's layer ``l`` final ``[h, c]``, the layer-by-layer hand-off, which needs
            ``encoder_units == decoder_units``) or "zeros".
        bidirectional_bottom: the encoder's bottom layer reads the sentence both ways,
            ``encoder_units // 2`` per direction (GNMT's encoder; ``encoder_units`` even).
            Default False.
        layer_dropout_on_top: ``layer_dropout`` on the decoder's top output too, before the
            source attention reads it (default True); False: between layers only (Luong et
            al., OpenNMT).
        encoder_units: LSTM size of every encoder layer (default 512).
        decoder_units: LSTM size of every decoder layer (default 512).
    """

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        num_layers: int = 2,
        score: str = "general",
        concat_units: int | None = None,
        layer_dropout: float = 0.0,
        readout_units: int = 256,
        init_state: str = "encoder",
        bidirectional_bottom: bool = False,
        layer_dropout_on_top: bool = True,
        encoder_units: int = 512,
        decoder_units: int = 512,
        **kwargs,
    ):
        self.num_layers = num_layers
        self.score = score
        self.concat_units = concat_units
        self.layer_dropout = layer_dropout
        self.readout_units = readout_units
        self.init_state = init_state
        self.bidirectional_bottom = bidirectional_bottom
        self.layer_dropout_on_top = layer_dropout_on_top
        if init_state == "encoder" and encoder_units != decoder_units:
            raise ValueError(
                f"init_state='encoder' (the layer-by-layer hand-off) needs encoder_units == "
                f"decoder_units, got encoder_units={encoder_units}, decoder_units={decoder_units}; "
                "pass init_state='zeros' or equal sizes"
            )
        super().__init__(
            source_vocab_size, target_vocab_size, encoder_units=encoder_units, decoder_units=decoder_units, **kwargs
        )

    free_options = (*Seq2Seq.free_options, "layer_dropout")

    def make_encoder(self) -> keras.layers.Layer:
        return StackedLSTMEncoder(
            self.source_vocab_size,
            self.embedding_dim,
            self.encoder_units,
            self.num_layers,
            dropout=self.dropout,
            layer_dropout=self.layer_dropout,
            annotation_dropout=self.annotation_dropout,
            bidirectional_bottom=self.bidirectional_bottom,
            name="encoder",
        )

    def stacked_cell_arguments(self) -> dict:
        """The cell arguments every stacked-LSTM cell takes, from this model's options."""
        return dict(
            units=self.decoder_units,
            target_vocab_size=self.target_vocab_size,
            readout_units=self.readout_units,
            annotation_units=self.encoder.annotation_units,
            num_layers=self.num_layers,
            score=self.score,
            concat_units=self.concat_units,
            layer_dropout=self.layer_dropout,
            layer_dropout_on_top=self.layer_dropout_on_top,
            init_state=self.init_state,
            attention_remat=self.attention_remat,
            output_dropout=self.output_dropout,
            tied_output=self.tie_embeddings,
        )

    def stacked_encoder_macs(self) -> int:
        """Per source token: the encoder's LSTM stack of ``h`` units, and the source
        attention's keys (none for "dot")."""
        e, h, d, layers = self.embedding_dim, self.encoder_units, self.decoder_units, self.num_layers
        bottom = 2 * 4 * (h // 2) * (e + h // 2) if self.bidirectional_bottom else 4 * h * (e + h)
        encoder = bottom + (layers - 1) * 4 * h * 2 * h
        keys = {"dot": 0, "general": h * d, "concat": h * (self.cell.concat_units or 0)}[self.cell.score]
        return encoder + keys

    def decoder_stack_macs(self, fed: int = 0) -> int:
        """Per target token: the decoder's LSTM stack of ``d`` units, its bottom layer reading
        the embedding and ``fed`` more features."""
        e, d, layers = self.embedding_dim, self.decoder_units, self.num_layers
        return 4 * d * (e + fed + d) + (layers - 1) * 4 * d * 2 * d

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "num_layers": self.num_layers,
            "score": self.score,
            "concat_units": self.concat_units,
            "layer_dropout": self.layer_dropout,
            "readout_units": self.readout_units,
            "init_state": self.init_state,
            "bidirectional_bottom": self.bidirectional_bottom,
            "layer_dropout_on_top": self.layer_dropout_on_top,
        }
