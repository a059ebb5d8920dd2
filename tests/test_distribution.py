"""Data-parallel training on two virtual CPU devices equals one device on the same global batch.

Each case runs in a subprocess: the devices must be configured before the backend
starts. ``XLA_FLAGS=--xla_force_host_platform_device_count=2`` makes two CPU devices on
both (on TensorFlow, two logical devices: ``keras_memnmt.runtime.split_tensorflow_cpu``).
"""

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_memnmt.cli import main
from keras_memnmt.testing.tiny_runs import TINY_TRAIN_ARGS

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# No dropout: the replicas would draw other masks than one device does.
TINY = [
    *TINY_TRAIN_ARGS,
    "--set",
    "dropout=0",
    "--set",
    "output_dropout=0",
    "--set",
    "annotation_dropout=0",
    "--set",
    "validate_every=1",
    "--set",
    "max_steps=3",
    "--set",
    "val_loss_sentences=0",
    "--set",
    "tensorboard_pictures=0",
    "--set",
    "keep_checkpoints=true",
]

# Two trainings in one process (same seed, same data): one device, then data-parallel.
SCRIPT = """
import os, sys
from keras_memnmt.cli import main
out, args = sys.argv[1], sys.argv[2:]
for name, distribution in (("one", "none"), ("two", "data_parallel")):
    code = main(["train", "quickstart", "--out", os.path.join(out, name), *args,
                 "--set", f"distribution={distribution}"])
    if code:
        sys.exit(code)
"""


@pytest.mark.slow
@pytest.mark.skipif(keras.backend.backend() == "torch", reason="data_parallel is refused on torch (see below)")
def test_two_devices_train_like_one_on_the_same_global_batch(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # First: XLA stops reading its flags at one it does not know.
    env["XLA_FLAGS"] = ("--xla_force_host_platform_device_count=2 " + env.get("XLA_FLAGS", "")).strip()
    # clipnorm 0.01 clips every step: the clipping must see the whole batch's gradient.
    args = [*TINY, "--set", "clipnorm=0.01"]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    if keras.backend.backend() == "jax":  # and the same run on two processes of one device each
        _two_processes_train_like_two_devices(tmp_path, args)
    assert "distribution: data_parallel on 2 devices" in done.stderr
    assert "global batch 64 sentences, 32 per device; learning rate" in done.stderr

    def losses(name):
        return [h["loss"] for h in json.load(open(tmp_path / name / "validations.json"))]

    one, two = losses("one"), losses("two")
    assert len(one) == len(two) == 3
    # The first step's loss. (Later entries are Keras's running means over the epoch's
    # batches weighted by their rows, padding rows included.)
    np.testing.assert_allclose(two[0], one[0], rtol=2e-5)
    # The weights after three clipped Adam steps: float sums in another order (the all-reduce).
    from keras_memnmt.rundir.runs import read_model_file

    a, b = (read_model_file(str(tmp_path / name / "model.keras")) for name in ("one", "two"))
    initial = read_model_file(str(tmp_path / "one" / "checkpoints" / "step1.keras"))
    moved = False
    for va, vb, v0 in zip(a.weights, b.weights, initial.weights, strict=True):
        wa, wb = keras.ops.convert_to_numpy(va.value), keras.ops.convert_to_numpy(vb.value)
        np.testing.assert_allclose(wb, wa, rtol=1e-4, atol=1e-6, err_msg=va.path)
        moved = moved or not np.allclose(wa, keras.ops.convert_to_numpy(v0.value))
    assert moved  # it trains


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="torch only")
def test_data_parallel_is_refused_on_torch_with_the_reason(tmp_path, capsys):
    out = str(tmp_path / "r")
    assert main(["train", "quickstart", "--out", out, *TINY, "--set", "distribution=data_parallel"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "memnmt: error: config field distribution='data_parallel' is not supported on the torch backend"
    )
    assert not os.path.exists(out)


def test_padding_rows_change_no_loss(tmp_path):
    """pad_batches adds all-pad pairs; every model's loss (the Y-LSTM's language model
    included) is that of the real pairs."""
    import tensorflow as tf

    from keras_memnmt.config import TrainConfig
    from keras_memnmt.models import get_model
    from keras_memnmt.testing.tiny_runs import TINY_OPTIONS
    from keras_memnmt.training import compile_model
    from keras_memnmt.training.distribution import pad_batches

    rng = np.random.default_rng(0)
    source = rng.integers(4, 30, (3, 7)).astype("int32")
    source[0, 5:] = 0
    target_out = rng.integers(4, 30, (3, 6)).astype("int32")
    target_out[1, 4:] = 0
    target_in = np.concatenate([np.full((3, 1), 2, "int32"), target_out[:, :-1]], 1)
    ds = tf.data.Dataset.from_tensors(((source, target_in), target_out))
    (p_source, p_target_in), p_target_out = next(iter(pad_batches(ds, 4)))
    assert p_source.shape == (4, 7) and not np.asarray(p_target_out)[3].any()
    for name, options in TINY_OPTIONS.items():
        keras.utils.set_random_seed(1)
        model = get_model(name)(30, 30, **options)
        compile_model(model, TrainConfig(model=name))
        plain = model.evaluate((source, target_in), target_out, verbose=0, return_dict=True)["loss"]
        padded = model.evaluate(
            (np.asarray(p_source), np.asarray(p_target_in)), np.asarray(p_target_out), verbose=0, return_dict=True
        )["loss"]
        np.testing.assert_allclose(padded, plain, rtol=1e-5, err_msg=name)


@pytest.mark.backend_independent
def test_tensorflows_several_workers_are_refused_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}')
    out = str(tmp_path / "r")
    assert main(["train", "quickstart", "--out", out, *TINY, "--set", "distribution=data_parallel"]) == 2
    assert "with $TF_CONFIG set: TensorFlow's several workers" in capsys.readouterr().err
    assert not os.path.exists(out)


@pytest.mark.skipif(keras.backend.backend() == "jax", reason="on JAX the command joins the cluster first")
@pytest.mark.parametrize(
    "distribution, expected",
    [
        ("none", "add --set distribution=data_parallel"),
        ("data_parallel", "needs KERAS_BACKEND=jax"),
    ],
)
def test_several_processes_off_jax_are_refused_before_any_work(tmp_path, capsys, monkeypatch, distribution, expected):
    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", "2")
    out = str(tmp_path / "r")
    assert main(["train", "quickstart", "--out", out, *TINY, "--set", f"distribution={distribution}"]) == 2
    err = capsys.readouterr().err
    assert "$KERAS_DISTRIBUTION_NUM_PROCESSES=2" in err and expected in err
    assert not os.path.exists(out)


@pytest.mark.backend_independent
@pytest.mark.parametrize(
    "environment, expected",
    [
        ({"KERAS_DISTRIBUTION_NUM_PROCESSES": "two"}, "expected a whole number >= 1"),
        ({"KERAS_DISTRIBUTION_NUM_PROCESSES": "2"}, "$KERAS_DISTRIBUTION_JOB_ADDRESSES is not set"),
        (
            {
                "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
                "KERAS_DISTRIBUTION_JOB_ADDRESSES": "127.0.0.1:1",
                "KERAS_DISTRIBUTION_PROCESS_ID": "2",
            },
            "$KERAS_DISTRIBUTION_PROCESS_ID='2': expected 0 to 1",
        ),
    ],
)
def test_a_malformed_cluster_is_one_line_naming_the_variable(monkeypatch, environment, expected):
    from keras_memnmt.config import ConfigError
    from keras_memnmt.training import hosts

    for name in hosts.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        hosts.join(hosts.requested())
    assert expected in str(caught.value)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_processes_train_like_two_devices(tmp_path, args):
    """Two `memnmt train` processes on this machine (gloo over 127.0.0.1), one device each,
    train like the one process on two devices of ``tmp_path/two`` (the same ``args``): the
    same weights, validations and test scores, and one run directory, written by process 0."""
    from keras_memnmt.testing.tiny_runs import run_fingerprint

    args = [*args, "--set", "distribution=data_parallel"]
    # XLA_FLAGS stays the pytest process's (conftest.py's compile flags, no device count):
    # the two runs must compile alike to agree to the bit.
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    port, work = _free_port(), tmp_path / "processes"
    work.mkdir()
    command = [sys.executable, "-m", "keras_memnmt.cli", "train", "quickstart", "--out", str(work / "run"), *args]
    procs = [
        subprocess.Popen(
            command,
            cwd=work,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(
                env,
                KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{port}",
                KERAS_DISTRIBUTION_NUM_PROCESSES="2",
                KERAS_DISTRIBUTION_PROCESS_ID=str(i),
            ),
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=900) for p in procs]
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err[-3000:]
    assert "in 2 processes (this is process 0); global batch 64 sentences, 32 per device" in outputs[0][1]
    assert "(this is process 1)" in outputs[1][1]

    def untimed(results):  # each process has its own clock; the printed results leave validations out
        return {k: v for k, v in results.items() if not k.endswith("_seconds") and k not in ("run_dir", "validations")}

    # Both print the same results; process 0 wrote them, and they are the two devices' run's.
    printed = [untimed(json.loads(out)) for out, _ in outputs]
    assert printed[0] == printed[1] == untimed(json.load(open(work / "run" / "results.json")))
    assert printed[0] == untimed(json.load(open(tmp_path / "two" / "results.json")))

    def validations(run):
        return [{k: v for k, v in h.items() if k != "train_seconds"} for h in json.load(open(run / "validations.json"))]

    assert validations(work / "run") == validations(tmp_path / "two")

    def files(run):  # an event file's name holds its time and process id
        return sorted(os.path.dirname(f) + "/events" if ".tfevents." in f else f for f in run_fingerprint(str(run)))

    assert files(work / "run") == files(tmp_path / "two")
    assert os.listdir(work) == ["run"]  # the processes' working folder: nothing else written
    from keras_memnmt.rundir.runs import read_model_file

    a, b = (read_model_file(str(run / "model.keras")) for run in (tmp_path / "two", work / "run"))
    for va, vb in zip(a.weights, b.weights, strict=True):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(vb.value),
            keras.ops.convert_to_numpy(va.value),
            rtol=1e-5,
            atol=1e-7,
            err_msg=va.path,
        )


# ----- XLA_FLAGS' CPU device count on TensorFlow ------------------------------------------------

# The placement of a data_parallel run: first thing in the process, then after a second
# XLA_FLAGS count, once TensorFlow's devices are set up.
PLACEMENT_FIRST = """
import os
from keras_memnmt.config import TrainConfig
from keras_memnmt.training.distribution import placement
config = TrainConfig(distribution="data_parallel")
place = placement(config)
print(len(place.devices), place.pad_to)
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=3"
try:
    placement(config)
except ValueError as e:
    print(e)
"""

# The `memnmt` command's order: TensorFlow imported, then the recipe's config validated (which
# builds a model, setting up TensorFlow's devices), then the placement.
PLACEMENT_IN_THE_COMMAND = """
from keras_memnmt.runtime import import_tensorflow_without_jax
import_tensorflow_without_jax()
from keras_memnmt.config import TrainConfig, validate
from keras_memnmt.training.distribution import placement
config = validate(TrainConfig(distribution="data_parallel"))
print(len(placement(config).devices))
"""


def _run_on_tensorflow(script):
    env = dict(
        os.environ,
        KERAS_BACKEND="tensorflow",
        CUDA_VISIBLE_DEVICES="",
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
        PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


@pytest.mark.backend_independent  # its own TensorFlow process, whatever the backend here
def test_xla_flags_device_count_splits_tensorflows_cpu():
    """One flag makes N CPU devices on both backends: on TensorFlow without a GPU,
    XLA_FLAGS' count splits the CPU into that many logical devices."""
    pytest.importorskip("tensorflow")
    two, changed = _run_on_tensorflow(PLACEMENT_FIRST)
    assert two == "2 2"
    assert changed == (
        "XLA_FLAGS --xla_force_host_platform_device_count=3 asks for 3 CPU devices, but this "
        "process set up TensorFlow's devices already (2 CPU devices): set XLA_FLAGS before the "
        "process first runs TensorFlow"
    )
    assert _run_on_tensorflow(PLACEMENT_IN_THE_COMMAND) == ["2"]


@pytest.mark.backend_independent
@pytest.mark.parametrize(
    "flags, count",
    [
        ("", 1),
        ("--xla_cpu_enable_fast_math=false", 1),
        ("--xla_force_host_platform_device_count=4", 4),
        ("--xla_force_host_platform_device_count=2 --xla_force_host_platform_device_count=3", 3),
    ],
)
def test_host_device_count_reads_xla_flags(monkeypatch, flags, count):
    from keras_memnmt.runtime import host_device_count

    monkeypatch.setenv("XLA_FLAGS", flags)
    assert host_device_count() == count


@pytest.mark.backend_independent
@pytest.mark.parametrize("value", ["0", "two", ""])
def test_a_malformed_device_count_is_one_line_naming_xla_flags(monkeypatch, value):
    from keras_memnmt.runtime import host_device_count

    monkeypatch.setenv("XLA_FLAGS", f"--xla_force_host_platform_device_count={value}")
    with pytest.raises(
        ValueError,
        match=f"^XLA_FLAGS: --xla_force_host_platform_device_count expects a positive integer, got '{value}'$",
    ):
        host_device_count()


# ----- several processes that cannot go on together -------------------------------------------------

# Each case starts `memnmt train` processes on 127.0.0.1 (tiny runs, one CPU device each) with
# a short $MEMNMT_HOSTS_TIMEOUT; each process must end within that bound with one line on
# stderr, exit code 2 (3 once training had started), and no lock left in its run directory.
HOSTS_TIMEOUT = 10
CLUSTER_ARGS = [*TINY, "--set", "distribution=data_parallel"]
# What a process must never print: a Python traceback, the runtime's native log lines
# (absl's "E1128 12:00:00.000000 ..."), an abort.
NATIVE = re.compile(
    r"Traceback|^[IWEF]\d{4} \d\d:\d\d:\d\d|Fatal Python error|terminate called|Check failure"
    r"|Aborted",
    re.MULTILINE,
)


def _start(
    work,
    index: int,
    count: int,
    port: int,
    args: list[str],
    recipe: str = "quickstart",
    python: tuple = ("-m", "keras_memnmt.cli"),
    **environment,
):
    env = dict(
        os.environ,
        PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
        KERAS_BACKEND="jax",
        KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{port}",
        KERAS_DISTRIBUTION_NUM_PROCESSES=str(count),
        KERAS_DISTRIBUTION_PROCESS_ID=str(index),
        MEMNMT_HOSTS_TIMEOUT=str(HOSTS_TIMEOUT),
        **environment,
    )
    for name in ("XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL"):  # the command's own: TensorFlow's start-up lines off
        env.pop(name, None)
    command = [sys.executable, *python, "train", recipe, "--out", str(work / "run"), *args]
    return subprocess.Popen(command, cwd=work, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _ended(procs, limit: float):
    """``[(exit code, stderr)]`` of ``procs``, each ended within ``limit`` seconds (else killed)."""
    import time

    started, ended = time.monotonic(), []
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(1.0, limit - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"a process of the cluster did not end within {limit} s")
        ended.append((p.returncode, err))
    return ended


def _one_error_line(err: str, expected: str) -> str:
    """The stderr ``err``'s error line (it must be the only one, and contain ``expected``)."""
    errors = [line for line in err.splitlines() if line.startswith("memnmt: error:")]
    assert len(errors) == 1 and expected in errors[0], err[-3000:]
    assert not NATIVE.search(err), err[-3000:]
    return errors[0]


# Starting one process costs up to 30 s on a 2-core machine; joining waits HOSTS_TIMEOUT at most.
_JOIN_LIMIT = 60 + HOSTS_TIMEOUT


@pytest.mark.slow
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="several processes train on JAX")
def test_a_process_that_never_starts_stops_the_others_in_time(tmp_path):
    port = _free_port()
    procs = [_start(tmp_path, i, 3, port, CLUSTER_ARGS) for i in range(2)]  # process 2 never starts
    for i, (code, err) in enumerate(_ended(procs, _JOIN_LIMIT)):
        assert code == 2, err[-3000:]
        assert err.strip() == _one_error_line(
            err, f"memnmt: error: process {i} of 3: the cluster did not form within {HOSTS_TIMEOUT} s"
        )
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="several processes train on JAX")
def test_a_coordinator_port_in_use_stops_every_process_in_time(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        procs = [_start(tmp_path, i, 2, port, CLUSTER_ARGS) for i in range(2)]
        (code0, err0), (code1, err1) = _ended(procs, _JOIN_LIMIT)
    assert code0 == code1 == 2, err0[-3000:] + err1[-3000:]
    assert err0.strip() == _one_error_line(
        err0, f"process 0 of 2: cannot start the cluster's coordinator on 127.0.0.1:{port} (its port is in use"
    )
    assert err1.strip() == _one_error_line(err1, "process 1 of 2: the cluster did not form")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="several processes train on JAX")
@pytest.mark.parametrize(
    "case, second, expected",
    [
        ("set values", ["--set", "max_steps=6"], "differ in max_steps (process 0: 3, process 1: 6)"),
        ("recipes", ["--recipe", "multi30k_rnnsearch"], "differ in "),
        (
            "process counts",
            ["--processes", "3"],
            "differ in $KERAS_DISTRIBUTION_NUM_PROCESSES (process 0: 2, process 1: 3)",
        ),
    ],
)
def test_processes_that_differ_stop_before_training(tmp_path, case, second, expected):
    port = _free_port()
    recipe = second[1] if second[0] == "--recipe" else "quickstart"
    count = int(second[1]) if second[0] == "--processes" else 2
    procs = [
        _start(tmp_path, 0, 2, port, CLUSTER_ARGS),
        _start(tmp_path, 1, count, port, CLUSTER_ARGS + (second if second[0] == "--set" else []), recipe),
    ]
    for i, (code, err) in enumerate(_ended(procs, 120)):
        assert code == 2, err[-3000:]
        line = _one_error_line(err, f"memnmt: error: process {i} of ")
        assert expected in line, line
    assert not (tmp_path / "run").exists()  # no lock, no files: nothing was started


# `memnmt train` whose process stops before its training step 3 for ten minutes: alive (its
# runtime answers the heartbeats) but stuck, as on a hung file system.
STALLS_AT_STEP_3 = """
import time
from keras_memnmt.training import hosts
began = hosts.step_began
def stall(step):
    if step == 3:
        time.sleep(600)
    began(step)
hosts.step_began = stall
from keras_memnmt.cli.main import console_main
console_main()
"""
# Long enough for a step that compiles (the tiny model's first steps, on a busy 2-core machine).
STEP_TIMEOUT = 60


@pytest.mark.slow
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="several processes train on JAX")
def test_a_process_stuck_while_alive_stops_the_other_in_time_naming_it(tmp_path):
    import time

    port = _free_port()
    args = [*CLUSTER_ARGS, "--set", "max_steps=30"]
    timeouts = dict(MEMNMT_HOSTS_STEP_TIMEOUT=str(STEP_TIMEOUT))
    procs = [
        _start(tmp_path, 0, 2, port, args, **timeouts),
        _start(tmp_path, 1, 2, port, args, python=("-c", STALLS_AT_STEP_3), **timeouts),
    ]
    started = time.monotonic()
    [(code, err)] = _ended(procs[:1], 400 + STEP_TIMEOUT + HOSTS_TIMEOUT)
    _one_error_line(
        err,
        "memnmt: error: process 0 of 2: process 1 (at step 2) had not begun training step 3 "
        f"within {STEP_TIMEOUT} s: stuck ($MEMNMT_HOSTS_STEP_TIMEOUT sets the bound); the run "
        "directory resumes",
    )
    assert code == 3, err[-3000:]
    assert not (tmp_path / "run" / ".lock").exists()
    assert json.loads((tmp_path / "run" / "validations.json").read_text())[-1]["step"] == 2
    # The stuck process: the runtime ends it once its coordinator, process 0, has gone.
    try:
        procs[1].wait(timeout=3 * HOSTS_TIMEOUT + 30)
    except subprocess.TimeoutExpired:
        procs[1].kill()
        pytest.fail(f"the stuck process outlived process 0 by {3 * HOSTS_TIMEOUT + 30} s")
    assert procs[1].returncode != 0
    assert time.monotonic() - started < 400 + STEP_TIMEOUT + 4 * HOSTS_TIMEOUT + 30


@pytest.mark.slow
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="several processes train on JAX")
def test_a_process_killed_while_training_stops_the_other_and_the_run_resumes(tmp_path):
    import signal
    import time

    port = _free_port()
    args = [*CLUSTER_ARGS, "--set", "max_steps=30"]
    procs = [_start(tmp_path, i, 2, port, args) for i in range(2)]
    validations = tmp_path / "run" / "validations.json"
    deadline = time.monotonic() + 400  # the first step compiles: minutes on a busy 2-core machine
    while not (validations.exists() and json.loads(validations.read_text() or "[]")):
        assert time.monotonic() < deadline and procs[0].poll() is None, "no validation"
        time.sleep(0.2)
    procs[1].send_signal(signal.SIGKILL)
    killed = time.monotonic()
    [(code, err)] = _ended(procs[:1], 30 + HOSTS_TIMEOUT)
    procs[1].wait()
    assert time.monotonic() - killed < HOSTS_TIMEOUT + 15
    # 3: a collective step failed first; 6: the runtime aborted the process (its abort
    # handler is libc's _exit) once the coordination service missed process 1's heartbeats.
    assert code in (3, 6), err[-3000:]
    _one_error_line(err, "memnmt: error: process 0 of 2: process 1 ")
    assert not (tmp_path / "run" / ".lock").exists()
    # Resumable: one process continues the run from its last model.keras.
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), KERAS_BACKEND="jax")
    from keras_memnmt.training import hosts

    for name in hosts.ENVIRONMENT:
        env.pop(name, None)
    env.pop("XLA_FLAGS", None)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "keras_memnmt.cli",
            "train",
            "quickstart",
            "--out",
            str(tmp_path / "run"),
            *args,
            "--resume",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming from" in done.stderr
