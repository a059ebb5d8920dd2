"""The RMN decoder model (Yum & Mu §2.4) and its RMR variant (Tran et al. 2016)."""

from __future__ import annotations

import keras

from keras_memnmt.layers.rmn import RMNCell
from keras_memnmt.models.panels import SOURCE_ATTENTION, Panel
from keras_memnmt.models.registry import register_model
from keras_memnmt.models.seq2seq import Seq2Seq


@register_model("rmn")
class RMN(Seq2Seq):
    """Bidirectional GRU encoder + :class:`~keras_memnmt.layers.RMNCell` (LSTM + memory block
    over the ``memory_size`` most recent target words).

    Args (beyond :class:`Seq2Seq`): ``attention_units``, ``readout_units``,
    ``feedback_attention`` as in :class:`RNNsearch`; ``memory_size`` (n, default 7 as in
    the report), ``memory_dim`` (d, default ``decoder_units``), ``temporal_embeddings``,
    ``context`` ("attention" or "fixed"), ``context_once`` (None, "input" or
    "output") and ``top_lstm`` (RMR): see :class:`~keras_memnmt.layers.RMNCell`, where
    each paper ambiguity is documented at its equation.

    Example:
        >>> model = RMN(8000, 8000, memory_size=7)  # doctest: +SKIP
        >>> logits = model((source_ids, target_in_ids))  # doctest: +SKIP
    """

    tiny_options = dict(embedding_dim=8, encoder_units=6, decoder_units=10, attention_units=9,
                        readout_units=7, output_dropout=0.0, memory_size=4)
    # The memory holds the step's own input word y_{t-1} in slot 0 (lag 0).
    panels = (SOURCE_ATTENTION,
              Panel("memory_attention", "window", "attention over the {size} most recent target words",
                    "previous word", lag=0))

    def __init__(self, source_vocab_size: int, target_vocab_size: int, attention_units: int = 512,
                 readout_units: int = 256, feedback_attention: bool = True, memory_size: int = 7,
                 memory_dim: int | None = None, temporal_embeddings: bool = True,
                 context: str = "attention", context_once: str | None = None, top_lstm: bool = False,
                 **kwargs):
        self.attention_units = attention_units
        self.readout_units = readout_units
        self.feedback_attention = feedback_attention
        self.memory_size = memory_size
        self.memory_dim = memory_dim
        self.temporal_embeddings = temporal_embeddings
        self.context = context
        self.context_once = context_once
        self.top_lstm = top_lstm
        super().__init__(source_vocab_size, target_vocab_size, **kwargs)

    def make_cell(self) -> keras.layers.Layer:
        return RMNCell(
            self.decoder_units, self.target_vocab_size, readout_units=self.readout_units,
            annotation_units=self.encoder.annotation_units, attention_units=self.attention_units,
            memory_size=self.memory_size, memory_dim=self.memory_dim,
            temporal_embeddings=self.temporal_embeddings, context=self.context,
            context_once=self.context_once, top_lstm=self.top_lstm,
            feedback_attention=self.feedback_attention, attention_remat=self.attention_remat,
            output_dropout=self.output_dropout, tied_output=self.tie_embeddings, name="rmn_cell",
        )

    def matmul_macs(self) -> tuple[int, int]:
        e, h, d, a = self.embedding_dim, self.encoder_units, self.decoder_units, self.attention_units
        cell = self.cell
        n, m = cell.memory_size, cell.memory_dim
        keys = 2 * h * a  # U_a h_j, per source token
        lstm_inputs = e + (0 if cell.context_once == "output" else 2 * h)
        decoder = 4 * d * (lstm_inputs + d)  # LSTM on [e; c] with state d
        decoder += (d + e) * d + a * d  # the feedback-attention query, W_a q
        decoder += (0 if m == d else d * m) + 2 * n * m  # the memory query, Eq. 16 scores, Eq. 17 read
        decoder += 3 * d * (m + d)  # the gated merge (a GRU step on s_t with state z_t)
        if cell.top_lstm:
            decoder += 4 * d * (2 * d)  # RMR's top LSTM
        readout_inputs = d + (0 if cell.context_once == "input" else 2 * h)  # [h_t; c_t] or h_t
        return self.gru_encoder_macs() + keys, decoder + self.deep_output_macs(readout_inputs)

    def get_config(self) -> dict:
        return {**super().get_config(), "attention_units": self.attention_units,
                "readout_units": self.readout_units, "feedback_attention": self.feedback_attention,
                "memory_size": self.memory_size, "memory_dim": self.memory_dim,
                "temporal_embeddings": self.temporal_embeddings, "context": self.context,
                "context_once": self.context_once, "top_lstm": self.top_lstm}


@register_model("rmr")
class RMR(RMN):
    """RMN with a second LSTM on the memory block's output (Tran et al.'s RMR; report §5.2
    item 5): :class:`RMN` with ``top_lstm=True`` by default."""

    def __init__(self, source_vocab_size: int, target_vocab_size: int, top_lstm: bool = True, **kwargs):
        super().__init__(source_vocab_size, target_vocab_size, top_lstm=top_lstm, **kwargs)
