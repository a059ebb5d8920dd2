"""Greedy search against a list-based reference, with a fake decoder and no model.

Every call uses 6 sentences, a 5-token vocabulary and 5 steps where it can:
under JAX each new shape costs a few seconds of compilation.
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
    reference_greedy,
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
        tokens, raw = reference_greedy(model, s, 5)
        assert unpad(out["tokens"][s], out["lengths"][s]) == tokens
        np.testing.assert_allclose(out["scores"][s], raw, rtol=1e-5)


def test_per_sentence_max_length():
    model = FakeDecoder(seed=2, num_sentences=6, eos_bias=-30.0)  # never eos
    out = run_greedy(model, max_length=keras.ops.convert_to_tensor(LIMITS))
    assert out["tokens"].shape == (6, 5)
    np.testing.assert_array_equal(out["lengths"], LIMITS)  # every sentence hits its limit
    for s in SENTENCES:
        tokens, raw = reference_greedy(model, s, int(LIMITS[s]))
        assert unpad(out["tokens"][s], out["lengths"][s]) == tokens
        assert EOS not in tokens
        np.testing.assert_allclose(out["scores"][s], raw, rtol=1e-5)
    # A longer static buffer (max_steps) only adds padding.
    wide = run_greedy(model, max_length=keras.ops.convert_to_tensor(LIMITS), max_steps=7)
    np.testing.assert_array_equal(wide["tokens"][:, :5], out["tokens"])
    assert np.all(wide["tokens"][:, 5:] == PAD)


def test_eos_then_padding():
    out = run_greedy(FakeDecoder(seed=4, num_sentences=6, eos_bias=0.5), max_length=5)
    assert 0 < np.sum(out["lengths"] < 5) < 6  # some end on eos, some are cut
    for row, length in zip(out["tokens"], out["lengths"], strict=True):
        body = row[:length].tolist()
        assert 1 <= length <= 5
        assert PAD not in body and BOS not in body  # never generated
        assert EOS not in body[:-1]
        assert body[-1] == EOS or length == 5
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
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(out["tokens"]), run_greedy(model, max_length=5)["tokens"]
    )


def test_invalid_arguments():
    model = FakeDecoder(seed=0, num_sentences=6)
    states = model.initial_states(SENTENCES)
    with pytest.raises(ValueError, match="max_length"):
        greedy_search(model.next_fn, states, 6, 0)
    with pytest.raises(ValueError, match="eos_id"):
        greedy_search(model.next_fn, states, 6, 5, eos_id=0)


def test_compiled():
    """The whole search inside `tf.function` / `jax.jit` equals the eager call."""
    backend = keras.backend.backend()
    model = FakeDecoder(seed=4, num_sentences=6, eos_bias=0.5)
    states = model.initial_states(SENTENCES)

    def search(limits, *states):
        return greedy_search(
            model.next_fn, list(states), 6, limits, max_steps=5, return_attention=True
        )

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

    def next_fn(tokens, states):
        rows.append(int(tokens.shape[0]))
        return model.next_fn(tokens, states)

    outs = {}
    for compact in (True, False):
        rows.clear()
        out = greedy_search(next_fn, model.initial_states(SENTENCES), 6, limits,
                            return_attention=True, compact=compact)
        outs[compact] = {key: keras.ops.convert_to_numpy(value) for key, value in out.items()}
        if compact:
            assert rows[0] == 6 and rows[-1] < 6 and rows == sorted(rows, reverse=True)
        else:
            assert set(rows) == {6}
    for key in ("tokens", "lengths"):
        np.testing.assert_array_equal(outs[True][key], outs[False][key])
    for key in ("scores", "attention"):
        np.testing.assert_allclose(outs[True][key], outs[False][key], rtol=1e-6, atol=1e-7)
