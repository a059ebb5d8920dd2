"""Encoders, attention layers and decoder cells (one public class per module; the Y-LSTM
encoder's layer sits beside its cell), and what a new cell builds on: ``sublayers`` (the
factories of the sublayers every cell makes: ``dense``, ``additive_attention``,
``gru_cell``, ``lstm_cell``, ``deep_output``), the argument checks (``check_positive_int``,
``check_rate``, ``check_bool``, ``check_choice``), ``clone_initializer`` and
``embedding.embedding_initializer``, and the cell bases ``stacked.StackedLSTMCell`` (the
stacked-LSTM cells) and ``tracked.TrackedStack`` (the Y-LSTM cells)."""

from keras_memnmt.layers import sublayers
from keras_memnmt.layers._checks import check_bool, check_choice, check_positive_int, check_rate
from keras_memnmt.layers.attention import AdditiveAttention, LuongAttention
from keras_memnmt.layers.attentive import AttentiveCell
from keras_memnmt.layers.base import DecoderCell, EncoderOutput
from keras_memnmt.layers.bidirectional_encoder import BidirectionalEncoder
from keras_memnmt.layers.cho import ChoDecoderCell
from keras_memnmt.layers.luong import LuongCell
from keras_memnmt.layers.memdec import MemDecCell
from keras_memnmt.layers.readout import DeepOutput, clone_initializer
from keras_memnmt.layers.rmn import RMNCell
from keras_memnmt.layers.rnnsearch import RNNsearchCell
from keras_memnmt.layers.stacked_encoder import StackedLSTMEncoder
from keras_memnmt.layers.ylstm import YLSTMCell
from keras_memnmt.layers.ylstm_encoder import YLSTMEncoder, YLSTMEncoderCell

__all__ = [
    "AdditiveAttention",
    "AttentiveCell",
    "BidirectionalEncoder",
    "ChoDecoderCell",
    "DecoderCell",
    "DeepOutput",
    "EncoderOutput",
    "LuongAttention",
    "LuongCell",
    "MemDecCell",
    "RMNCell",
    "RNNsearchCell",
    "StackedLSTMEncoder",
    "YLSTMCell",
    "YLSTMEncoder",
    "YLSTMEncoderCell",
    "check_bool",
    "check_choice",
    "check_positive_int",
    "check_rate",
    "clone_initializer",
    "sublayers",
]
