"""The RMN decoder model (Yum & Mu §2.4) and its RMR variant (Tran et al. 2016)."""

from __future__ import annotations

import keras

from keras_memnmt.layers.rmn import RMNCell
from keras_memnmt.models.panels import SOURCE_ATTENTION, Panel
from keras_memnmt.models.recurrent import Seq2Seq
from keras_memnmt.models.registry import register_model


@register_model("rmn")
class RMN(Seq2Seq):
    """Bidirectional GRU encoder + :class:`~keras_memnmt.layers.RMNCell` (LSTM + memory block
    over the ``memory_size`` most recent target words).

    Args (beyond :class:`~keras_memnmt.models.Seq2Seq`):
        attention_units: hidden size of the additive source attention, as in
            :class:`~keras_memnmt.models.RNNsearch` (``context="attention"`` only; default 512).
        readout_units: size of the deep-output tanh layer (§2.4, Eq. 19; default 256); equal
            to ``embedding_dim`` for tying.
        feedback_attention: query the source attention with ``tanh(W [z_{t-1}; e] + b)``
            (MemDec §2.1, as RNNsearch; default True) instead of ``z_{t-1}``
            (``context="attention"`` only).
        memory_size: n, the number of most recent target words in memory (default 7, as in
            the report; Tran et al.: 15).
        memory_dim: d, the size of the memory embeddings ``M`` and ``C``; None (default):
            ``decoder_units`` (Eq. 16 as printed); another size adds a learned query
            ``q_t = W_q z_t + b_q``.
        temporal_embeddings: add one learned row per memory slot to ``M_i`` and ``C_i``
            (Tran et al.'s default, not in the report; default True).
        context: the encoder context (Eq. 13-14): "attention" (default: RNNsearch's additive
            attention) or "fixed" (the report's Cho-style ``c = tanh(V summary + b)``).
        context_once: where the context is joined: None (default: twice, before the LSTM
            and before the softmax, as printed), "input" (before the LSTM only) or
            "output" (before the softmax only).
        top_lstm: run a second LSTM of ``decoder_units`` on the memory block's output and
            output its state (the RMR variant, report §5.2 item 5; default False).

    See :class:`~keras_memnmt.layers.RMNCell`, where each paper ambiguity is documented at
    its equation.

    Example:
        >>> model = RMN(8000, 8000, memory_size=7)  # doctest: +SKIP
        >>> logits = model((source_ids, target_in_ids))  # doctest: +SKIP
    """

    tiny_options = dict(
        embedding_dim=8,
        encoder_units=6,
        decoder_units=10,
        attention_units=9,
        readout_units=7,
        output_dropout=0.0,
        memory_size=4,
    )
    # The memory holds the step's own input word y_{t-1} in slot 0 (lag 0).
    panels = (
        SOURCE_ATTENTION,
        Panel(
            "memory_attention", "window", "attention over the {size} most recent target words", "previous word", lag=0
        ),
    )

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        attention_units: int = 512,
        readout_units: int = 256,
        feedback_attention: bool = True,
        memory_size: int = 7,
        memory_dim: int | None = None,
        temporal_embeddings: bool = True,
        context: str = "attention",
        context_once: str | None = None,
        top_lstm: bool = False,
        **kwargs,
    ):
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
            self.decoder_units,
            self.target_vocab_size,
            readout_units=self.readout_units,
            annotation_units=self.encoder.annotation_units,
            attention_units=self.attention_units,
            memory_size=self.memory_size,
            memory_dim=self.memory_dim,
            temporal_embeddings=self.temporal_embeddings,
            context=self.context,
            context_once=self.context_once,
            top_lstm=self.top_lstm,
            feedback_attention=self.feedback_attention,
            attention_remat=self.attention_remat,
            output_dropout=self.output_dropout,
            tied_output=self.tie_embeddings,
            name="rmn_cell",
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
        return {
            **super().get_config(),
            "attention_units": self.attention_units,
            "readout_units": self.readout_units,
            "feedback_attention": self.feedback_attention,
            "memory_size": self.memory_size,
            "memory_dim": self.memory_dim,
            "temporal_embeddings": self.temporal_embeddings,
            "context": self.context,
            "context_once": self.context_once,
            "top_lstm": self.top_lstm,
        }


@register_model("rmr")
class RMR(RMN):
    """RMN with a second LSTM on the memory block's output (Tran et al.'s RMR; report §5.2
    item 5): :class:`RMN` with ``top_lstm=True`` by default.

    Args (beyond :class:`~keras_memnmt.models.RMN`):
        top_lstm: run a second LSTM of ``decoder_units`` on the memory block's output and
            output its state (default True; False is :class:`RMN`).
    """

    def __init__(self, source_vocab_size: int, target_vocab_size: int, top_lstm: bool = True, **kwargs):
        super().__init__(source_vocab_size, target_vocab_size, top_lstm=top_lstm, **kwargs)
