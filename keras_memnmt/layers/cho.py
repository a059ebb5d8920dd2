"""The Cho et al. 2014 RNN encoder-decoder's decoder cell (fixed context vector)."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers import sublayers
from keras_memnmt.layers.base import DecoderCell, EncoderOutput


@keras.saving.register_keras_serializable(package="keras_memnmt")
class ChoDecoderCell(DecoderCell):
    """Decoder step of the RNN encoder-decoder: GRU conditioned on a fixed context.

    Cho et al. 2014, as restated by Yum & Mu, Eq. 13-15:

        c   = tanh(V summary + b_V)         (the fixed context, Eq. 13)
        s_0 = tanh(W_init c + b_init)
        s_t = GRU(s_{t-1}, [e_{y_{t-1}}; c])                          (Eq. 14)
        p(y_t | y_<t, X) = g(s_t, y_{t-1}, c)                         (Eq. 15)

    One step returns `o_t = [s_t; c; e_{y_{t-1}}]`, and `readout(o)` is `g`: the
    same deep output as `RNNsearchCell` (see `DeepOutput`).

    Decisions:
    - Eq. 13 writes `c = h_T` (the last encoder state); like Cho et al.'s
      appendix we squash it, `c = tanh(V h_T)`, with `V` mapping the encoder's
      `annotation_units`-sized summary to `units` (so `c` has `units` features),
      and initialise `s_0 = tanh(W_init c)` (Cho et al.: `h'_0 = tanh(V' c)`).
      Biases are added to both.
    - `c` enters the GRU through the input (`[e; c]`, Eq. 14) rather than
      through separate `C` matrices per gate — the same function.
    - `g` is a tanh deep output instead of Cho et al.'s maxout (see
      `DeepOutput`); GRU is Keras's GRUCell (`layers.gru.GRUCell`,
      `reset_after=True`).
    - `dropout` is variational dropout on the input embedding, as in
      `RNNsearchCell` (`DecoderCell.drop_inputs`).
    - Mixed precision: no softmax and no sum over the source; everything runs
      in the compute dtype.

    States (all 2-D): `[s (B, units), c (B, units)]`; `c` is passed through
    unchanged. Build them with `initial_states(...)` and pass them to
    `keras.layers.RNN(cell, return_sequences=True)` as `initial_state=`.

    Args:
        units: int, size of the decoder state `s_t` and of the context `c`.
        target_vocab_size: int, number of output logits.
        readout_units: int, size of the deep-output tanh layer.
        annotation_units: int, size `D` of the encoder summary.
        **kwargs: the `DecoderCell` arguments (`output_dropout`, `tied_output`,
            `dropout`, the three initializers, `seed`) and the base
            `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(B, E)`, the embedding of the previous target word.
        states: `[s_{t-1}, c]`.
        training: bool, whether dropout is active.

    Returns (`call`): `(output (B, 2*units + E), new_states)`; (`step`): the
    same plus `None` (no attention weights).

    Note: with a target mask in the enclosing `keras.layers.RNN`, use
    `zero_output_for_mask=True` (see `RNNsearchCell`).
    """

    def __init__(
        self,
        units: int,
        target_vocab_size: int,
        readout_units: int,
        annotation_units: int,
        **kwargs: Any,
    ) -> None:
        super().__init__(units, target_vocab_size, readout_units, annotation_units, **kwargs)
        self.context_dense = sublayers.dense(self, self.units, "context")
        self.init_dense = sublayers.dense(self, self.units, "init_state")
        self.gru_cell = sublayers.gru_cell(self)
        self.deep_output = sublayers.deep_output(self, self.seed)

    @property
    def state_size(self) -> list:
        """`[units, units]`: the state `s` and the fixed context `c`."""
        return [self.units, self.units]

    def compute_output_size(self, embedding_dim: int) -> int:
        """`2 * units + E`."""
        return 2 * self.units + embedding_dim

    def _build_memory_side(self) -> None:
        """Builds what `initial_states` needs; it does not depend on `E`."""
        if not self.context_dense.built:
            self.context_dense.build((None, self.annotation_units))
        if not self.init_dense.built:
            self.init_dense.build((None, self.units))

    def build(self, input_shape: tuple) -> None:
        """Builds every weight from `input_shape = (B, E)`."""
        embedding_dim = self.set_embedding_dim(input_shape)
        self._build_memory_side()
        self.gru_cell.build((None, embedding_dim + self.units))
        self.deep_output.build((None, 2 * self.units + embedding_dim))
        self.built = True

    def initial_states_from(self, encoded: EncoderOutput, training: bool = False) -> list:
        """Builds `[s_0 (B, units), c (B, units)]` from the encoder summary `(B, D)`.

        The annotations and their mask are not used: the context is fixed, no attention.
        """
        if encoded.summary is None:
            raise ValueError("ChoDecoderCell needs the encoder's `summary`. Received: summary=None")
        self._build_memory_side()
        context = self.context_dense(ops.cast(encoded.summary, self.compute_dtype))  # (B, units)
        return [self.init_dense(context), context]

    @property
    def projection_size(self) -> int:
        """`3 units`: the GRU input kernel's rows for `e`, with its input bias."""
        return 3 * self.units

    def input_side(self, inputs: Any) -> Any:
        """`W^gru_e e + b^gru` (the GRU reads `[e; c]`): `(B, [T,] E)` to `(B, [T,] 3 units)`."""
        gru = self.gru_cell
        return self.rows_product(inputs, gru.kernel, 0, self._embedding_dim, bias=gru.bias[0])

    def loop_weights(self) -> dict:
        """The GRU input kernel's rows for `c`."""
        return {"gru_context": self.kernel_rows(self.gru_cell.kernel, self._embedding_dim)}

    def _recurrent_step(self, inputs: Any, products: Any, states: list, training: bool = False) -> tuple:
        """One decoder step (Eq. 14) given `products = input_side(inputs)`.

        Args:
            inputs: `(B, E)` embedding of `y_{t-1}`.
            products: `(B, 3 units)`, `input_side(inputs)`.
            states: `[s_{t-1}, c]`.
            training: bool, unused (the input dropout is applied before the loop,
                `drop_inputs`).

        Returns:
            `(output (B, 2*units + E), [s_t, c], {})`: no attention, no details.
        """
        s_prev, context = states
        state = self.gru_cell.step_from_input_product(
            products + ops.matmul(context, self.step_weights()["gru_context"]), s_prev
        )
        output = ops.concatenate([state, context, inputs], axis=-1)
        return output, [state, context], {}
