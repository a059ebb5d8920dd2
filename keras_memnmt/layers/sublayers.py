"""Sublayer factories shared by the decoder cells (RNNsearch, Cho, MemDec).

Every cell builds the same pieces — dense layers, the additive attention, the
GRU cell and the deep output — from its own initializers and dtype policy (so a
cell's sublayers compute in its dtype, and a cell loaded from a ``.keras`` file
builds them in the policy it was saved with). The names given here are the
weight names the pre-training copy (MemDec §4.2) and ``.keras`` files rely on,
so they live in one place.
"""

from __future__ import annotations

import keras

from keras_memnmt.layers.attention import AdditiveAttention
from keras_memnmt.layers.gru import GRUCell
from keras_memnmt.layers.lstm import LSTMCell
from keras_memnmt.layers.readout import DeepOutput, clone_initializer


def dense(cell: keras.layers.Layer, size: int, name: str, activation: str | None = "tanh", use_bias: bool = True):
    """``Dense(size, activation)`` with the cell's kernel/bias initializers and dtype policy."""
    return keras.layers.Dense(
        size,
        activation=activation,
        use_bias=use_bias,
        kernel_initializer=clone_initializer(cell.kernel_initializer),
        bias_initializer=clone_initializer(cell.bias_initializer),
        dtype=cell.dtype_policy,
        name=name,
    )


def additive_attention(cell: keras.layers.Layer) -> AdditiveAttention:
    """The source attention (``cell.attention_units`` hidden units), named ``attention``."""
    return AdditiveAttention(
        cell.attention_units,
        rematerialize=cell.attention_remat,
        kernel_initializer=clone_initializer(cell.kernel_initializer),
        dtype=cell.dtype_policy,
        name="attention",
    )


def gru_cell(cell: keras.layers.Layer) -> GRUCell:
    """The state update ``GRUCell(cell.units)`` (Keras's, split by ``ops.split``), named ``gru``."""
    return GRUCell(
        cell.units,
        kernel_initializer=clone_initializer(cell.kernel_initializer),
        recurrent_initializer=clone_initializer(cell.recurrent_initializer),
        bias_initializer=clone_initializer(cell.bias_initializer),
        dtype=cell.dtype_policy,
        name="gru",
    )


def lstm_cell(cell: keras.layers.Layer, name: str, units: int | None = None) -> LSTMCell:
    """``LSTMCell(units or cell.units)`` (Keras's, with a step from a precomputed input
    product) with the cell's initializers and dtype policy."""
    return LSTMCell(
        units or cell.units,
        kernel_initializer=clone_initializer(cell.kernel_initializer),
        recurrent_initializer=clone_initializer(cell.recurrent_initializer),
        bias_initializer=clone_initializer(cell.bias_initializer),
        dtype=cell.dtype_policy,
        name=name,
    )


def deep_output(cell: keras.layers.Layer, seed: int | None, hidden_layer: bool = True) -> DeepOutput:
    """The deep output (Eq. 9) over ``cell.target_vocab_size``, named ``deep_output``."""
    return DeepOutput(
        cell.readout_units,
        cell.target_vocab_size,
        output_dropout=cell.output_dropout,
        tied=cell.tied_output,
        kernel_initializer=clone_initializer(cell.kernel_initializer),
        bias_initializer=clone_initializer(cell.bias_initializer),
        seed=seed,
        hidden_layer=hidden_layer,
        dtype=cell.dtype_policy,
        name="deep_output",
    )
