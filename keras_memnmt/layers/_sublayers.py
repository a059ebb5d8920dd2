"""The sublayer factories, under their former module name: see :mod:`keras_memnmt.layers.sublayers`."""

from keras_memnmt.layers.sublayers import additive_attention, deep_output, dense, gru_cell, lstm_cell

__all__ = ["additive_attention", "deep_output", "dense", "gru_cell", "lstm_cell"]
