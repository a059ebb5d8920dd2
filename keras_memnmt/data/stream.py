"""Training pairs streamed from their files: corpora larger than memory.

:func:`make_dataset` holds a corpus in memory (its pairs, then their ids); a corpus of
files (``train_prefix``) is read a chunk at a time instead, so memory does not grow
with its size:

1. :func:`stream_stats`, one pass over the files in Python: each chunk of lines is
   decoded (an invalid byte names the file and line), tokenized by the vocabulary's
   SentencePiece (all cores) and counted: pairs, pairs with an empty side, pairs longer
   than ``max_length``, tokens, and a histogram of lengths (the percentiles, and the
   batches each epoch holds, :func:`~keras_memnmt.data.pipeline.batches_per_epoch`);
2. :func:`make_stream_dataset`, the same reading and tokenizing inside tf.data (a
   ``tf.numpy_function`` calling the same SentencePiece, so no tensorflow-text op library
   is loaded), then the same filters, a shuffle within blocks of ``shuffle_buffer``
   pairs seeded by ``(seed, epoch)``, the length buckets of the in-memory pipeline, and
   prefetching.

Epoch ``e`` is the files' pairs, each consecutive block of ``shuffle_buffer`` of them in
the order of a permutation drawn from ``(seed, e, block)`` alone (memory holds one block,
not the corpus; a corpus whose lines are sorted, by length or by source, wants one
shuffle of its files beforehand, as pairs never leave their block): a run resumed at step ``s`` builds epoch
``s // batches_per_epoch`` and skips its first ``s % batches_per_epoch`` batches (read
and tokenized, not trained), so it trains on the batches the uninterrupted run would.
:func:`sample_pairs` reads the first pairs for the vocabulary's training sample.
"""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import os
from collections.abc import Iterator

import numpy as np

from keras_memnmt.data.corpus import CorpusError, empty_corpus, unreadable
from keras_memnmt.data.pipeline import PipelineStats
from keras_memnmt.data.vocab import SubwordVocab

CHUNK = 8192  # lines read, decoded and tokenized together


@dataclasses.dataclass(frozen=True)
class CorpusFiles:
    """Aligned text files (plain or ``.gz``): line N of ``source`` translates line N of
    ``target``; ``limit``: only the first ``limit`` pairs with no empty side."""

    source: str
    target: str
    limit: int | None = None

    @property
    def name(self) -> str:
        return f"{self.source} | {self.target}"

    def check(self) -> CorpusFiles:
        """Itself, once both files are known to exist (else a ``CorpusError`` naming the file)."""
        for path in (self.source, self.target):
            if not os.path.isfile(path):
                raise CorpusError(
                    f"expected a file, got a directory: {path}" if os.path.isdir(path) else f"file not found: {path}"
                )
        return self

    def take(self, n: int | None) -> CorpusFiles:
        return self if n is None else dataclasses.replace(self, limit=min(n, self.limit or n))


def _open(path: str):
    try:
        return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    except OSError as e:
        raise unreadable(path, 0, e) from e


def _next_lines(f, path: str, first: int, chunk: int) -> list[bytes]:
    """Up to ``chunk`` lines of the open file ``f`` (line ``first`` of ``path`` first); one
    that cannot be read (a truncated or corrupt ``.gz``) is a ``CorpusError`` naming
    ``path`` and its last whole line read."""
    lines: list[bytes] = []
    try:
        lines.extend(itertools.islice(f, chunk))  # the lines read before an error stay in the list
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        raise unreadable(path, first + len(lines) - 1, e) from e
    return lines


def _decode(lines: list[bytes], path: str, first: int) -> list[str]:
    """The stripped text of ``lines`` (line ``first`` of ``path`` first)."""
    try:
        return [line.decode("utf-8").strip() for line in lines]
    except UnicodeDecodeError:
        for number, line in enumerate(lines, start=first):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CorpusError(
                    f"{path}, line {number}: invalid UTF-8 (byte {e.start}: {line[e.start : e.start + 1]!r})"
                ) from None
        raise


def read_chunks(files: CorpusFiles, chunk: int = CHUNK) -> Iterator[tuple[list[str], list[str]]]:
    """``(source lines, target lines)`` a chunk at a time, stripped, in file order, pairs
    with an empty side included (the caller counts them).

    Raises:
        CorpusError: a file is missing, unreadable (the file, and the line it cannot be read
            past, named), not UTF-8 (file and line named), or the files' line counts differ.
    """
    files.check()
    with _open(files.source) as fs, _open(files.target) as ft:
        number = 1
        while True:
            src = _next_lines(fs, files.source, number, chunk)
            tgt = _next_lines(ft, files.target, number, chunk)
            if len(src) != len(tgt):
                short, long_ = (files.source, files.target) if len(src) < len(tgt) else (files.target, files.source)
                raise CorpusError(
                    f"source and target line counts differ: {short} ends at line "
                    f"{number + min(len(src), len(tgt)) - 1}, {long_} goes on"
                )
            if not src:
                return
            yield _decode(src, files.source, number), _decode(tgt, files.target, number)
            number += len(src)


def sample_pairs(files: CorpusFiles, n: int) -> tuple[list[str], list[str]]:
    """The first ``n`` pairs with no empty side (the vocabulary's training sample).

    Raises:
        CorpusError: as :func:`read_chunks`, and for files that hold no such pair (the
            files named).
    """
    source, target, empty = [], [], 0
    for src, tgt in read_chunks(files):
        for s, t in zip(src, tgt):
            if s and t:
                source.append(s)
                target.append(t)
                if len(source) >= min(n, files.limit or n):
                    return source, target
            else:
                empty += 1
    if not source:
        raise empty_corpus(files.source, files.target, empty)
    return source, target


@dataclasses.dataclass
class StreamStats:
    """What a pass over a corpus's files found; the fields of
    :class:`~keras_memnmt.data.pipeline.PipelineStats`, with histograms of the lengths
    (``[length] -> pairs``) in place of the lengths themselves."""

    pairs: int
    kept: int
    dropped_too_long: int
    dropped_empty: int
    source_tokens: int
    target_tokens: int
    source_histogram: np.ndarray = dataclasses.field(repr=False)
    target_histogram: np.ndarray = dataclasses.field(repr=False)
    key_histogram: np.ndarray = dataclasses.field(repr=False)  # kept pairs by max(source, target) + 1

    def percentiles(self, qs=(50, 90, 99, 100)) -> dict:
        """As ``PipelineStats.percentiles``: ``int(np.percentile(lengths, q))``, from the histograms."""
        out = {}
        for side, hist in (("source", self.source_histogram), ("target", self.target_histogram)):
            cumulative = np.cumsum(hist)
            out[side] = {}
            for q in qs:
                position = q / 100 * (int(cumulative[-1]) - 1)  # numpy's linear interpolation
                # the lengths of ranks floor(position) and ceil(position), 0-based
                low, high = (
                    int(np.searchsorted(cumulative, rank, side="right"))
                    for rank in (np.floor(position), np.ceil(position))
                )
                out[side][f"p{q}"] = int(low + (high - low) * (position - np.floor(position)))
        return out

    summary = PipelineStats.summary  # the same report, from these percentiles


def _lengths(vocab_side, texts: list[str]) -> np.ndarray:
    return np.fromiter(map(len, vocab_side.encode(texts)), np.int64, len(texts))


def stream_stats(files: CorpusFiles, vocab: SubwordVocab, max_length: int, log=None) -> StreamStats:
    """One pass over ``files``: what :func:`make_stream_dataset` keeps and drops (its filters,
    in the same order: pairs with an empty side, then ``files.limit``, then the length).

    ``log``: called with a line every million pairs read.
    """
    top = max_length + 1  # the largest bucket key of a kept pair
    hists = [np.zeros(top + 1, np.int64) for _ in range(3)]

    def add(histogram: np.ndarray, counts: np.ndarray) -> np.ndarray:
        if len(counts) > len(histogram):
            histogram = np.pad(histogram, (0, len(counts) - len(histogram)))
        histogram[: len(counts)] += counts
        return histogram

    pairs = empty = tokens_s = tokens_t = 0
    for src, tgt in read_chunks(files):
        full = np.array([bool(s and t) for s, t in zip(src, tgt)])
        empty += int((~full).sum())
        rows = np.flatnonzero(full)
        if files.limit is not None:
            rows = rows[: files.limit - pairs]
        s_len = _lengths(vocab.source, [src[i] for i in rows])
        t_len = _lengths(vocab.target, [tgt[i] for i in rows])
        before, pairs = pairs, pairs + len(rows)
        tokens_s, tokens_t = tokens_s + int(s_len.sum()), tokens_t + int(t_len.sum())
        hists[0] = add(hists[0], np.bincount(s_len))
        hists[1] = add(hists[1], np.bincount(t_len))
        keep = (s_len <= max_length) & (t_len <= max_length)
        hists[2] = add(hists[2], np.bincount(np.maximum(s_len[keep], t_len[keep]) + 1))
        if log and pairs // 1_000_000 > before // 1_000_000:
            log(f"counted {pairs:,} pairs of {files.name}")
        if files.limit is not None and pairs >= files.limit:
            break
    if pairs == 0:
        raise empty_corpus(files.source, files.target, empty)
    kept = int(hists[2].sum())
    return StreamStats(
        pairs=pairs,
        kept=kept,
        dropped_too_long=pairs - kept,
        dropped_empty=empty,
        source_tokens=tokens_s,
        target_tokens=tokens_t,
        source_histogram=hists[0],
        target_histogram=hists[1],
        key_histogram=hists[2],
    )


def make_stream_dataset(
    files: CorpusFiles,
    vocab: SubwordVocab,
    stats: StreamStats,
    batch_size: int = 64,
    batch_by: str = "sentences",
    max_length: int = 80,
    bucket_width: int = 8,
    seed: int = 0,
    start_step: int = 0,
    shuffle_buffer: int = 100_000,
):
    """The endless training dataset of ``files``: epoch after epoch, each the pairs in file
    order shuffled within blocks of ``shuffle_buffer`` pairs (seeded by ``(seed, epoch)``),
    filtered and batched as :func:`~keras_memnmt.data.pipeline.make_dataset` does, starting
    after its first ``start_step`` batches. ``stats``: :func:`stream_stats` of the same
    files and ``max_length``."""
    import tensorflow as tf

    from keras_memnmt.data.pipeline import batches_per_epoch, bucketed, epochs_from, model_inputs

    def lines(path):
        return tf.data.TextLineDataset(path, compression_type="GZIP" if path.endswith(".gz") else "")

    def tokenize(src, tgt):
        """A chunk of lines -> the ids of its pairs with no empty side, as flat values and
        row lengths per side."""
        src = [s.decode("utf-8").strip() for s in src]
        tgt = [t.decode("utf-8").strip() for t in tgt]
        rows = [i for i, (s, t) in enumerate(zip(src, tgt)) if s and t]
        out = []
        for side, texts in ((vocab.source, src), (vocab.target, tgt)):
            ids = side.encode([texts[i] for i in rows])
            out += [
                np.fromiter(itertools.chain.from_iterable(ids), np.int32),
                np.fromiter(map(len, ids), np.int64, len(ids)),
            ]
        return out

    def ragged(src, tgt):
        s, s_len, t, t_len = tf.numpy_function(
            tokenize, [src, tgt], [tf.int32, tf.int64, tf.int32, tf.int64], stateful=False
        )
        for tensor in (s, s_len, t, t_len):
            tensor.set_shape([None])
        return tf.RaggedTensor.from_row_lengths(s, s_len), tf.RaggedTensor.from_row_lengths(t, t_len)

    def permuted(pairs, key):
        order = tf.argsort(tf.random.stateless_uniform([pairs[0].nrows()], seed=key))
        return tuple(tf.gather(side, order) for side in pairs)

    def short_enough(src, tgt):
        return (tf.size(src) <= max_length) & (tf.size(tgt) <= max_length)

    def epoch(e):
        ds = tf.data.Dataset.zip((lines(files.source), lines(files.target))).batch(CHUNK)
        ds = ds.map(ragged, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch()
        if files.limit is not None:
            ds = ds.take(files.limit)
        ds = ds.filter(short_enough).batch(shuffle_buffer).enumerate()
        # Each block of shuffle_buffer pairs in the order of a permutation drawn from (seed, e,
        # the block): stateless, so that the order does not depend on the global seed either.
        ds = ds.map(
            lambda block, pairs: permuted(pairs, tf.stack([seed * 1_000_003 + e, block])),
            num_parallel_calls=tf.data.AUTOTUNE,
        ).unbatch()
        return bucketed(ds, batch_size, batch_by, max_length, bucket_width)

    per_epoch = batches_per_epoch(stats, batch_size, batch_by, max_length, bucket_width)
    return model_inputs(epochs_from(epoch, start_step, per_epoch))
