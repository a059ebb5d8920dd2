"""Beam search against brute force, a list-based reference and greedy search.

The fake decoder (`keras_memnmt.testing.fake_decoder`) has by default a 5-token vocabulary
(pad 0, unk 1, bos 2, eos 3, 4), so 3 tokens can be generated and every
hypothesis up to length 5 can be enumerated.

The references (`allowed`, `ruled_greedy`, `ruled_beam`, `ruled_brute_force`, in the
fake decoder's module) are written from the searches' token rules
(`keras_memnmt.decoding.common`): at a sentence's limit eos is the only token, so every
hypothesis ends with eos; before it, `min_length` bans eos and `no_repeat_ngram_size`
bans the tokens that would repeat an n-gram. The greedy and constrained search tests
and the ensemble tests use them too.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from keras_memnmt.decoding import LENGTH_PENALTIES, beam_search, greedy_search, length_penalty
from keras_memnmt.decoding.beam import block_size, candidates
from keras_memnmt.decoding.common import log_probs
from keras_memnmt.testing.fake_decoder import (
    BOS,
    EOS,
    PAD,
    FakeDecoder,
    has_repeated_ngram,
    lp_np,
    ruled_beam,
    ruled_brute_force,
    ruled_greedy,
    score_np,
    table_decoder,
    unpad,
)

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SENTENCES = [0, 1, 2]
SEED = 4  # the optima differ across penalties and from greedy (checked below)
# Six sentences with their own limits: one call covers lengths 3 to 5 (at limit 3, the
# 3 generable tokens give 7 hypotheses, enough for a 5-best list).
MANY = list(range(6))
LIMITS = np.array([5, 4, 5, 3, 5, 3], "int32")


def to_numpy(out: dict) -> dict:
    return {key: keras.ops.convert_to_numpy(value) for key, value in out.items()}


def run_beam(model: FakeDecoder, sentences=SENTENCES, tx=None, **kwargs) -> dict:
    """Decode `sentences` of `model`; every call compiles a loop under JAX (~1 s), so
    the tests batch many sentences into few calls."""
    states = model.initial_states(list(sentences), tx)
    return to_numpy(beam_search(model.next_fn, states, len(sentences), **kwargs))


def hypotheses(out: dict, row: int) -> list[tuple[float, float, list[int]]]:
    return [
        (out["scores"][row, j], out["raw_scores"][row, j], unpad(out["tokens"][row, j], n))
        for j, n in enumerate(out["lengths"][row])
    ]


def assert_same_hypotheses(got, expected):
    assert [h[2] for h in got] == [h[2] for h in expected]
    np.testing.assert_allclose([h[0] for h in got], [h[0] for h in expected], rtol=1e-5)
    np.testing.assert_allclose([h[1] for h in got], [h[1] for h in expected], rtol=1e-5)


def test_length_penalty_values():
    lengths = keras.ops.convert_to_tensor([1, 7, 10])

    def lp(kind):
        return keras.ops.convert_to_numpy(length_penalty(lengths, kind, 0.6))

    np.testing.assert_allclose(lp("gnmt"), [1.0, 2.0**0.6, 2.5**0.6], rtol=1e-6)
    np.testing.assert_allclose(lp("average"), [1, 7, 10])
    np.testing.assert_allclose(lp("none"), [1, 1, 1])
    with pytest.raises(ValueError, match="length_penalty"):
        length_penalty(lengths, "wu")


def test_fixture_exercises_length_penalties():
    """Guard for the tests below: penalties and greedy disagree, no near ties."""
    model = FakeDecoder(seed=SEED, num_sentences=6)
    disagree, beats_greedy = 0, 0
    for s, limit in zip(MANY, LIMITS, strict=True):
        bests = set()
        for kind in LENGTH_PENALTIES:
            ranked = ruled_brute_force(model, s, limit, kind)
            # No near ties in the top 6, so float32 vs float64 cannot flip an order.
            assert np.all(-np.diff([h[0] for h in ranked[:7]]) > 1e-3)
            bests.add(tuple(ranked[0][2]))
        disagree += len(bests) > 1
        beats_greedy += bests != {tuple(ruled_greedy(model, s, limit)[0])}
    assert disagree >= 2 and beats_greedy >= 2


@pytest.mark.parametrize("kind, early_stopping", [("gnmt", True), ("gnmt", False), ("average", True), ("none", True)])
def test_exhaustive_beam_equals_brute_force(kind, early_stopping):
    """A beam wide enough to keep every candidate finds the exact n best.

    With 2 non-eos tokens there are at most `2 ** (L - 2)` alive prefixes and
    `3 * 2 ** (L - 2) = 24` candidates per step for `L = 5` (the last step has
    eos only); `beam_size=48` keeps them all, so the result must be the brute-force
    ranking, for every sentence up to its own limit (`max_length` a `(B,)` tensor).
    """
    model = FakeDecoder(seed=SEED, num_sentences=6)
    out = run_beam(
        model,
        MANY,
        beam_size=48,
        max_length=keras.ops.convert_to_tensor(LIMITS),
        length_penalty=kind,
        n_best=5,
        early_stopping=early_stopping,
    )
    assert out["tokens"].shape == (6, 5, 5)
    for row, (s, limit) in enumerate(zip(MANY, LIMITS, strict=True)):
        assert_same_hypotheses(hypotheses(out, row), ruled_brute_force(model, s, limit, kind)[:5])
        assert np.all(out["lengths"][row] <= limit)


@pytest.mark.parametrize("early_stopping", [True, False])
@pytest.mark.parametrize("kind", LENGTH_PENALTIES)
def test_beam_matches_reference(kind, early_stopping):
    """A narrow beam (3) is not exhaustive; it must follow the documented algorithm.

    Brute force is still the judge of each returned hypothesis' score.
    """
    model = FakeDecoder(seed=7, vocab_size=7, num_sentences=6)
    out = run_beam(
        model,
        MANY,
        beam_size=3,
        max_length=6,
        length_penalty=kind,
        n_best=2,
        early_stopping=early_stopping,
    )
    for row, s in enumerate(MANY):
        expected = ruled_beam(model, s, 3, 6, kind, n_best=2, early_stopping=early_stopping)
        assert_same_hypotheses(hypotheses(out, row), expected)
        for score, raw, tokens in hypotheses(out, row):
            np.testing.assert_allclose([score, raw], score_np(model, s, tokens, kind), rtol=1e-5)


@pytest.mark.parametrize("vocab", [8000, 7931, 4096, 9001, 1024, 300])
@pytest.mark.parametrize("ties", ["none", "dense", "sparse"])
def test_candidates_equal_one_top_k(vocab, ties):
    """The blockwise selection returns what one `top_k` over every beam's row returns.

    Sentence 0 has no live beam (every candidate `-inf`), sentence 1 one live beam;
    integer logits make many equal scores ("sparse": a few high ones per row, so blocks
    whose best differ hold equal candidates, and lower index must still win). TensorFlow's and JAX's `top_k` put the lower
    index first among equals, and so must `candidates`; PyTorch's `topk` orders equals
    arbitrarily, so there the values must agree and each index must hold its value.
    """
    rng = np.random.default_rng(vocab)
    a, k = 6, 4
    count = 2 * k
    if ties == "none":
        logits = rng.normal(0, 3, (a * k, vocab))
    else:
        logits = rng.integers(-3, 3 if ties == "dense" else -1, (a * k, vocab))
    if ties == "sparse":
        for row in logits:
            row[rng.choice(vocab, 6, replace=False)] = rng.integers(1, 3, 6)
    logits = logits.astype("float32")
    alive = rng.normal(0, 1, (a, k)).astype("float32")
    alive[0] = -np.inf
    alive[1, 1:] = -np.inf
    alive[2] = np.round(alive[2])  # equal sums across beams, too
    logits, alive = keras.ops.convert_to_tensor(logits), keras.ops.convert_to_tensor(alive)
    full = keras.ops.convert_to_numpy(
        keras.ops.reshape(
            alive[:, :, None] + keras.ops.reshape(log_probs(logits, (0, 2)), (a, k, vocab)), (a, k * vocab)
        )
    )
    want_raw, want_index = (keras.ops.convert_to_numpy(t) for t in keras.ops.top_k(full, count))
    raw, index = (keras.ops.convert_to_numpy(t) for t in candidates(logits, alive, count, (0, 2)))
    assert (block_size(vocab, count) is None) == (vocab in (9001, 300))  # both paths are covered
    np.testing.assert_array_equal(raw, want_raw)
    assert index.dtype == np.int32
    if keras.backend.backend() == "torch":
        np.testing.assert_array_equal(np.take_along_axis(full, index, axis=1), raw)
        assert all(len(set(row)) == count for row in index.tolist())
    else:
        np.testing.assert_array_equal(index, want_index)


def test_beam_matches_reference_with_a_large_vocabulary():
    """With 2,048 tokens the candidates are chosen blockwise (`candidates`)."""
    assert block_size(2048, 6) is not None
    model = FakeDecoder(seed=3, vocab_size=2048, num_sentences=6, eos_bias=3.0)
    out = run_beam(model, MANY, beam_size=3, max_length=5, length_penalty="gnmt", n_best=2)
    for row, s in enumerate(MANY):
        assert_same_hypotheses(hypotheses(out, row), ruled_beam(model, s, 3, 5, "gnmt", n_best=2))


def test_beam_matches_reference_n_best_one():
    """With `n_best=1` the bound (f. ii) watches the best finished hypothesis only."""
    model = FakeDecoder(seed=8, vocab_size=7, num_sentences=6)
    out = run_beam(model, MANY, beam_size=3, max_length=6, early_stopping=False)
    for row, s in enumerate(MANY):
        expected = ruled_beam(model, s, 3, 6, "gnmt", early_stopping=False)
        assert_same_hypotheses(hypotheses(out, row), expected)


def test_beam_one_equals_greedy():
    """Tokens and lengths agree exactly, raw scores to the last bit.

    Under JAX the two searches are two XLA programs, and XLA's CPU codegen may
    contract the fake model's own multiply-adds into FMAs differently in each
    (1 ulp; with `--xla_backend_optimization_level=0`, or a lookup-table
    `next_fn`, the scores are bitwise equal), so there 2 ulp are allowed.
    """
    max_ulp = 2 if keras.backend.backend() == "jax" else 0
    model = FakeDecoder(seed=1, num_sentences=6, eos_bias=0.0)
    states = model.initial_states(MANY)
    limits = keras.ops.convert_to_tensor(np.array([5, 2, 5, 3, 1, 4], "int32"))
    greedy = {
        "int": to_numpy(greedy_search(model.next_fn, states, 6, 5)),
        "tensor": to_numpy(greedy_search(model.next_fn, states, 6, limits)),
    }
    assert len(set(greedy["tensor"]["lengths"].tolist())) > 2
    for max_length, kind in [("int", "gnmt"), ("tensor", "average"), ("tensor", "none")]:
        limit = 5 if max_length == "int" else limits
        beam = to_numpy(beam_search(model.next_fn, states, 6, 1, limit, length_penalty=kind))
        expected = greedy[max_length]
        np.testing.assert_array_equal(beam["tokens"][:, 0], expected["tokens"])
        np.testing.assert_array_equal(beam["lengths"][:, 0], expected["lengths"])
        np.testing.assert_array_max_ulp(beam["raw_scores"][:, 0], expected["scores"], max_ulp)


def early_eos_tables() -> np.ndarray:
    """Sentence 0: from bos, eos (p = e^-1) beats word 4 (p = e^-1.1), but 4 goes on to
    1 and 1 to eos, each with p = 0.99, so with GNMT `[4, 1, eos]` (score
    -1.12 / 1.19 = -0.94) beats `[eos]` (-1.0). Sentence 1 never ends before its limit.
    Rows: previous token; columns: next token."""
    tables = np.full((2, 5, 5), 0.2)
    eos, word = np.exp(-1.0), np.exp(-1.1)
    tables[0, BOS] = [(1 - eos - word - 1e-3) / 2, 1e-3, (1 - eos - word - 1e-3) / 2, eos, word]
    tables[0, 4] = [2e-3, 0.99, 2e-3, 3e-3, 3e-3]
    tables[0, 1] = [2e-3, 3e-3, 2e-3, 0.99, 3e-3]
    tables[1, :] = [0.1, 0.3, 0.1, 1e-6, 0.5 - 1e-6]
    return tables


def test_early_stopping_false_searches_on():
    """Greedy's finished `[eos]` is beaten by a longer hypothesis under GNMT.

    `early_stopping=True` (default) stops at the first finished hypothesis
    (= greedy); `False` keeps searching because the alive `[4]` could still
    reach `-1.1 / lp(5) = -0.81 > -1.0` (a bound taken at the current length,
    `-1.1 / lp(1)`, would wrongly stop).
    """
    next_fn, initial_states = table_decoder(early_eos_tables())
    states = initial_states([0, 1])  # sentence 1 keeps the loop running

    def top(early_stopping, kind="gnmt"):
        out = to_numpy(beam_search(next_fn, states, 2, 1, 5, length_penalty=kind, early_stopping=early_stopping))
        return unpad(out["tokens"][0, 0], out["lengths"][0, 0]), out["scores"][0, 0]

    assert top(True) == ([EOS], pytest.approx(-1.0, abs=1e-5))
    tokens, score = top(False)
    assert tokens == [4, 1, EOS]
    np.testing.assert_allclose(score, (-1.1 + 2 * np.log(0.99)) / lp_np(3, "gnmt"), rtol=1e-5)
    assert top(False, "none")[0] == [EOS]  # without a penalty the bound stops at once


def test_done_sentence_is_frozen():
    """Sentence 0 is done after one step (early stopping) while sentence 1 runs to
    its limit; its alive beam must not reach the finished buffer afterwards."""
    next_fn, initial_states = table_decoder(early_eos_tables())
    alone = to_numpy(beam_search(next_fn, initial_states([0]), 1, 1, 5))
    batch = to_numpy(beam_search(next_fn, initial_states([0, 1]), 2, 1, 5))
    assert batch["lengths"].tolist() == [[1], [5]]
    np.testing.assert_array_equal(batch["tokens"][0], alone["tokens"][0])
    np.testing.assert_array_equal(batch["raw_scores"][0], alone["raw_scores"][0])


MANY_SEED = 7
MANY_KWARGS = dict(beam_size=4, n_best=4, max_steps=5, return_attention=True)


def decode_many(sentences: list[int], tx: int | None = None, **kwargs) -> dict:
    """Beam 4, 4 best, with attention, each sentence up to its limit in `LIMITS`."""
    model = FakeDecoder(seed=MANY_SEED, num_sentences=6)
    limits = keras.ops.convert_to_tensor(LIMITS[sentences])
    return run_beam(model, sentences, tx, max_length=limits, **MANY_KWARGS, **kwargs)


@pytest.fixture(scope="module")
def many() -> dict:
    """`decode_many(MANY)`, shared by the tests below (each call costs ~1 s on JAX)."""
    return decode_many(MANY)


def test_batch_size_invariance(many):
    """A sentence decoded alone, in a batch of 6, or in reverse order: same result.

    Sentence 5 (limit 3) is done long before the rest of its batch; sentence 0
    runs to the end.
    """
    for sentences in (MANY[::-1], [5], [0]):
        out = decode_many(sentences)
        for row, s in enumerate(sentences):
            for key in ("tokens", "lengths"):
                np.testing.assert_array_equal(out[key][row], many[key][s])
            for key in ("scores", "raw_scores", "attention"):
                np.testing.assert_allclose(out[key][row], many[key][s], rtol=1e-6, atol=1e-7)


def test_compaction_drops_done_sentences(many):
    """With `compact`, done sentences leave the loop: `next_fn` sees fewer rows, and
    every result is the same as without it. (`many` is decoded with the default,
    which is `compact` except on JAX.)"""
    if keras.backend.backend() == "jax":
        with pytest.raises(ValueError, match="compact"):
            decode_many(MANY, compact=True)
        return
    model = FakeDecoder(seed=MANY_SEED, num_sentences=6)
    rows = []
    next_fn = model.counted_next_fn(rows)  # records the rows of each call

    for compact in (True, False):
        rows.clear()
        limits = keras.ops.convert_to_tensor(LIMITS)
        out = to_numpy(
            beam_search(next_fn, model.initial_states(MANY), 6, max_length=limits, compact=compact, **MANY_KWARGS)
        )
        for key in ("tokens", "lengths"):
            np.testing.assert_array_equal(out[key], many[key])
        for key in ("scores", "raw_scores", "attention"):
            np.testing.assert_allclose(out[key], many[key], rtol=1e-6, atol=1e-7)
        assert rows[:2] == [6, 6 * 4]  # the first call on bos, then K beams per sentence
        if compact:
            assert rows[-1] < 6 * 4  # done sentences left
            assert all(n % 4 == 0 for n in rows[1:]) and rows[1:] == sorted(rows[1:], reverse=True)
        else:
            assert set(rows[1:]) == {6 * 4}


def test_padded_memory_invariance(many):
    """More padding on the pass-through memory (garbage values, mask 0) changes nothing."""
    padded = decode_many(MANY, tx=9)
    for key in ("tokens", "lengths"):
        np.testing.assert_array_equal(padded[key], many[key])
    for key in ("scores", "raw_scores"):
        np.testing.assert_allclose(padded[key], many[key], rtol=1e-6)
    np.testing.assert_allclose(padded["attention"][..., :4], many["attention"], atol=1e-7)
    assert np.all(padded["attention"][..., 4:] == 0.0)


def test_n_best_sorted_and_distinct(many):
    assert many["scores"].shape == (6, 4)
    for row in MANY:
        assert np.all(np.diff(many["scores"][row]) <= 0)
        assert len({tuple(h[2]) for h in hypotheses(many, row)}) == 4
        lp = np.array([lp_np(n, "gnmt") for n in many["lengths"][row]])
        np.testing.assert_allclose(many["scores"][row], many["raw_scores"][row] / lp, rtol=1e-5)


def check_eos_then_padding(out: dict, limits: np.ndarray) -> None:
    for row, limit in enumerate(limits):
        for tokens, length in zip(out["tokens"][row], out["lengths"][row], strict=True):
            body = tokens[:length].tolist()
            assert 1 <= length <= limit
            assert PAD not in body and BOS not in body  # never generated
            assert EOS not in body[:-1]
            assert body[-1] == EOS  # at the limit at the latest
            assert np.all(tokens[length:] == PAD)


def test_eos_then_padding(many):
    assert many["tokens"].shape == (6, 4, 5) and many["tokens"].dtype == np.int32
    check_eos_then_padding(many, LIMITS)
    at_limit = many["lengths"] == LIMITS[:, None]
    assert np.any(at_limit) and np.any(~at_limit)  # eos chosen, and eos at the limit


def test_the_limit_ends_every_hypothesis_with_eos():
    """eos is the only token at the limit, and the score counts its log-probability."""
    model = FakeDecoder(seed=MANY_SEED, num_sentences=6, eos_bias=-30.0)  # eos never wins before
    limits = keras.ops.convert_to_tensor(LIMITS)
    out = run_beam(model, MANY, max_length=limits, length_penalty="average", **MANY_KWARGS)
    check_eos_then_padding(out, LIMITS)
    np.testing.assert_array_equal(out["lengths"], np.repeat(LIMITS[:, None], 4, axis=1))
    for row, s in enumerate(MANY):
        for score, raw, tokens in hypotheses(out, row):
            assert tokens.index(EOS) == len(tokens) - 1
            np.testing.assert_allclose([score, raw], score_np(model, s, tokens, "average"), rtol=1e-5)
            assert raw < -25  # eos's log-probability is in it


def test_attention_follows_the_hypothesis(many):
    """Returned attention equals the attention of replaying the hypothesis' tokens.

    The fake attention depends on the whole history, so attention rows that
    did not follow their beam through a reordering would show.
    """
    model = FakeDecoder(seed=MANY_SEED, num_sentences=6)
    assert many["attention"].shape == (6, 4, 5, 4)
    for s in MANY:
        for j in range(4):
            length = many["lengths"][s, j]
            states = [keras.ops.convert_to_tensor(x) for x in model.initial_states([s])]
            replay = []
            for token in [BOS, *many["tokens"][s, j, : length - 1]]:
                _, states, attention = model.next_fn(keras.ops.convert_to_tensor([token]), states)
                replay.append(keras.ops.convert_to_numpy(attention)[0])
            np.testing.assert_allclose(many["attention"][s, j, :length], replay, rtol=1e-5)
            assert np.all(many["attention"][s, j, length:] == 0.0)
            assert np.all(many["attention"][s, j, :, model.memory_lengths[s] :] == 0.0)


def test_invalid_arguments():
    model = FakeDecoder(seed=0)
    states = model.initial_states(SENTENCES)
    for kwargs, name in [
        (dict(beam_size=0), "beam_size"),
        (dict(n_best=4), "n_best"),
        (dict(length_penalty="wu"), "length_penalty"),
        (dict(max_length=0), "max_length"),
        (dict(eos_id=2), "eos_id"),
        (dict(min_length=-1), "min_length"),
        (dict(no_repeat_ngram_size=1.5), "no_repeat_ngram_size"),
    ]:
        call = dict(beam_size=3, max_length=5) | kwargs
        with pytest.raises(ValueError, match=name):
            beam_search(model.next_fn, states, 3, **call)


def test_compiled(many):
    """The whole search inside `tf.function` / `jax.jit` equals the eager call."""
    backend = keras.backend.backend()
    model = FakeDecoder(seed=MANY_SEED, num_sentences=6)

    def search(limits, *states):
        return beam_search(model.next_fn, list(states), 6, max_length=limits, **MANY_KWARGS)

    if backend == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(search)
    elif backend == "jax":
        import jax

        compiled = jax.jit(search)
    else:
        pytest.skip(f"no graph compiler for the {backend} backend")
    traced = to_numpy(compiled(LIMITS, *model.initial_states(MANY)))
    for key, value in many.items():
        np.testing.assert_allclose(traced[key], value, rtol=1e-6, atol=1e-7)


def reference_rules(rules: dict) -> dict:
    """The searches' argument names -> `allowed`'s."""
    return dict(min_length=rules.get("min_length", 0), ngram=rules.get("no_repeat_ngram_size", 0))


RULES = [
    dict(min_length=3),
    dict(no_repeat_ngram_size=1),
    dict(no_repeat_ngram_size=2),
    dict(min_length=2, no_repeat_ngram_size=2),
    dict(min_length=7),
]


@pytest.mark.parametrize("rules", RULES, ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()))
def test_min_length_and_no_repeat_ngram_follow_the_reference(rules):
    """`min_length` 7 is past the limit (6): the limit's eos wins."""
    model = FakeDecoder(seed=7, vocab_size=7, num_sentences=6)
    out = run_beam(model, MANY, beam_size=3, max_length=6, n_best=2, **rules)
    ref = reference_rules(rules)
    changed = 0
    for row, s in enumerate(MANY):
        expected = ruled_beam(model, s, 3, 6, "gnmt", n_best=2, **ref)
        assert_same_hypotheses(hypotheses(out, row), expected)
        for score, raw, tokens in hypotheses(out, row):
            assert tokens.index(EOS) == len(tokens) - 1 and len(tokens) >= min(ref["min_length"] + 1, 6)
            assert not (ref["ngram"] and has_repeated_ngram(tokens, ref["ngram"]))
            np.testing.assert_allclose([score, raw], score_np(model, s, tokens, "gnmt"), rtol=1e-5)
        changed += [h[2] for h in expected] != [h[2] for h in ruled_beam(model, s, 3, 6, "gnmt", n_best=2)]
    assert changed >= 2  # the rules change what the search finds


def test_exhaustive_beam_with_bans_equals_brute_force():
    """Beam 48 keeps every allowed candidate: the n best allowed hypotheses, exactly. At
    limit 3, `min_length=2` leaves 4 hypotheses: the 5th entry is empty."""
    model = FakeDecoder(seed=SEED, num_sentences=6)
    out = run_beam(
        model,
        MANY,
        beam_size=48,
        max_length=keras.ops.convert_to_tensor(LIMITS),
        n_best=5,
        early_stopping=False,
        min_length=2,
        no_repeat_ngram_size=2,
    )
    for row, (s, limit) in enumerate(zip(MANY, LIMITS, strict=True)):
        expected = ruled_brute_force(model, s, limit, "gnmt", min_length=2, ngram=2)[:5]
        found = hypotheses(out, row)
        assert_same_hypotheses(found[: len(expected)], expected)
        for score, _, tokens in found[len(expected) :]:
            assert score == -np.inf and tokens == []
    assert len(ruled_brute_force(model, 3, 3, "gnmt", min_length=2, ngram=2)) == 4


def test_no_repeat_ngram_follows_the_beams_reordering():
    """Each hypothesis' bans come from its own tokens, which change beam slot as the beam
    is reordered. Guard: the reference meets steps where a hypothesis the previous step
    moved to another slot has a ban that changes the `2K` best candidates."""
    model = FakeDecoder(seed=7, vocab_size=7, num_sentences=6)
    out = run_beam(model, MANY, beam_size=3, max_length=6, n_best=3, no_repeat_ngram_size=2, early_stopping=False)
    moved = []
    for row, s in enumerate(MANY):
        expected = ruled_beam(model, s, 3, 6, "gnmt", n_best=3, early_stopping=False, moved_bans=moved, ngram=2)
        assert_same_hypotheses(hypotheses(out, row), expected)
    assert len(moved) >= 3


def test_compaction_keeps_each_hypothesis_bans():
    """With `compact`, the bans still read each remaining hypothesis' own tokens: the
    results equal the search without compaction and the reference. Sentences 1 and 3
    (limit 3) leave the loop first; the n-gram ban changes the others' results later."""
    if keras.backend.backend() == "jax":
        pytest.skip("JAX's loop keeps every shape: no compaction")
    model = FakeDecoder(seed=MANY_SEED, vocab_size=7, num_sentences=6)
    limits = np.array([8, 3, 7, 3, 8, 4], "int32")
    rules = dict(min_length=2, no_repeat_ngram_size=2)
    rows = []
    next_fn = model.counted_next_fn(rows)  # records the rows of each call

    outs = {}
    for compact in (True, False):
        rows.clear()
        outs[compact] = to_numpy(
            beam_search(
                next_fn,
                model.initial_states(MANY),
                6,
                3,
                keras.ops.convert_to_tensor(limits),
                n_best=2,
                compact=compact,
                **rules,
            )
        )
        assert (rows[-1] < 6 * 3) == compact  # done sentences left the loop
    for key in ("tokens", "lengths"):
        np.testing.assert_array_equal(outs[True][key], outs[False][key])
    np.testing.assert_allclose(outs[True]["scores"], outs[False]["scores"], rtol=1e-6)
    for row, (s, limit) in enumerate(zip(MANY, limits, strict=True)):
        expected = ruled_beam(model, s, 3, int(limit), "gnmt", n_best=2, **reference_rules(rules))
        assert_same_hypotheses(hypotheses(outs[True], row), expected)
        if limit > 5:
            without = ruled_beam(model, s, 3, int(limit), "gnmt", n_best=2, min_length=2)
            assert [h[2] for h in expected] != [h[2] for h in without]
