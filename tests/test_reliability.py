"""A run directory is whole and a run that exits 0 made a real model: atomic writes,
kill-safety, the divergence stop, one writer per directory, range-checked configs."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

from keras_memnmt.cli import main
from keras_memnmt.files import remove_temporaries, replacing, write_json
from keras_memnmt.testing.tiny_runs import SHARED_RUN_ARGS, TINY_TRAIN_ARGS

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = TINY_TRAIN_ARGS


def _train(out, *extra):
    return main(["train", "quickstart", "--out", out, *TINY, *extra])


def test_an_interrupted_write_leaves_the_earlier_file(tmp_path):
    path = str(tmp_path / "a.json")
    write_json(path, {"v": 1})
    with pytest.raises(KeyboardInterrupt), replacing(path) as tmp:
        with open(tmp, "w") as f:
            f.write('{"v": 2, "trunc')
        raise KeyboardInterrupt
    assert json.load(open(path)) == {"v": 1}
    assert os.listdir(tmp_path) == ["a.json"]  # the temporary file is gone too


def test_a_process_that_does_not_write_writes_nothing(tmp_path):
    """The processes of a run on several hosts other than process 0 (files.set_writer)."""
    from keras_memnmt.files import save_with, set_writer, write_bytes, write_text, writes

    saved = []
    with set_writer(False):
        assert not writes()
        write_json(str(tmp_path / "a" / "b.json"), {"v": 1})
        write_text(str(tmp_path / "c.txt"), "x")
        write_bytes(str(tmp_path / "d.bin"), b"x")
        save_with(saved.append, str(tmp_path / "m.keras"))
    assert writes() and saved == [] and os.listdir(tmp_path) == []
    write_text(str(tmp_path / "c.txt"), "x")  # writes again after the block
    assert os.listdir(tmp_path) == ["c.txt"]


def test_temporaries_of_a_killed_writer_are_recognised(tmp_path):
    for name in (".best.keras.ab12cd_9.tmp.keras", ".log.csv.x7y8z9aa.tmp", ".hidden", "notes.tmp"):
        (tmp_path / name).write_text("x")
    assert sorted(remove_temporaries(str(tmp_path))) == [".best.keras.ab12cd_9.tmp.keras", ".log.csv.x7y8z9aa.tmp"]
    assert sorted(os.listdir(tmp_path)) == [".hidden", "notes.tmp"]


# A training that SIGKILLs itself while a model file is being written: KILL_AT names the
# file and the how-manieth write of it. The temporary file is complete then, and not yet
# renamed; a kill earlier in the write leaves the same run directory (a partial temporary).
KILLING_TRAIN = textwrap.dedent("""
    import os, signal, sys
    import keras_memnmt.files as files
    from keras_memnmt.cli import main
    name, nth = os.environ["KILL_AT"].split(":")
    seen = [0]
    real_sync = files._sync
    def sync(tmp):
        real_sync(tmp)
        if os.path.basename(tmp).startswith("." + name + "."):
            seen[0] += 1
            if seen[0] == int(nth):
                os.kill(os.getpid(), signal.SIGKILL)
    files._sync = sync
    sys.exit(main(sys.argv[1:]))
""")


def _killed_training(out, kill_at, *extra):
    env = {**os.environ, "KILL_AT": kill_at, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    args = ["train", "quickstart", "--out", out, *TINY, "--set", "validate_every=1", *extra]
    return subprocess.run(
        [sys.executable, "-c", KILLING_TRAIN, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_a_kill_during_a_checkpoint_write_loses_nothing_and_resume_goes_on(tmp_path, capsys):
    out = str(tmp_path / "r")
    # Killed while writing the second validation's model.keras: the first validation's
    # model.keras and best.keras stay whole.
    done = _killed_training(out, "model.keras:2", "--set", "max_steps=3")
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    steps = [h["step"] for h in json.load(open(os.path.join(out, "validations.json")))]
    assert steps == [1]
    assert any(n.startswith(".model.keras.") for n in os.listdir(out))  # the killed write's leftover
    assert os.path.isfile(os.path.join(out, ".lock"))  # left by the killed process
    capsys.readouterr()
    assert main(["translate", "--model", out, "--quiet", "--input", os.path.join(out, "config.json")]) == 0
    # --resume takes the stale lock over, removes the leftover and continues from step 1.
    assert _train(out, "--set", "validate_every=1", "--set", "max_steps=3", "--resume") == 0
    err = capsys.readouterr().err
    assert "stale lock" in err
    assert [h["step"] for h in json.load(open(os.path.join(out, "validations.json")))] == [1, 2, 3]
    assert not [n for n in os.listdir(out) if n.startswith(".")]


def test_a_broken_best_model_falls_back_to_the_latest_with_a_notice(trained_run, capsys):
    from keras_memnmt.rundir.runs import CheckpointError, load_model

    out = trained_run  # checkpoints/step2.keras and step4.keras kept
    best = os.path.join(out, "best.keras")
    open(best, "wb").close()  # as a writer without atomic renames leaves it
    capsys.readouterr()
    notices = []
    assert load_model(out, warn=notices.append) is not None
    assert notices and best in notices[0] and "model.keras" in notices[0]
    with pytest.raises(CheckpointError, match=r"best\.keras is truncated or corrupt.*intact: .*model\.keras"):
        load_model(out, "best")
    # Both broken: an error naming the kept checkpoint that is still whole.
    with open(os.path.join(out, "model.keras"), "r+b") as f:
        f.truncate(100)
    with pytest.raises(CheckpointError, match=r"intact: .*checkpoints/step2\.keras"):
        load_model(out)
    assert main(["translate", "--model", out, "--quiet", "--input", os.path.join(out, "config.json")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "step2.keras" in err and len(err.strip().splitlines()) == 1


# learning_rate 1e30: a loss of about 8e30 at step 2 on TensorFlow and PyTorch, not finite on JAX.
@pytest.mark.backend
@pytest.mark.parametrize(
    "limit, expected",
    [("max_loss=0.01", "above max_loss=0.01"), ("learning_rate=1e30", "(above max_loss=100|not finite)")],
)
def test_a_diverging_run_fails_and_saves_no_model(tmp_path, capsys, limit, expected):
    out = str(tmp_path / "r")
    # learning_rate 1e30: the first update makes the weights about 1e30, and the
    # second step's loss explodes before its validation.
    assert _train(out, "--set", "validate_every=2", "--set", "max_steps=4", "--set", limit) == 3
    err = capsys.readouterr().err
    assert "training diverged at step" in err and re.search(expected, err) and "Traceback" not in err
    assert not [n for n in os.listdir(out) if n.endswith(".keras")]
    record = json.load(open(os.path.join(out, "record.json")))
    assert "diverged" in record["failed"] and record["finished"] is None


@pytest.mark.backend
@pytest.mark.parametrize("loss", [float("nan"), float("inf")])
def test_a_non_finite_loss_stops_even_without_a_threshold(tmp_path, loss):
    from keras_memnmt.training import DivergenceStop, TrainingDiverged

    stop = DivergenceStop(str(tmp_path), max_loss=None, initial_step=7)
    stop.on_train_batch_end(0, {"loss": 1e30})
    with pytest.raises(TrainingDiverged, match=r"at step 9: the loss is (nan|inf) \(not finite\)"):
        stop.on_train_batch_end(1, {"loss": loss})


@pytest.mark.backend
def test_validation_refuses_to_save_non_finite_weights(tmp_path):
    import keras
    import numpy as np

    from keras_memnmt.training import BleuValidation, TrainingDiverged

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    model.layers[0].kernel.assign(np.full((2, 2), np.nan, "float32"))
    validation = BleuValidation(None, [], [], str(tmp_path), every_steps=1)
    validation.set_model(model)
    validation.on_train_begin()
    with pytest.raises(TrainingDiverged, match="weights are not finite"):
        validation.on_train_batch_end(0, {"loss": 1.0})
    assert os.listdir(tmp_path) == []


def test_a_second_training_into_a_directory_in_use_is_refused(tmp_path, capsys):
    out = tmp_path / "r"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from keras_memnmt.rundir.runs import LOCK_FILE, _process_start

        (out / LOCK_FILE).write_text(
            json.dumps(
                {
                    "host": os.uname().nodename,
                    "pid": holder.pid,
                    "started": _process_start(holder.pid),
                    "command": "memnmt train quickstart",
                }
            )
        )
        assert _train(str(out), "--set", "max_steps=1") == 2
        err = capsys.readouterr().err
        assert f"in use by process {holder.pid}" in err and "memnmt train quickstart" in err
        assert sorted(os.listdir(out)) == [LOCK_FILE]  # nothing written
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_whose_pid_was_reused_is_stale(tmp_path):
    from keras_memnmt.rundir.runs import LOCK_FILE, lock_run_dir

    # A live pid (the parent) with another start time: the locking process has ended.
    (tmp_path / LOCK_FILE).write_text(
        json.dumps({"host": os.uname().nodename, "pid": os.getppid(), "started": "1", "command": "old"})
    )
    notices = []
    with lock_run_dir(str(tmp_path), notices.append):
        assert json.load(open(tmp_path / LOCK_FILE))["pid"] == os.getpid()
    assert notices and "stale lock" in notices[0]
    assert not (tmp_path / LOCK_FILE).exists()


def test_max_steps_is_exact_and_validates_at_the_last_step(trained_run):
    """The shared run (validations every 2 steps, at 2 and 4) resumed to 5 steps."""
    assert (
        main(["train", "quickstart", "--out", trained_run, *SHARED_RUN_ARGS, "--set", "max_steps=5", "--resume"]) == 0
    )
    assert [h["step"] for h in json.load(open(os.path.join(trained_run, "validations.json")))] == [2, 4, 5]


@pytest.mark.parametrize(
    "override, message",
    [
        ("max_steps=-5", "max_steps=-5: expected an int >= 1, or None"),
        ("epochs=-1", "epochs=-1: expected an int >= 1"),
        ("epochs=0", "epochs=0: expected an int >= 1"),
        ("learning_rate=inf", "learning_rate=inf: expected a finite number >= 0"),
        ("learning_rate=nan", "learning_rate=nan: expected a finite number >= 0"),
        ("batch_size=0", "batch_size=0: expected an int >= 1"),
        ("label_smoothing=1", "label_smoothing=1.0: expected a number in [0, 1)"),
        ("clipnorm=-1", "clipnorm=-1.0: expected a finite number >= 0"),
        ("validate_every=-2", "validate_every=-2: expected an int >= 0"),
        ("vocab_size=3", "vocab_size=3: expected an int >= 8"),
        ("max_loss=0", "max_loss=0.0: expected a finite number > 0, or None"),
        ("batch_size=10000000000000000000000", "batch_size=10000000000000000000000: expected an int <= 2147483647"),
        ("seed=99999999999", "seed=99999999999: expected an int <= 2147483647"),
        (
            "embedding_dim=10000000000000000000000",
            "option embedding_dim=10000000000000000000000: expected an int <= 2147483647",
        ),
    ],
)
def test_out_of_range_values_fail_before_any_work(tmp_path, capsys, override, message):
    out = str(tmp_path / "r")
    assert _train(out, "--set", override) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not os.path.exists(out)


def test_every_int_field_and_option_has_an_upper_bound():
    """2**31 - 1 at most (what TensorFlow's and SentencePiece's 32-bit counts and the
    backends' seeds hold), checked with the other ranges before any work."""
    import dataclasses
    import typing

    from keras_memnmt.config import ConfigError, TrainConfig, apply_overrides

    hints = typing.get_type_hints(TrainConfig)
    fields = [
        f.name for f in dataclasses.fields(TrainConfig) if int in (typing.get_args(hints[f.name]) or (hints[f.name],))
    ]
    assert "batch_size" in fields and "max_steps" in fields and "seed" in fields
    for name in [*fields, "embedding_dim", "decoder_units"]:
        apply_overrides(TrainConfig(), [f"{name}=2147483647"])  # the bound itself is allowed
        with pytest.raises(ConfigError, match=f"{name}=2147483648: expected an int <= 2147483647"):
            apply_overrides(TrainConfig(), [f"{name}=2147483648"])


def test_every_float_field_and_option_is_finite():
    """inf, -inf and NaN are refused by name in every float config field and every float
    option of every model, checked with the other ranges before any work."""
    import dataclasses
    import typing

    from keras_memnmt.config import ConfigError, TrainConfig, apply_overrides
    from keras_memnmt.models import MODELS, get_model, model_options

    def floats(hints):
        return [name for name, hint in hints.items() if float in (typing.get_args(hint) or (hint,))]

    hints = typing.get_type_hints(TrainConfig)
    cases = [(TrainConfig(), name) for name in floats({f.name: hints[f.name] for f in dataclasses.fields(TrainConfig)})]
    for model in MODELS:
        options = model_options(get_model(model))
        cases += [(TrainConfig(model=model), name) for name in floats({k: o.annotation for k, o in options.items()})]
    assert {"learning_rate", "init_noise_std", "encoder_lm_weight"} <= {name for _, name in cases}
    for config, name in cases:
        for value in ("inf", "-inf", "nan"):
            with pytest.raises(
                ConfigError, match=rf"{name}={value}: expected (a finite number|a number in|a factor in)"
            ):
                apply_overrides(config, [f"{name}={value}"])


@pytest.mark.parametrize(
    "recipe, override",
    [
        ("multi30k_memdec", "init_noise_std=inf"),
        ("multi30k_ylstm", "encoder_lm_weight=inf"),
        ("multi30k_ylstm", "encoder_lm_weight=nan"),
    ],
)
def test_a_float_option_that_is_not_finite_fails_before_any_work(tmp_path, capsys, recipe, override):
    out = str(tmp_path / "r")
    assert main(["train", recipe, "--out", out, "--set", override]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"option {override}: expected a finite number" in err
    assert not os.path.exists(out)


@pytest.mark.parametrize(
    "name, content",
    [("source.model", b"garbage, not a SentencePiece model"), ("target.model", b""), ("vocab.json", b"not json")],
)
def test_a_corrupt_vocabulary_file_is_named_in_one_line(trained_run, capsys, name, content):
    path = os.path.join(trained_run, "vocab", name)
    with open(path, "wb") as f:
        f.write(content)
    capsys.readouterr()
    assert (
        main(["translate", "--model", trained_run, "--quiet", "--input", os.path.join(trained_run, "config.json")]) == 2
    )
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert err.startswith(f"memnmt: error: {path} is not a"), err


def test_a_started_run_is_not_reused_silently(trained_run, capsys):
    out = trained_run
    for name in ("model.keras", "best.keras", "validations.json", "log.csv", "results.json", "record.json"):
        os.remove(os.path.join(out, name))  # as if killed before its first validation
    shared = ["train", "quickstart", "--out", out, *SHARED_RUN_ARGS]
    assert main([*shared, "--set", "max_steps=1"]) == 2
    err = capsys.readouterr().err
    assert "already holds the start of a run (" in err and "config.json" in err
    # --resume checks that the vocabulary would be the same before it reuses it.
    assert main([*shared, "--set", "max_steps=1", "--set", "vocab_size=300", "--resume"]) == 2
    assert "vocab_size=200 (now 300)" in capsys.readouterr().err
    assert main([*shared, "--set", "max_steps=2", "--resume"]) == 0
    assert "vocabulary: reusing" in capsys.readouterr().err


def test_a_vocabulary_too_small_for_the_text_fails_before_any_file(tmp_path, capsys):
    out = str(tmp_path / "r")
    assert _train(out, "--set", "vocab_size=10", "--set", "max_steps=1") == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("memnmt: error: config field vocab_size=10: vocabulary size 10 is too small")
    assert not os.path.exists(out)


@pytest.mark.backend
@pytest.mark.slow
def test_a_resumed_run_ends_where_an_uninterrupted_run_ends(tmp_path):
    """Stopped after step 2 (mid-epoch) and resumed into the next epoch: the same batches
    and dropout masks as a run that was not stopped, so the same validations (the logged
    loss, Keras's running mean over its epoch, included) and the same weights."""
    import keras
    import numpy as np

    args = ["--set", "validate_every=2", "--set", "dropout=0.3", "--set", "output_dropout=0.3"]
    straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
    assert _train(straight, *args, "--set", "max_steps=8") == 0
    assert _train(resumed, *args, "--set", "max_steps=2") == 0
    assert _train(resumed, *args, "--set", "max_steps=8", "--resume") == 0  # epochs of 6 steps

    def validations(run):
        return [
            (h["step"], h["val_bleu"], round(h["loss"], 5))
            for h in json.load(open(os.path.join(run, "validations.json")))
        ]

    assert validations(resumed) == validations(straight)
    assert [s for s, _, _ in validations(straight)] == [2, 4, 6, 8]
    a, b = (keras.saving.load_model(os.path.join(run, "model.keras"), compile=False) for run in (straight, resumed))
    for va, vb in zip(a.weights, b.weights, strict=True):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(vb.value),
            keras.ops.convert_to_numpy(va.value),
            rtol=1e-5,
            atol=1e-6,
            err_msg=va.path,
        )


def test_an_error_before_the_first_step_leaves_no_half_made_run(tmp_path, capsys):
    """The vocabulary is trained and written before every pair is found too long: the
    error removes what the command created (nothing of a folder it did not make), so a
    plain rerun with the input fixed is not refused as "the start of a run"."""
    out = tmp_path / "r"
    assert _train(str(out), "--set", "max_length=1", "--set", "max_steps=1") == 2
    assert "longer than max_length=1" in capsys.readouterr().err
    assert not out.exists()
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert _train(str(out), "--set", "max_length=1", "--set", "max_steps=1") == 2
    assert os.listdir(out) == ["notes.txt"]
    assert _train(str(out), "--set", "max_steps=1") == 0  # no --overwrite needed


def test_a_model_file_naming_a_class_outside_keras_is_refused_by_name(trained_run, capsys):
    """A ``model.keras`` whose config names ``subprocess.Popen``: Keras runs nothing, and the
    refusal is one line naming the file (exit 2), on ``--resume`` as on ``translate``."""
    import zipfile

    latest = os.path.join(trained_run, "model.keras")
    with zipfile.ZipFile(latest) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    marker = os.path.join(trained_run, "ran")
    config = json.loads(entries["config.json"])
    config.update(module="subprocess", class_name="Popen", registered_name=None, config={"args": ["touch", marker]})
    entries["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(latest, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    capsys.readouterr()
    assert (
        main(["train", "quickstart", "--out", trained_run, *SHARED_RUN_ARGS, "--set", "max_steps=6", "--resume"]) == 2
    )
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            f"memnmt: error: cannot resume {trained_run}: {latest} cannot be loaded (Could not locate class 'Popen')"
        )
    )
    assert (
        main(
            [
                "translate",
                "--model",
                trained_run,
                "--checkpoint",
                "model.keras",
                "--quiet",
                "--input",
                os.path.join(trained_run, "config.json"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith(f"memnmt: error: {latest} cannot be loaded (Could not locate class 'Popen')")
    assert err.count("\n") == 1 and not os.path.exists(marker)


def test_a_resume_never_writes_into_a_file_with_other_names(trained_run, tmp_path):
    """A copy made of hard links (``cp -al``) resumed: every file it changes gets a name of
    its own first (``train.log`` is appended to; ``log.csv`` and the event files lose
    what the resume trains again), so the original run stays as it was."""
    from keras_memnmt.testing.tiny_runs import run_fingerprint

    copy = str(tmp_path / "copy")
    for folder, _, names in os.walk(trained_run):
        os.makedirs(os.path.join(copy, os.path.relpath(folder, trained_run)))
        for name in names:
            os.link(os.path.join(folder, name), os.path.join(copy, os.path.relpath(folder, trained_run), name))
    before = run_fingerprint(trained_run)
    assert main(["train", "quickstart", "--out", copy, *SHARED_RUN_ARGS, "--set", "max_steps=6", "--resume"]) == 0
    assert run_fingerprint(trained_run) == before
    with open(os.path.join(trained_run, "train.log")) as f, open(os.path.join(copy, "train.log")) as g:
        original, continued = f.read().splitlines(), g.read().splitlines()
    assert continued[: len(original)] == original and len(continued) > len(original)
    for name in ("train.log", "log.csv"):
        assert os.stat(os.path.join(copy, name)).st_nlink == 1
