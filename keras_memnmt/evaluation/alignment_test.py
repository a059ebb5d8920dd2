"""Word alignments from the source attention (``keras_memnmt.evaluation.alignment``) and the
synthetic corpus's own alignment."""

import numpy as np
import pytest

from keras_memnmt.data.synthetic import synthetic_alignments, synthetic_corpus
from keras_memnmt.evaluation.alignment import (
    alignment_accuracy,
    format_alignment,
    parse_pharaoh,
    word_attention,
    word_index,
)

# Arithmetic on given weights, corpus construction and one trained run's figure: the same on
# every backend (the attention the searches return is checked per backend by the models'
# contract tests).
pytestmark = pytest.mark.backend_independent

SOURCE = ["▁the", "▁big", "▁ca", "t", "▁runs"]  # words: the, big, cat, runs
TARGET = ["▁le", "▁ka", "t", "▁grando", "▁kuri-a"]  # words: le, kat, grando, kuri-a


def test_pieces_make_words_at_the_boundary_mark():
    assert word_index(SOURCE) == [0, 1, 2, 2, 3]
    assert word_index(["t", "▁a"]) == [0, 1]  # a first piece always starts a word


def test_source_subwords_are_summed_target_subwords_averaged():
    weights = np.zeros((6, 6))  # one more row and column: eos, left out
    weights[0, 0] = 1.0
    weights[1, [2, 3]] = [0.3, 0.3]
    weights[1, 5] = 0.4  # eos: dropped, and the row renormalized
    weights[2, 2] = 1.0
    weights[3, 1] = 1.0
    weights[4, 4] = 1.0
    words = word_attention(SOURCE, TARGET, weights)
    assert words.shape == (4, 4)
    np.testing.assert_allclose(words[1], [0, 0, 1, 0])  # (0.6/0.6 + 1) / 2 on "cat"
    np.testing.assert_allclose(words.sum(axis=1), 1.0)
    assert format_alignment(SOURCE, TARGET, weights) == "0-0 1-2 2-1 3-3"
    assert format_alignment(SOURCE, TARGET, weights, "soft").split()[1] == "0.000,0.000,1.000,0.000"
    assert format_alignment([], TARGET, weights) == ""
    with pytest.raises(ValueError, match="expected one of hard, soft"):
        format_alignment(SOURCE, TARGET, weights, "fuzzy")


def test_pharaoh_pairs_are_source_then_target():
    """A rotation (target word j attends to source word j + 1): its alignment is not its
    own transpose, so ``j-i`` written for ``i-j`` fails here."""
    source, target = ["▁a", "▁b", "▁c"], ["▁x", "▁y", "▁z"]
    weights = np.zeros((3, 3))  # (target, source)
    for j in range(3):
        weights[j, (j + 1) % 3] = 1.0
    assert format_alignment(source, target, weights) == "0-2 1-0 2-1"  # source i - target j


def test_accuracy_is_the_share_of_predicted_links_in_the_gold_alignment():
    assert parse_pharaoh("0-0 2-1") == [(0, 0), (2, 1)]
    assert alignment_accuracy([[(0, 0), (2, 1)], [(1, 0)]], [[(0, 0), (1, 1)], [(1, 0)]]) == pytest.approx(2 / 3)


def test_the_synthetic_alignment_links_every_word_to_its_translation():
    corpus, gold = synthetic_corpus(300, seed=5), synthetic_alignments(300, seed=5)
    lexicon = {}
    for source, target, links in zip(corpus.source, corpus.target, gold):
        s, t = source.split(), target.split()
        assert sorted(i for i, _ in links) == list(range(len(s)))
        assert sorted(j for _, j in links) == list(range(len(t)))
        for i, j in links:  # a word has one translation, whatever the sentence
            lexicon.setdefault(s[i], set()).add(t[j])
    assert lexicon["big"] == {"grando"} and lexicon["that"] == {"ke"} and lexicon["cat"] == {"kat"}
    assert lexicon["sees"] == {"vidi-a"} and lexicon["the"] == {"le"}


def test_a_model_without_source_attention_is_a_one_line_error():
    from keras_memnmt.evaluation.translation import translate
    from keras_memnmt.models import MODELS
    from keras_memnmt.testing.tiny_runs import TINY_OPTIONS, synthetic_vocab

    vocab = synthetic_vocab()
    cho = MODELS["cho"](vocab.source.vocab_size, vocab.target.vocab_size, **TINY_OPTIONS["cho"])
    with pytest.raises(ValueError, match="has no source attention to align with"):
        translate(cho, vocab, ["the dog runs"], beam_size=1, word_alignment="hard", progress=False)


@pytest.mark.slow
def test_a_trained_rnnsearch_aligns_far_above_chance(tmp_path):
    """A tiny RNNsearch trained 150 steps on the synthetic corpus (about half a minute)."""
    from keras_memnmt.cli import main
    from keras_memnmt.data.synthetic import synthetic_splits
    from keras_memnmt.evaluation.translation import reference_alignments
    from keras_memnmt.rundir.runs import load_run

    run = str(tmp_path / "run")
    assert (
        main(
            [
                "train",
                "quickstart",
                "--out",
                run,
                "--set",
                "corpus=synthetic",
                "--set",
                "synthetic_size=3000",
                "--set",
                "max_steps=150",
                "--set",
                "validate_every=150",
                "--set",
                "val_limit=50",
                "--set",
                "test_limit=10",
                "--set",
                "beam_size=1",
                "--set",
                "vocab_size=300",
            ]
        )
        == 0
    )
    model, vocab, _ = load_run(run)
    test = synthetic_splits(10, seed=0)[2]
    found = reference_alignments(model, vocab, test.source[:100], test.target[:100])
    accuracy = alignment_accuracy([parse_pharaoh(x) for x in found], synthetic_alignments(500, seed=2)[:100])
    chance = sum(len(t.split()) / len(s.split()) for s, t in zip(test.source[:100], test.target[:100]))
    chance /= sum(len(t.split()) for t in test.target[:100])
    assert accuracy > 0.5 > 3 * chance, (accuracy, chance)
