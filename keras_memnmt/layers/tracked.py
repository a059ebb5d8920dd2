"""The Y-LSTM's stacked LSTM whose middle layer exchanges state with a tracker LSTM
(Bradbury & Socher 2016, §2.1), shared by its encoder and decoder cells."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers import sublayers
from keras_memnmt.layers._checks import check_bool, check_positive_int, check_rate


class TrackedStack:
    """Mixin for a cell (a ``keras.layers.Layer`` with ``units``, the initializers and a
    ``seed_generator``): ``num_layers`` LSTMs (``lstm_{i}``) and a one-layer tracker LSTM
    (``tracker``) attached to layer ``m = tracker_layer`` (1-based; Bradbury & Socher: 3 of 5):

        a^l_t = [h^{l-1}_t; h^l_{t-1}]                           l != m
        a^m_t = [h^{m-1}_t; h^m_{t-1}; h^tracker_{t-1}]
        a^tracker_t = [h^tracker_{t-1}; h^m_t]

    i.e. layer ``m``'s LSTM reads ``[x^m; h^tracker_{t-1}]`` and the tracker reads ``h^m_t``
    (the recurrent halves are each LSTM's own). ``layer_dropout`` multiplies each layer's
    output by its mask (one per sequence, carried in the state) before the layer above and
    the tracker read it (``tracker_reads_masked=False``: the tracker reads layer ``m``'s
    output before its mask); the top output is dropped too.
    """

    def init_tracked_stack(
        self,
        num_layers: int,
        tracker_layer: int,
        tracker_units: int | None,
        layer_dropout: float,
        tracker_reads_masked: bool = True,
    ) -> None:
        self.num_layers = check_positive_int("num_layers", num_layers)
        self.tracker_layer = check_positive_int("tracker_layer", tracker_layer)
        if self.tracker_layer > self.num_layers:
            raise ValueError(
                f"`tracker_layer` must be one of the {self.num_layers} layers (1-based), "
                f"got tracker_layer={tracker_layer}"
            )
        self.tracker_units = self.units if tracker_units is None else check_positive_int("tracker_units", tracker_units)
        self.layer_dropout = check_rate("layer_dropout", layer_dropout)
        self.tracker_reads_masked = check_bool("tracker_reads_masked", tracker_reads_masked)
        self.lstms = [sublayers.lstm_cell(self, f"lstm_{i}") for i in range(self.num_layers)]
        self.tracker = sublayers.lstm_cell(self, "tracker", units=self.tracker_units)

    @property
    def tracked_state_size(self) -> list:
        """``[h^1, k^1, ..., h^L, k^L, h^tracker, k^tracker, masks]``."""
        return [self.units] * (2 * self.num_layers) + [self.tracker_units] * 2 + [self.num_layers * self.units]

    def build_tracked_stack(self, input_dim: int, above_tracker: int = 0) -> None:
        """Builds the LSTMs and the tracker; each layer above layer ``m`` reads ``above_tracker``
        more features (what ``tracked_step``'s ``after_tracker`` returns)."""
        for i, lstm in enumerate(self.lstms):
            size = input_dim if i == 0 else self.units
            size += self.tracker_units if i == self.tracker_layer - 1 else 0
            lstm.build((None, size + (above_tracker if i >= self.tracker_layer else 0)))
        self.tracker.build((None, self.units))

    def layer_masks(self, batch: Any, training: bool = False) -> Any:
        """``(B, L*units)`` dropout masks: drawn in training, ones otherwise."""
        masks = ops.ones((batch, self.num_layers * self.units), self.compute_dtype)
        if training and self.layer_dropout > 0.0:
            masks = keras.random.dropout(masks, self.layer_dropout, seed=self.seed_generator)
        return masks

    def tracked_step(
        self,
        x: Any,
        lstm_states: list,
        tracker_states: list,
        masks: Any,
        bottom_product: Any = None,
        after_tracker: Any = None,
    ) -> tuple:
        """One step: ``(top (B, units), new lstm states, new tracker [h, k])``.

        The tracker runs as soon as layer ``m`` has (it reads nothing from the layers above).

        Args:
            bottom_product: the bottom LSTM's product with ``x`` and its bias, computed by the
                caller (for the whole sequence before the loop), or None to compute it here.
            after_tracker: None, or a function of the tracker's new output ``h'_t`` called
                right after the tracker runs; what it returns (None: nothing) is concatenated
                to the input of every layer above layer ``m`` in this same step.
        """
        middle = self.tracker_layer - 1
        new_states, new_tracker, extra = [], None, None
        for i, lstm in enumerate(self.lstms):
            states = [lstm_states[2 * i], lstm_states[2 * i + 1]]
            if i > middle and extra is not None:
                x = ops.concatenate([x, extra], axis=-1)
            if i == 0 and bottom_product is not None:
                if i == middle:  # the tracker's rows follow x's
                    bottom_product = bottom_product + ops.matmul(
                        tracker_states[0], self.step_weights()["bottom_tracker"]
                    )
                h, (_, c) = lstm.step_from_input_product(bottom_product, states)
            else:
                if i == middle:
                    x = ops.concatenate([x, tracker_states[0]], axis=-1)
                h, (_, c) = lstm(x, states)
            new_states += [h, c]
            undropped, x = h, h * masks[:, i * self.units : (i + 1) * self.units]
            if i == middle:
                h, (_, c) = self.tracker(x if self.tracker_reads_masked else undropped, list(tracker_states))
                new_tracker = [h, c]
                extra = after_tracker(h) if after_tracker is not None else None
        return x, new_states, new_tracker

    def tracked_config(self) -> dict:
        return {
            "num_layers": self.num_layers,
            "tracker_layer": self.tracker_layer,
            "tracker_units": self.tracker_units,
            "layer_dropout": self.layer_dropout,
            "tracker_reads_masked": self.tracker_reads_masked,
        }
