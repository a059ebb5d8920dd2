"""A corpus of your own, given only as files: training, validation and test pairs from
``train_prefix``, ``val_prefix`` and ``test_prefix``, checked like any parallel text, named
as they are in the log, ``results.json`` and the record; ``memnmt evaluate`` of such a run
and of any file pair (``--source``, ``--reference``); and the end-to-end path of the
README (train, evaluate, export, translate the export)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from keras_memnmt.cli import main
from keras_memnmt.config import ConfigError, TrainConfig, validate
from keras_memnmt.data import CorpusError, synthetic_splits
from keras_memnmt.evaluation import splits
from keras_memnmt.testing.tiny_runs import TINY_EVAL_ARGS, TINY_SIZE_ARGS
from keras_memnmt.training.trainer import load_corpora

# The command line and the corpus files: the same on every backend (CI runs it on one).
pytestmark = pytest.mark.backend_independent


def _write(path: str, lines: list[str]) -> None:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> str:
    """``mydata/{train,valid,test}.{en,de}`` from the synthetic corpus; valid as ``.gz``."""
    root = str(tmp_path_factory.mktemp("mydata"))
    train, val, test = synthetic_splits(300, seed=0)
    for name, part, suffix in (("train", train, ""), ("valid", val, ".gz"), ("test", test.take(12), "")):
        _write(os.path.join(root, f"{name}.en{suffix}"), list(part.source))
        _write(os.path.join(root, f"{name}.de{suffix}"), list(part.target))
    return root


def _prefixes(root: str) -> dict[str, str]:
    return {
        f"{part}_prefix": os.path.join(root, name)
        for part, name in (("train", "train"), ("val", "valid"), ("test", "test"))
    }


def test_three_prefixes_are_the_whole_corpus_and_nothing_is_downloaded(corpus_dir, monkeypatch):
    import keras_memnmt.training.trainer as trainer

    def no_multi30k(*args, **kwargs):
        raise AssertionError("Multi30k was read")

    monkeypatch.setattr(trainer, "load_multi30k", no_multi30k)
    prefixes = _prefixes(corpus_dir)
    # Whatever the recipe's corpus: the three files are the corpus, and the name says so.
    for corpus in ("auto", "multi30k", "synthetic", "files"):
        train, val, test, name = load_corpora(TrainConfig(corpus=corpus, **prefixes), log=lambda msg: None)
        assert name == (
            f"files en->de (train {prefixes['train_prefix']}, val {prefixes['val_prefix']}, "
            f"test {prefixes['test_prefix']})"
        ), corpus
    assert len(test) == 12 and list(val.source)[:1] == list(synthetic_splits(300, seed=0)[1].source)[:1]
    assert train.name.endswith("train.de") and train.source.endswith("train.en")


def test_a_prefix_beside_multi30k_is_named_with_it(corpus_dir, data_dir):
    prefixes = _prefixes(corpus_dir)
    _, val, test, name = load_corpora(
        TrainConfig(corpus="multi30k", test_prefix=prefixes["test_prefix"]), data_dir=data_dir, log=lambda msg: None
    )
    assert name == f"multi30k en->de (test {prefixes['test_prefix']})"
    assert len(test) == 12 and len(val) == 1014  # Multi30k's val split


def test_corpus_files_needs_all_three_prefixes(corpus_dir):
    with pytest.raises(ConfigError, match="corpus='files' needs val_prefix, test_prefix"):
        validate(TrainConfig(corpus="files", train_prefix=_prefixes(corpus_dir)["train_prefix"]))


@pytest.mark.parametrize(
    "problem, message",
    [
        ("short", r"valid\.de.*(lines|line count)"),
        ("utf8", r"valid\.de.*line 2"),
    ],
)
def test_a_bad_validation_file_is_an_error_naming_the_file(corpus_dir, tmp_path, problem, message):
    prefixes = _prefixes(corpus_dir)
    bad = str(tmp_path / "valid")
    _write(bad + ".en", ["a b", "c d", "e f"])
    if problem == "short":
        _write(bad + ".de", ["a b", "c d"])
    else:
        with open(bad + ".de", "wb") as f:
            f.write(b"a b\n\xff\xfe c\ne f\n")
    with pytest.raises(CorpusError, match=message):
        load_corpora(TrainConfig(**{**prefixes, "val_prefix": bad}), log=lambda msg: None)


def test_a_run_with_test_files_is_tested_on_them(corpus_dir):
    prefixes = _prefixes(corpus_dir)
    config = TrainConfig(corpus="files", **prefixes)
    assert splits.run_test_split(config) == "test"
    for split in ("test_2016_flickr", "all", "test"):
        assert splits.test_splits(config, split) == ["test"]
    with pytest.raises(ValueError, match="--split 'test_2017_flickr': this run's test set is its own files"):
        splits.test_splits(config, "test_2017_flickr")
    corpus, split, name = splits.load_test_set(config, "test")
    assert len(corpus) == 12 and split == "test" and name == f"{prefixes['test_prefix']} en->de"
    # A Multi30k run keeps Multi30k's other test splits.
    multi30k = TrainConfig(corpus="multi30k", test_prefix=prefixes["test_prefix"])
    assert splits.test_splits(multi30k, "test_2017_flickr") == ["test_2017_flickr"]


def test_evaluate_scores_any_file_pair_and_stores_nothing(trained_run, corpus_dir, capsys):
    source, reference = os.path.join(corpus_dir, "test.en"), os.path.join(corpus_dir, "test.de")
    before = (
        sorted(os.listdir(os.path.join(trained_run, "hyps")))
        if os.path.isdir(os.path.join(trained_run, "hyps"))
        else []
    )
    assert (
        main(
            ["evaluate", "--model", trained_run, "--source", source, "--reference", reference, "--beam", "2", "--quiet"]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["corpus"] == f"{source} -> {reference}" and "hypotheses" not in report
    assert 0.0 <= report["bleu"] <= 100.0 and report["beam_size"] == 2
    after = (
        sorted(os.listdir(os.path.join(trained_run, "hyps")))
        if os.path.isdir(os.path.join(trained_run, "hyps"))
        else []
    )
    assert after == before


@pytest.mark.parametrize(
    "args, message",
    [
        (["--source", "S"], "--source and --reference go together"),
        (["--reference", "R"], "--source and --reference go together"),
        (["--source", "S", "--reference", "R", "--split", "all"], "--split all and --source"),
    ],
)
def test_evaluate_given_files_needs_both_and_no_split(trained_run, args, message, capsys):
    assert main(["evaluate", "--model", trained_run, *args]) == 2
    assert message in capsys.readouterr().err


def test_evaluate_a_missing_source_file_names_it(trained_run, tmp_path, capsys):
    missing = str(tmp_path / "nowhere.en")
    assert main(["evaluate", "--model", trained_run, "--source", missing, "--reference", missing]) != 0
    assert "nowhere.en" in capsys.readouterr().err


@pytest.mark.slow
def test_train_validate_test_export_and_translate_on_your_own_files(corpus_dir, tmp_path, monkeypatch, capsys):
    """The README's path for a corpus of your own: no Multi30k anywhere."""
    monkeypatch.setenv("MEMNMT_DATA", str(tmp_path / "no-multi30k"))
    monkeypatch.setenv("MEMNMT_CACHE", str(tmp_path / "no-cache"))
    prefixes = _prefixes(corpus_dir)
    out = str(tmp_path / "run")
    sets = [arg for key, value in prefixes.items() for arg in ("--set", f"{key}={value}")]
    assert (
        main(
            [
                "train",
                "quickstart",
                "--out",
                out,
                *sets,
                *TINY_SIZE_ARGS,
                *TINY_EVAL_ARGS,
                "--set",
                "max_steps=4",
                "--set",
                "validate_every=2",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    results = json.loads(captured.out)
    assert results["corpus"].startswith("files en->de (train ") and results["test_split"] == "test"
    assert "Multi30k" not in captured.err and "synthetic" not in captured.err
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        assert json.load(f)["corpus"] == "files"
    assert captured.err.rstrip().splitlines()[-1].startswith(f"[memnmt] test test, beam 2: BLEU {results['bleu']:.2f}")

    # `memnmt evaluate RUN` tests on the run's own files, reusing the stored translations.
    assert main(["evaluate", "--model", out, "--beam", "2", "--limit", "4"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["corpus"] == f"{prefixes['test_prefix']} en->de"

    exported = str(tmp_path / "exported")
    assert main(["export", "--model", out, "--out", exported, "--beam", "2"]) == 0
    capsys.readouterr()
    sentences = list(synthetic_splits(300, seed=0)[2].source)[:3]
    consumer = (
        "import json, sys, tensorflow as tf, tensorflow_text\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "out = m.signatures['translate'](sentences=tf.constant(json.loads(sys.argv[2])))\n"
        "print(json.dumps([t.decode('utf-8') for t in out['translation'].numpy()]))\n"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run(
        [sys.executable, "-c", consumer, exported, json.dumps(sentences)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    translations = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(translations) == 3 and all(isinstance(t, str) for t in translations)
