"""Greedy search against a list-based reference, with a fake decoder and no model.

Every call uses 6 sentences, a 5-token vocabulary and 5 steps where it can:
under JAX each new shape costs a few seconds of compilation. The reference,
`ruled_greedy` (`keras_memnmt.testing.fake_decoder`), is written from the token rules
(`beam_test`'s module docstring).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from keras_memnmt.decoding import greedy_search
from keras_memnmt.testing.fake_decoder import (
    BOS,
    EOS,
    PAD,
    FakeDecoder,
    has_repeated_ngram,
    ruled_greedy,
    score_np,
    unpad,
)

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SENTENCES = list(range(6))
LIMITS = np.array([2, 5, 3, 1, 5, 4], "int32")


def run_greedy(model: FakeDecoder, tx=None, **kwargs) -> dict:
    states = model.initial_states(SENTENCES, tx)
    out = greedy_search(model.next_fn, states, len(SENTENCES), **kwargs)
    return {key: keras.ops.convert_to_numpy(value) for key, value in out.items()}


@pytest.mark.parametrize("seed", [1, 4])
def test_matches_reference(seed):
    model = FakeDecoder(seed=seed, num_sentences=6, eos_bias=0.0)
    out = run_greedy(model, max_length=5)
    assert out["tokens"].shape == (6, 5) and out["tokens"].dtype == np.int32
    assert sorted(out) == ["lengths", "scores", "tokens"]
    assert len(set(out["lengths"].tolist())) > 1
    for s in SENTENCES:
        tokens, raw = ruled_greedy(model, s, 5)
        assert unpad(out["tokens"][s], out["lengths"][s]) == tokens
        np.testing.assert_allclose(out["scores"][s], raw, rtol=1e-5)


def test_per_sentence_max_length():
    """A sentence at its limit takes eos there, and its score counts eos's log-probability."""
    model = FakeDecoder(seed=2, num_sentences=6, eos_bias=-30.0)  # never eos before the limit
    out = run_greedy(model, max_length=keras.ops.convert_to_tensor(LIMITS))
    assert out["tokens"].shape == (6, 5)
    np.testing.assert_array_equal(out["lengths"], LIMITS)  # every sentence hits its limit
    for s in SENTENCES:
        tokens, raw = ruled_greedy(model, s, int(LIMITS[s]))
        assert unpad(out["tokens"][s], out["lengths"][s]) == tokens
        assert tokens.index(EOS) == len(tokens) - 1
        np.testing.assert_allclose(out["scores"][s], raw, rtol=1e-5)
        np.testing.assert_allclose(out["scores"][s], score_np(model, s, tokens, "none")[1], rtol=1e-5)
        assert raw < -25  # eos's log-probability is in it
    # A longer static buffer (max_steps) only adds padding.
    wide = run_greedy(model, max_length=keras.ops.convert_to_tensor(LIMITS), max_steps=7)
    np.testing.assert_array_equal(wide["tokens"][:, :5], out["tokens"])
    assert np.all(wide["tokens"][:, 5:] == PAD)


def test_eos_then_padding():
    out = run_greedy(FakeDecoder(seed=4, num_sentences=6, eos_bias=0.5), max_length=5)
    assert 0 < np.sum(out["lengths"] < 5) < 6  # some choose eos, some reach the limit
    for row, length in zip(out["tokens"], out["lengths"], strict=True):
        body = row[:length].tolist()
        assert 1 <= length <= 5
        assert PAD not in body and BOS not in body  # never generated
        assert EOS not in body[:-1]
        assert body[-1] == EOS  # at the limit at the latest
        assert np.all(row[length:] == PAD)


def test_attention():
    model = FakeDecoder(seed=4, num_sentences=6, eos_bias=0.5)
    out = run_greedy(model, max_length=5, return_attention=True)
    attention = out["attention"]
    assert attention.shape == (6, 5, 4)
    for s in SENTENCES:
        length, n = out["lengths"][s], model.memory_lengths[s]
        np.testing.assert_allclose(attention[s, :length].sum(-1), 1.0, rtol=1e-5)
        assert np.all(attention[s, :, n:] == 0.0)  # masked memory positions
        assert np.all(attention[s, length:] == 0.0)  # after eos


def test_attention_required():
    model = FakeDecoder(seed=4, num_sentences=6, eos_bias=0.5)

    def no_attention(tokens, states):
        logits, states, _ = model.next_fn(tokens, states)
        return logits, states, None

    states = model.initial_states(SENTENCES)
    with pytest.raises(ValueError, match="attention"):
        greedy_search(no_attention, states, 6, 5, return_attention=True)
    out = greedy_search(no_attention, states, 6, 5)  # fine without attention
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(out["tokens"]), run_greedy(model, max_length=5)["tokens"])


def test_invalid_arguments():
    model = FakeDecoder(seed=0, num_sentences=6)
    states = model.initial_states(SENTENCES)
    with pytest.raises(ValueError, match="max_length"):
        greedy_search(model.next_fn, states, 6, 0)
    with pytest.raises(ValueError, match="eos_id"):
        greedy_search(model.next_fn, states, 6, 5, eos_id=0)
    with pytest.raises(ValueError, match="min_length"):
        greedy_search(model.next_fn, states, 6, 5, min_length=-1)
    with pytest.raises(ValueError, match="no_repeat_ngram_size"):
        greedy_search(model.next_fn, states, 6, 5, no_repeat_ngram_size=None)


def test_compiled():
    """The whole search inside `tf.function` / `jax.jit` equals the eager call."""
    backend = keras.backend.backend()
    model = FakeDecoder(seed=4, num_sentences=6, eos_bias=0.5)
    states = model.initial_states(SENTENCES)

    def search(limits, *states):
        return greedy_search(model.next_fn, list(states), 6, limits, max_steps=5, return_attention=True)

    if backend == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(search)
    elif backend == "jax":
        import jax

        compiled = jax.jit(search)
    else:
        pytest.skip(f"no graph compiler for the {backend} backend")
    eager = search(LIMITS, *states)
    traced = compiled(LIMITS, *states)
    for key, value in eager.items():
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(traced[key]), keras.ops.convert_to_numpy(value), rtol=1e-6
        )
    if backend == "jax":  # a traced per-sentence limit needs a static buffer width
        with pytest.raises(ValueError, match="max_steps"):
            jax.jit(lambda limits: greedy_search(model.next_fn, states, 6, limits))(LIMITS)


def test_compaction_drops_finished_sentences():
    """With `compact`, finished sentences leave the loop (`next_fn` sees fewer rows);
    every result equals the search without it. Sentence 3 (limit 1) finishes first."""
    model = FakeDecoder(seed=4, num_sentences=6, eos_bias=0.5)
    limits = keras.ops.convert_to_tensor(LIMITS)
    if keras.backend.backend() == "jax":
        with pytest.raises(ValueError, match="compact"):
            run_greedy(model, max_length=limits, compact=True)
        return
    rows = []
    next_fn = model.counted_next_fn(rows)  # records the rows of each call

    outs = {}
    for compact in (True, False):
        rows.clear()
        out = greedy_search(next_fn, model.initial_states(SENTENCES), 6, limits, return_attention=True, compact=compact)
        outs[compact] = {key: keras.ops.convert_to_numpy(value) for key, value in out.items()}
        if compact:
            assert rows[0] == 6 and rows[-1] < 6 and rows == sorted(rows, reverse=True)
        else:
            assert set(rows) == {6}
    for key in ("tokens", "lengths"):
        np.testing.assert_array_equal(outs[True][key], outs[False][key])
    for key in ("scores", "attention"):
        np.testing.assert_allclose(outs[True][key], outs[False][key], rtol=1e-6, atol=1e-7)


def rules_of(kwargs: dict) -> dict:
    """The searches' argument names -> `allowed`'s."""
    return dict(min_length=kwargs.get("min_length", 0), ngram=kwargs.get("no_repeat_ngram_size", 0))


WIDE_LIMITS = np.array([8, 3, 7, 1, 8, 4], "int32")


@pytest.mark.parametrize(
    "rules",
    [
        dict(min_length=4),
        dict(no_repeat_ngram_size=1),
        dict(no_repeat_ngram_size=2),
        dict(min_length=3, no_repeat_ngram_size=3),
    ],
    ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()),
)
def test_min_length_and_no_repeat_ngram_follow_the_reference(rules):
    """Sentence 3's limit (1) is below `min_length`: its eos at the limit wins."""
    model = FakeDecoder(seed=4, vocab_size=7, num_sentences=6, eos_bias=0.5)
    out = run_greedy(model, max_length=keras.ops.convert_to_tensor(WIDE_LIMITS), **rules)
    ref, changed = rules_of(rules), 0
    for s in SENTENCES:
        tokens, raw = ruled_greedy(model, s, int(WIDE_LIMITS[s]), **ref)
        assert unpad(out["tokens"][s], out["lengths"][s]) == tokens
        np.testing.assert_allclose(out["scores"][s], raw, rtol=1e-5)
        assert tokens.index(EOS) == len(tokens) - 1 and len(tokens) >= min(ref["min_length"] + 1, WIDE_LIMITS[s])
        assert not (ref["ngram"] and has_repeated_ngram(tokens, ref["ngram"]))
        changed += tokens != ruled_greedy(model, s, int(WIDE_LIMITS[s]))[0]
    assert changed  # the rules change what the search finds


def test_a_prefix_counts_for_min_length_and_no_repeat_ngram():
    """Sentence 1's prefix `[4, 5, 4]` holds the bigram (4, 5), which the model would
    repeat next: 5 is banned there; sentence 3's `[6]` raises its limit to 2, where eos
    wins over `min_length`."""
    model = FakeDecoder(seed=3, vocab_size=7, num_sentences=6, eos_bias=0.5)
    limits = np.array([8, 8, 7, 1, 8, 4], "int32")
    prefixes = [[5, 5], [4, 5, 4], [], [6], [4], []]
    prefix = np.zeros((6, 3), "int32")
    for row, p in enumerate(prefixes):
        prefix[row, : len(p)] = p
    out = run_greedy(
        model,
        max_length=keras.ops.convert_to_tensor(limits),
        prefix=prefix,
        max_steps=8,
        min_length=3,
        no_repeat_ngram_size=2,
    )
    for s in SENTENCES:
        limit = max(int(limits[s]), len(prefixes[s]) + 1)  # raised to fit the prefix and one token
        tokens, raw = ruled_greedy(model, s, limit, min_length=3, ngram=2, prefix=tuple(prefixes[s]))
        assert unpad(out["tokens"][s], out["lengths"][s]) == tokens
        np.testing.assert_allclose(out["scores"][s], raw, rtol=1e-5)
    assert ruled_greedy(model, 1, 8, prefix=(4, 5, 4))[0][3] == 5  # the ban matters
    assert unpad(out["tokens"][3], out["lengths"][3]) == [6, EOS]


def test_samples_obey_the_rules():
    """Drawn tokens never break `min_length` or the n-gram ban, end with eos by the limit,
    and score their log-probabilities under the model."""
    model = FakeDecoder(seed=3, vocab_size=7, num_sentences=6, eos_bias=0.5)
    draws = []
    for seed in range(3):
        keys = np.arange(6, dtype="int32") + 10 * seed
        out = run_greedy(
            model,
            max_length=keras.ops.convert_to_tensor(WIDE_LIMITS),
            sampling=("full", 0.0),
            keys=keys,
            min_length=2,
            no_repeat_ngram_size=2,
        )
        for s in SENTENCES:
            tokens = unpad(out["tokens"][s], out["lengths"][s])
            assert tokens.index(EOS) == len(tokens) - 1 and len(tokens) >= min(3, WIDE_LIMITS[s])
            assert not has_repeated_ngram(tokens, 2)
            np.testing.assert_allclose(out["scores"][s], score_np(model, s, tokens, "none")[1], rtol=1e-5)
            draws.append(tuple(tokens))
    assert len(set(draws)) > 6  # the draws differ


def test_compaction_keeps_each_sentence_bans():
    """With `compact`, the bans read each remaining sentence's own tokens: the results
    equal the search without compaction and the reference."""
    if keras.backend.backend() == "jax":
        pytest.skip("JAX's loop keeps every shape: no compaction")
    model = FakeDecoder(seed=3, vocab_size=7, num_sentences=6, eos_bias=0.5)
    rules = dict(min_length=2, no_repeat_ngram_size=2)
    rows = []
    next_fn = model.counted_next_fn(rows)  # records the rows of each call

    outs = {}
    for compact in (True, False):
        rows.clear()
        out = greedy_search(
            next_fn,
            model.initial_states(SENTENCES),
            6,
            keras.ops.convert_to_tensor(WIDE_LIMITS),
            compact=compact,
            **rules,
        )
        outs[compact] = {key: keras.ops.convert_to_numpy(value) for key, value in out.items()}
        assert (rows[-1] < 6) == compact
    for key in ("tokens", "lengths"):
        np.testing.assert_array_equal(outs[True][key], outs[False][key])
    for s in SENTENCES:
        tokens, raw = ruled_greedy(model, s, int(WIDE_LIMITS[s]), **rules_of(rules))
        assert unpad(outs[True]["tokens"][s], outs[True]["lengths"][s]) == tokens
        np.testing.assert_allclose(outs[True]["scores"][s], raw, rtol=1e-5)
