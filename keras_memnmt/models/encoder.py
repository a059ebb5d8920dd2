"""The encoders, which are layers: this module re-exports them from ``keras_memnmt.layers``
(:mod:`~keras_memnmt.layers.bidirectional_encoder`, :mod:`~keras_memnmt.layers.stacked_encoder`,
:mod:`~keras_memnmt.layers.ylstm_encoder`, :mod:`~keras_memnmt.layers.embedding`)."""

from keras_memnmt.layers.bidirectional_encoder import BidirectionalEncoder, bidirectional
from keras_memnmt.layers.embedding import embedding_initializer
from keras_memnmt.layers.stacked_encoder import StackedLSTMEncoder
from keras_memnmt.layers.ylstm_encoder import YLSTMEncoder

__all__ = ["BidirectionalEncoder", "StackedLSTMEncoder", "YLSTMEncoder", "bidirectional", "embedding_initializer"]
