"""Encoder–decoder models, one per architecture, sharing the Seq2Seq base."""

from keras_memnmt.models.encoder import BidirectionalEncoder
from keras_memnmt.models.rnnsearch import ChoEncoderDecoder, RNNsearch
from keras_memnmt.models.seq2seq import Seq2Seq

MODELS = {"rnnsearch": RNNsearch, "cho": ChoEncoderDecoder}

__all__ = ["MODELS", "BidirectionalEncoder", "ChoEncoderDecoder", "RNNsearch", "Seq2Seq"]
