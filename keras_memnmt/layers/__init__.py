"""Attention layers and decoder cells (one public class per module), and what a new cell
builds on: ``sublayers`` (the factories of the sublayers every cell makes: ``dense``,
``additive_attention``, ``gru_cell``, ``lstm_cell``, ``deep_output``), the argument checks
(``check_positive_int``, ``check_rate``, ``check_bool``, ``check_choice``) and
``clone_initializer``."""

from keras_memnmt.layers import _sublayers as sublayers
from keras_memnmt.layers._checks import check_bool, check_choice, check_positive_int, check_rate
from keras_memnmt.layers.attention import AdditiveAttention, LuongAttention
from keras_memnmt.layers.attentive import AttentiveCell
from keras_memnmt.layers.base import DecoderCell, EncoderOutput
from keras_memnmt.layers.cho import ChoDecoderCell
from keras_memnmt.layers.luong import LuongCell
from keras_memnmt.layers.memdec import MemDecCell
from keras_memnmt.layers.readout import DeepOutput, clone_initializer
from keras_memnmt.layers.rmn import RMNCell
from keras_memnmt.layers.rnnsearch import RNNsearchCell
from keras_memnmt.layers.ylstm import YLSTMCell
from keras_memnmt.layers.ylstm_encoder import YLSTMEncoderCell

__all__ = [
    "AdditiveAttention",
    "AttentiveCell",
    "ChoDecoderCell",
    "DecoderCell",
    "DeepOutput",
    "EncoderOutput",
    "LuongAttention",
    "LuongCell",
    "MemDecCell",
    "RMNCell",
    "RNNsearchCell",
    "YLSTMCell",
    "YLSTMEncoderCell",
    "check_bool",
    "check_choice",
    "check_positive_int",
    "check_rate",
    "clone_initializer",
    "sublayers",
]
