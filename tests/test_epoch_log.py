"""A run's ``log.csv`` and TensorBoard ``epoch_*`` scalars: one row per epoch, in order,
whatever cut the training into several ``fit`` calls (``max_steps`` inside an epoch, an
early stop, a resume inside an epoch or after the run's end)."""

import csv
import os
import re

import pytest

from keras_memnmt.cli import main
from keras_memnmt.testing.tiny_runs import TINY_TRAIN_ARGS

# Files and Keras's bookkeeping: the same on every backend (conftest.py).
pytestmark = pytest.mark.backend_independent


def train(out, capsys, *sets: str, resume: bool = False) -> int:
    """Trains (or resumes) the tiny quickstart run; returns its batches per epoch."""
    args = [a for s in sets for a in ("--set", s)]
    assert (
        main(
            [
                "train",
                "quickstart",
                "--out",
                str(out),
                *TINY_TRAIN_ARGS,
                "--set",
                "validate_every=4",
                "--set",
                "patience=0",
                *args,
                *(["--resume"] if resume else []),
            ]
        )
        == 0
    )
    return int(re.search(r"(\d+) batches per epoch", capsys.readouterr().err).group(1))


def log_epochs(run) -> list[int]:
    with open(os.path.join(run, "log.csv"), encoding="utf-8", newline="") as f:
        return [int(row["epoch"]) for row in csv.DictReader(f)]


def board_steps(run, tag: str = "epoch_loss") -> list[int]:
    """The steps (epochs, for ``epoch_*``) of ``tag`` in ``RUN/tensorboard/train``, as the
    event files hold them (no reader's purge of orphaned data)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(
        os.path.join(run, "tensorboard", "train"), size_guidance={"tensors": 0}, purge_orphaned_data=False
    )
    events.Reload()
    return [event.step for event in events.Tensors(tag)]


def epochs_up_to(step: int, per_epoch: int) -> list[int]:
    return list(range(-(-step // per_epoch)))


def test_a_run_cut_by_max_steps_keeps_every_epoch(tmp_path, capsys):
    run = tmp_path / "run"
    per_epoch = train(run, capsys, "epochs=5", "max_steps=15")
    assert per_epoch < 15 // 2  # several whole epochs, then one that max_steps cuts short
    assert log_epochs(run) == board_steps(run) == epochs_up_to(15, per_epoch)


def test_a_run_stopped_early_keeps_every_epoch_up_to_its_stop(tmp_path, capsys):
    import json

    run = tmp_path / "run"
    per_epoch = train(run, capsys, "epochs=5", "patience=1")
    with open(run / "validations.json", encoding="utf-8") as f:
        last = json.load(f)[-1]["step"]
    assert log_epochs(run) == board_steps(run) == epochs_up_to(last, per_epoch)


@pytest.mark.parametrize("first", ["inside", "end"])
def test_a_resumed_run_logs_each_epoch_once(tmp_path, capsys, first):
    """The first run stops at max_steps inside an epoch (8) or at an epoch's end, then
    goes on to 20 steps: the epoch it stopped in is logged once, by the resumed run."""
    run = tmp_path / "run"
    per_epoch = train(run, capsys, "epochs=5", "max_steps=8", "log_every=2")
    stop = 8 if first == "inside" else per_epoch * 2
    if first == "end":
        train(tmp_path / "other", capsys, "epochs=5", f"max_steps={stop}", "log_every=2")
        run = tmp_path / "other"
    assert log_epochs(run) == epochs_up_to(stop, per_epoch)
    train(run, capsys, "epochs=5", "max_steps=20", "log_every=2", resume=True)
    assert log_epochs(run) == board_steps(run) == epochs_up_to(20, per_epoch)
    steps = board_steps(run, "loss")  # the monitor's per-step curve: each step once
    assert steps == sorted(set(steps))
    with open(os.path.join(run, "train.log"), encoding="utf-8") as f:  # continued by the resume
        commands = [line for line in f if " command: memnmt train " in line]
    assert len(commands) == 2 and "--resume" in commands[1]
