"""``memnmt train --resume`` is exact at every point of a run: after a kill at any of its
writes, and at its end (a finished run is left as it is)."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from keras_memnmt.cli import main
from keras_memnmt.testing.tiny_runs import SHARED_RUN_ARGS, TINY_TRAIN_ARGS, run_fingerprint

# The same on every backend (the resumed steps' numbers are compared on each backend by
# test_reliability's resume test): CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_resuming_a_run_that_ended_by_max_steps_changes_nothing(trained_run, capsys):
    before = run_fingerprint(trained_run)
    capsys.readouterr()
    assert main(["train", "quickstart", "--out", trained_run, *SHARED_RUN_ARGS, "--resume"]) == 0
    out, err = capsys.readouterr()
    assert "nothing to do" in err and "step 4 of 4" in err
    assert json.loads(out)["bleu"] == json.load(open(os.path.join(trained_run, "results.json")))["bleu"]
    assert run_fingerprint(trained_run) == before


@pytest.mark.parametrize(
    "change, named",
    [
        ("seed=1", "seed=0 (now 1)"),
        ("batch_size=7", "batch_size=64 (now 7)"),
        ("bucket_width=4", "bucket_width=8 (now 4)"),
        ("max_length=30", "max_length=40 (now 30)"),
        ("synthetic_size=300", "synthetic_size=200 (now 300)"),
        ("val_limit=4", "val_limit=8 (now 4)"),
        ("learning_rate=0.01", "learning_rate=0.002 (now 0.01)"),
        ("output_dropout=0.5", "output_dropout=0.2 (now 0.5)"),
    ],
)
def test_resume_refuses_a_change_of_what_the_steps_so_far_were_trained_with(trained_run, capsys, change, named):
    """The data and their order, the batches, the seed, the validation set, and what
    model.keras holds (the optimizer, the model's options): a resume goes on with them as
    they were, so a change is refused by name, with the run's value and the new one."""
    before = run_fingerprint(trained_run)
    capsys.readouterr()
    assert (
        main(
            [
                "train",
                "quickstart",
                "--out",
                trained_run,
                *SHARED_RUN_ARGS,
                "--set",
                "max_steps=6",
                "--set",
                change,
                "--resume",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"memnmt: error: cannot resume {trained_run}: it was trained with {named};" in err
    assert run_fingerprint(trained_run) == before


def test_resume_may_change_when_the_run_stops_validates_logs_and_tests():
    from keras_memnmt.config import TrainConfig
    from keras_memnmt.rundir.runs import RESUME_FIELDS

    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(RESUME_FIELDS) <= fields
    assert {"epochs", "max_steps", "patience", "validate_every", "log_every"} <= set(RESUME_FIELDS)
    assert not {
        "seed",
        "batch_size",
        "batch_by",
        "bucket_width",
        "max_length",
        "train_limit",
        "train_prefix",
        "val_prefix",
        "val_limit",
        "vocab_size",
        "shuffle_buffer",
        "learning_rate",
    } & set(RESUME_FIELDS)


@pytest.mark.slow
@pytest.mark.parametrize(
    "ending, args, why",
    [
        # 200 pairs make 6 batches an epoch: one epoch, validated at its end.
        ("epochs", ["--set", "epochs=1", "--set", "max_steps=none", "--set", "validate_every=0"], "step 6 of 6"),
        # Frozen weights score the same at every validation: the second has no gain.
        (
            "patience",
            ["--set", "learning_rate=0", "--set", "validate_every=1", "--set", "patience=1", "--set", "max_steps=50"],
            "early stop at step 2",
        ),
    ],
)
def test_resuming_a_run_that_ended_by_epochs_or_patience_changes_nothing(tmp_path, capsys, ending, args, why):
    run = str(tmp_path / ending)
    assert main(["train", "quickstart", "--out", run, *TINY_TRAIN_ARGS, *args]) == 0
    before = run_fingerprint(run)
    capsys.readouterr()
    assert main(["train", "quickstart", "--out", run, *TINY_TRAIN_ARGS, *args, "--resume"]) == 0
    assert f"nothing to do: {run} has finished ({why}" in capsys.readouterr().err
    assert run_fingerprint(run) == before


# Each resumed copy trains in this one child process, so that the test's own process
# does not hold a traced training per copy (TensorFlow keeps one for the process's life).
RESUME_ALL = """
import json, sys
from keras_memnmt.cli import main
args = json.loads(sys.argv[1])
for run in json.loads(sys.argv[2]):
    code = main(["train", "quickstart", "--out", run, *args, "--resume"])
    if code:
        sys.exit(f"{run}: exit {code}")
"""


# Validations at steps 1 and 2 of a 6-step epoch (test_reliability's resume test crosses
# an epoch's end).
KILLED_ARGS = [
    *TINY_TRAIN_ARGS,
    "--set",
    "max_steps=2",
    "--set",
    "validate_every=1",
    "--set",
    "dropout=0.3",
    "--set",
    "keep_checkpoints=true",
]
# The killed copies are resumed in this many tests (each a third of them), so that pytest-xdist's
# workers share the resumes.
PARTS = 3


@pytest.fixture(scope="session")
def killed_copies(shared_folder) -> tuple[str, list[str]]:
    """A run trained once (``KILLED_ARGS``), and at each of its atomic writes (a complete
    temporary file, not yet renamed into place) a copy of its directory as a SIGKILL at that
    moment leaves it on disk (less the ``.lock``, whose stale takeover test_reliability
    covers). Built once per pytest run; read it, never change it."""
    import keras_memnmt.files as files

    def build(root):
        run, real_sync = str(root / "run"), files._sync

        def sync_and_copy(path):
            real_sync(path)
            if os.path.commonpath([run, os.path.abspath(path)]) == run:
                names = sorted(n for n in os.listdir(root) if n.startswith("killed"))
                copy = str(root / f"killed{len(names) + 1:02d}-{os.path.basename(path)}")
                shutil.copytree(run, copy, ignore=shutil.ignore_patterns(".lock"))

        files._sync = sync_and_copy
        try:
            assert main(["train", "quickstart", "--out", run, *KILLED_ARGS]) == 0
        finally:
            files._sync = real_sync

    root = shared_folder("killed_copies", build)
    return str(root / "run"), sorted(str(root / n) for n in os.listdir(root) if n.startswith("killed"))


@pytest.mark.slow
@pytest.mark.parametrize("part", range(PARTS))
def test_a_kill_at_any_write_resumes_to_the_uninterrupted_run(killed_copies, part, tmp_path):
    """Each killed copy of the run (``killed_copies``; this test takes every ``PARTS``-th,
    from ``part``) is copied again and resumed, and must end where the run ended: the same
    validations, weights, checkpoints, test translations and scores."""
    import keras

    run, all_copies = killed_copies
    # The vocabulary (3 files), config, record, each validation's 4 files (model.keras, its
    # checkpoint, best.keras where it improves, validations.json), the test's translations,
    # record and results.
    assert len(all_copies) >= 14, all_copies
    assert [h["step"] for h in json.load(open(os.path.join(run, "validations.json")))] == [1, 2]
    copies = [shutil.copytree(c, str(tmp_path / os.path.basename(c))) for c in all_copies[part::PARTS]]
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", RESUME_ALL, json.dumps(KILLED_ARGS), json.dumps(copies)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    def validations(path):  # the loss: Keras's running mean over the steps of the epoch so far
        return [
            (h["step"], h["val_bleu"], h["val_chrf"], round(h["loss"], 5))
            for h in json.load(open(os.path.join(path, "validations.json")))
        ]

    def weights(path):
        return [keras.ops.convert_to_numpy(w.value) for w in keras.saving.load_model(path, compile=False).weights]

    expected = {name: weights(os.path.join(run, name)) for name in ("model.keras", "best.keras")}
    results = json.load(open(os.path.join(run, "results.json")))
    for copy in copies:
        assert validations(copy) == validations(run), copy
        assert sorted(os.listdir(os.path.join(copy, "checkpoints"))) == ["step1.keras", "step2.keras"], copy
        for name, want in expected.items():
            for got, w in zip(weights(os.path.join(copy, name)), want, strict=True):
                np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6, err_msg=f"{copy}/{name}")
        got = json.load(open(os.path.join(copy, "results.json")))
        assert (got["bleu"], got["samples"]) == (results["bleu"], results["samples"]), copy
        assert sorted(os.listdir(os.path.join(copy, "hyps"))) == sorted(os.listdir(os.path.join(run, "hyps")))
        assert json.load(open(os.path.join(copy, "record.json")))["finished"], copy
        assert not [n for n in os.listdir(copy) if n.startswith(".")], copy
