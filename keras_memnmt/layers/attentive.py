"""The Attentive NMT decoder cell (Salton, Ross & Kelleher 2017): a stacked LSTM that attends
over its own past states and, with Luong attention, over the source."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers import sublayers
from keras_memnmt.layers._checks import check_choice, check_positive_int
from keras_memnmt.layers.attention import masked_softmax
from keras_memnmt.layers.base import EncoderOutput
from keras_memnmt.layers.readout import clone_initializer
from keras_memnmt.layers.stacked import StackedLSTMCell

SELF_SCORES = ("single", "combined")


@keras.saving.register_keras_serializable(package="keras_memnmt")
class AttentiveCell(StackedLSTMCell):
    """Attentive NMT decoder step: stacked LSTM, attention over its past top states and
    Luong attention over the source, merged (Salton et al. 2017, §3, Eq. 5-16).

    One step, given the embedding ``e = e_{y_{t-1}}`` of the previous target word:

        1. stack    h^l_t, k^l_t = LSTM_l(x^l, (h^l_{t-1}, k^l_{t-1})),  x^1 = e,
                    x^{l+1} = dropout(h^l_t);  h_t = h^L_t
        2. past     a_i = softmax_i score(h_i),  i < t over the filled buffer    (Eq. 12)
                    score(h_i) = v_s . tanh(W_s h_i)                  (Eq. 13, "single")
                              or v_s . tanh(W_s h_i + U_s h_t)        ("combined")
                    c^d_t = sum_i a_i h_i                                       (Eq. 11)
                    h'_t = tanh(W_c [h_t; c^d_t] + b_c)                         (Eq. 14)
        3. source   c^e_t, alpha_t = Luong attention(h_t, h^e_1..h^e_Tx)   (Eq. 5-9)
                    h''_t = tanh(W_e [h_t; c^e_t] + b_e)                        (Eq. 10)
        4. output   o_t = [h''_t; h'_t]; the deep output computes
                    h†_t = tanh(W [h''_t; h'_t] + b) (Eq. 16), dropout, and the
                    logits W_soft h†_t + b (Eq. 15), W_soft tied to the target
                    embedding in the paper (``tied_output``).
        5. push h_t into the past-states buffer.

    ``input_side`` (the bottom LSTM's product with ``e``) and ``_recurrent_step`` are the
    only place these equations live: ``_step`` composes them for ``step``, ``step_details``
    and the greedy and beam searches, and ``keras.layers.RNN`` (teacher forcing) runs
    ``_recurrent_step`` on ``project_inputs`` (the input side of the whole sequence at once).

    Decisions where the printed text is unclear:

    - **Eq. 13 reads only h_i**: as printed, the past-state score does not see the
      current state, so the weights are a learned summary of the past independent of
      ``h_t`` (``self_score="single"``, default). Salton et al.'s "combined" score
      of their Attentive LMs adds ``U_s h_t`` inside the tanh (``self_score="combined"``).
    - **t = 1 has no past**: ``c^d_1`` is the zero vector (as the authors' code does) and
      Eq. 14 runs on ``[h_1; 0]``; the merge is never skipped, so every step has the same
      shape of computation.
    - **The buffer** holds the last ``history_length`` top states, newest first, with a 0/1
      mask of the filled slots (positions not yet reached get weight exactly 0). A
      sentence longer than the buffer attends over its most recent ``history_length``
      states: a sliding window, in training and in decoding alike.
    - **Eq. 7-9**: the printed ⊙ is a dot product (``LuongAttention``: "dot",
      "general" or "concat"); the query is the top state ``h_t`` (Luong's ``h_t``).
    - **Eq. 10, 14 and 16** have their own weights each (``W_e``, ``W_c``, ``W``).
    - **Eq. 15-16**: the softmax reads ``h†_t``, which is the tanh layer of
      ``DeepOutput`` (``readout_units`` features); with tying, ``readout_units`` must
      equal the embedding size (the model checks and names both).
    - **Dropout** (paper: 50% on the non-recurrent connections): ``layer_dropout`` on
      each layer's output that feeds the layer above and on the top output, one mask
      per sequence drawn when the states are made (``initial_states(training=True)``),
      carried in the state; the embedding's is the base ``dropout`` and the readout's
      ``output_dropout``.
    - **Initial states**: ``init_state="encoder"`` (default) starts layer ``l`` from the
      encoder's layer ``l`` final ``[h, c]`` (Luong's hand-off; the encoder must have as
      many layers of ``units``, else a ``ValueError`` naming both); ``"zeros"`` starts
      from zeros.
    - **Mixed precision**: Eq. 12's and the source attention's softmaxes are computed in
      float32; the rest, the states included, in the compute dtype.

    States (all 2-D; ``K = history_length``, ``A = self_attention_units``)::

        [h^1, k^1, ..., h^L, k^L (units each), dropout masks (L*units),
         past (K*units), past keys W_s h_i (K*A), past mask (K),
         annotations (Tx*D), source keys (Tx*S), source mask (Tx)]

    Args:
        units: int, LSTM size of every layer.
        target_vocab_size: int, number of logits.
        readout_units: int, size of ``h†_t`` (Eq. 16).
        annotation_units: int, size ``D`` of an annotation.
        num_layers: int, stacked LSTM layers (the paper: 4).
        score: "dot", "general" (default) or "concat", the source score (Eq. 7-9).
        concat_units: int, the "concat" score's hidden size (None otherwise).
        self_score: "single" (Eq. 13, default) or "combined".
        self_attention_units: int or None, the size of ``W_s h_i`` (None: ``units``).
        history_length: int, the past-states buffer's length (default 100).
        layer_dropout: float in [0, 1), dropout between layers and on the top output.
        init_state: "encoder" (default) or "zeros".
        attention_remat: bool, passed to ``LuongAttention`` ("concat" only).
        **kwargs: the ``DecoderCell`` arguments and ``keras.layers.Layer``'s.

    Call arguments: ``inputs (B, E)``, the states above, ``training``.

    Returns (``call``): ``(o_t (B, 2*units), new_states)``; (``step``): the same plus the
    source attention ``(B, Tx)``. ``step_details`` (and :meth:`past_attention`) return
    Eq. 12's weights as "past_attention".
    """

    def __init__(
        self,
        units: int,
        target_vocab_size: int,
        readout_units: int,
        annotation_units: int,
        num_layers: int = 2,
        score: str = "general",
        concat_units: int | None = None,
        self_score: str = "single",
        self_attention_units: int | None = None,
        history_length: int = 100,
        layer_dropout: float = 0.0,
        init_state: str = "encoder",
        attention_remat: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            units,
            target_vocab_size,
            readout_units,
            annotation_units,
            num_layers=num_layers,
            score=score,
            concat_units=concat_units,
            layer_dropout=layer_dropout,
            init_state=init_state,
            attention_remat=attention_remat,
            **kwargs,
        )
        self.self_score = check_choice("self_score", self_score, SELF_SCORES)
        self.self_attention_units = (
            self.units
            if self_attention_units is None
            else check_positive_int("self_attention_units", self_attention_units)
        )
        self.history_length = check_positive_int("history_length", history_length)
        self.past_key = sublayers.dense(self, self.self_attention_units, "past_key", activation=None)
        self.past_query = (
            sublayers.dense(self, self.self_attention_units, "past_query", activation=None)
            if self.self_score == "combined"
            else None
        )
        self.past_merge = sublayers.dense(self, self.units, "past_merge")  # Eq. 14
        self.source_merge = sublayers.dense(self, self.units, "source_merge")  # Eq. 10
        self.deep_output = sublayers.deep_output(self, self.seed)  # Eq. 16 and 15

    # ----------------------------------------------------------------- sizes
    @property
    def state_size(self) -> list:
        k, u = self.history_length, self.units
        return [*self.stack_state_size, k * u, k * self.self_attention_units, k, None, None, None]

    def compute_output_size(self, embedding_dim: int) -> int:
        """``2 * units``: ``[h''_t; h'_t]``."""
        return 2 * self.units

    # ----------------------------------------------------------------- build
    def _build_memory_side(self) -> None:
        self.build_source_side()
        if not self.past_key.built:
            self.past_key.build((None, self.units))
        if self.past_query is not None and not self.past_query.built:
            self.past_query.build((None, self.units))

    def build(self, input_shape: tuple) -> None:
        embedding_dim = self.set_embedding_dim(input_shape)
        self._build_memory_side()
        self.build_stack(embedding_dim)
        self.past_score = self.add_weight(
            shape=(self.self_attention_units,),
            name="past_score",
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.past_merge.build((None, 2 * self.units))
        self.source_merge.build((None, self.units + self.annotation_units))
        self.deep_output.build((None, 2 * self.units))
        self.built = True

    # --------------------------------------------------------------- states
    def initial_states_from(self, encoded: EncoderOutput, training: bool = False) -> list:
        """The states of the class docstring; the buffer starts empty."""
        self._build_memory_side()
        stack, source = self.stack_initial_states(encoded, training=training)
        batch, dtype, k = ops.shape(source[2])[0], self.compute_dtype, self.history_length
        buffer = [
            ops.zeros((batch, k * self.units), dtype),
            ops.zeros((batch, k * self.self_attention_units), dtype),
            ops.zeros((batch, k), dtype),
        ]
        return [*stack, *buffer, *source]

    # ----------------------------------------------------------------- step
    def past_attention(self, inputs: Any, states: list) -> Any:
        """Eq. 12's weights ``(B, history_length)`` of the step on ``inputs`` from ``states``
        (slot 0 the most recent past state; ``step_details(...)["past_attention"]``)."""
        return self._step(inputs, states)[2]["past_attention"]

    def _recurrent_step(self, inputs: Any, products: Any, states: list, training: bool = False) -> tuple:
        """One decoder step (the equations of the class docstring) given ``products =
        input_side(inputs)`` (the bottom LSTM's product with ``e``): ``(o_t, states,
        details)``, details "attention" ``alpha_t (B, Tx)`` and "past_attention"
        ``(B, history_length)``."""
        layers = 2 * self.num_layers
        masks, past_flat, past_keys_flat, filled = states[layers : layers + 4]
        source = states[layers + 4 :]
        units, k = self.units, self.history_length
        # 1. the stack; dropout between layers and on the top output (masks from the state)
        top, lstm_states = self.run_stack(products, states[:layers], masks)  # (B, units)
        # 2. attention over the past top states (Eq. 11-14); empty at t = 1: c^d = 0
        past = ops.reshape(past_flat, (-1, k, units))
        past_keys = ops.reshape(past_keys_flat, (-1, k, self.self_attention_units))
        if self.past_query is not None:
            past_keys = past_keys + ops.expand_dims(self.past_query(top), 1)
        scores = ops.sum(ops.tanh(past_keys) * ops.cast(self.past_score, past_keys.dtype), axis=-1)
        weights = masked_softmax(scores, filled)  # (B, K), all 0 when nothing is filled
        past_context = ops.sum(ops.expand_dims(weights, -1) * past, axis=1)  # (B, units)
        merged_past = self.past_merge(ops.concatenate([top, past_context], axis=-1))  # h'_t
        # 3. Luong attention over the source (Eq. 5-10)
        context, attention = self.attend_source(top, source)
        merged_source = self.source_merge(ops.concatenate([top, context], axis=-1))  # h''_t
        # 5. push h_t (and W_s h_t) into the buffer
        past_flat = self.push_window(past_flat, top)
        past_keys_flat = self.push_window(past_keys_flat, self.past_key(top))
        filled = self.push_window(filled, ops.ones_like(filled[:, :1]))
        output = ops.concatenate([merged_source, merged_past], axis=-1)  # 4. [h''_t; h'_t]
        new_states = [*lstm_states, masks, past_flat, past_keys_flat, filled, *source]
        return output, new_states, {"attention": attention, "past_attention": weights}

    # ---------------------------------------------------------------- config
    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "self_score": self.self_score,
            "self_attention_units": self.self_attention_units,
            "history_length": self.history_length,
        }
