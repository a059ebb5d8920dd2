"""Encoder–decoder models, one per architecture, sharing the Seq2Seq base."""

from keras_memnmt.models.encoder import BidirectionalEncoder
from keras_memnmt.models.memdec import MemDec, memdec_from_rnnsearch
from keras_memnmt.models.rnnsearch import ChoEncoderDecoder, RNNsearch
from keras_memnmt.models.seq2seq import Seq2Seq

MODELS = {"rnnsearch": RNNsearch, "cho": ChoEncoderDecoder, "memdec": MemDec}

__all__ = [
    "MODELS", "BidirectionalEncoder", "ChoEncoderDecoder", "MemDec", "RNNsearch", "Seq2Seq",
    "memdec_from_rnnsearch",
]
