"""MBR selection against the definition and against sacreBLEU's own sentence scores.

Plain Python: no tensor is involved.
"""

from __future__ import annotations

import doctest
import math
import random

import pytest
from sacrebleu.metrics import BLEU, CHRF

from keras_memnmt.decoding import mbr
from keras_memnmt.decoding.mbr import UTILITIES, mbr_select, mbr_select_batch, utility_matrix

# Text in, numbers out: the same on every backend (conftest.py).
pytestmark = pytest.mark.backend_independent

METRICS = {"chrf": CHRF(), "bleu": BLEU(effective_order=True)}

# Repeated words and characters (clipped counts above 1), punctuation that 13a splits off,
# case, accents, trailing and inner whitespace, duplicates, an empty and a blank string.
CANDIDATES = [
    "A man in a blue shirt is standing on a ladder.",
    "A man in a blue shirt stands on a ladder .",
    "a man in a blue shirt is standing on a ladder",
    "The the the man, the ladder and the shirt!",
    "A man in a blue shirt is standing on a ladder.",
    "Ein Mann im blauen Hemd steht auf einer Leiter.",
    "   A  man   on a   ladder.  ",
    "aaaa aaa aa a",
    "",
    " ",
    "Zwei Hunde spielen im Schnee; café, naïve — «quoted» (text) 3.5%",
    "a man",
]


def direct_expected(candidates, utility, weights=None):
    """`E_i` from 240-style `sentence_score` calls: every pair scored on its own."""
    metric = METRICS[utility]
    n = len(candidates)
    weights = [1.0] * n if weights is None else weights
    out = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        total = sum(weights[j] * metric.sentence_score(candidates[i], [candidates[j]]).score for j in others)
        out.append(total / sum(weights[j] for j in others))
    return out


# chrF by hand (whitespace removed, character 1- to 6-grams, beta 2): "abcd" against "abce"
# matches 3/4 unigrams, 2/3 bigrams, 1/2 trigrams and 0/1 4-grams (orders 5 and 6 are
# empty, so the effective order is 4), precision = recall = 23/48, F = 100 * 23/48.
# "abce" against "exyz": 1/4 unigrams, nothing longer: F = 100 * (1/4) / 4 = 6.25.
# "abcd" and "exyz" share no character: 0. chrF's counts are symmetric here (same lengths).
NEAR = 100 * 23 / 48


def test_hand_made_case():
    index, expected = mbr_select(["abcd", "abce", "exyz"], "chrf")
    # E_0 = (NEAR + 0) / 2; E_1 = (NEAR + 6.25) / 2; E_2 = (0 + 6.25) / 2.
    assert expected == pytest.approx([NEAR / 2, (NEAR + 6.25) / 2, 3.125], rel=1e-12)
    assert index == 1


def test_hand_made_pairs():
    u = utility_matrix(["abcd", "abce", "exyz"], "chrf")
    off_diagonal = [[x for j, x in enumerate(row) if j != i] for i, row in enumerate(u)]
    assert off_diagonal == [
        pytest.approx([NEAR, 0.0], rel=1e-12),
        pytest.approx([NEAR, 6.25], rel=1e-12),
        pytest.approx([0.0, 6.25], rel=1e-12),
    ]
    assert all(math.isnan(u[i][i]) for i in range(3))


@pytest.mark.parametrize("utility", UTILITIES)
def test_pairs_equal_sentence_score(utility):
    u = utility_matrix(CANDIDATES, utility)
    metric = METRICS[utility]
    for i, hyp in enumerate(CANDIDATES):
        for j, ref in enumerate(CANDIDATES):
            if i != j:
                assert u[i][j] == metric.sentence_score(hyp, [ref]).score, (hyp, ref)


@pytest.mark.parametrize("utility", UTILITIES)
def test_pairs_equal_sentence_score_on_random_text(utility):
    # A 5-word vocabulary: most n-grams occur more than once in a candidate.
    rng = random.Random(3)
    words = ["a", "ab", "b", "ba", "."]
    candidates = [" ".join(rng.choices(words, k=rng.randint(0, 12))) for _ in range(10)]
    u = utility_matrix(candidates + candidates[:2], utility)
    metric = METRICS[utility]
    for i, hyp in enumerate(candidates):
        for j, ref in enumerate(candidates):
            if i != j:
                assert u[i][j] == metric.sentence_score(hyp, [ref]).score, (hyp, ref)


@pytest.mark.parametrize("utility", UTILITIES)
def test_expected_utilities_equal_direct_computation(utility):
    index, expected = mbr_select(CANDIDATES, utility)
    direct = direct_expected(CANDIDATES, utility)
    assert expected == pytest.approx(direct, rel=1e-12, abs=1e-12)
    assert index == max(range(len(direct)), key=lambda i: (direct[i], -i))


@pytest.mark.parametrize("utility", UTILITIES)
def test_weighted_expected_utilities_equal_direct_computation(utility):
    weights = [0.3, 0.05, 0.2, 0.01, 0.1, 0.02, 0.08, 0.04, 0.0, 0.06, 0.09, 0.05]
    _, expected = mbr_select(CANDIDATES, utility, weights)
    assert expected == pytest.approx(direct_expected(CANDIDATES, utility, weights), rel=1e-12, abs=1e-12)


def test_weights_choose_between_clusters():
    # Two clusters: within each, u = NEAR both ways; across, 0 (no shared character).
    candidates = ["abcd", "abce", "wxyz", "wxyv"]
    # Uniform: every E_i = NEAR / 3, a tie, won by index 0.
    index, expected = mbr_select(candidates)
    assert index == 0 and expected == pytest.approx([NEAR / 3] * 4, rel=1e-12)
    # E_0 = E_1 = NEAR * 1 / (1 + 1 + 3); E_2 = NEAR * 3 / (1 + 1 + 3); E_3 = NEAR * 1 / 3:
    # candidate 2 wins through the weight of its neighbour 3, not its own.
    index, expected = mbr_select(candidates, weights=[1, 1, 1, 3])
    assert expected == pytest.approx([NEAR / 5, NEAR / 5, 3 * NEAR / 5, NEAR / 3], rel=1e-12)
    assert index == 2
    index, _ = mbr_select(candidates, weights=[3, 1, 1, 1])
    assert index == 1


def test_weights_scale_and_uniform():
    _, plain = mbr_select(CANDIDATES, "chrf")
    _, ones = mbr_select(CANDIDATES, "chrf", [1.0] * len(CANDIDATES))
    _, scaled = mbr_select(CANDIDATES, "chrf", [7.5] * len(CANDIDATES))
    assert ones == pytest.approx(plain, rel=1e-12) and scaled == pytest.approx(plain, rel=1e-12)


@pytest.mark.parametrize(
    "weights, message",
    [
        ([1.0, 1.0], "2 entries for 3"),
        ([1.0, -1.0, 1.0], "non-negative"),
        ([1.0, math.nan, 1.0], "finite"),
        ([1.0, math.inf, 1.0], "finite"),
        ([0.0, 1.0, 0.0], "at least two positive"),
    ],
)
def test_bad_weights(weights, message):
    with pytest.raises(ValueError, match="`weights`") as error:
        mbr_select(["a b", "a c", "b c"], weights=weights)
    assert message in str(error.value)


def test_ties_go_to_the_lowest_index():
    # E = [0, 50, 50]: the two copies of "abcd" tie; the first wins.
    index, expected = mbr_select(["exyz", "abcd", "abcd"])
    assert expected[0] == 0.0 and expected[1] == expected[2] == 50.0
    assert index == 1
    # Every candidate alike: equal expected utilities (BLEU's 100 is 100.00000000000004
    # in floating point, the same for all), index 0.
    index, expected = mbr_select(["same text"] * 5, "bleu")
    assert index == 0 and len(set(expected)) == 1 and expected[0] == pytest.approx(100.0)


def test_duplicates_are_separate_pseudo_references():
    # "abce" twice: each copy scores 100 against the other, so it beats "abcd".
    index, expected = mbr_select(["abcd", "abce", "abce"])
    assert expected == pytest.approx([NEAR, (NEAR + 100) / 2, (NEAR + 100) / 2], rel=1e-12)
    assert index == 1


@pytest.mark.parametrize("utility", UTILITIES)
def test_one_candidate(utility):
    index, expected = mbr_select(["only one"], utility)
    assert index == 0 and len(expected) == 1 and math.isnan(expected[0])
    assert mbr_select([""], utility, weights=[0.5])[0] == 0


@pytest.mark.parametrize("utility", UTILITIES)
def test_empty_candidates(utility):
    # An empty or blank candidate scores 0 both ways, as sacreBLEU gives.
    assert mbr_select(["", "", " "], utility) == (0, [0.0, 0.0, 0.0])
    index, expected = mbr_select(["", "a man sleeps", "a man sleeps"], utility)
    assert index == 1 and expected == pytest.approx([0.0, 50.0, 50.0], rel=1e-12)
    assert expected[1] == expected[2]
    for hyp, ref in [("", "a man"), ("a man", ""), ("", ""), (" ", "")]:
        assert METRICS[utility].sentence_score(hyp, [ref]).score == 0.0


def test_no_candidates():
    with pytest.raises(ValueError, match="`candidates`"):
        mbr_select([])
    with pytest.raises(ValueError, match="`candidates`"):
        mbr_select("a single string")
    with pytest.raises(ValueError, match="`candidates`"):
        mbr_select(["a", None])


def test_bad_utility():
    for call in (
        lambda: mbr_select(["a", "b"], "ter"),
        lambda: mbr_select_batch([["a", "b"]], utility="CHRF"),
        lambda: utility_matrix(["a", "b"], "meteor"),
    ):
        with pytest.raises(ValueError, match="`utility`"):
            call()


@pytest.mark.parametrize("utility", UTILITIES)
def test_batch_matches_one_by_one(utility):
    lists = [CANDIDATES, ["abcd", "abce", "exyz"], ["alone"], ["", "a b c", "a b c"], CANDIDATES[:4]]
    chosen, indices = mbr_select_batch(lists, utility, progress=False)
    assert indices == [mbr_select(c, utility)[0] for c in lists]
    assert chosen == [c[i] for c, i in zip(lists, indices)]


def test_batch_weights():
    lists = [["abcd", "abce", "wxyz", "wxyv"]] * 3
    chosen, indices = mbr_select_batch(lists, weights=[None, [1, 1, 1, 3], [3, 1, 1, 1]], progress=False)
    assert indices == [0, 2, 1] and chosen == ["abcd", "wxyz", "abce"]
    with pytest.raises(ValueError, match="`weights`"):
        mbr_select_batch(lists, weights=[None, None])
    assert mbr_select_batch([], progress=False) == ([], [])


def test_docstring_example():
    assert doctest.testmod(mbr, verbose=False).failed == 0
