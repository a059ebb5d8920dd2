import gzip
import json
import os
import subprocess
import sys

import keras
import pytest

from keras_memnmt.cli import main

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent


def test_help_lists_only_existing_subcommands():
    out = subprocess.run(
        [sys.executable, "-m", "keras_memnmt.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "data" in out and "vocab" in out


def test_the_readme_synopsis_has_every_command():
    import argparse

    from keras_memnmt.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8").read()
    synopsis = readme.split("## Command line", 1)[1].split("```")[1]
    missing = [name for name in sub.choices if f"memnmt {name} " not in synopsis]
    assert not missing, f"README's command-line synopsis lacks {missing}"


def test_data_check_on_a_data_dir(data_dir, capsys):
    assert (
        main(
            [
                "data",
                "check",
                "--data-dir",
                data_dir,
                "--src",
                "en",
                "--tgt",
                "de",
                "--split",
                "val",
                "--vocab-size",
                "500",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["pairs"] == 1014 and report["dropped_empty"] == 0
    assert report["source_tokens"] > 1014 and report["length_percentiles"]["target"]["p50"] > 3


def test_data_check_on_files_reports_drops(tmp_path, capsys):
    src, tgt = tmp_path / "a.en", tmp_path / "a.de.gz"
    src.write_text("a dog runs\n\nthe cat sleeps now\n" + "a b c d e f g h i j k l m n " * 6 + "\n")
    with gzip.open(tgt, "wt") as f:
        f.write("ein Hund rennt\nleer\ndie Katze schläft jetzt\n" + "x y " * 40 + "\n")
    assert (
        main(
            [
                "data",
                "check",
                "--src-file",
                str(src),
                "--tgt-file",
                str(tgt),
                "--vocab-size",
                "40",
                "--max-length",
                "40",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["pairs"] == 3 and report["dropped_empty"] == 1 and report["dropped_too_long"] == 1


@pytest.mark.parametrize(
    "content, message",
    [
        (("a\nb\n", "x\n"), "line counts differ"),
        ((b"ok\n\xff\n", "x\ny\n"), "line 2: invalid UTF-8"),
        (("", ""), "empty corpus"),
    ],
)
def test_data_check_bad_input_exits_non_zero(tmp_path, capsys, content, message):
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    for path, data in zip((src, tgt), content):
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    assert main(["data", "check", "--src-file", str(src), "--tgt-file", str(tgt)]) == 2
    err = capsys.readouterr().err
    assert message in err and "s.txt" in err


def test_data_check_missing_folder(tmp_path, capsys):
    assert main(["data", "check", "--data-dir", str(tmp_path / "no"), "--src", "en", "--tgt", "de"]) == 2
    assert "data directory not found" in capsys.readouterr().err


def test_vocab_build(data_dir, tmp_path, capsys):
    out = tmp_path / "vocab"
    assert (
        main(
            [
                "vocab",
                "build",
                "--data-dir",
                data_dir,
                "--src",
                "en",
                "--tgt",
                "de",
                "--split",
                "val",
                "--out",
                str(out),
                "--size",
                "600",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert sorted(os.listdir(out)) == ["source.model", "target.model", "vocab.json"]
    assert 300 < report["target_vocab_size"] <= 600


# ----- ensembles, averaging and resumable translation (tiny untrained run directories) --------

SENTENCES = [
    "the big red cat sees a small dog",
    "",
    "a dog that sleeps likes the fish",
    "the old man holds a ball",
    "the boys watch the horses",
    "a girl finds the happy bird",
    "the cat sleeps",
]


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    from keras_memnmt.testing.tiny_runs import write_ensemble_runs

    root = tmp_path_factory.mktemp("tiny_runs")
    return write_ensemble_runs(str(root), checkpoints=2)


@pytest.fixture()
def source_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("".join(line + "\n" for line in SENTENCES))
    return path


@pytest.mark.parametrize("second", ["b", "t"])  # MemDec; a Transformer (another architecture)
def test_translate_with_two_models(tiny_runs, source_file, tmp_path, second):
    from keras_memnmt.evaluation.translation import translate
    from keras_memnmt.models import Ensemble
    from keras_memnmt.rundir.runs import load_ensemble

    out = tmp_path / "out.txt"
    assert (
        main(
            [
                "translate",
                "--model",
                tiny_runs["a"],
                "--model",
                tiny_runs[second],
                "--beam",
                "2",
                "--input",
                str(source_file),
                "--output",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    model, vocab, _ = load_ensemble([tiny_runs["a"], tiny_runs[second]])
    assert isinstance(model, Ensemble)
    expected = translate(model, vocab, SENTENCES, beam_size=2, progress=False)
    assert out.read_text() == "".join(line + "\n" for line in expected)
    assert out.read_text().split("\n")[1] == ""  # an empty input line stays empty


def test_evaluate_with_two_models_and_the_checkpoint_pairing(tiny_runs, capsys):
    a, b = tiny_runs["a"], tiny_runs["b"]
    assert main(["evaluate", "--model", a, "--model", b, "--split", "test", "--beam", "2", "--limit", "3"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["ensemble"] == [a, b] and scores["sentences"] == 3
    # One --checkpoint per --model, paired in order (`best` is best.keras).
    assert (
        main(
            [
                "evaluate",
                "--model",
                a,
                "--checkpoint",
                "step10",
                "--model",
                b,
                "--checkpoint",
                "best",
                "--split",
                "test",
                "--beam",
                "1",
                "--limit",
                "2",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["ensemble"] == [f"{a}:step10", f"{b}:best"]
    # One --model with several --checkpoint: an ensemble of that run's snapshots.
    assert (
        main(
            [
                "evaluate",
                "--model",
                a,
                "--checkpoint",
                "step10",
                "--checkpoint",
                "step20",
                "--split",
                "test",
                "--beam",
                "1",
                "--limit",
                "2",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["ensemble"] == [f"{a}:step10", f"{a}:step20"]
    # A single model prints what it always did.
    assert main(["evaluate", "--model", a, "--split", "test", "--beam", "1", "--limit", "2"]) == 0
    assert "ensemble" not in json.loads(capsys.readouterr().out)
    assert main(["evaluate", "--model", a, "--model", b, "--checkpoint", "step10", "--split", "test"]) == 2
    assert "2 --model and 1 --checkpoint" in capsys.readouterr().err


def test_ensemble_members_must_share_the_vocabularies(tiny_runs, source_file, capsys):
    for a in (tiny_runs["a"], tiny_runs["t"]):
        other = tiny_runs["other"]
        assert main(["translate", "--model", a, "--model", other, "--input", str(source_file), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "different target vocabularies" in err and a in err and other in err


def test_translate_output_is_written_as_chunks_finish(tiny_runs, source_file, tmp_path, monkeypatch):
    import keras_memnmt.evaluation.translation as inference

    whole = tmp_path / "whole.txt"
    assert (
        main(
            [
                "translate",
                "--model",
                tiny_runs["a"],
                "--beam",
                "2",
                "--input",
                str(source_file),
                "--output",
                str(whole),
                "--quiet",
            ]
        )
        == 0
    )
    out, sizes = tmp_path / "out.txt", []
    chunk = inference._translate_chunk

    def spy(model, vocab, sentences, *args):
        # lines written (to out.txt.partial, which becomes out.txt when whole) before this chunk
        sizes.append(len((tmp_path / "out.txt.partial").read_text().split("\n")) - 1)
        assert not out.exists()
        return chunk(model, vocab, sentences, *args)

    monkeypatch.setattr(inference, "_translate_chunk", spy)
    assert (
        main(
            [
                "translate",
                "--model",
                tiny_runs["a"],
                "--beam",
                "2",
                "--input",
                str(source_file),
                "--output",
                str(out),
                "--chunk-size",
                "3",
                "--quiet",
            ]
        )
        == 0
    )
    assert sizes == [0, 3, 6]
    assert out.read_text() == whole.read_text()


def test_translate_resume_continues_a_partial_output(tiny_runs, source_file, tmp_path, monkeypatch, capsys):
    import keras_memnmt.evaluation.translation as inference

    whole = tmp_path / "whole.txt"
    assert (
        main(
            [
                "translate",
                "--model",
                tiny_runs["a"],
                "--beam",
                "2",
                "--input",
                str(source_file),
                "--output",
                str(whole),
                "--quiet",
            ]
        )
        == 0
    )
    lines = whole.read_text().split("\n")
    out = tmp_path / "out.txt"
    out.write_text("\n".join(lines[:4]) + "\nhalf a li")  # 4 complete lines, an unfinished 5th
    seen = []
    chunks = inference.translate_chunks

    def spy(model, vocab, sentences, **kwargs):
        seen.append(list(sentences))
        return chunks(model, vocab, sentences, **kwargs)

    monkeypatch.setattr(inference, "translate_chunks", spy)
    assert (
        main(
            [
                "translate",
                "--model",
                tiny_runs["a"],
                "--beam",
                "2",
                "--input",
                str(source_file),
                "--output",
                str(out),
                "--resume",
            ]
        )
        == 0
    )
    assert seen == [SENTENCES[4:]]
    assert out.read_text() == whole.read_text()
    assert "holds 4 of 7 lines" in capsys.readouterr().err
    # Finished already: nothing to translate; no --output: an error.
    assert (
        main(
            [
                "translate",
                "--model",
                tiny_runs["a"],
                "--input",
                str(source_file),
                "--output",
                str(out),
                "--resume",
                "--quiet",
            ]
        )
        == 0
    )
    assert seen[-1] == [] and out.read_text() == whole.read_text()
    assert main(["translate", "--model", tiny_runs["a"], "--input", str(source_file), "--resume"]) == 2
    assert "--resume continues an --output file" in capsys.readouterr().err


def test_average_the_last_checkpoints_and_translate_with_them(tiny_runs, source_file, tmp_path, capsys):
    a = tiny_runs["a"]
    out = tmp_path / "avg.keras"
    assert main(["average", "--model", a, "--last", "2", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [os.path.basename(p) for p in report["averaged"]] == ["step10.keras", "step20.keras"]
    loaded = keras.saving.load_model(str(out), compile=False)
    assert type(loaded).__name__ == "RNNsearch"
    translated = tmp_path / "out.txt"
    assert (
        main(
            [
                "translate",
                "--model",
                a,
                "--checkpoint",
                str(out),
                "--input",
                str(source_file),
                "--output",
                str(translated),
                "--quiet",
            ]
        )
        == 0
    )
    assert len(translated.read_text().split("\n")) == len(SENTENCES) + 1
    # Named checkpoints instead of --last: the same file.
    again = tmp_path / "again.keras"
    assert main(["average", "--model", a, "--checkpoint", "step10", "--checkpoint", "step20", "--out", str(again)]) == 0
    capsys.readouterr()
    for x, y in zip(loaded.weights, keras.saving.load_model(str(again), compile=False).weights, strict=True):
        assert (keras.ops.convert_to_numpy(x) == keras.ops.convert_to_numpy(y)).all()


@pytest.mark.parametrize(
    "run, args, message",
    [
        ("a", ["--last", "3"], "need the last 3 checkpoints, found 2"),
        ("b", ["--last", "1"], "keep_checkpoints=true"),
        ("a", ["--last", "0"], "must be >= 1"),
        ("a", ["--checkpoint", "step99"], "checkpoint 'step99' not found"),
    ],
)
def test_average_errors(tiny_runs, tmp_path, capsys, run, args, message):
    assert main(["average", "--model", tiny_runs[run], *args, "--out", str(tmp_path / "x.keras")]) == 2
    err = capsys.readouterr().err
    assert message in err and tiny_runs[run] in err
