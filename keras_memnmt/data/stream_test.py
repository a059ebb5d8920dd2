"""A corpus of files streamed through tf.data (``keras_memnmt.data.stream``): the same pairs,
counts and batches per epoch as the in-memory pipeline, a bounded seeded shuffle, and an
exact restart at any step."""

import collections
import gzip
import json
import os

import numpy as np
import pytest

from keras_memnmt.data import (
    CorpusError,
    SubwordVocab,
    batches_per_epoch,
    corpus_stats,
    make_dataset,
    read_parallel,
    synthetic_corpus,
)
from keras_memnmt.data.stream import (
    CorpusFiles,
    make_stream_dataset,
    read_chunks,
    sample_pairs,
    stream_stats,
)

# tf.data feeds every backend the same batches: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

MAX_LENGTH, WIDTH = 30, 4


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    """300 synthetic pairs, two with an empty side, the source gzipped; and a vocabulary."""
    corpus = synthetic_corpus(300, seed=0)
    source, target = list(corpus.source), list(corpus.target)
    source[5], target[9] = "  ", ""
    folder = tmp_path_factory.mktemp("stream")
    with gzip.open(folder / "train.en.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(source) + "\n")
    (folder / "train.de").write_text("\n".join(target) + "\n", encoding="utf-8")
    vocab = SubwordVocab.train(corpus.source, corpus.target, size=80)
    return CorpusFiles(str(folder / "train.en.gz"), str(folder / "train.de")), vocab


def _pairs(batches):
    """The multiset of (source, target) id tuples in ``batches`` (padding and specials dropped)."""
    return collections.Counter(
        (tuple(s[s > 3]), tuple(t[t > 3])) for (source, _), target in batches for s, t in zip(source, target)
    )


def _same(a, b) -> bool:
    return all(
        x[0][0].shape == y[0][0].shape and (x[0][0] == y[0][0]).all() and (x[1] == y[1]).all()
        for x, y in zip(a, b, strict=True)
    )


def test_the_counts_equal_the_in_memory_pipeline(corpus_files):
    files, vocab = corpus_files
    files = files.take(250)
    in_memory = corpus_stats(read_parallel(files.source, files.target).take(250), vocab, MAX_LENGTH)
    streamed = stream_stats(files, vocab, MAX_LENGTH)
    assert streamed.summary() == in_memory.summary()
    assert (streamed.pairs, streamed.dropped_empty) == (250, 2)
    assert 0 < streamed.dropped_too_long < streamed.pairs  # the length filter is exercised
    for size, by in ((16, "sentences"), (200, "tokens")):
        assert batches_per_epoch(streamed, size, by, MAX_LENGTH, WIDTH) == batches_per_epoch(
            in_memory, size, by, MAX_LENGTH, WIDTH
        )


@pytest.mark.parametrize("size, by", [(16, "sentences"), (200, "tokens")])
def test_each_epoch_holds_the_in_memory_pairs_in_its_own_order(corpus_files, size, by):
    files, vocab = corpus_files
    stats = stream_stats(files, vocab, MAX_LENGTH)
    per_epoch = batches_per_epoch(stats, size, by, MAX_LENGTH, WIDTH)
    shape = dict(batch_size=size, batch_by=by, max_length=MAX_LENGTH, bucket_width=WIDTH)
    ds = make_stream_dataset(files, vocab, stats, seed=1, shuffle_buffer=50, **shape)
    batches = list(ds.take(3 * per_epoch).as_numpy_iterator())
    epochs = [batches[i * per_epoch : (i + 1) * per_epoch] for i in range(3)]
    in_memory, _ = make_dataset(read_parallel(files.source, files.target), vocab, seed=1, start_step=0, **shape)
    expected = _pairs(in_memory.take(per_epoch).as_numpy_iterator())
    assert all(_pairs(epoch) == expected for epoch in epochs)  # an epoch is an epoch
    assert not _same(epochs[0], epochs[1])  # reshuffled
    again = make_stream_dataset(files, vocab, stats, seed=1, shuffle_buffer=50, **shape)
    assert _same(list(again.take(per_epoch).as_numpy_iterator()), epochs[0])  # seeded
    # A restart at step per_epoch + 3 gives the batches the uninterrupted stream gave there.
    resumed = make_stream_dataset(files, vocab, stats, seed=1, shuffle_buffer=50, start_step=per_epoch + 3, **shape)
    assert _same(list(resumed.take(5).as_numpy_iterator()), batches[per_epoch + 3 : per_epoch + 8])


def test_the_shuffle_is_within_blocks(corpus_files):
    """With blocks of one pair the order is the files' order."""
    files, vocab = corpus_files
    stats = stream_stats(files, vocab, MAX_LENGTH)
    ds = make_stream_dataset(
        files, vocab, stats, batch_size=1, max_length=MAX_LENGTH, bucket_width=WIDTH, seed=3, shuffle_buffer=1
    )
    first = [tuple(t[t > 3]) for (_, _), target in ds.take(stats.kept).as_numpy_iterator() for t in target]
    kept = [
        tuple(ids)
        for s, ids in zip(
            vocab.source.encode(sample_pairs(files, 1000)[0]), vocab.target.encode(sample_pairs(files, 1000)[1])
        )
        if len(s) <= MAX_LENGTH and len(ids) <= MAX_LENGTH
    ]
    assert first == kept


def test_the_vocabulary_sample_is_the_first_pairs(corpus_files):
    files, _ = corpus_files
    source, target = sample_pairs(files, 10)
    assert len(source) == len(target) == 10 and all(source) and all(target)
    assert "  " not in source and sample_pairs(files.take(4), 10)[0] == source[:4]


def test_misaligned_files_and_bad_bytes_name_the_file_and_line(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\nthree\n")
    (tmp_path / "a.de").write_text("eins\nzwei\n")
    with pytest.raises(CorpusError, match=r"line counts differ: .*a.de ends at line 2, .*a.en goes on"):
        list(read_chunks(CorpusFiles(str(tmp_path / "a.en"), str(tmp_path / "a.de"))))
    (tmp_path / "b.de").write_bytes(b"eins\nzw\xffei\ndrei\n")
    with pytest.raises(CorpusError, match=r"b.de, line 2: invalid UTF-8"):
        list(read_chunks(CorpusFiles(str(tmp_path / "a.en"), str(tmp_path / "b.de")), chunk=1))
    with pytest.raises(CorpusError, match="file not found: .*nope.de"):
        CorpusFiles(str(tmp_path / "a.en"), str(tmp_path / "nope.de")).check()


def test_a_run_on_a_prefix_streams_and_records_its_vocabulary_sample(corpus_files, tmp_path, capsys):
    from keras_memnmt.cli import main
    from keras_memnmt.testing.tiny_runs import TINY_TRAIN_ARGS

    files, _ = corpus_files
    prefix = str(tmp_path / "train")
    os.symlink(files.source, prefix + ".en.gz")
    os.symlink(files.target, prefix + ".de")
    out = str(tmp_path / "run")
    assert (
        main(
            [
                "train",
                "quickstart",
                "--out",
                out,
                *TINY_TRAIN_ARGS,
                "--set",
                f"train_prefix={prefix}",
                "--set",
                "vocab_sample=120",
                "--set",
                "max_steps=2",
                "--set",
                "validate_every=2",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "trained on the first 120 pairs" in err and "298 training pairs (2 empty dropped), streamed" in err
    assert json.load(open(os.path.join(out, "vocab", "vocab.json")))["sample_pairs"] == 120
    assert np.isfinite(json.load(open(os.path.join(out, "validations.json")))[-1]["loss"])


def test_a_truncated_gz_names_the_broken_file_and_the_line(tmp_path, capsys):
    import zlib

    from keras_memnmt.cli import main
    from keras_memnmt.testing.tiny_runs import TINY_TRAIN_ARGS

    whole = gzip.compress("".join(f"the cat number {i} sees a dog\n" for i in range(3000)).encode())
    cut = whole[: len(whole) // 2]
    readable = zlib.decompressobj(wbits=31).decompress(cut).count(b"\n")  # whole lines before the cut
    (tmp_path / "train.en.gz").write_bytes(cut)
    (tmp_path / "train.de").write_text("".join(f"le chat {i} voit un chien\n" for i in range(3000)))
    files = CorpusFiles(str(tmp_path / "train.en.gz"), str(tmp_path / "train.de"))
    with pytest.raises(CorpusError) as raised:
        list(read_chunks(files, chunk=100))
    assert str(raised.value).startswith(f"cannot read {files.source} after line {readable}: ")
    assert files.target not in str(raised.value)
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "quickstart",
                "--out",
                str(out),
                *TINY_TRAIN_ARGS,
                "--set",
                f"train_prefix={tmp_path / 'train'}",
                "--set",
                "max_steps=1",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith(f"memnmt: error: cannot read {files.source} after line ")
    assert "Traceback" not in err and f"{files.target}:" not in err and not out.exists()


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "empty corpus: {source} and {target} are empty"),
        ("\n \n", "empty corpus: no sentence pair in {source} | {target} (2 pairs with an empty side were dropped)"),
    ],
)
def test_empty_training_files_are_named_not_the_vocabulary_size(tmp_path, capsys, content, message):
    from keras_memnmt.cli import main
    from keras_memnmt.testing.tiny_runs import TINY_TRAIN_ARGS

    source, target = tmp_path / "train.en", tmp_path / "train.de"
    source.write_text(content)
    target.write_text(content)
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "quickstart",
                "--out",
                str(out),
                *TINY_TRAIN_ARGS,
                "--set",
                f"train_prefix={tmp_path / 'train'}",
                "--set",
                "max_steps=1",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == "memnmt: error: " + message.format(source=source, target=target)
    assert "vocab_size" not in err and not out.exists()
