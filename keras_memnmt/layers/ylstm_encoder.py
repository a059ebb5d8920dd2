"""The Y-LSTM encoder cell (Bradbury & Socher 2016, §2.1): one step of the source language
model, its middle layer joined to a tracker LSTM whose states are the encoding."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers._tracked import TrackedStack


@keras.saving.register_keras_serializable(package="keras_memnmt")
class YLSTMEncoderCell(TrackedStack, keras.layers.Layer):
    """One source step of the Y-LSTM encoder, a stacked-LSTM language model with a tracker
    (see :class:`~keras_memnmt.layers._tracked.TrackedStack` for the equations).

    The step outputs ``[h^L_s; h^tracker_s; k^tracker_s]``: the top output (for the
    next-source-token softmax) and the tracker's hidden and memory states, which the
    encoder keeps at every step as the matrices ``H`` and ``C``.

    States: ``[output, h^1, k^1, ..., h^L, k^L, h^tracker, k^tracker, masks]`` (2-D each):
    the step's output comes first (the Keras 3 cell contract: JAX's masked loop holds the
    previous output in a state of the output's shape), and the masks ``(B, L*units)`` are
    the dropout masks, passed through unchanged. Under a mixed policy every state and the
    output are in the compute dtype (nothing is kept in float32).

    Args:
        units: int, LSTM size of every layer.
        num_layers: int, stacked layers (paper: 5).
        tracker_layer: int, the layer (1-based) the tracker is attached to (paper: 3).
        tracker_units: int or None, the tracker's size (None: ``units``).
        layer_dropout: float in [0, 1), dropout between layers (the masks come in the state).
        kernel_initializer, recurrent_initializer, bias_initializer: the LSTMs' initializers.
        seed: optional int, seed of the dropout masks.

    Call arguments: ``inputs (B, E)`` source embeddings, ``states``, ``training``.

    Returns: ``(output (B, units + 2*tracker_units), new_states)``.
    """

    def __init__(
        self,
        units: int,
        num_layers: int = 5,
        tracker_layer: int = 3,
        tracker_units: int | None = None,
        layer_dropout: float = 0.0,
        tracker_reads_masked: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        recurrent_initializer: Any = "orthogonal",
        bias_initializer: Any = "zeros",
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(units, int) or units < 1:
            raise ValueError(f"`units` must be a positive integer, got units={units!r}")
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.init_tracked_stack(num_layers, tracker_layer, tracker_units, layer_dropout, tracker_reads_masked)

    @property
    def state_size(self) -> list:
        return [self.output_size, *self.tracked_state_size]

    @property
    def output_size(self) -> int:
        return self.units + 2 * self.tracker_units

    def build(self, input_shape: tuple) -> None:
        self.build_tracked_stack(int(input_shape[-1]))
        self.built = True

    def initial_states(self, batch: Any, training: bool = False) -> list:
        """A zero output, zero LSTM and tracker states, and this sequence's dropout masks."""
        zeros = [ops.zeros((batch, size), self.compute_dtype) for size in self.state_size[:-1]]
        return [*zeros, self.layer_masks(batch, training=training)]

    def get_initial_state(self, batch_size: int | None = None) -> list:
        return self.initial_states(batch_size)

    def call(self, inputs: Any, states: list, training: bool = False) -> tuple:
        layers = 2 * self.num_layers
        states = states[1:]  # the previous output is not read
        masks = states[layers + 2]
        top, lstm_states, tracker = self.tracked_step(inputs, states[:layers], states[layers : layers + 2], masks)
        output = ops.concatenate([top, *tracker], axis=-1)
        return output, [output, *lstm_states, *tracker, masks]

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "units": self.units,
            **self.tracked_config(),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "seed": self.seed,
        }
