"""Test helpers for keras_memnmt: ``run_cell_test`` (one call checks a decoder cell),
``run_decoder_test`` (one call checks a model, with or without a cell), NumPy reference
steps (``reference``), a tiny model around a cell (``decoder_model``), and a fake decoder
with pure-Python searches for the decoding tests (``fake_decoder``)."""

from keras_memnmt.testing.cells import run_cell_test
from keras_memnmt.testing.decoders import run_decoder_test
from keras_memnmt.testing.utils import random_encoder_output

__all__ = ["random_encoder_output", "run_cell_test", "run_decoder_test"]
