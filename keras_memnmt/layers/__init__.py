"""Attention layers and decoder cells (one public class per module)."""

from keras_memnmt.layers.attention import AdditiveAttention, LuongAttention
from keras_memnmt.layers.attentive import AttentiveCell
from keras_memnmt.layers.base import DecoderCell, EncoderOutput
from keras_memnmt.layers.cho import ChoDecoderCell
from keras_memnmt.layers.luong import LuongCell
from keras_memnmt.layers.memdec import MemDecCell
from keras_memnmt.layers.readout import DeepOutput
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
]
