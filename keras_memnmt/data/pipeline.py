"""tf.data pipeline: text pairs → padded ``((source_ids, target_in_ids), target_out_ids)`` batches.

Steps (the first two up front in NumPy, the rest inside tf.data, so the same
pipeline feeds ``model.fit`` under TensorFlow, JAX and PyTorch):

1. tokenize both sides once (``SentencePieceVocab.encode``);
2. drop pairs longer than ``max_length`` subword tokens on either side — the
   number dropped is counted and returned in :class:`PipelineStats` (and logged
   by the CLI), never silent — and make a ragged-tensor dataset of the rest;
3. append eos to the source; ``target_in = [bos] + y``, ``target_out = y + [eos]``;
4. cache, then a seeded shuffle (reshuffled every epoch; with ``start_step``, epoch
   ``e`` in the order of a permutation drawn from ``(seed, e)``);
5. bucket by length and batch by sentences or by tokens, padding with 0 up to
   the bucket boundary (a small fixed set of shapes, so jit compiles each once);
6. prefetch.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from keras_memnmt.data.corpus import CorpusError, ParallelCorpus
from keras_memnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID, SubwordVocab

BATCH_BY = ("sentences", "tokens")


@dataclasses.dataclass
class PipelineStats:
    """What the pipeline kept and dropped (printed by ``memnmt data check``)."""

    pairs: int
    kept: int
    dropped_too_long: int
    dropped_empty: int
    source_tokens: int
    target_tokens: int
    source_lengths: np.ndarray = dataclasses.field(repr=False)
    target_lengths: np.ndarray = dataclasses.field(repr=False)

    def percentiles(self, qs=(50, 90, 99, 100)) -> dict:
        return {
            side: {f"p{q}": int(np.percentile(lengths, q)) for q in qs}
            for side, lengths in (("source", self.source_lengths), ("target", self.target_lengths))
        }

    def summary(self) -> dict:
        return {
            "pairs": self.pairs,
            "kept": self.kept,
            "dropped_too_long": self.dropped_too_long,
            "dropped_empty": self.dropped_empty,
            "source_tokens": self.source_tokens,
            "target_tokens": self.target_tokens,
            "length_percentiles": self.percentiles(),
        }


def _encode(corpus: ParallelCorpus, vocab: SubwordVocab):
    """Subword ids (no bos/eos) of both sides: two ``(values, row_lengths)`` pairs of arrays."""
    out = []
    for side, texts in ((vocab.source, corpus.source), (vocab.target, corpus.target)):
        rows = side.encode(texts)
        lengths = np.fromiter(map(len, rows), np.int64, len(rows))
        values = np.fromiter(itertools.chain.from_iterable(rows), np.int32, int(lengths.sum()))
        out.append((values, lengths))
    return out


def _ragged(encoded, keep: np.ndarray) -> tuple:
    """(source ids, target ids) ragged tensors of the pairs where ``keep`` is True, from
    :func:`_encode`'s arrays."""
    import tensorflow as tf

    rows = np.flatnonzero(keep)
    return tuple(tf.gather(tf.RaggedTensor.from_row_lengths(values, lengths), rows) for values, lengths in encoded)


def token_lengths(corpus: ParallelCorpus, vocab: SubwordVocab) -> tuple[np.ndarray, np.ndarray]:
    """Subword lengths (without bos/eos) of every source and target sentence."""
    (_, src_len), (_, tgt_len) = _encode(corpus, vocab)
    return src_len, tgt_len


def _short_enough(src_len: np.ndarray, tgt_len: np.ndarray, max_length: int) -> np.ndarray:
    """The pairs the pipeline keeps: at most ``max_length`` subword tokens on both sides."""
    return (src_len <= max_length) & (tgt_len <= max_length)


def corpus_stats(
    corpus: ParallelCorpus, vocab: SubwordVocab, max_length: int, lengths: tuple[np.ndarray, np.ndarray] | None = None
) -> PipelineStats:
    """What :func:`make_dataset` keeps and drops; ``lengths``: precomputed :func:`token_lengths`."""
    src_len, tgt_len = lengths if lengths is not None else token_lengths(corpus, vocab)
    keep = _short_enough(src_len, tgt_len, max_length)
    return PipelineStats(
        pairs=len(corpus),
        kept=int(keep.sum()),
        dropped_too_long=int((~keep).sum()),
        dropped_empty=corpus.dropped_empty,
        source_tokens=int(src_len.sum()),
        target_tokens=int(tgt_len.sum()),
        source_lengths=src_len,
        target_lengths=tgt_len,
    )


def bucket_boundaries(max_length: int, bucket_width: int) -> list[int]:
    """Upper (exclusive) boundaries of the length buckets for sequences of ≤ max_length+1 ids."""
    bounds = list(range(bucket_width + 1, max_length + 2, bucket_width))
    if not bounds or bounds[-1] < max_length + 2:
        bounds.append(max_length + 2)
    return bounds


def make_dataset(
    corpus: ParallelCorpus,
    vocab: SubwordVocab,
    batch_size: int = 64,
    batch_by: str = "sentences",
    max_length: int = 80,
    bucket_width: int = 8,
    shuffle: bool = True,
    seed: int = 0,
    stats: PipelineStats | None = None,
    start_step: int | None = None,
):
    """Builds the training/evaluation dataset.

    Args:
        corpus: the text pairs.
        vocab: the subword vocabulary (source and target sides).
        batch_size: sentences per batch (``batch_by="sentences"``) or the most
            padded tokens per batch on the longer side (``batch_by="tokens"``).
        batch_by: ``"sentences"`` or ``"tokens"``.
        max_length: pairs with more subword tokens than this on either side
            (before bos/eos) are dropped and counted.
        bucket_width: width of the length buckets; batches are padded to the
            bucket's upper boundary.
        shuffle: shuffle pairs (seeded, reshuffled every epoch).
        seed: the shuffle seed.
        stats: precomputed :func:`corpus_stats` (computed here when None).
        start_step: ``None``: one pass over the data per iteration, reshuffled at each
            new iteration. An int: an endless dataset of epochs, epoch ``e`` in the
            order of a permutation drawn from ``(seed, e)`` and holding :func:`batches_per_epoch` batches,
            starting after its first ``start_step`` batches; the order of every epoch is
            known without running the ones before it (an exact ``--resume``).

    Returns:
        ``(dataset, stats)``: a ``tf.data.Dataset`` of
        ``((source_ids (B, S), target_in_ids (B, T)), target_out_ids (B, T))``
        int32 batches padded with 0, and the :class:`PipelineStats`.

    Raises:
        ValueError: a bad argument (named in the message).
        CorpusError: every pair is longer than ``max_length``.
    """
    import tensorflow as tf

    if batch_by not in BATCH_BY:
        raise ValueError(f"batch_by must be one of {BATCH_BY}, got {batch_by!r}")
    for name, value in (("batch_size", batch_size), ("max_length", max_length), ("bucket_width", bucket_width)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if batch_by == "tokens" and batch_size < max_length + 1:
        raise ValueError(f"batch_size={batch_size} tokens cannot hold one sentence of max_length={max_length}")
    encoded = _encode(corpus, vocab)
    (_, src_len), (_, tgt_len) = encoded
    stats = stats or corpus_stats(corpus, vocab, max_length, (src_len, tgt_len))
    if stats.kept == 0:
        raise CorpusError(
            f"all {stats.pairs} pairs of {corpus.name or 'the corpus'} are longer than "
            f"max_length={max_length} subword tokens"
        )

    pairs = _ragged(encoded, _short_enough(src_len, tgt_len, max_length))
    ds = tf.data.Dataset.from_tensor_slices(pairs).map(_add_specials, num_parallel_calls=tf.data.AUTOTUNE).cache()
    shape = dict(batch_size=batch_size, batch_by=batch_by, max_length=max_length, bucket_width=bucket_width)

    buffer = min(stats.kept, 100_000)
    if start_step is not None:

        def epoch(e):  # a permutation drawn from (seed, e): epoch e's order depends on nothing else
            if not shuffle:
                return _bucketed(ds, **shape)
            keys = tf.random.stateless_uniform([stats.kept], seed=tf.stack([tf.constant(seed, tf.int64), e]))
            order = tf.argsort(keys)
            shuffled = tuple(tf.gather(side, order) for side in pairs)
            return bucketed(tf.data.Dataset.from_tensor_slices(shuffled), **shape)

        ds = epochs_from(epoch, start_step, batches_per_epoch(stats, **shape))
    else:
        if shuffle:
            ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
        ds = _bucketed(ds, **shape)
    return model_inputs(ds), stats


def _add_specials(src, tgt):
    """``(source + [eos], [bos] + target, target + [eos])``."""
    import tensorflow as tf

    src = tf.concat([src, [EOS_ID]], 0)
    return src, tf.concat([[BOS_ID], tgt], 0), tf.concat([tgt, [EOS_ID]], 0)


def _bucketed(triples, batch_size: int, batch_by: str, max_length: int, bucket_width: int):
    """Batches of ``_add_specials``'s triples, bucketed by length and padded to the bucket's
    boundary (a small fixed set of shapes, so jit compiles each once)."""
    import tensorflow as tf

    bounds, sizes = _buckets(batch_size, batch_by, max_length, bucket_width)
    return triples.bucket_by_sequence_length(
        lambda s, ti, to: tf.maximum(tf.size(s), tf.size(ti)),
        bucket_boundaries=bounds,
        bucket_batch_sizes=sizes,
        padding_values=(PAD_ID, PAD_ID, PAD_ID),
        pad_to_bucket_boundary=True,
    )


def bucketed(pairs, batch_size: int = 64, batch_by: str = "sentences", max_length: int = 80, bucket_width: int = 8):
    """A dataset of ``(source ids, target ids)`` pairs (no bos/eos) as padded, length-bucketed
    batches of ``(source + eos, bos + target, target + eos)``."""
    import tensorflow as tf

    return _bucketed(
        pairs.map(_add_specials, num_parallel_calls=tf.data.AUTOTUNE), batch_size, batch_by, max_length, bucket_width
    )


def epochs_from(epoch, start_step: int, per_epoch: int):
    """The endless dataset ``epoch(first), epoch(first + 1), ...`` (``epoch``: an epoch number
    tensor -> that epoch's batches, ``per_epoch`` of them) starting after its first
    ``start_step`` batches."""
    import tensorflow as tf

    first_epoch, skip = divmod(start_step, per_epoch)
    return tf.data.Dataset.range(first_epoch, 2**62).flat_map(epoch).skip(skip)


def model_inputs(batches):
    """Batches of triples as ``model.fit`` takes them, ``((source, target_in), target_out)``,
    prefetched."""
    import tensorflow as tf

    ds = batches.map(lambda s, ti, to: ((s, ti), to), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def _buckets(batch_size: int, batch_by: str, max_length: int, bucket_width: int) -> tuple[list[int], list[int]]:
    """``(boundaries, batch size of each bucket)`` of ``bucket_by_sequence_length``."""
    bounds = bucket_boundaries(max_length, bucket_width)
    if batch_by == "sentences":
        return bounds, [batch_size] * (len(bounds) + 1)
    return bounds, [max(1, batch_size // (b - 1)) for b in bounds] + [1]


def batches_per_epoch(
    stats: PipelineStats, batch_size: int = 64, batch_by: str = "sentences", max_length: int = 80, bucket_width: int = 8
) -> int:
    """How many batches one epoch of :func:`make_dataset` (same arguments) holds, from the
    pairs' lengths alone: each bucket (by the longer side, bos/eos included) gives
    ``ceil(pairs / its batch size)`` batches, whatever the order."""
    bounds, sizes = _buckets(batch_size, batch_by, max_length, bucket_width)
    histogram = getattr(stats, "key_histogram", None)  # a streamed corpus's (data.stream.StreamStats)
    if histogram is None:
        src_len, tgt_len = stats.source_lengths, stats.target_lengths
        keep = _short_enough(src_len, tgt_len, max_length)
        keys = np.maximum(src_len[keep], tgt_len[keep]) + 1  # eos on the source, bos on target_in
        counts = np.bincount(np.searchsorted(bounds, keys, side="right"), minlength=len(bounds) + 1)
    else:
        counts = np.bincount(
            np.searchsorted(bounds, np.arange(len(histogram)), side="right"),
            weights=histogram,
            minlength=len(bounds) + 1,
        )
    return int(sum(-(-int(n) // size) for n, size in zip(counts, sizes, strict=True)))
