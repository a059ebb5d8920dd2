import numpy as np
import pytest

from keras_memnmt.data import BOS_ID, EOS_ID, PAD_ID, CorpusError, make_dataset

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent


def batches(ds):
    return list(ds.as_numpy_iterator())


def test_batch_layout(val_corpus, small_vocab):
    ds, stats = make_dataset(val_corpus, small_vocab, batch_size=32, max_length=60, shuffle=False)
    n_pairs = 0
    for (src, tgt_in), tgt_out in batches(ds):
        assert src.dtype == np.int32 and tgt_in.shape == tgt_out.shape
        assert src.shape[0] == tgt_in.shape[0] <= 32
        assert (tgt_in[:, 0] == BOS_ID).all()
        # target_out is target_in shifted left by one, ending with eos
        lengths = (tgt_out != PAD_ID).sum(1)
        for row_in, row_out, n in zip(tgt_in, tgt_out, lengths):
            assert row_out[n - 1] == EOS_ID and (row_out[n:] == PAD_ID).all()
            np.testing.assert_array_equal(row_in[1:n], row_out[: n - 1])
        src_len = (src != PAD_ID).sum(1)
        assert all(src[i, src_len[i] - 1] == EOS_ID for i in range(len(src)))
        n_pairs += len(src)
    assert n_pairs == stats.kept == 1014 - stats.dropped_too_long


def test_max_length_filter_is_counted(val_corpus, small_vocab):
    ds, stats = make_dataset(val_corpus, small_vocab, batch_size=64, max_length=12, shuffle=False)
    keep = (stats.source_lengths <= 12) & (stats.target_lengths <= 12)
    assert stats.dropped_too_long == int((~keep).sum()) > 0
    got = sum(len(b[1]) for b in batches(ds))
    assert got == stats.kept == len(val_corpus) - stats.dropped_too_long
    assert max(b[1].shape[1] for b in batches(ds)) <= 13


def test_all_pairs_too_long_is_an_error(val_corpus, small_vocab):
    with pytest.raises(CorpusError, match="longer than max_length=1"):
        make_dataset(val_corpus.take(5), small_vocab, max_length=1)


def test_batching_by_tokens(val_corpus, small_vocab):
    ds, _ = make_dataset(val_corpus, small_vocab, batch_size=400, batch_by="tokens", max_length=60)
    for (src, tgt_in), _ in batches(ds):
        assert src.shape[0] * max(src.shape[1], tgt_in.shape[1]) <= 400


def test_bucketing_uses_a_few_fixed_shapes(val_corpus, small_vocab):
    ds, _ = make_dataset(val_corpus, small_vocab, batch_size=16, max_length=60, bucket_width=8)
    widths = {b[1].shape[1] for b in batches(ds)}
    assert widths <= {8, 16, 24, 32, 40, 48, 56, 61}
    assert all(b[0][0].shape[1] == b[1].shape[1] for b in batches(ds))


@pytest.mark.parametrize("width", [1, 4, 8])
def test_batches_pad_to_the_bucket_boundary(val_corpus, small_vocab, width):
    """Every batch is padded to its bucket's boundary: at most width - 1 past its longest pair."""
    ds, _ = make_dataset(val_corpus, small_vocab, batch_size=16, max_length=60, bucket_width=width, shuffle=False)
    slack = set()
    for (src, tgt_in), tgt_out in batches(ds):
        longest = max((src != PAD_ID).sum(1).max(), (tgt_out != PAD_ID).sum(1).max())
        assert src.shape[1] == tgt_in.shape[1] == tgt_out.shape[1]
        slack.add(src.shape[1] - longest)
    assert min(slack) == 0 and max(slack) <= width - 1
    if width > 1:
        assert max(slack) > 0  # the wider buckets really pad past the longest pair


def test_seeded_shuffle(val_corpus, small_vocab):
    def first(seed):
        ds, _ = make_dataset(val_corpus, small_vocab, batch_size=16, seed=seed)
        return next(iter(ds.as_numpy_iterator()))[1]

    np.testing.assert_array_equal(first(1), first(1))
    assert not np.array_equal(first(1), first(2))


def test_bad_arguments(val_corpus, small_vocab):
    with pytest.raises(ValueError, match="batch_by"):
        make_dataset(val_corpus, small_vocab, batch_by="words")
    with pytest.raises(ValueError, match="batch_size"):
        make_dataset(val_corpus, small_vocab, batch_size=0)
    with pytest.raises(ValueError, match="cannot hold one sentence"):
        make_dataset(val_corpus, small_vocab, batch_size=10, batch_by="tokens", max_length=50)


def _add_source_summary_layer():
    import keras

    class AddSourceSummary(keras.layers.Layer):
        def call(self, target_emb, source_summary):
            return target_emb + keras.ops.expand_dims(source_summary, 1)

    return AddSourceSummary


def test_feeds_model_fit_on_this_backend(val_corpus, small_vocab):
    """A trivial seq2seq-shaped Keras model trains on the pipeline (run once per backend)."""
    import keras

    AddSourceSummary = _add_source_summary_layer()
    ds, _ = make_dataset(val_corpus.take(256), small_vocab, batch_size=32, max_length=40)
    src = keras.Input((None,), dtype="int32")
    tgt_in = keras.Input((None,), dtype="int32")
    v = small_vocab.target.vocab_size
    emb = keras.layers.Embedding(v, 16)(tgt_in)
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(v, 16)(src))
    logits = keras.layers.Dense(v)(AddSourceSummary()(emb, pooled))
    model = keras.Model([src, tgt_in], logits)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(ds, epochs=3, verbose=0)
    assert hist.history["loss"][-1] < hist.history["loss"][0]
    assert np.isfinite(hist.history["loss"]).all()


@pytest.mark.parametrize("batch_by, size", [("sentences", 32), ("tokens", 600)])
def test_endless_epochs_are_fixed_by_seed_and_epoch(val_corpus, small_vocab, batch_by, size):
    """start_step: every epoch holds batches_per_epoch batches with every kept pair once,
    and starting at step s gives the batches an earlier start gives from s on."""
    from keras_memnmt.data import batches_per_epoch

    corpus = val_corpus.take(300)
    shape = dict(batch_size=size, batch_by=batch_by, max_length=40, seed=5)
    _, stats = make_dataset(corpus, small_vocab, **shape)
    n = batches_per_epoch(stats, size, batch_by, 40)
    assert n == len(batches(make_dataset(corpus, small_vocab, **shape)[0]))  # a pass of the plain pipeline
    endless = batches(make_dataset(corpus, small_vocab, start_step=0, **shape)[0].take(2 * n + 3))
    first = endless[:n]
    assert sum(len(target_out) for _, target_out in first) == stats.kept
    later = batches(make_dataset(corpus, small_vocab, start_step=n + 2, **shape)[0].take(n + 1))
    for ((source_a, _), target_a), ((source_b, _), target_b) in zip(endless[n + 2 :], later, strict=True):
        assert np.array_equal(source_a, source_b) and np.array_equal(target_a, target_b)
    # Each epoch in its own order.
    assert any(not np.array_equal(a[1], b[1]) for a, b in zip(first, endless[n : 2 * n], strict=True))
