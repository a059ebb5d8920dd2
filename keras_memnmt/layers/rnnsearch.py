"""The RNNsearch decoder cell (Bahdanau et al. 2014) with optional feedback attention."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers import sublayers
from keras_memnmt.layers._checks import check_bool, check_choice, check_positive_int
from keras_memnmt.layers.base import DecoderCell, EncoderOutput

INIT_STATES = ("mean", "summary")


@keras.saving.register_keras_serializable(package="keras_memnmt")
class RNNsearchCell(DecoderCell):
    """RNNsearch decoder step: additive attention + GRU + deep output.

    Bahdanau et al. 2014 as restated by MemDec (Wang et al. 2016), Eq. 1-3
    and 9, with the "feedback attention" of MemDec §2.1. One step, given the
    embedding `e = e_{y_{t-1}}` of the previous target word:

        1. query   q = tanh(W [s_{t-1}; e] + b)     if feedback_attention  (§2.1)
                   q = s_{t-1}                       otherwise (Bahdanau)
        2. context c_t, alpha_t = AdditiveAttention(q, h_1..h_Tx)      (Eq. 3)
        3. state   s_t = GRU(s_{t-1}, [e; c_t])                         (Eq. 2)
        4. output  o_t = [s_t; c_t; e]        (the input of the readout, Eq. 9)

    and `readout(o)` = the deep output of Eq. 9 (see `DeepOutput`), applied to
    a whole `(B, T, F)` sequence in training or one `(B, F)` step in decoding.
    `input_side` (what depends on `e` alone: its rows of the feedback query's and
    the GRU's input kernels) and `_recurrent_step` (the rest) are the only place
    these equations live; `_step` composes them for `step`, `step_details` and the
    greedy / beam decoders, and `keras.layers.RNN` runs `_recurrent_step` on
    `project_inputs` (the input side computed for the whole sequence at once).

    Decisions:
    - Initial state (`init_state="mean"`, default): `s_0 = tanh(W_init
      mean_j h_j + b)`, the mean over unmasked source positions, as in the
      dl4mt implementation MemDec builds on. Bahdanau et al. used
      `tanh(W_s <-h_1)`, the first backward encoder state: pass it as
      `summary` with `init_state="summary"`.
    - Feedback attention uses the tanh form of H (MemDec §2.1: "we chose the
      latter for simplicity"), with a bias.
    - GRU: Keras's GRUCell (`layers.gru.GRUCell`, the same step split by
      `ops.split`) with its default `reset_after=True` (the
      reset gate multiplies `U_h s_{t-1} + b`, CuDNN style) rather than Cho et
      al.'s original reset-before-matmul.
    - `dropout` is variational dropout on the input embedding `e` (one mask per
      sequence, as `keras.layers.GRU` does, drawn by `DecoderCell.drop_inputs`
      before the loop); the embedding is dropped before every use (query, GRU
      input, output). Default 0: MemDec found it did not
      help (§4); its 0.5 dropout is `output_dropout`, in the readout.
    - Biases everywhere except inside the attention score (see
      `AdditiveAttention`).
    - Mixed precision: the attention softmax and the mean over the source (`s_0`)
      are computed in float32; the rest, the states included, in the compute dtype.

    Encoder memory reaches the step as pass-through states (Keras 3 has no
    `constants=`), flattened to keep every state 2-D:

        states = [s (B, units), annotations (B, Tx*D), keys (B, Tx*A),
                  source_mask (B, Tx)]

    with `D = annotation_units`, `A = attention_units`. Build them with
    `initial_states(...)` and pass them as `initial_state=`; `Tx` may differ
    from batch to batch (`state_size = [units, None, None, None]`).

    Args:
        units: int, size of the decoder state `s_t`.
        target_vocab_size: int, number of output logits.
        attention_units: int, hidden size of the additive attention.
        readout_units: int, size of the deep-output tanh layer.
        annotation_units: int, size `D` of an annotation `h_j` (2x the
            encoder units for a bidirectional encoder).
        feedback_attention: bool, use `tanh(W [s_{t-1}; e])` as the attention
            query (MemDec §2.1) instead of `s_{t-1}` (Bahdanau).
        attention_remat: bool, `rematerialize` of the source attention (recompute its
            `(B, Tx, A)` tanh in the backward pass: less memory, same values).
        init_state: "mean" or "summary", how `s_0` is computed (see above).
        **kwargs: the `DecoderCell` arguments (`output_dropout`, `tied_output`,
            `dropout`, the three initializers, `seed`) and the base
            `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(B, E)`, the embedding of the previous target word.
        states: the 4 states above.
        training: bool, whether dropout is active.

    Returns (`call`): `(output (B, units + D + E), new_states)`;
    (`step`): the same plus the attention weights `(B, Tx)`; (`step_details`):
    a dict with "output", "states" and "attention".

    Note: if a target mask reaches the enclosing `keras.layers.RNN` (e.g. from
    `Embedding(mask_zero=True)`), create it with `zero_output_for_mask=True`:
    otherwise the JAX loop takes `states[0]` as the previous output, whose size
    differs from `output_size`.

    Example:

    ```python
    cell = RNNsearchCell(32, vocab, attention_units=32, readout_units=16,
                         annotation_units=2 * encoder_units)
    decoder = keras.layers.RNN(cell, return_sequences=True)
    # inside a subclassed keras.Model.call:
    states = cell.initial_states(annotations, source_mask)
    # project_inputs: the products with the embeddings, for the whole sequence at once
    outputs = decoder(cell.project_inputs(target_embedded), initial_state=states)  # (B, T, F)
    logits = cell.readout(outputs, training=training)           # (B, T, V)
    ```
    """

    def __init__(
        self,
        units: int,
        target_vocab_size: int,
        attention_units: int,
        readout_units: int,
        annotation_units: int,
        feedback_attention: bool = True,
        attention_remat: bool = True,
        init_state: str = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(units, target_vocab_size, readout_units, annotation_units, **kwargs)
        self.attention_units = check_positive_int("attention_units", attention_units)
        self.feedback_attention = check_bool("feedback_attention", feedback_attention)
        self.attention_remat = check_bool("attention_remat", attention_remat)
        self.init_state = check_choice("init_state", init_state, INIT_STATES)

        self.init_dense = sublayers.dense(self, self.units, "init_state")
        self.query_dense = sublayers.dense(self, self.units, "feedback_query") if feedback_attention else None
        self.attention = sublayers.additive_attention(self)
        self.gru_cell = sublayers.gru_cell(self)
        self.deep_output = sublayers.deep_output(self, self.seed)

    # ----------------------------------------------------------------- sizes
    @property
    def state_size(self) -> list:
        """`[units, None, None, None]`: `Tx` is only known per batch."""
        return [self.units, None, None, None]

    def compute_output_size(self, embedding_dim: int) -> int:
        """`units + annotation_units + E`."""
        return self.units + self.annotation_units + embedding_dim

    # ----------------------------------------------------------------- build
    def _build_memory_side(self) -> None:
        """Builds what `initial_states` needs; it does not depend on `E`."""
        if not self.attention.built:
            self.attention.build((None, self.units), (None, None, self.annotation_units))
        if not self.init_dense.built:
            self.init_dense.build((None, self.annotation_units))

    def build(self, input_shape: tuple) -> None:
        """Builds every weight from `input_shape = (B, E)`."""
        embedding_dim = self.set_embedding_dim(input_shape)
        self._build_memory_side()
        if self.query_dense is not None:
            self.query_dense.build((None, self.units + embedding_dim))
        self.gru_cell.build((None, embedding_dim + self.annotation_units))
        self.deep_output.build((None, self.units + self.annotation_units + embedding_dim))
        self.built = True

    # --------------------------------------------------------------- states
    def initial_states_from(self, encoded: EncoderOutput, training: bool = False) -> list:
        """Builds the 4 decoder states from the encoder output.

        Args:
            encoded: the annotations `h_j` `(B, Tx, D)`, their mask `(B, Tx)`, and
                the summary `(B, D)` (used only with `init_state="summary"`).
            training: unused (cells with a stochastic start draw it in training).

        Returns:
            `[s_0 (B, units), annotations (B, Tx*D), keys (B, Tx*A),
            source_mask (B, Tx)]`, with `keys = U_a h_j` computed here, once
            per sentence.
        """
        self._build_memory_side()
        dtype = self.compute_dtype
        annotations = ops.cast(encoded.annotations, dtype)
        mask = ops.cast(encoded.mask, dtype)  # (B, Tx)
        if self.init_state == "mean":
            pooled = self.masked_mean(annotations, mask)  # (B, D)
        else:
            if encoded.summary is None:
                raise ValueError("init_state='summary' needs `summary`. Received: summary=None")
            pooled = ops.cast(encoded.summary, dtype)
        s0 = self.init_dense(pooled)  # (B, units)
        keys = ops.cast(self.attention.precompute_keys(annotations), dtype)  # (B, Tx, A)
        return [s0, self.flatten(annotations), self.flatten(keys), mask]

    # ----------------------------------------------------------------- step
    @property
    def projection_size(self) -> int:
        """`units` (the feedback query's `e` rows, with feedback attention) + `3 units`
        (the GRU input kernel's `e` rows)."""
        return (self.units if self.query_dense is not None else 0) + 3 * self.units

    def input_side(self, inputs: Any) -> Any:
        """What steps 1 and 3 compute from `e` alone: `[W_e e + b; W^gru_e e + b^gru]`.

        Args:
            inputs: `(B, [T,] E)` embeddings of `y_{t-1}`.

        Returns:
            `(B, [T,] projection_size)`: the feedback query's product with `e` and its bias
            (its kernel reads `[s_{t-1}; e]`), then the GRU input kernel's (it reads `[e; c_t]`).
        """
        embedding_dim = self._embedding_dim
        gru = self.gru_cell
        parts = (
            []
            if self.query_dense is None
            else [self.rows_product(inputs, self.query_dense.kernel, self.units, bias=self.query_dense.bias)]
        )
        parts.append(self.rows_product(inputs, gru.kernel, 0, embedding_dim, bias=gru.bias[0]))
        return parts[0] if len(parts) == 1 else ops.concatenate(parts, axis=-1)

    def loop_weights(self) -> dict:
        """The feedback query kernel's rows for `s_{t-1}`, the GRU input kernel's for `c_t`."""
        weights = {"gru_context": self.kernel_rows(self.gru_cell.kernel, self._embedding_dim)}
        if self.query_dense is not None:
            weights["query_state"] = self.kernel_rows(self.query_dense.kernel, 0, self.units)
        return weights

    def _recurrent_step(self, inputs: Any, products: Any, states: list, training: bool = False) -> tuple:
        """One decoder step (the equations of the class docstring) given `input_side(inputs)`.

        Args:
            inputs: `(B, E)` embedding of `y_{t-1}`.
            products: `(B, projection_size)`, `input_side(inputs)`.
            states: `[s_{t-1}, annotations, keys, source_mask]` (2-D each).
            training: bool, unused (the input dropout is applied before the loop,
                `drop_inputs`).

        Returns:
            `(output, new_states, {"attention": alpha_t})`: `(B, units + D + E)`,
            the 4 states (the last 3 unchanged) and `(B, Tx)`.
        """
        s_prev, annotations_flat, keys_flat, mask = states
        annotations = self.unflatten(annotations_flat, mask, self.annotation_units)  # (B, Tx, D)
        keys = self.unflatten(keys_flat, mask, self.attention_units)  # (B, Tx, A)
        gru_e = products[:, -3 * self.units :]  # W^gru_e e + b^gru
        loop = self.step_weights()

        # 1. query: feedback attention tanh(W [s_{t-1}; e] + b) (MemDec §2.1) or s_{t-1}.
        if self.query_dense is not None:
            query_e = products[:, : self.units]  # W_e e + b
            query = self.query_dense.activation(ops.matmul(s_prev, loop["query_state"]) + query_e)
        else:
            query = s_prev
        # 2. context c_t = sum_j alpha_tj h_j (Eq. 3).
        context, weights = self.attention(query, keys, annotations, mask=mask)
        # 3. s_t = GRU(s_{t-1}, [e; c_t]) (Eq. 2).
        state = self.gru_cell.step_from_input_product(gru_e + ops.matmul(context, loop["gru_context"]), s_prev)
        # 4. o_t = [s_t; c_t; e], the input of the deep output (Eq. 9).
        output = ops.concatenate([state, context, inputs], axis=-1)
        return output, [state, annotations_flat, keys_flat, mask], {"attention": weights}

    # ---------------------------------------------------------------- config
    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "attention_units": self.attention_units,
            "feedback_attention": self.feedback_attention,
            "attention_remat": self.attention_remat,
            "init_state": self.init_state,
        }
