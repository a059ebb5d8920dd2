"""The RMN decoder model (Yum & Mu §2.4) and its RMR variant (Tran et al. 2016)."""

from __future__ import annotations

import keras

from keras_memnmt.layers.rmn import RMNCell
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
