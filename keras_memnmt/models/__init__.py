"""Encoder–decoder models, one per architecture, on two bases: ``EncoderDecoder`` (every
model) and ``RecurrentEncoderDecoder`` (a decoder cell inside ``keras.layers.RNN``), with
``Seq2Seq``, the recurrent base of the models whose decoder attends over the annotations.

Each model is registered under a name (``register_model``); ``get_model(name)``
returns its class and ``model_options(cls)`` its options. Importing a model's module here
registers it.
"""

from keras_memnmt.layers.bidirectional_encoder import BidirectionalEncoder
from keras_memnmt.layers.stacked_encoder import StackedLSTMEncoder
from keras_memnmt.layers.ylstm_encoder import YLSTMEncoder
from keras_memnmt.models.base import EncoderDecoder, option_differences
from keras_memnmt.models.ensemble import Ensemble
from keras_memnmt.models.panels import SOURCE_ATTENTION, Panel
from keras_memnmt.models.recurrent import RecurrentEncoderDecoder, Seq2Seq
from keras_memnmt.models.registry import (
    MODELS,
    Option,
    get_model,
    model_names,
    model_options,
    register_model,
)
from keras_memnmt.models.stacked import StackedSeq2Seq

# The models, in the order they register: the order of model_names() (and so of
# docs/config.md and the messages that list the names).
# isort: off
from keras_memnmt.models.attentive import AttentiveNMT
from keras_memnmt.models.luong import LuongNMT
from keras_memnmt.models.rnnsearch import RNNsearch
from keras_memnmt.models.cho import ChoEncoderDecoder
from keras_memnmt.models.memdec import MemDec, memdec_from_rnnsearch
from keras_memnmt.models.rmn import RMN, RMR
from keras_memnmt.models.transformer import Transformer, TransformerEncoderStack
from keras_memnmt.models.ylstm import YLSTM

# isort: on

__all__ = [
    "MODELS",
    "RMN",
    "RMR",
    "AttentiveNMT",
    "LuongNMT",
    "StackedLSTMEncoder",
    "BidirectionalEncoder",
    "ChoEncoderDecoder",
    "EncoderDecoder",
    "Ensemble",
    "MemDec",
    "Option",
    "Panel",
    "RNNsearch",
    "RecurrentEncoderDecoder",
    "SOURCE_ATTENTION",
    "Seq2Seq",
    "StackedSeq2Seq",
    "Transformer",
    "TransformerEncoderStack",
    "YLSTM",
    "YLSTMEncoder",
    "get_model",
    "memdec_from_rnnsearch",
    "model_names",
    "model_options",
    "option_differences",
    "register_model",
]
