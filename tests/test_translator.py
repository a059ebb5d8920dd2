"""``keras_memnmt.Translator``: a run, an ensemble or an export in one Python object, translating
as the library's functions and signatures do and scoring as ``memnmt score`` does."""

import json
import re

import numpy as np
import pytest

from keras_memnmt import Translator
from keras_memnmt.evaluation.scoring import score_pairs
from keras_memnmt.evaluation.translation import translate, translate_chunks
from keras_memnmt.rundir.runs import load_ensemble, load_run

# A run's translations are the backend's searches; the export's and the errors are marked per test.
pytestmark = pytest.mark.backend

SENTENCES = ["the dog runs", "a big green fish sees the cars", "", "the cat"]
TARGETS = ["le hundo kuri-a", "le granda fisho", "le hundo", "le kato"]


@pytest.fixture(scope="module")
def run_translator(shared_run):
    return Translator(shared_run)


@pytest.fixture(scope="module")
def loaded(run_translator):
    """The translator's model and vocabulary, for the library's functions (one model: its
    searches compile once for both)."""
    return run_translator.model, run_translator.vocab


def same_weights(a, b):
    assert len(a.weights) == len(b.weights)
    for x, y in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(x, y)


def n_best_lists(model, vocab, sentences, **kwargs):
    return [row for chunk in translate_chunks(model, vocab, sentences, progress=False, **kwargs) for row in chunk]


def same_lists(got, want):
    assert [[text for text, _ in row] for row in got] == [[text for text, _ in row] for row in want]
    assert [s for row in got for _, s in row] == pytest.approx([s for row in want for _, s in row], abs=1e-6)


def test_greedy_and_beam_equal_the_library(run_translator, loaded, shared_run):
    model, vocab = loaded
    assert run_translator.kind == "run" and run_translator.members == [(shared_run, None)]
    same_weights(model, load_run(shared_run)[0])  # the run's best.keras
    for beam in (1, 3):
        got = run_translator.translate(SENTENCES, beam=beam)
        assert got == translate(model, vocab, SENTENCES, beam_size=beam, progress=False)
        assert got[2] == "" and all(isinstance(t, str) for t in got)
    # The defaults are memnmt translate's: beam 5, gnmt, alpha 0.6.
    assert run_translator.translate(SENTENCES) == translate(model, vocab, SENTENCES, beam_size=5, progress=False)


def test_n_best_lists_equal_the_library(run_translator, loaded):
    model, vocab = loaded
    got = run_translator.translate(SENTENCES, beam=3, n_best=2, length_penalty="average")
    same_lists(got, n_best_lists(model, vocab, SENTENCES, beam_size=3, n_best=2, length_penalty="average"))
    assert got[2] == [("", 0.0), ("", 0.0)] and all(len(row) == 2 for row in got)


def test_sampling_prefixes_and_constraints_equal_the_library(run_translator, loaded):
    model, vocab = loaded
    got = run_translator.translate(SENTENCES, sampling="topk:5", temperature=0.7, seed=3, samples=2)
    assert got == translate(
        model, vocab, SENTENCES, beam_size=1, sampling="topk:5", temperature=0.7, seed=3, samples=2, progress=False
    )
    assert all(len(draws) == 2 for draws in got)
    prefixes = ["le hundo", "", "", "le"]
    assert run_translator.translate(SENTENCES, beam=2, prefixes=prefixes) == translate(
        model, vocab, SENTENCES, beam_size=2, prefixes=prefixes, progress=False
    )
    constraints = ["hundo", "", "", "kato\tle"]
    assert run_translator.translate(SENTENCES, beam=2, constraints=constraints) == translate(
        model, vocab, SENTENCES, beam_size=2, constraints=constraints, progress=False
    )


def test_an_ensemble_of_the_run_with_itself_and_a_checkpoint(shared_run):
    ensemble = Translator([shared_run, (shared_run, "step2")])
    assert ensemble.members == [(shared_run, None), (shared_run, "step2")]
    for got, want in zip(
        ensemble.model.members, load_ensemble([shared_run, (shared_run, "step2")])[0].members, strict=True
    ):
        same_weights(got, want)
    same_lists(
        ensemble.translate(SENTENCES, beam=3, n_best=2),
        n_best_lists(ensemble.model, ensemble.vocab, SENTENCES, beam_size=3, n_best=2),
    )
    step2 = Translator(shared_run, checkpoint="step2")
    assert step2.members == [(shared_run, "step2")]
    same_weights(step2.model, load_run(shared_run, "step2")[0])


def test_score_is_what_memnmt_score_prints(run_translator, loaded, tmp_path, capsys):
    from keras_memnmt.cli import main

    model, vocab = loaded
    got = run_translator.score(SENTENCES, TARGETS)
    assert got == [entry["score"] for entry in score_pairs(model, vocab, SENTENCES, TARGETS)]
    source, target = tmp_path / "in.en", tmp_path / "in.de"
    source.write_text("".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    target.write_text("".join(t + "\n" for t in TARGETS), encoding="utf-8")
    assert (
        main(
            [
                "score",
                "--model",
                run_translator.members[0][0],
                "--source",
                str(source),
                "--target",
                str(target),
                "--quiet",
            ]
        )
        == 0
    )
    printed = [json.loads(line)["score"] for line in capsys.readouterr().out.splitlines()]
    assert got[2] is None and printed[2] is None  # the empty source
    assert [s for i, s in enumerate(got) if i != 2] == pytest.approx(
        [s for i, s in enumerate(printed) if i != 2], abs=1e-4
    )
    assert run_translator.score(SENTENCES[:1], TARGETS[:1], batch_size=1) == pytest.approx(got[:1], abs=1e-5)


@pytest.mark.backend_independent  # the SavedModel runs on TensorFlow whatever the backend
def test_an_export_translates_as_its_signatures(export_dir):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    exported = Translator(export_dir)
    assert exported.kind == "export" and exported.model is None
    assert exported.exported["beam_size"] == 3 and exported.exported["n_best"] == 2
    signatures = tf.saved_model.load(export_dir).signatures
    best = signatures["translate"](sentences=tf.constant(SENTENCES))
    lists = signatures["translate_n_best"](sentences=tf.constant(SENTENCES))
    texts = [t.decode() for t in best["translation"].numpy()]
    assert exported.translate(SENTENCES) == texts
    assert exported.translate(SENTENCES, beam=3, length_penalty="gnmt", alpha=0.6, batch_size=3) == texts
    same_lists(exported.translate(SENTENCES, n_best=1), [[(t, float(s))] for t, s in zip(texts, best["score"].numpy())])
    same_lists(
        exported.translate(SENTENCES, n_best=2),
        [
            [(t.decode(), float(s)) for t, s in zip(row_t, row_s)]
            for row_t, row_s in zip(lists["translations"].numpy(), lists["scores"].numpy())
        ],
    )
    for kwargs, message in (
        ({"beam": 5}, "beam 5: an export's search is fixed when it is exported (beam_size 3"),
        ({"alpha": 1.0}, "alpha 1.0: an export's search is fixed"),
        ({"n_best": 3}, "n_best 3: the export answers 1 (translate) or 2"),
        ({"sampling": "full"}, "sampling 'full': an export's search is fixed"),
        ({"prefixes": ["le"] * 4}, "prefixes: an export's search is fixed"),
    ):
        with pytest.raises(ValueError, match="^" + re.escape(message)):
            exported.translate(SENTENCES, **kwargs)
    with pytest.raises(ValueError, match="is an export: its signatures translate but do not score"):
        exported.score(SENTENCES, TARGETS)
    with pytest.raises(ValueError, match="is a SavedModel export: translate with it alone"):
        Translator([export_dir, export_dir])


@pytest.mark.backend_independent  # refused before anything is translated
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"beam": 0}, "beam must be an integer >= 1, got 0"),
        ({"beam": 2.0}, "beam must be an integer >= 1, got 2.0"),
        ({"beam": 2, "n_best": 3}, "n_best 3 is more than beam 2"),
        ({"n_best": 0}, "n_best must be an integer >= 1, got 0"),
        ({"length_penalty": "long"}, "length_penalty must be one of gnmt, average, none, got 'long'"),
        ({"alpha": -1}, "alpha must be >= 0, got -1"),
        ({"alpha": float("nan")}, "alpha must be a finite number, got nan"),
        ({"sampling": "topk:0"}, "sampling 'topk:0': expected full, topk:K"),
        ({"sampling": "full", "beam": 3}, "sampling draws one token at a time; it does not combine with beam 3"),
        ({"sampling": "full", "temperature": 0}, "temperature must be > 0, got 0"),
        ({"sampling": "full", "seed": -1}, "seed must be an integer >= 0, got -1"),
        ({"sampling": "full", "samples": 0}, "samples must be an integer >= 1, got 0"),
        ({"temperature": 0.5}, "temperature sets how sampling draws; give sampling"),
        ({"seed": 1}, "seed sets how sampling draws"),
        ({"prefixes": ["le"]}, "prefixes: 1 for 4 sentences; give one per sentence"),
        ({"constraints": ["le", "", "", ""], "beam": 1}, "constraints needs beam search: beam 2 or more (got beam 1)"),
        ({"constraints": ["a\tb\tc", "", "", ""], "beam": 2}, "constraints line 1 has 3 phrases, more than the beam"),
        ({"prefixes": ["漢字", "", "", ""]}, "prefix line 1 ('漢字') has a piece the target vocabulary cannot spell"),
        ({"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
    ],
)
def test_bad_options_are_value_errors_naming_them(run_translator, kwargs, message):
    with pytest.raises(ValueError) as caught:
        run_translator.translate(SENTENCES, **kwargs)
    assert str(caught.value).startswith(message), str(caught.value)


@pytest.mark.backend_independent
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda t, run: t.translate("the dog runs"), "sentences: expected a list of strings, got str"),
        (lambda t, run: t.translate(["the dog", 3]), "sentences[1]: expected a string, got int"),
        (lambda t, run: t.score(SENTENCES, TARGETS[:2]), "4 sources but 2 targets"),
        (lambda t, run: Translator([]), "model: expected a run directory, a list of them"),
        (lambda t, run: Translator([(run,)]), "model[0]: expected a run directory or a (run, checkpoint) pair"),
        (lambda t, run: Translator([run, run], checkpoint="step2"), "checkpoint: only with one run"),
    ],
    ids=["a string", "not a string", "counts", "no model", "a bad pair", "checkpoint of an ensemble"],
)
def test_bad_inputs_and_models(run_translator, shared_run, call, message):
    with pytest.raises(ValueError) as caught:
        call(run_translator, shared_run)
    assert str(caught.value).startswith(message), str(caught.value)
