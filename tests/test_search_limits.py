"""The search limits through ``generate`` on real models: eos at the length bound (so a
search's score is the teacher-forced score of its tokens and eos, what ``memnmt score``
computes), ``min_length``, ``no_repeat_ngram_size``, and the compiled searches keyed by
their ``SearchPlan``."""

import keras
import numpy as np
import pytest

from keras_memnmt.data import BOS_ID, EOS_ID, PAD_ID
from keras_memnmt.evaluation.scoring import score_ids
from keras_memnmt.models import MODELS
from keras_memnmt.testing.tiny_runs import TINY_OPTIONS

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SOURCE = np.array([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0], [10, 11, 12, 13, 14, 3], [15, 3, 0, 0, 0, 0]], np.int32)
PREFIX = np.array([[10, 11], [12, 0], [0, 0], [13, 0]], np.int32)
CONSTRAINTS = np.array([[7, 8, -1, 15], [12, 0, 0, 0], [0, 0, 0, 0], [9, 0, 0, 0]], np.int32)
BOUND = 4  # max_length_a=0, max_length_b=4: at most 4 tokens, eos included (before a prefix or constraints)


def tiny(name: str, seed: int = 0):
    """An untrained tiny model of ``name``: its outputs seldom end before the bound."""
    keras.utils.set_random_seed(seed)
    model = MODELS[name](30, 25, **TINY_OPTIONS[name])
    model((SOURCE[:1], np.full((1, 1), BOS_ID, np.int32)))
    return model


def rows(tokens) -> list[list[int]]:
    """``(B, L)`` tokens -> each row's ids before pad (eos kept)."""
    return [[int(t) for t in row if t != PAD_ID] for row in np.asarray(tokens)]


def sources() -> list[list[int]]:
    return rows(SOURCE)


def count(ids: np.ndarray) -> np.ndarray:
    return np.sum(ids > 0, axis=1)


MODES = {  # generate's arguments, and each sentence's bound with them
    "greedy": (dict(beam_size=1), np.full(4, BOUND)),
    "beam": (dict(beam_size=3, n_best=3, length_penalty="none"), np.full(4, BOUND)),
    "sampling": (dict(sampling="full", keys=np.arange(4, dtype=np.int32)), np.full(4, BOUND)),
    "prefix": (dict(beam_size=2, n_best=2, length_penalty="none", prefix=PREFIX), count(PREFIX) + BOUND),
    "constraints": (
        dict(beam_size=3, n_best=2, length_penalty="none", constraints=CONSTRAINTS),
        BOUND + count(CONSTRAINTS),
    ),
}


@pytest.mark.parametrize("name", ["rnnsearch", "transformer"])
def test_outputs_at_the_bound_end_with_eos_and_score_as_teacher_forcing(name):
    model = tiny(name)
    reached = {}
    for mode, (kwargs, bounds) in MODES.items():
        out = model.generate(SOURCE, max_length_a=0.0, max_length_b=BOUND, **kwargs)
        tokens, scores = np.asarray(out["tokens"]), np.asarray(out["scores"])
        reached[mode] = 0
        for j in range(tokens.shape[1]):
            found = rows(tokens[:, j])
            forced = score_ids(model, sources(), found)  # each target ends with its eos
            for b, row in enumerate(found):
                assert len(row) <= bounds[b] and row.index(EOS_ID) == len(row) - 1, (mode, b, j, row)
                reached[mode] += len(row) == bounds[b]
                np.testing.assert_allclose(
                    float(np.sum(forced[b])),
                    scores[b, j],
                    atol=1e-4,
                    err_msg=f"{mode} sentence {b} hypothesis {j}: {row}",
                )
    assert all(reached.values()), reached  # each mode has hypotheses that reach the bound


@pytest.mark.parametrize("name", ["rnnsearch", "transformer"])
def test_min_length_and_no_repeat_ngram_through_generate(name):
    """``no_repeat_ngram_size=1``: no token twice; ``min_length=5``: at least 5 tokens
    before eos (the bound, 8, leaves room)."""
    model = tiny(name)
    changed = 0
    for kwargs in (
        dict(beam_size=1),
        dict(beam_size=3, n_best=2, length_penalty="none"),
        dict(beam_size=3, constraints=CONSTRAINTS, length_penalty="none"),
    ):
        options = dict(max_length_a=0.0, max_length_b=8, **kwargs)
        out = model.generate(SOURCE, min_length=5, no_repeat_ngram_size=1, **options)
        tokens, scores = np.asarray(out["tokens"]), np.asarray(out["scores"])
        for j in range(tokens.shape[1]):
            found = rows(tokens[:, j])
            forced = score_ids(model, sources(), found)
            for b, row in enumerate(found):
                assert row[-1] == EOS_ID and len(row) >= 6 and len(set(row)) == len(row), (kwargs, b, j, row)
                np.testing.assert_allclose(float(np.sum(forced[b])), scores[b, j], atol=1e-4)
        plain = rows(np.asarray(model.generate(SOURCE, **options)["tokens"])[:, 0])
        changed += plain != rows(tokens[:, 0])
    assert changed >= 2  # the rules change the outputs


def test_generate_checks_the_new_arguments():
    model = tiny("rnnsearch")
    for kwargs, name in [
        (dict(min_length=-1), "min_length"),
        (dict(min_length=1.5), "min_length"),
        (dict(no_repeat_ngram_size=-2), "no_repeat_ngram_size"),
        (dict(no_repeat_ngram_size="2"), "no_repeat_ngram_size"),
    ]:
        with pytest.raises(ValueError, match=name) as error:
            model.generate(SOURCE, **kwargs)
        assert "\n" not in str(error.value)


def test_compiled_searches_are_keyed_by_their_plan():
    """One compiled search per plan (and shape): the same plan reuses it, a new setting
    compiles another. PyTorch runs the search eagerly and keeps none."""
    from keras_memnmt.models.generation import SearchPlan

    with pytest.raises(TypeError):
        SearchPlan(1, 1.5)  # named fields only
    assert SearchPlan(min_length=2) == SearchPlan(min_length=2) and hash(SearchPlan()) == hash(SearchPlan())
    if keras.backend.backend() == "torch":
        pytest.skip("PyTorch runs the search eagerly: nothing compiled to key")
    model = tiny("rnnsearch")
    for _ in range(2):
        model.generate(SOURCE, max_length_b=3, min_length=2)
    model.generate(SOURCE, max_length_b=3, min_length=2, no_repeat_ngram_size=2)
    plans = [key[0] for key in model._compiled_generate]
    assert len(plans) == 2 and all(isinstance(p, SearchPlan) for p in plans)
    assert {(p.min_length, p.no_repeat_ngram_size) for p in plans} == {(2, 0), (2, 2)}
