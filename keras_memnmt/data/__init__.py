"""Corpora, subword vocabulary and the tf.data pipeline."""

from keras_memnmt.data.corpus import (
    CorpusError,
    ParallelCorpus,
    prefix_files,
    read_lines,
    read_parallel,
    read_prefix,
)
from keras_memnmt.data.multi30k import (
    ChecksumError,
    DownloadError,
    load_multi30k,
    multi30k_file,
)
from keras_memnmt.data.pipeline import PipelineStats, batches_per_epoch, corpus_stats, make_dataset
from keras_memnmt.data.synthetic import synthetic_corpus, synthetic_splits
from keras_memnmt.data.vocab import (
    BOS_ID,
    EOS_ID,
    MAX_INPUT_TOKENS,
    PAD_ID,
    UNK_ID,
    SentencePieceVocab,
    SubwordVocab,
    encode_sources,
)

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "MAX_INPUT_TOKENS",
    "PAD_ID",
    "UNK_ID",
    "ChecksumError",
    "CorpusError",
    "DownloadError",
    "ParallelCorpus",
    "PipelineStats",
    "SentencePieceVocab",
    "SubwordVocab",
    "corpus_stats",
    "encode_sources",
    "load_multi30k",
    "batches_per_epoch",
    "make_dataset",
    "multi30k_file",
    "prefix_files",
    "read_lines",
    "read_parallel",
    "read_prefix",
    "synthetic_corpus",
    "synthetic_splits",
]
