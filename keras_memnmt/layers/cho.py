"""The Cho et al. 2014 RNN encoder-decoder's decoder cell (fixed context vector)."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

# Not re-exported by `keras.layers`; it is how `keras.layers.RNN` knows to
# create the dropout mask once per sequence, outside the (JAX) scan.
from keras.src.layers.rnn.dropout_rnn_cell import DropoutRNNCell

from keras_memnmt.layers import _sublayers as sublayers
from keras_memnmt.layers._checks import check_bool, check_positive_int, check_rate


@keras.saving.register_keras_serializable(package="keras_memnmt")
class ChoDecoderCell(sublayers.DecoderCellMixin, keras.layers.Layer, DropoutRNNCell):
    """Decoder step of the RNN encoder-decoder: GRU conditioned on a fixed context.

    Cho et al. 2014, as restated in paper 001 (Yum & Mu), Eq. 13-15:

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
      `RNNsearchCell`.

    States (all 2-D): `[s (B, units), c (B, units)]`; `c` is passed through
    unchanged. Build them with `initial_states(...)` and pass them to
    `keras.layers.RNN(cell, return_sequences=True)` as `initial_state=`.

    Args:
        units: int, size of the decoder state `s_t` and of the context `c`.
        target_vocab_size: int, number of output logits.
        readout_units: int, size of the deep-output tanh layer.
        annotation_units: int, size `D` of the encoder summary.
        output_dropout: float in [0, 1), dropout in the readout.
        tied_output: bool, the readout's output kernel is the target embedding
            matrix, passed to `readout(..., output_embedding=)` (see `DeepOutput`).
        dropout: float in [0, 1), variational dropout on the input embedding.
        kernel_initializer: initializer of the input kernels.
        recurrent_initializer: initializer of the GRU recurrent kernel.
        bias_initializer: initializer of the biases.
        seed: optional int, seed of both dropouts.
        **kwargs: base `keras.layers.Layer` arguments.

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
        output_dropout: float = 0.5,
        tied_output: bool = False,
        dropout: float = 0.0,
        kernel_initializer: Any = "glorot_uniform",
        recurrent_initializer: Any = "orthogonal",
        bias_initializer: Any = "zeros",
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        self.target_vocab_size = check_positive_int("target_vocab_size", target_vocab_size)
        self.readout_units = check_positive_int("readout_units", readout_units)
        self.annotation_units = check_positive_int("annotation_units", annotation_units)
        self.output_dropout = check_rate("output_dropout", output_dropout)
        self.tied_output = check_bool("tied_output", tied_output)
        self.dropout = check_rate("dropout", dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        # DropoutRNNCell reads these two; there is no recurrent dropout.
        self.recurrent_dropout = 0.0
        self.seed_generator = keras.random.SeedGenerator(seed)
        self._embedding_dim: int | None = None

        self.context_dense = sublayers.dense(self, self.units, "context")
        self.init_dense = sublayers.dense(self, self.units, "init_state")
        self.gru_cell = sublayers.gru_cell(self)
        self.deep_output = sublayers.deep_output(self, seed)

    @property
    def state_size(self) -> list:
        """`[units, units]`: the state `s` and the fixed context `c`."""
        return [self.units, self.units]

    @property
    def output_size(self) -> int:
        """`2 * units + E`; `E` is known once the cell is built."""
        if self._embedding_dim is None:
            raise ValueError(
                f"{self.__class__.__name__} '{self.name}': output_size needs the "
                "embedding size; build the cell first (keras.layers.RNN does)."
            )
        return 2 * self.units + self._embedding_dim

    def _build_memory_side(self) -> None:
        """Builds what `initial_states` needs; it does not depend on `E`."""
        if not self.context_dense.built:
            self.context_dense.build((None, self.annotation_units))
        if not self.init_dense.built:
            self.init_dense.build((None, self.units))

    def build(self, input_shape: tuple) -> None:
        """Builds every weight from `input_shape = (B, E)`."""
        embedding_dim = input_shape[-1]
        self._embedding_dim = int(embedding_dim)
        self._build_memory_side()
        self.gru_cell.build((None, embedding_dim + self.units))
        self.deep_output.build((None, 2 * self.units + embedding_dim))
        self.built = True

    def initial_states(
        self,
        annotations: Any | None,
        source_mask: Any | None,
        summary: Any,
        training: bool = False,
    ) -> list:
        """Builds `[s_0 (B, units), c (B, units)]` from the encoder summary.

        Args:
            annotations: unused (kept so every decoder cell has one signature).
            source_mask: unused.
            summary: `(B, D)`, the encoder's fixed-size sentence representation.
            training: unused (MemDecCell draws its Eq. 14 noise only in training).
        """
        del annotations, source_mask  # the context is fixed: no attention.
        self._build_memory_side()
        context = self.context_dense(ops.cast(summary, self.compute_dtype))  # (B, units)
        return [self.init_dense(context), context]

    def step(self, inputs: Any, states: list, training: bool = False) -> tuple:
        """One decoder step (Eq. 14).

        Args:
            inputs: `(B, E)` embedding of `y_{t-1}`.
            states: `[s_{t-1}, c]`.
            training: bool, whether dropout is active.

        Returns:
            `(output (B, 2*units + E), [s_t, c], None)`.

        With `training=True` and `dropout > 0` outside `keras.layers.RNN`, call
        `cell.reset_dropout_mask()` after each sequence (see `RNNsearchCell.step`).
        """
        s_prev, context = states
        if training and self.dropout > 0.0:
            inputs = inputs * self.get_dropout_mask(inputs)
        state, _ = self.gru_cell(
            ops.concatenate([inputs, context], axis=-1), [s_prev], training=training
        )
        output = ops.concatenate([state, context, inputs], axis=-1)
        return output, [state, context], None

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "target_vocab_size": self.target_vocab_size,
                "readout_units": self.readout_units,
                "annotation_units": self.annotation_units,
                "output_dropout": self.output_dropout,
                "tied_output": self.tied_output,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "seed": self.seed,
            }
        )
        return config
