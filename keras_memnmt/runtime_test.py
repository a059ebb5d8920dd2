"""Process tuning applied by the `memnmt` command (keras_memnmt.runtime)."""

import os
import subprocess
import sys

import pytest

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

CHECK = "from keras_memnmt.runtime import tune_malloc; import sys; sys.stdout.write(str(tune_malloc()))"


def _run(env_value):
    import os

    env = {**os.environ, "MEMNMT_MALLOC_TUNING": env_value}
    return subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_tune_malloc_applies_on_glibc_and_can_be_turned_off():
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert _run("1") == "True"
    assert _run("0") == "False"


MMAP_CHECK = """
import ctypes, sys
from keras_memnmt.runtime import tune_malloc

class MallInfo2(ctypes.Structure):  # glibc >= 2.33
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
tune_malloc()
before = libc.mallinfo2().hblks  # blocks mmapped by the interpreter's start
block = libc.malloc(64 << 20)  # far above glibc's default 128 KB mmap threshold
sys.stdout.write(str(libc.mallinfo2().hblks - before))
libc.free(block)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_tune_malloc_serves_large_blocks_from_the_heap():
    """With the tuning a 64 MB block is not its own mmap (refaulted after every free)."""
    import os
    import platform

    if platform.libc_ver()[0] != "glibc" or tuple(map(int, platform.libc_ver()[1].split("."))) < (2, 33):
        pytest.skip("needs glibc >= 2.33 (mallinfo2)")
    for setting, mmapped in (("1", "0"), ("0", "1")):
        env = {**os.environ, "MEMNMT_MALLOC_TUNING": setting}
        out = subprocess.run(
            [sys.executable, "-c", MMAP_CHECK], env=env, capture_output=True, text=True, check=True
        ).stdout
        assert out == mmapped, (setting, out)


JAX_CHECK = """
import sys
from keras_memnmt.runtime import import_tensorflow_without_jax

applied = import_tensorflow_without_jax()
import keras  # the backend named by KERAS_BACKEND, jax included

loaded = any(name.split(".")[0] in ("jax", "jaxlib") for name in sys.modules)
again = import_tensorflow_without_jax()
x = keras.ops.add(keras.ops.ones((2,)), 1.0)
sys.stdout.write(f"{applied} {keras.backend.backend()} {loaded} {again} {float(keras.ops.sum(x))}")
"""


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_tensorflow_is_imported_without_loading_jax(backend):
    """TF Lite's `from jax import jit` at import loaded jaxlib (109 MB) into every process;
    the JAX backend itself must still load."""
    import os

    pytest.importorskip("jax")
    pytest.importorskip("tensorflow")
    env = {**os.environ, "KERAS_BACKEND": backend}
    out = subprocess.run([sys.executable, "-c", JAX_CHECK], env=env, capture_output=True, text=True, check=True).stdout
    assert out == f"True {backend} {backend == 'jax'} False 4.0"


def test_only_the_console_command_tunes_malloc(monkeypatch, capsys):
    """`main()` called from Python (pytest, a notebook) keeps the caller's allocator;
    the `memnmt` console script (`console_main`) applies the tuning before running `main`."""
    import keras_memnmt.cli as cli
    import keras_memnmt.runtime as runtime

    calls = []
    monkeypatch.setattr(runtime, "tune_malloc", lambda: calls.append("tuned") or True)
    monkeypatch.setattr(runtime, "quiet_tensorflow_startup", lambda: False)  # this process's TensorFlow is loaded
    with pytest.raises(SystemExit):  # argparse's --help exits after the parse
        cli.main(["--help"])
    assert cli.main(["translate", "--model", "no/such/run", "--input", "x"]) == 2
    assert calls == []
    monkeypatch.setattr(sys, "argv", ["memnmt", "--help"])
    with pytest.raises(SystemExit) as exit_:
        cli.console_main()
    assert exit_.value.code == 0 and calls == ["tuned"]
    capsys.readouterr()


# ----- TensorFlow's start-up lines ------------------------------------------------------------

QUIET_CHECK = """
import sys
from keras_memnmt.runtime import quiet_tensorflow_startup
assert quiet_tensorflow_startup()
print("before", file=sys.stderr, flush=True)
import tensorflow as tf
print([d.device_type for d in tf.config.list_physical_devices()])
print("after", file=sys.stderr, flush=True)
"""

STARTUP_LINES = (
    "absl::InitializeLog",
    "oneDNN custom operations",
    "cudart_stub",
    "cpu_feature_guard",
    "To enable the following instructions",
    "cuInit",
)


def test_tensorflow_starts_without_its_log_lines():
    """No start-up line of TensorFlow's reaches stderr (the `memnmt` command's setting)."""
    import os

    pytest.importorskip("tensorflow")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run(
        [sys.executable, "-c", QUIET_CHECK],
        env={**env, "KERAS_BACKEND": "tensorflow"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "CPU" in done.stdout
    assert not [line for line in done.stderr.splitlines() if any(s in line for s in STARTUP_LINES)], done.stderr
    assert "before" in done.stderr and "after" in done.stderr  # stderr itself still works


def test_a_log_level_set_by_the_user_is_kept(monkeypatch):
    from keras_memnmt.runtime import quiet_tensorflow_startup

    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    before = list(sys.meta_path)
    assert quiet_tensorflow_startup() is False
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0" and sys.meta_path == before


DROP_CHECK = """
import os, sys
from keras_memnmt.runtime import _startup_lines_dropped
with _startup_lines_dropped():
    for line in sys.stdin:
        os.write(2, line.encode())
    print("a Python line", file=sys.stderr)
"""


def test_only_the_start_up_lines_are_dropped():
    """The lines written to descriptor 2 while TensorFlow loads come back in order, without
    the start-up lines."""
    lines = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
        "I0000 00:00:1795752547.669060   12822 port.cc:153] oneDNN custom operations are on. You may see\n",
        "W0000 00:00:1795752547.669060   12822 other.cc:1] a warning of TensorFlow's\n",
        "I0000 00:00:1795752547.669450   12822 cudart_stub.cc:31] Could not find cuda drivers on your "
        "machine, GPU will not be used.\n",
        "E0000 00:00:1795752547.669450   12822 cuda_platform.cc:52] failed call to cuInit: CUDA error\n",
    ]
    done = subprocess.run(
        [sys.executable, "-c", DROP_CHECK], input="".join(lines), capture_output=True, text=True, check=True
    )
    assert done.stderr == lines[2] + lines[4] + "a Python line\n"


CACHE_CHECK = """
import json, os
from keras_memnmt.runtime import enable_compilation_cache

folder = enable_compilation_cache()
import jax, jax.numpy as jnp

events = []
jax.monitoring.register_event_listener(lambda event, **kwargs: events.append(event))
jax.jit(lambda x: jnp.tanh(x @ x.T) + 1)(jnp.arange(64.0).reshape(8, 8)).block_until_ready()
print(json.dumps({"folder": folder, "jax_dir": jax.config.jax_compilation_cache_dir,
                  "hits": events.count("/jax/compilation_cache/cache_hits"),
                  "writes": events.count("/jax/compilation_cache/cache_misses"),
                  "entries": sorted(os.listdir(folder)) if folder and os.path.isdir(folder) else []}))
"""


def _cache_run(tmp_path, backend: str = "jax", **variables) -> dict:
    """CACHE_CHECK's report from a process on ``backend`` with ``HOME`` in ``tmp_path``, the two
    cache variables unset, and ``variables`` set."""
    import json

    pytest.importorskip(backend)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MEMNMT_COMPILATION_CACHE", "JAX_COMPILATION_CACHE_DIR")
    }
    env.update(KERAS_BACKEND=backend, HOME=str(tmp_path / "home"), TF_CPP_MIN_LOG_LEVEL="2", **variables)
    script = CACHE_CHECK if backend == "jax" else CACHE_CHECK.split("import jax")[0] + "print(json.dumps(folder))"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_a_compilation_is_written_to_the_cache_and_read_by_the_next_process(tmp_path):
    cache = str(tmp_path / "cache")
    first = _cache_run(tmp_path, MEMNMT_COMPILATION_CACHE=cache)
    assert first["folder"] == first["jax_dir"] == cache
    assert first["writes"] >= 1 and first["hits"] == 0 and len(first["entries"]) == first["writes"]
    second = _cache_run(tmp_path, MEMNMT_COMPILATION_CACHE=cache)
    assert second["hits"] == first["writes"] and second["writes"] == 0
    assert second["entries"] == first["entries"]


@pytest.mark.slow
def test_the_compilation_cache_folder_by_default_by_jax_and_off(tmp_path):
    default = _cache_run(tmp_path)
    assert default["folder"] == str(tmp_path / "home" / ".cache" / "keras_memnmt" / "jax")
    assert default["writes"] >= 1 and len(default["entries"]) == default["writes"]
    jax_own = str(tmp_path / "jax_own")
    assert _cache_run(tmp_path, JAX_COMPILATION_CACHE_DIR=jax_own)["folder"] == jax_own
    off = _cache_run(tmp_path, MEMNMT_COMPILATION_CACHE="off")
    assert off["folder"] is None and off["jax_dir"] is None and off["writes"] == 0


@pytest.mark.slow
def test_the_compilation_cache_is_a_no_op_on_the_other_backends(tmp_path):
    assert _cache_run(tmp_path, "torch", MEMNMT_COMPILATION_CACHE=str(tmp_path / "cache")) is None
    assert not (tmp_path / "cache").exists()
