"""The stacked-LSTM cell base, under its former module name: see :mod:`keras_memnmt.layers.stacked`."""

from keras_memnmt.layers.stacked import INIT_STATES, StackedLSTMCell

__all__ = ["INIT_STATES", "StackedLSTMCell"]
