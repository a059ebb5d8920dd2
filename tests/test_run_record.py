"""Run records (record.json, hyps/) written by `memnmt train` and `memnmt evaluate`, and the
`memnmt results` table rendered from them."""

import json
import os
import re
import shutil
import subprocess

import keras
import pytest

import keras_memnmt
from keras_memnmt.cli import main
from keras_memnmt.rundir import provenance, records
from keras_memnmt.rundir.tables import results_table, run_summary
from keras_memnmt.testing.tiny_runs import SHARED_RUN_ARGS

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

BACKEND_LIBRARIES = {"tensorflow": ["tensorflow"], "jax": ["jax", "jaxlib"], "torch": ["torch"]}


def _git_head() -> str | None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(keras_memnmt.__file__)))
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        if os.path.realpath(top) != os.path.realpath(root):
            return None
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row."""
    return [cell.strip() for cell in line.strip().strip("|").split(" | ")]


def _check_provenance(made: dict) -> None:
    """Every field of what made a record (or one of its evaluations)."""
    code = made["code"]
    assert code["version"] == keras_memnmt.__version__
    head = _git_head()
    if head:
        assert code["git_commit"] == head and isinstance(code["git_dirty"], bool)
    env = made["environment"]
    assert env["backend"] == keras.backend.backend()
    assert re.fullmatch(r"3\.\d+\.\d+", env["python"])
    for name in ["keras", "tensorflow", "sacrebleu", *BACKEND_LIBRARIES[env["backend"]]]:
        assert env["versions"][name], name
    assert env["versions"]["keras"] == keras.__version__
    machine = made["machine"]
    assert machine["cpu"] and machine["cores"] >= 1 and machine["usable_cores"] >= 1
    assert isinstance(machine["gpus"], list)
    assert os.path.isabs(made["cwd"])


# ----- a trained run ------------------------------------------------------------------------


@pytest.fixture()
def trained(shared_run):
    """The shared run, read only (``tests/conftest.py``)."""
    return shared_run


def test_train_records_how_the_run_was_made(trained):
    record = records.read_record(trained)
    assert record["command"] == ["memnmt", "train", "quickstart", "--out", trained, *SHARED_RUN_ARGS]
    _check_provenance(record)
    with open(os.path.join(trained, "config.json")) as f:
        assert record["config"] == json.load(f)
    with open(os.path.join(trained, "results.json")) as f:
        results = json.load(f)
    assert record["started"] <= record["finished"]
    assert record["train_seconds"] == results["train_seconds"]
    assert record["total_seconds"] == results["total_seconds"]
    best = max(range(2), key=lambda i: results["validations"][i]["val_bleu"])  # the first of equals
    assert record["best_validation"] == {
        "index": best,
        "step": 2 * (best + 1),
        "val_bleu": results["best_val_bleu"],
        "train_seconds": results["validations"][best]["train_seconds"],
    }
    # The test evaluation: its hypotheses file, its scores with sacreBLEU's signatures.
    assert record["test"] == "synthetic-test.beam2.gnmt0.6.first4"
    test = record["evaluations"][record["test"]]
    assert (test["split"], test["beam_size"], test["length_penalty"], test["alpha"], test["limit"]) == (
        "synthetic-test",
        2,
        "gnmt",
        0.6,
        4,
    )
    assert test["hypotheses"] == "hyps/synthetic-test.beam2.gnmt0.6.first4.txt"
    with open(os.path.join(trained, test["hypotheses"])) as f:
        hyps = f.read().split("\n")[:-1]
    assert len(hyps) == 4 and hyps[:3] == [s["translation"] for s in results["samples"]]
    assert test["model_file"] == "best.keras"
    assert test["model_sha256"] == records.sha256_file(os.path.join(trained, "best.keras"))
    for key in ("bleu", "bleu_lowercase", "chrf", "ter", "sentences", "bleu_signature", "bleu_lowercase_signature"):
        assert test["scores"][key] == results[key], key
    assert "nrefs:1|case:lc|tok:tercom" in test["scores"]["ter_signature"]
    assert "nc:6" in test["scores"]["chrf_signature"]
    _check_provenance(test)


def test_results_table_shows_the_records_numbers(trained, capsys):
    assert main(["results", trained, "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    record = records.read_record(trained)
    scores = record["evaluations"][record["test"]]["scores"]
    assert {k: row[k] for k in ("bleu", "bleu_lowercase", "chrf", "ter")} == {
        k: scores[k] for k in ("bleu", "bleu_lowercase", "chrf", "ter")
    }
    assert (row["recipe"], row["seed"], row["best_step"], row["best_val_bleu"], row["train_seconds"]) == (
        "quickstart",
        0,
        record["best_validation"]["step"],
        record["best_validation"]["val_bleu"],
        record["train_seconds"],
    )
    assert row["date"] == record["finished"] and row["missing"] == []
    assert main(["results", trained]) == 0
    table = capsys.readouterr().out
    cells = _cells(next(x for x in table.splitlines() if x.startswith(f"| `{trained}`")))
    assert cells[1:3] == ["quickstart", "0"]
    assert cells[4] == f"4 steps, {record['train_seconds'] / 60:.1f} min"
    assert cells[5] == "synthetic-test (first 4), beam 2"
    assert cells[6:10] == [f"{scores[k]:.2f}" for k in ("bleu", "bleu_lowercase", "chrf", "ter")]
    assert cells[10] == record["finished"][:10]
    assert cells[11].startswith("`memnmt train quickstart --out ")


@pytest.mark.slow
def test_resume_keeps_the_record_and_adds_the_resuming_command(trained, tmp_path):
    out = str(tmp_path / "resumed")
    shutil.copytree(trained, out)
    before = records.read_record(out)
    assert main(["train", "quickstart", "--out", out, *SHARED_RUN_ARGS, "--set", "max_steps=6", "--resume"]) == 0
    record = records.read_record(out)
    assert record["command"] == before["command"] and record["started"] == before["started"]
    (resume,) = record["resumes"]
    assert resume["command"][-1] == "--resume" and resume["finished"] == record["finished"]
    _check_provenance(resume)
    assert record["config"]["max_steps"] == 6 and record["best_validation"]["step"] in (2, 4, 6)
    # --overwrite starts a new record and removes the stored hypotheses.
    assert main(["train", "quickstart", "--out", out, *SHARED_RUN_ARGS, "--set", "max_steps=2", "--overwrite"]) == 0
    record = records.read_record(out)
    assert "resumes" not in record and sorted(os.listdir(os.path.join(out, "hyps"))) == [
        "synthetic-test.beam2.gnmt0.6.first4.txt"
    ]


# ----- records without training -----------------------------------------------------------


@pytest.fixture()
def tiny(tmp_path):
    from keras_memnmt.testing.tiny_runs import synthetic_vocab, write_tiny_run

    return write_tiny_run(str(tmp_path / "tiny"), synthetic_vocab(), "rnnsearch", seed=1, checkpoints=1)


def test_start_and_finish_record(tiny, monkeypatch):
    monkeypatch.setattr(provenance, "_command", ["memnmt", "train", "quickstart", "--out", tiny])
    record = records.start_record(tiny, {"model": "rnnsearch", "validate_every": 0, "seed": 0})
    assert record["finished"] is None and record["resumed"] is False
    _check_provenance(record)
    history = [
        {"step": 10, "val_bleu": 1.0, "train_seconds": 5.0},
        {"step": 20, "val_bleu": 3.0, "train_seconds": 9.0},
        {"step": 30, "val_bleu": 3.0, "train_seconds": 14.0},
    ]
    results = {
        "corpus": "synthetic",
        "beam_size": 2,
        "bleu": 1.5,
        "bleu_lowercase": 1.6,
        "chrf": 20.0,
        "ter": 90.0,
        "sentences": 2,
        "train_seconds": 14.0,
        "total_seconds": 30.0,
        "validations": history,
    }
    record = records.finish_record(tiny, results, ["ein hund", "eine katze"], ["x", "y"], "synthetic-test")
    assert record["best_validation"] == {"index": 1, "step": 20, "epoch": 2, "val_bleu": 3.0, "train_seconds": 9.0}
    assert record["test"] == "synthetic-test.beam2.gnmt0.6" and record["finished"]
    with open(os.path.join(tiny, "hyps", "synthetic-test.beam2.gnmt0.6.txt")) as f:
        assert f.read() == "ein hund\neine katze\n"
    summary = run_summary(tiny)
    assert (summary["best_epoch"], summary["best_val_bleu"], summary["recipe"]) == (2, 3.0, "quickstart")
    assert "| 3 epochs, 0.2 min |" in results_table([summary])


def test_code_version_without_git(monkeypatch):
    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(provenance.subprocess, "run", no_git)
    assert provenance.code_version() == {"version": keras_memnmt.__version__}


def test_hypotheses_key():
    assert records.hypotheses_key("test_2016_flickr", 5) == "test_2016_flickr.beam5.gnmt0.6"
    assert records.hypotheses_key("val", 1, "average", 0.6, limit=10) == "val.beam1.average.first10"
    assert records.hypotheses_key("val", 4, "gnmt", 1.0) == "val.beam4.gnmt1"


def test_stored_hypotheses_need_the_same_model_and_references(tiny):
    refs = ["a b", "c d", "e f"]
    records.store_evaluation(tiny, "x", ["1", "", "3"], refs, {"bleu": 1.0}, beam_size=2)
    assert records.stored_hypotheses(tiny, "x", 2, refs)[0] == ["1", "", "3"]
    assert records.stored_hypotheses(tiny, "x", 2, refs, limit=2)[0] == ["1", ""]
    assert records.stored_hypotheses(tiny, "x", 3, refs) is None  # another beam
    assert records.stored_hypotheses(tiny, "x", 2, refs, length_penalty="none") is None
    assert records.stored_hypotheses(tiny, "x", 2, ["a b", "c d", "other"]) is None
    shutil.copy(os.path.join(tiny, "checkpoints", "step10.keras"), os.path.join(tiny, "best.keras"))
    assert records.stored_hypotheses(tiny, "x", 2, refs) is None
    # Without a model file (an archive) the stored translations are taken as they are.
    for name in records.MODEL_FILES:
        if os.path.exists(os.path.join(tiny, name)):
            os.remove(os.path.join(tiny, name))
    assert records.stored_hypotheses(tiny, "x", 2, refs)[0] == ["1", "", "3"]
    assert records.stored_hypotheses(tiny, "x", 2, ["a b", "c d", "other"]) is None


def test_evaluate_stores_a_single_runs_own_model_only(tiny, capsys):
    assert main(["evaluate", "--model", tiny, "--split", "test", "--beam", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    record = records.read_record(tiny)
    (key,) = record["evaluations"]
    entry = record["evaluations"][key]
    assert key == "synthetic-test.beam1.gnmt0.6" and printed["hypotheses"] == os.path.join(tiny, entry["hypotheses"])
    assert entry["scores"] == {k: printed[k] for k in entry["scores"]}
    assert entry["command"] == ["memnmt", "evaluate", "--model", tiny, "--split", "test", "--beam", "1"]
    _check_provenance(entry)
    # --limit, another checkpoint, an ensemble: printed, not stored.
    for args in (["--limit", "3"], ["--checkpoint", "step10"], ["--model", tiny, "--limit", "2"]):
        assert main(["evaluate", "--model", tiny, "--split", "test", "--beam", "2", *args]) == 0
        assert "hypotheses" not in json.loads(capsys.readouterr().out)
    assert list(records.read_record(tiny)["evaluations"]) == [key]
    # `memnmt results --split` renders the stored evaluation.
    assert main(["results", tiny, "--split", "synthetic-test", "--beam", "1", "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert {k: row[k] for k in ("bleu", "bleu_lowercase", "chrf", "ter")} == {
        k: entry["scores"][k] for k in ("bleu", "bleu_lowercase", "chrf", "ter")
    }
    assert set(row["missing"]) == {"recipe", "best_val_bleu", "train_seconds", "date", "command"}


def test_results_of_runs_made_before_records(tmp_path, capsys):
    old, unfinished = tmp_path / "old", tmp_path / "unfinished"
    history = [
        {"step": 461, "train_seconds": 300.0, "val_bleu": 15.0},
        {"step": 922, "train_seconds": 600.0, "val_bleu": 25.85},
        {"step": 1383, "train_seconds": 900.0, "val_bleu": 25.0},
    ]
    for run in (old, unfinished):
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"model": "rmn", "seed": 2, "validate_every": 0}))
        (run / "validations.json").write_text(json.dumps(history))
    (old / "results.json").write_text(
        json.dumps(
            {
                "test_split": "test_2016_flickr",
                "beam_size": 5,
                "bleu": 35.73,
                "bleu_lowercase": 36.1,
                "chrf": 60.86,
                "ter": 51.01,
                "train_seconds": 960.0,
                "best_val_bleu": 25.85,
            }
        )
    )
    assert main(["results", str(old), str(unfinished)]) == 0
    table = capsys.readouterr().out
    old_row, unfinished_row = [_cells(line) for line in table.splitlines() if line.startswith("| `")]
    assert old_row[1:10] == [
        "—",
        "2",
        "epoch 2 (25.85)",
        "3 epochs, 16.0 min",
        "test_2016_flickr, beam 5",
        "35.73",
        "36.10",
        "60.86",
        "51.01",
    ]
    assert old_row[10].endswith(" (file)") and old_row[11] == "—"
    assert unfinished_row[4] == "3 epochs, 15.0 min, unfinished"
    assert unfinished_row[5:10] == ["—"] * 5
    assert "—: not held by the run directory" in table and "(file): the modification date" in table
    assert main(["results", str(old), "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["missing"] == ["recipe", "command"] and row["recorded"] is False
    assert main(["results", str(tmp_path / "nothing")]) == 2
    assert "model directory not found" in capsys.readouterr().err


def test_the_files_translated_with_hold_no_optimizer_state(shared_run):
    """best.keras and the kept checkpoints are for translating: the weights without Adam's
    moments and the compile settings; model.keras (what a resume reads) keeps them."""
    import json
    import zipfile

    import h5py
    import numpy as np

    from keras_memnmt.rundir.runs import read_model_file

    def parts(path):
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
            with archive.open("model.weights.h5") as f, h5py.File(f, "r") as weights:
                return "compile_config" in config, "optimizer" in weights

    last = os.path.join(shared_run, "checkpoints", "step4.keras")  # the same weights as model.keras
    assert parts(os.path.join(shared_run, "model.keras")) == (True, True)
    for path in (os.path.join(shared_run, "best.keras"), last):
        assert parts(path) == (False, False)
    assert os.path.getsize(last) < 0.6 * os.path.getsize(os.path.join(shared_run, "model.keras"))
    for a, b in zip(
        read_model_file(last).get_weights(),
        read_model_file(os.path.join(shared_run, "model.keras")).get_weights(),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
