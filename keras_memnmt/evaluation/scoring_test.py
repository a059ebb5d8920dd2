"""Scores of given translations (``keras_memnmt.evaluation.scoring``): the log-probability
that teacher forcing gives a target is the score the searches report for it."""

import numpy as np
import pytest

from keras_memnmt.data import BOS_ID, PAD_ID
from keras_memnmt.evaluation.scoring import score_ids, score_pairs, token_log_probs
from keras_memnmt.models import MODELS, Ensemble
from keras_memnmt.testing.tiny_runs import TINY_OPTIONS, synthetic_vocab

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

BEAM = 4


def tiny(name, seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    model = MODELS[name](30, 25, **TINY_OPTIONS[name])
    model((np.full((1, 3), 5, "int32"), np.full((1, 1), BOS_ID, "int32")))
    return model


def sources(seed=0):
    rng = np.random.default_rng(seed)
    lengths = [6, 3, 9, 5, 7]
    return [list(rng.integers(4, 30, size=n - 1)) + [3] for n in lengths]  # eos last


def beam_hypotheses(model, source_rows):
    """Every hypothesis of a beam search without length penalty: ``(ids, raw score)``."""
    width = max(map(len, source_rows))
    batch = np.full((len(source_rows), width), PAD_ID, np.int32)
    for row, ids in enumerate(source_rows):
        batch[row, : len(ids)] = ids
    out = model.generate(batch, beam_size=BEAM, n_best=BEAM, length_penalty="none")
    tokens, scores = np.asarray(out["tokens"]), np.asarray(out["scores"])
    found = []
    for b in range(len(source_rows)):
        for k in range(BEAM):
            ids = [int(t) for t in tokens[b, k] if t != PAD_ID]  # eos included, where it came
            found.append((source_rows[b], ids, float(scores[b, k])))
    return found


def check_scores(model):
    found = [h for h in beam_hypotheses(model, sources()) if np.isfinite(h[2])]
    assert len(found) >= 3 * BEAM
    scored = score_ids(model, [s for s, _, _ in found], [t for _, t, _ in found], batch_size=7)
    np.testing.assert_allclose(
        [float(np.sum(x)) for x in scored],
        [r for _, _, r in found],
        atol=1e-4,
        err_msg="teacher-forced score != beam search's score",
    )


# The three kinds of decoder the scoring path reaches (a recurrent cell with attention, a
# memory cell, no cell: the Transformer); each model's own teacher forcing against its
# stepping is run_decoder_test's, for every model.
FAMILIES = ["rnnsearch", "memdec", "transformer"]


@pytest.mark.parametrize("name", FAMILIES)
def test_the_score_of_each_beam_hypothesis_is_what_the_search_reported(name):
    check_scores(tiny(name))


def test_an_ensembles_score_is_what_its_search_reported():
    check_scores(Ensemble([tiny("rnnsearch", seed=1), tiny("memdec", seed=2)]))


def test_a_score_does_not_depend_on_its_batch():
    model = tiny("rnnsearch")
    source_rows = sources()
    targets = [[5, 6, 7, 3], [8, 3], [9, 10, 11, 12, 13, 3], [3], [14, 15, 3]]
    alone = [score_ids(model, [s], [t])[0] for s, t in zip(source_rows, targets)]
    together = score_ids(model, source_rows, targets, batch_size=2)
    for a, b, t in zip(alone, together, targets):
        assert a.shape == (len(t),) and np.all(a <= 0)
        np.testing.assert_allclose(a, b, atol=1e-5)
    # A padded position scores 0 and changes nothing before it.
    logp = token_log_probs(model, np.array([source_rows[1] + [0] * 4], np.int32), np.array([[8, 3, 0, 0]], np.int32))
    assert logp[0, 2:].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(logp[0, :2], together[1], atol=1e-5)


def test_text_pairs_in_input_order_with_per_token_scores():
    vocab = synthetic_vocab()
    model = MODELS["rnnsearch"](vocab.source.vocab_size, vocab.target.vocab_size, **TINY_OPTIONS["rnnsearch"])
    src = ["the dog runs", "", "a big green fish sees the cars"]
    tgt = ["le hundo kuri-a", "le hundo", ""]
    entries = score_pairs(model, vocab, src, tgt, per_token=True, batch_size=2)
    assert [e["line"] for e in entries] == [1, 2, 3]
    assert entries[1] == {"line": 2, "score": None, "tokens": 0, "pieces": [], "token_scores": []}
    first, empty_target = entries[0], entries[2]
    assert first["tokens"] == len(first["pieces"]) == len(first["token_scores"]) and first["pieces"][-1] == "</s>"
    assert first["score"] == pytest.approx(sum(first["token_scores"]), abs=1e-5) and first["score"] < 0
    assert empty_target["tokens"] == 1 and empty_target["pieces"] == ["</s>"]  # eos alone
    with pytest.raises(ValueError, match="3 source lines but 2 target lines"):
        score_pairs(model, vocab, src, tgt[:2])
