"""Constrained beam search against Python references, brute force and beam search.

The fake decoder and the brute force under the token rules (`ruled_brute_force`: eos at
the limit, `min_length`, `no_repeat_ngram_size`), both in
`keras_memnmt.testing.fake_decoder`, are those of the beam search tests.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from keras_memnmt.decoding import beam_search
from keras_memnmt.decoding.constrained import (
    SEPARATOR,
    advance,
    bank_slots,
    constrained_beam_search,
    constraint_tables,
)
from keras_memnmt.testing.fake_decoder import (
    EOS,
    FakeDecoder,
    has_repeated_ngram,
    ruled_brute_force,
    score_np,
    unpad,
)

pytestmark = pytest.mark.backend


def to_numpy(out: dict) -> dict:
    return {key: keras.ops.convert_to_numpy(value) for key, value in out.items()}


def search(model: FakeDecoder, sentences: list[int], beam: int, limit: int, rows, **kwargs) -> dict:
    """`constrained_beam_search` over `model`'s `sentences`; under JAX inside one `jax.jit`
    (run eagerly, the first step's many small ops each compile on their own: seconds)."""
    states, constraints = model.initial_states(sentences), constraint_rows(rows)

    def run(states, constraints):
        return constrained_beam_search(model.next_fn, states, len(sentences), beam, limit, constraints, **kwargs)

    if keras.backend.backend() == "jax":
        import jax

        run = jax.jit(run)
    return to_numpy(run(states, constraints))


def constraint_rows(rows: list[list[list[int]]], width: int | None = None) -> np.ndarray:
    """Phrases per sentence -> the `(B, M)` layout the search takes."""
    flat = [[t for i, p in enumerate(phrases) for t in ([SEPARATOR] if i else []) + p] for phrases in rows]
    out = np.zeros((len(rows), width or max(1, *map(len, flat))), "int32")
    for row, ids in enumerate(flat):
        out[row, : len(ids)] = ids
    return out


def track(phrases: list[list[int]], tokens: list[int]) -> tuple[list[list[bool]], tuple | None]:
    """The documented constraint state after `tokens`, with lists: `met[p][i]`, and the
    `(phrase, index)` of the next token of the phrase in progress."""
    met = [[False] * len(p) for p in phrases]
    current = None
    for t in tokens:
        if current is not None:
            p, i = current
            if phrases[p][i] == t:
                met[p][i] = True
                current = (p, i + 1) if i + 1 < len(phrases[p]) else None
                continue
            met[p] = [False] * len(phrases[p])
            current = None
        for p, phrase in enumerate(phrases):
            if not met[p][0] and phrase[0] == t:
                met[p][0] = True
                current = (p, 1) if len(phrase) > 1 else None
                break
    return met, current


def contains(tokens: list[int], phrase: list[int]) -> bool:
    n = len(phrase)
    return any(tokens[i : i + n] == phrase for i in range(len(tokens) - n + 1))


def get_bank_sizes(total: int, beam: int, counts: list[int]) -> list[int]:
    """Sockeye's allocation (remainder to the top bank, unused slots passed down), then
    the slots left over go round once more from the top."""
    banks = total + 1
    taken = [beam // banks] * banks
    taken[-1] += beam - sum(taken)
    passed = 0
    for i in reversed(range(banks)):
        have = taken[i] + passed
        taken[i] = min(have, counts[i])
        passed = have - taken[i]
    for i in reversed(range(banks)):
        extra = min(passed, counts[i] - taken[i])
        taken[i] += extra
        passed -= extra
    return taken


def test_bank_slots_match_the_list_reference():
    rng = np.random.default_rng(0)
    totals = rng.integers(0, 6, 200).astype("int32")
    counts = np.zeros((200, 7), "int32")
    for row, total in enumerate(totals):
        counts[row, : total + 1] = rng.integers(0, 9, total + 1) * (rng.random(total + 1) < 0.7)
    for beam in (1, 4, 5, 12):
        got = keras.ops.convert_to_numpy(bank_slots(counts, totals, beam))
        for row, total in enumerate(totals):
            expected = get_bank_sizes(int(total), beam, counts[row, : total + 1].tolist())
            assert got[row, : total + 1].tolist() == expected, (beam, total, counts[row])
            assert not got[row, total + 1 :].any()
            assert got[row].sum() == min(beam, counts[row].sum())


def test_advance_matches_the_list_reference():
    rng = np.random.default_rng(1)
    phrases = [[[4, 5]], [[4], [5, 4, 6]], [[5, 5, 6], [6]], [[4, 4, 5], [5]], []]
    table = constraint_tables(constraint_rows(phrases, width=8))
    seqs = rng.integers(4, 8, (len(phrases), 30, 9)).astype("int32")  # (A, N, steps) over tokens 4..7
    met = keras.ops.zeros((len(phrases), 30, 8), dtype="bool")
    current = keras.ops.full((len(phrases), 30), -1, dtype="int32")
    for step in range(seqs.shape[2]):
        met, current = advance(table, met, current, keras.ops.convert_to_tensor(seqs[:, :, step]))
        got_met, got_current = keras.ops.convert_to_numpy(met), keras.ops.convert_to_numpy(current)
        for a, sentence in enumerate(phrases):
            starts = np.cumsum([0] + [len(p) + 1 for p in sentence])  # each phrase's first position
            for n in range(30):
                want_met, want_current = track(sentence, seqs[a, n, : step + 1].tolist())
                flat = [False] * 8
                for p, flags in enumerate(want_met):
                    flat[starts[p] : starts[p] + len(flags)] = flags
                assert got_met[a, n].tolist() == flat
                want = -1 if want_current is None else starts[want_current[0]] + want_current[1]
                assert got_current[a, n] == want


# Phrases without a token repeated inside them: containing the phrase and meeting it agree.
PHRASES = [[[4, 1]], [[1], [4]], [[4]], [], [[1, 4, 1]]]


@pytest.mark.parametrize("rules", [{}, dict(min_length=2, no_repeat_ngram_size=2)], ids=["plain", "bans"])
def test_a_wide_beam_finds_the_best_hypothesis_that_meets_the_constraints(rules):
    """Beam 64 prunes nothing here (vocabulary 5: at most 2^5 alive hypotheses), so the
    result is the best of brute force's hypotheses that contain every phrase."""
    model = FakeDecoder(seed=4, num_sentences=len(PHRASES))
    sentences = list(range(len(PHRASES)))
    limit = 3
    out = search(
        model, sentences, 64, limit, PHRASES, length_penalty="gnmt", early_stopping=False, max_steps=limit + 3, **rules
    )
    ref = dict(min_length=rules.get("min_length", 0), ngram=rules.get("no_repeat_ngram_size", 0))
    for s, phrases in enumerate(PHRASES):
        total = sum(map(len, phrases))
        hyps = [
            h
            for h in ruled_brute_force(model, s, limit + total, "gnmt", **ref)
            if all(contains(h[2], p) for p in phrases)
        ]
        score, raw, tokens = hyps[0]
        assert unpad(out["tokens"][s, 0], out["lengths"][s, 0]) == tokens, s
        np.testing.assert_allclose(out["scores"][s, 0], score, rtol=1e-5)
        np.testing.assert_allclose(out["raw_scores"][s, 0], raw, rtol=1e-5)


def test_every_constraint_is_met_with_a_small_beam():
    rng = np.random.default_rng(2)
    model = FakeDecoder(seed=7, vocab_size=9, num_sentences=24, eos_bias=1.0)  # short unconstrained outputs
    rows = []
    for _ in range(24):
        count = int(rng.integers(1, 3))
        rows.append([rng.integers(4, 9, int(rng.integers(1, 3))).tolist() for _ in range(count)])
    out = search(model, list(range(24)), 6, 6, rows, n_best=2, max_steps=12, return_attention=True)
    for s, phrases in enumerate(rows):
        for j in range(2):
            tokens = unpad(out["tokens"][s, j], out["lengths"][s, j])
            assert all(contains(tokens, p) for p in phrases), (s, j, phrases, tokens)
            assert tokens.index(EOS) == len(tokens) - 1 and len(tokens) <= 6 + sum(map(len, phrases))
            np.testing.assert_allclose(out["attention"][s, j, : len(tokens)].sum(-1), 1.0, rtol=1e-5)
            assert not out["attention"][s, j, len(tokens) :].any()
    assert (out["scores"][:, 0] >= out["scores"][:, 1]).all()


def test_sentences_without_constraints_get_beam_searchs_result():
    model = FakeDecoder(seed=4, num_sentences=6)
    sentences = list(range(6))
    states = model.initial_states(sentences)
    rows = [[], [[4]], [], [], [[1, 4]], []]
    got = search(model, sentences, 3, 5, rows, n_best=2, max_steps=7)
    plain = to_numpy(beam_search(model.next_fn, states, 6, 3, 5, n_best=2, max_steps=7))
    for s, phrases in enumerate(rows):
        if not phrases:
            for name in ("tokens", "scores", "raw_scores", "lengths"):
                np.testing.assert_allclose(got[name][s], plain[name][s], rtol=1e-6, err_msg=name)


def test_the_limit_ends_every_hypothesis_with_eos():
    """eos is unlikely here (`eos_bias` -30): most hypotheses reach the limit (raised by
    the sentence's constraint tokens) and take eos there, met or not (sentence 4's
    second has not met `[1, 4, 1]`), and every score counts eos's log-probability."""
    model = FakeDecoder(seed=4, num_sentences=len(PHRASES), eos_bias=-30.0)
    out = search(model, list(range(len(PHRASES))), 4, 3, PHRASES, n_best=2, length_penalty="none", max_steps=6)
    at_limit = 0
    for s, phrases in enumerate(PHRASES):
        limit = 3 + sum(map(len, phrases))
        for j in range(2):
            tokens = unpad(out["tokens"][s, j], out["lengths"][s, j])
            assert len(tokens) <= limit and tokens.index(EOS) == len(tokens) - 1
            np.testing.assert_allclose(out["raw_scores"][s, j], score_np(model, s, tokens, "none")[1], rtol=1e-5)
            assert out["raw_scores"][s, j] < -25  # eos's log-probability is in it
            at_limit += len(tokens) == limit
    assert at_limit >= 6
    unmet = unpad(out["tokens"][4, 1], out["lengths"][4, 1])
    assert len(unmet) == 3 + 3 and not contains(unmet, [1, 4, 1])


def test_a_small_beam_meets_the_constraints_under_the_bans():
    """`min_length` and `no_repeat_ngram_size` hold with constraints (none of these
    phrases needs a repeated trigram), and the scores stay the model's."""
    model = FakeDecoder(seed=7, vocab_size=9, num_sentences=6, eos_bias=1.0)
    rows = [[[5, 5]], [[4], [6, 7]], [[8]], [], [[5, 6], [6, 5]], [[7, 7], [4]]]
    out = search(
        model,
        list(range(6)),
        4,
        7,
        rows,
        n_best=2,
        max_steps=12,
        min_length=4,
        no_repeat_ngram_size=3,
        length_penalty="none",
    )
    for s, phrases in enumerate(rows):
        for j in range(2):
            tokens = unpad(out["tokens"][s, j], out["lengths"][s, j])
            assert all(contains(tokens, p) for p in phrases), (s, j, phrases, tokens)
            assert tokens.index(EOS) == len(tokens) - 1 and len(tokens) >= 5
            assert not has_repeated_ngram(tokens, 3)
            np.testing.assert_allclose(out["raw_scores"][s, j], score_np(model, s, tokens, "none")[1], rtol=1e-5)
