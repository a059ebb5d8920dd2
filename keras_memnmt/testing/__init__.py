"""Test helpers for keras_memnmt: ``run_cell_test`` (one call checks a decoder cell),
NumPy reference steps (``reference``), and a tiny model around a cell (``decoder_model``)."""

from keras_memnmt.testing.cell_test import random_encoder_output, run_cell_test

__all__ = ["random_encoder_output", "run_cell_test"]
