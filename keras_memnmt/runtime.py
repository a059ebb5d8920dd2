"""Process-wide settings, applied by the `memnmt` command, the trainer and the benchmarks: the
allocator's tuning for CPU training (``tune_malloc``), TensorFlow's start-up lines kept off
stderr (``quiet_tensorflow_startup``), TensorFlow's CPU split into the devices ``XLA_FLAGS``
asks for (``split_tensorflow_cpu``), and JAX's persistent compilation cache
(``enable_compilation_cache``)."""

from __future__ import annotations

import contextlib
import ctypes
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_MAX, _M_ARENA_MAX = -1, -2, -4, -8  # glibc <malloc.h>


def tune_malloc(
    top_pad: int = 512 << 20,
    trim_threshold: int = 2**31 - 1,
    mmap_max: int = 0,
    arena_max: int = 1,
) -> bool:
    """Stops glibc's malloc from giving freed heap memory back to the OS after every step.

    Why: a training step allocates and frees the same few hundred MB of
    temporaries (the `(B, T, V)` logits and their gradients, the per-step RNN
    tensors). With glibc's defaults the top of the heap is trimmed after the
    frees and the next step faults every page in again: on the 2-core
    development machine about 40% of the CPU time went to the kernel. Keeping
    the memory (what ``MALLOC_TRIM_THRESHOLD_`` / ``MALLOC_TOP_PAD_`` do, or
    what jemalloc / tcmalloc do by design) took RNNsearch training from 41 to
    64 sentence pairs/s there with this call (69 with the environment
    variables; see docs/benchmarks.md, "malloc tuning"). TensorFlow's CPU
    allocator and the other backends allocate through malloc, so one call
    covers all three. The peak memory is unchanged; the resident size stays
    near the peak instead of falling between steps.

    Two more settings close the remaining leaks of freed memory to the OS
    (`perf stat` over one RNNsearch `KERAS_BACKEND=tensorflow python benchmarks/throughput.py
    --steps 20 --warmup-steps 8 --translate 0` run: 3.8M page
    faults and 21 s of kernel time before, 0.37M and 9 s after; 55-65 -> 66-77
    sentence pairs/s):

    - ``mmap_max=0``: setting the trim threshold freezes glibc's mmap
      threshold at 128 KB, so every tensor above that was its own ``mmap``,
      unmapped when freed and faulted in again on the next step. With 0,
      every block comes from the heap, which is no longer trimmed.
    - ``arena_max=1``: the backends' worker threads otherwise get their own
      arenas, whose heaps glibc shrinks with ``MADV_DONTNEED`` (the same
      refaulting). One arena is enough for a 2-core machine's few threads;
      pass ``arena_max=0`` to keep glibc's default.

    A no-op (returns False) off Linux/glibc or with ``MEMNMT_MALLOC_TUNING=0``.
    Call it once, early; the `memnmt` command does. Returns whether it applied.
    """
    if os.environ.get("MEMNMT_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl and others: no glibc mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settings = [(_M_TRIM_THRESHOLD, trim_threshold), (_M_TOP_PAD, top_pad), (_M_MMAP_MAX, mmap_max)]
    if arena_max > 0:
        settings.append((_M_ARENA_MAX, arena_max))
    return all([bool(mallopt(option, value)) for option, value in settings])


# Modules that import jax only if it is there, for features no code here uses: TF Lite's
# jax converter, and the jax.monitoring patch of Keras's Orbax checkpoint callback
# (which `import tensorflow` loads, through Keras's TensorFlow trainer).
_OPTIONAL_JAX_IMPORTERS = ("tensorflow.lite.python.util", "keras.src.callbacks.orbax_checkpoint")


class _SkipOptionalJax(importlib.abc.MetaPathFinder):
    """Fails `import jax` made by one of `_OPTIONAL_JAX_IMPORTERS`; other importers are untouched."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "jax":
            frame = sys._getframe(1)
            while frame is not None:
                importer = frame.f_globals.get("__name__")
                if importer in _OPTIONAL_JAX_IMPORTERS:
                    raise ImportError(f"keras_memnmt.runtime: jax is not loaded for {importer}")
                frame = frame.f_back
        return None  # the usual finders decide


def import_tensorflow_without_jax() -> bool:
    """Imports TensorFlow without the optional jax imports made as it loads.

    Why: ``tensorflow/lite/python/util.py`` (TF Lite's jax converter) and Keras's
    ``callbacks/orbax_checkpoint.py`` (which ``import tensorflow`` loads through Keras's
    TensorFlow trainer) each try ``import jax`` at import time. Where jax is installed
    next to TensorFlow (as in this project's development and CI environment, which has
    all three backends), every TensorFlow- or PyTorch-backend process then loads
    jaxlib: after ``import tensorflow`` the resident size is 658 MB with it and 549 MB
    without (docs/benchmarks.md, "TensorFlow without jax"). No code here uses either feature, so
    the `memnmt` command and the benchmarks call this first. Only those two imports
    fail; with ``KERAS_BACKEND=jax`` nothing is blocked, and any later ``import jax``
    works.

    Returns whether TensorFlow was imported here: False when it already was, or is
    not installed.
    """
    if "tensorflow" in sys.modules:
        return False
    finder = None if os.environ.get("KERAS_BACKEND") == "jax" else _SkipOptionalJax()
    if finder:
        sys.meta_path.insert(0, finder)
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        return False
    finally:
        if finder:
            sys.meta_path.remove(finder)
    keras = sys.modules.get("keras")  # `import tensorflow` loads it
    if keras is not None and keras.backend.backend() == "tensorflow":
        with contextlib.suppress(ValueError):  # a malformed count: refused where it is used
            split_tensorflow_cpu()
    return True


HOST_DEVICE_FLAG = "--xla_force_host_platform_device_count"


def host_device_count() -> int:
    """The CPU device count that ``XLA_FLAGS`` asks for with
    ``--xla_force_host_platform_device_count=N`` (the last one given, as XLA reads its
    flags), 1 without it. A value that is not a positive integer is a ``ValueError``."""
    values = re.findall(rf"(?:^|\s){HOST_DEVICE_FLAG}=(\S*)", os.environ.get("XLA_FLAGS", ""))
    if not values:
        return 1
    if not values[-1].isdigit() or int(values[-1]) < 1:
        raise ValueError(f"XLA_FLAGS: {HOST_DEVICE_FLAG} expects a positive integer, got {values[-1]!r}")
    return int(values[-1])


def split_tensorflow_cpu() -> int:
    """Splits TensorFlow's CPU into the ``N`` logical devices that
    ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` asks for (:func:`host_device_count`),
    so that the one flag makes N CPU devices on TensorFlow as it does on JAX; returns the
    number of logical CPU devices it leaves (1 without the flag).

    Nothing is done without the flag, with ``N = 1``, where TensorFlow sees a GPU (the
    GPUs are then the devices; returns 1), or where the CPU is split into N already.
    The logical devices share the one CPU's threads; a model placed nowhere in particular
    runs on the first. TensorFlow allows the split only before it sets up its devices
    (the process's first op, variable or ``list_logical_devices``): after that, this
    raises a one-line ``ValueError`` naming ``XLA_FLAGS`` and the device count the
    process has. :func:`import_tensorflow_without_jax` calls it as it imports TensorFlow
    (on the TensorFlow backend), so in the `memnmt` command it comes first.
    """
    count = host_device_count()
    if count == 1:
        return 1
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):  # listing physical devices sets nothing up
        return 1
    cpu = tf.config.list_physical_devices("CPU")[0]
    if len(tf.config.get_logical_device_configuration(cpu) or [None]) == count:
        return count
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError:  # "Virtual devices cannot be modified after being initialized"
        have = len(tf.config.list_logical_devices("CPU"))
        raise ValueError(
            f"XLA_FLAGS {HOST_DEVICE_FLAG}={count} asks for {count} CPU devices, but this process set up "
            f"TensorFlow's devices already ({have} CPU device{'s' if have > 1 else ''}): set XLA_FLAGS "
            "before the process first runs TensorFlow"
        ) from None
    return count


# The INFO lines TensorFlow's shared libraries log while they load (`import tensorflow`),
# before anything has applied TF_CPP_MIN_LOG_LEVEL: Abseil writes every message logged
# before `absl::InitializeLog()` to stderr, whatever the level. Each library that logs
# them logs them once, so a process sees them twice.
_STARTUP_LINES = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|I\d{4} [\d:.]+ +\d+ port\.cc:\d+\] oneDNN custom operations are on\."
    r"|I\d{4} [\d:.]+ +\d+ cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine"
)


def cuda_driver_present() -> bool:
    """Whether the NVIDIA driver's library (``libcuda.so.1``, what TensorFlow loads to find a
    GPU) can be loaded in this process."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@contextlib.contextmanager
def _startup_lines_dropped():
    """Captures file descriptor 2 (C++ and Python writes alike) for the ``with`` block and
    then writes back every line but ``_STARTUP_LINES``, in order. Without a descriptor 2 to
    capture, the block runs as it is."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (AttributeError, OSError, ValueError):
        yield
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(AttributeError, OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [
                line
                for line in captured.read().splitlines(keepends=True)
                if not _STARTUP_LINES.match(line.decode("utf-8", "replace"))
            ]
            if kept:
                os.write(2, b"".join(kept))


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Runs the next `import tensorflow` (all of it: the package's ``__init__`` loads the
    shared libraries) with ``_STARTUP_LINES`` dropped from its stderr; then steps aside."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once; also keeps the find_spec below from coming back here
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            load = spec.loader.exec_module

            def exec_module(module):
                with _startup_lines_dropped():
                    load(module)

            spec.loader.exec_module = exec_module  # this module's own loader object
        return spec


def quiet_tensorflow_startup() -> bool:
    """Keeps TensorFlow's start-up lines off stderr, unless ``TF_CPP_MIN_LOG_LEVEL`` is set.

    A user who sets ``TF_CPP_MIN_LOG_LEVEL`` (to any value, ``0`` for everything) chooses
    TensorFlow's log lines: then nothing is changed and this returns False. Otherwise, on a
    machine without a GPU driver, a process that imports TensorFlow and lists its devices
    prints these lines, and this removes each of them (returns True):

    - ``WARNING: All log messages before absl::InitializeLog() is called are written to
      STDERR``, ``I... port.cc] oneDNN custom operations are on ...`` and
      ``I... cudart_stub.cc] Could not find cuda drivers on your machine, GPU will not be
      used.``, each twice: logged while `import tensorflow` loads TensorFlow's shared
      libraries, before any level applies, so no environment variable removes them
      (``TF_ENABLE_ONEDNN_OPTS=0`` removes the oneDNN line only by turning oneDNN off).
      The next `import tensorflow` runs with its stderr captured and written back without
      these lines (they are matched whole; every other line, Python's warnings included,
      comes back in order). Call this before TensorFlow is imported; if it already is,
      only the settings below apply.
    - ``I... cpu_feature_guard.cc] This TensorFlow binary is optimized to use available
      CPU instructions ...`` (two lines): ``TF_CPP_MIN_LOG_LEVEL=2`` (no INFO or WARNING
      lines from TensorFlow's C++ code).
    - ``E... cuda_platform.cc] failed call to cuInit: ... CUDA error``, when the devices
      are listed, and ``E... util.cc] oneDNN supports DT_BOOL only on platforms with
      AVX-512 ...``, when a model runs: ``TF_CPP_MIN_LOG_LEVEL=3`` (no ERROR lines either),
      set only where the NVIDIA driver's ``libcuda.so.1`` cannot be loaded, as the cuInit
      error comes only from there. Where the driver is present the level is 2, so that
      the ERROR lines that explain a GPU failure (a cuDNN version mismatch, say) are
      shown. ``CUDA_VISIBLE_DEVICES`` is never touched: no GPU is hidden.

    TensorFlow's Python warnings are not affected by any of this. The `memnmt` command
    calls it first thing.
    """
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return False
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2" if cuda_driver_present() else "3"
    if "tensorflow" not in sys.modules and not any(isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowImport())
    return True


def enable_compilation_cache(path: str | None = None) -> str | None:
    """Turns on JAX's persistent compilation cache, so that each compiled program (a training
    step of one batch shape, say) is compiled once per machine and read from disk by later
    processes; returns the cache folder, or None where nothing was turned on.

    The folder is ``path``, else ``$MEMNMT_COMPILATION_CACHE``, else the one JAX was given
    already (``JAX_COMPILATION_CACHE_DIR``), else ``~/.cache/keras_memnmt/jax``. ``off`` (as
    ``path`` or in the variable) turns nothing on. Every compilation is written there, however
    short or small (``jax_persistent_cache_min_compile_time_secs=0``,
    ``jax_persistent_cache_min_entry_size_bytes=-1``; JAX's defaults keep only those that took
    a second or more), and nothing is evicted (JAX's default ``jax_compilation_cache_max_size``).
    JAX keys each entry by the program, the devices and the JAX and XLA versions, so a changed
    model or a new JAX compiles anew.

    JAX opens the folder at its first compilation that consults the cache: call this before
    the first training step. A later call with another folder resets the cache, so JAX opens
    the new folder at its next compilation. JAX runs what it reads from the folder: it must
    not be writable by anyone the user does not trust.

    A no-op (returns None) on the TensorFlow and PyTorch backends.
    """
    import keras

    if keras.backend.backend() != "jax":
        return None
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    folder = (
        path
        if path is not None
        else (
            os.environ.get("MEMNMT_COMPILATION_CACHE")
            or jax.config.jax_compilation_cache_dir
            or os.path.join(os.path.expanduser("~"), ".cache", "keras_memnmt", "jax")
        )
    )
    if folder.strip().lower() == "off":
        return None
    folder = os.path.abspath(os.path.expanduser(folder))
    if jax.config.jax_compilation_cache_dir != folder:
        compilation_cache.reset_cache()  # JAX opens a folder once; it opens this one next
        jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return folder
