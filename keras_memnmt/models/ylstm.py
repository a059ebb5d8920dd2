"""The Y-LSTM (Bradbury & Socher 2016, §2.1): a purely attentional translator whose encoder
and decoder are language models joined by tracker LSTMs."""

from __future__ import annotations

import keras
from keras import ops

from keras_memnmt.layers.ylstm import YLSTMCell
from keras_memnmt.layers.ylstm_encoder import YLSTMEncoder
from keras_memnmt.models.panels import Panel
from keras_memnmt.models.recurrent import RecurrentEncoderDecoder
from keras_memnmt.models.registry import register_model


@register_model("ylstm")
class YLSTM(RecurrentEncoderDecoder):
    """:class:`~keras_memnmt.layers.YLSTMEncoder` + :class:`~keras_memnmt.layers.YLSTMCell`.

    The loss is the translation loss plus ``encoder_lm_weight`` times the encoder's
    next-source-token language-model loss (paper: their sum, weight 1), one ``model.fit``:
    the encoder adds its loss in training (``add_loss``), and the training log and
    TensorBoard show the two apart as ``translation_loss`` and ``encoder_lm_loss``
    (unweighted) beside the total ``loss``. ``encoder_lm_weight=0`` builds no language-model
    softmax and adds no loss.

    Args (beyond :class:`~keras_memnmt.models.RecurrentEncoderDecoder`):
        num_layers: LSTM layers of each stack (paper: 5; default 5).
        tracker_layer: the layer (1-based) joined to the tracker (paper: 3; default 3), at
            most ``num_layers``.
        tracker_units: size of both trackers; None (default): ``decoder_units``.
        score: the decoder's attention over the encoder's tracker states, "dot" (default,
            as printed) or "general".
        layer_dropout: dropout between the layers of both stacks and on their top outputs
            (paper: 0.2; default 0).
        encoder_lm_weight: weight of the encoder's language-model loss (default 1, the
            paper's sum); 0 builds no language-model softmax and adds no loss.
        encoder_lm_warmup: training steps over which that weight rises linearly to
            ``encoder_lm_weight`` (``encoder_lm_weight * step / encoder_lm_warmup``); 0
            (default): the full weight from the first step, the paper's sum.
        same_step_context: also feed the tracker attention's result to the decoder's layers
            above the tracker in the same step (needs ``tracker_layer < num_layers``;
            default False, as printed; see :class:`~keras_memnmt.layers.YLSTMCell`).
        tracker_reads_masked: both trackers read layer m's output after its ``layer_dropout``
            mask (default True) or before it.
        output_context: the decoder's softmax reads ``tanh(W_c [h^L_t; h̃^tracker_t])``
            (Luong et al. 2015, Eq. 5) instead of ``h^L_t`` (default False, as printed).
        encoder_units: LSTM size of every encoder layer (default 256).
        decoder_units: LSTM size of every decoder layer (default 256); the decoder's
            softmax reads ``h^L_t``, so tying needs ``decoder_units == embedding_dim``.

    See :class:`~keras_memnmt.layers.YLSTMCell` for every paper decision.
    """

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        num_layers: int = 5,
        tracker_layer: int = 3,
        tracker_units: int | None = None,
        score: str = "dot",
        layer_dropout: float = 0.0,
        encoder_lm_weight: float = 1.0,
        encoder_lm_warmup: int = 0,
        same_step_context: bool = False,
        tracker_reads_masked: bool = True,
        output_context: bool = False,
        encoder_units: int = 256,
        decoder_units: int = 256,
        **kwargs,
    ):
        self.num_layers = num_layers
        self.tracker_layer = tracker_layer
        self.tracker_units = tracker_units
        self.score = score
        self.layer_dropout = layer_dropout
        self.encoder_lm_weight = encoder_lm_weight
        self.encoder_lm_warmup = encoder_lm_warmup
        self.same_step_context = same_step_context
        self.tracker_reads_masked = tracker_reads_masked
        self.output_context = output_context
        super().__init__(
            source_vocab_size, target_vocab_size, encoder_units=encoder_units, decoder_units=decoder_units, **kwargs
        )
        if encoder_lm_weight > 0:  # the two losses, logged apart
            self.translation_loss_tracker = keras.metrics.Mean(name="translation_loss")
            self.encoder_lm_loss_tracker = keras.metrics.Mean(name="encoder_lm_loss")

    # encoder_lm_weight is not free: 0 builds no language-model softmax.
    free_options = (*RecurrentEncoderDecoder.free_options, "layer_dropout", "tracker_reads_masked")

    tiny_options = dict(
        embedding_dim=8, encoder_units=10, decoder_units=10, num_layers=2, tracker_layer=1, output_dropout=0.0
    )
    # Its "attention" is the decoder tracker's, over the encoder tracker's states.
    panels = (Panel("attention", "source", "tracker attention over the source", "source"),)

    def make_encoder(self) -> keras.layers.Layer:
        return YLSTMEncoder(
            self.source_vocab_size,
            self.embedding_dim,
            self.encoder_units,
            self.num_layers,
            self.tracker_layer,
            self._tracker_units,
            dropout=self.dropout,
            layer_dropout=self.layer_dropout,
            lm_weight=self.encoder_lm_weight,
            lm_warmup_steps=self.encoder_lm_warmup,
            tracker_reads_masked=self.tracker_reads_masked,
            name="encoder",
        )

    @property
    def _tracker_units(self) -> int:
        return self.decoder_units if self.tracker_units is None else self.tracker_units

    def make_cell(self) -> keras.layers.Layer:
        return YLSTMCell(
            self.decoder_units,
            self.target_vocab_size,
            readout_units=self.decoder_units,
            annotation_units=self.encoder.annotation_units,
            num_layers=self.num_layers,
            tracker_layer=self.tracker_layer,
            tracker_units=self._tracker_units,
            score=self.score,
            layer_dropout=self.layer_dropout,
            same_step_context=self.same_step_context,
            tracker_reads_masked=self.tracker_reads_masked,
            output_context=self.output_context,
            output_dropout=self.output_dropout,
            tied_output=self.tie_embeddings,
            name="ylstm_cell",
        )

    def matmul_macs(self) -> tuple[int, int]:
        # Two tracked stacks of h and d units, trackers of t units.
        e, h, d, layers, t = (
            self.embedding_dim,
            self.encoder_units,
            self.decoder_units,
            self.num_layers,
            self.cell.tracker_units,
        )
        encoder = 4 * h * (e + h) + (layers - 1) * 4 * h * 2 * h + 4 * h * t + 4 * t * (h + t)
        encoder += h * self.source_vocab_size if self.encoder_lm_weight > 0 else 0  # the language model's softmax
        keys = t * t if self.cell.score == "general" else 0
        decoder = 4 * d * (e + d) + (layers - 1) * 4 * d * 2 * d + 4 * d * t + 4 * t * (d + t)
        decoder += d * (d + t) if self.output_context else 0  # W_c
        return encoder + keys, decoder + d * self.target_vocab_size  # the softmax reads h^L_t (or o_t)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The total loss (Keras's: the compiled loss plus the encoder's added loss); records
        the translation and the unweighted language-model losses apart."""
        total = super().compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training)
        added = [ops.cast(loss, "float32") for loss in self.losses]
        if added and self.encoder_lm_weight > 0:
            lm = ops.sum(ops.stack(added))
            self.encoder_lm_loss_tracker.update_state(lm / self.encoder.current_lm_weight())
            self.translation_loss_tracker.update_state(ops.cast(total, "float32") - lm)
        return total

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "num_layers": self.num_layers,
            "tracker_layer": self.tracker_layer,
            "tracker_units": self.tracker_units,
            "score": self.score,
            "layer_dropout": self.layer_dropout,
            "encoder_lm_weight": self.encoder_lm_weight,
            "encoder_lm_warmup": self.encoder_lm_warmup,
            "same_step_context": self.same_step_context,
            "tracker_reads_masked": self.tracker_reads_masked,
            "output_context": self.output_context,
        }
