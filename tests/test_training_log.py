"""What ``memnmt train`` logs: each line says what is happening, with one clock, labelled."""

import json
import os
import re

import pytest

from keras_memnmt.training.callbacks import EpochBar
from keras_memnmt.training.trainer import fit_phases

# The log's wording and Keras's bookkeeping: the same on every backend (conftest.py).
pytestmark = pytest.mark.backend_independent

NUMBER = r"[0-9.]+"


@pytest.fixture(scope="module")
def log_lines(shared_run) -> list[str]:
    """The ``[memnmt]`` lines the shared run logged (4 steps, ``log_every=1``,
    validations at steps 2 and 4; stderr was a file, so no progress bar)."""
    with open(os.path.join(os.path.dirname(shared_run), "stderr.txt"), encoding="utf-8") as f:
        return [line.removeprefix("[memnmt] ").rstrip("\n") for line in f if line.startswith("[memnmt] ")]


def test_a_line_every_log_every_steps_with_its_labelled_clock(log_lines):
    steps = [line for line in log_lines if line.startswith("step ")]
    # Steps 1-3; step 4 is the last, which the epoch line reports.
    assert len(steps) == 3
    for n, line in enumerate(steps, start=1):
        assert re.fullmatch(rf"step {n}/4, epoch 1/1: loss {NUMBER}; training time {NUMBER} min", line), line


def test_one_line_per_epoch_with_one_clock_and_no_step_that_did_not_run(log_lines, shared_run):
    epochs = [line for line in log_lines if line.startswith("epoch ")]
    # max_steps=4 stops inside the first epoch (6 batches): the line says so.
    assert len(epochs) == 1
    assert re.fullmatch(rf"epoch 1/1 stopped at step 4: loss {NUMBER}; training time {NUMBER} min", epochs[0])
    with open(os.path.join(os.path.dirname(shared_run), "stderr.txt"), encoding="utf-8") as f:
        text = f.read()
    assert "Epoch 1/" not in text and "/step" not in text  # Keras's own epoch lines and clocks: not in a file
    # The clock of the lines is the run's training time, as validations.json holds it.
    with open(os.path.join(shared_run, "validations.json"), encoding="utf-8") as f:
        last = json.load(f)[-1]
    assert abs(float(epochs[0].rsplit("training time ", 1)[1].split()[0]) - last["train_seconds"] / 60) < 0.15


def test_validation_lines_name_their_step_and_their_own_clock(log_lines):
    validations = [line for line in log_lines if line.startswith("validation at step ")]
    assert [line.split(":")[0] for line in validations] == ["validation at step 2", "validation at step 4"]
    for line in validations:
        assert re.match(
            rf"validation at step \d: BLEU {NUMBER} \(best {NUMBER}\), chrF {NUMBER}; "
            rf"validated in \d+ s; e\.g\. ",
            line,
        ), line


def test_the_test_is_announced_and_its_scores_end_the_log(log_lines):
    test = [i for i, line in enumerate(log_lines) if line.startswith("test: translating synthetic-test")]
    assert len(test) == 1 and "(4 sentences, beam 2) with best.keras" in log_lines[test[0]]
    assert re.fullmatch(
        rf"test synthetic-test, beam 2: BLEU {NUMBER} \(lowercased {NUMBER}\), "
        rf"chrF {NUMBER}, TER {NUMBER}",
        log_lines[-1],
    )


@pytest.mark.parametrize(
    "done, last_step, per_epoch, phases",
    [
        (0, 12, 4, [(0, 0, 4, 3)]),  # whole epochs: one fit
        (0, 10, 4, [(0, 0, 4, 2), (8, 2, 2, 3)]),  # max_steps inside the third epoch: its 2 steps alone
        (0, 3, 4, [(0, 0, 3, 1)]),  # inside the first
        (5, 12, 4, [(5, 1, 3, 2), (8, 2, 4, 3)]),  # resumed inside the second epoch
        (5, 7, 4, [(5, 1, 2, 2)]),  # resumed, and the last step in the same epoch
        (4, 12, 4, [(4, 1, 4, 3)]),  # resumed at an epoch's end
    ],
)
def test_fit_phases_never_count_a_step_that_will_not_run(done, last_step, per_epoch, phases):
    assert fit_phases(done, last_step, per_epoch) == phases
    assert sum(steps * (until - initial) for _, initial, steps, until in phases) == last_step - done


def test_the_bar_of_an_epoch_stopped_early_ends_at_the_steps_it_ran(capsys):
    bar = EpochBar()
    bar.set_params({"verbose": 1, "epochs": 2, "steps": 100})
    bar.on_train_begin()
    for epoch, ran in ((0, 7), (1, 100)):
        bar.on_epoch_begin(epoch)
        for batch in range(ran):
            bar.on_train_batch_end(batch, {"loss": 1.0})
        bar.on_epoch_end(epoch, {"loss": 1.0})
        assert bar.progbar.target == ran  # the next epoch's bar counts to 100 again
    out = capsys.readouterr().out
    assert "7/7" in out and "100/100" in out and "7/100" not in out.rsplit("\r", 1)[-1]


def test_train_log_holds_what_the_log_showed_after_the_command_and_the_run(log_lines, shared_run):
    with open(os.path.join(shared_run, "train.log"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert re.fullmatch(r"\S+ command: memnmt train quickstart --out \S+ .*", lines[0]), lines[0]
    assert lines[1] == f"run directory: {os.path.abspath(shared_run)}"
    assert lines[2:] == log_lines  # every line, in order
    with open(os.path.join(shared_run, "record.json"), encoding="utf-8") as f:
        parameters = json.load(f)["parameters"]
    assert isinstance(parameters, int) and parameters > 0
    assert f"model: RNNsearch, {parameters:,} parameters" in lines
    assert any(line.startswith("distribution: ") for line in lines)  # the devices
