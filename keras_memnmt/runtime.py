"""Process-level tuning for CPU training, applied by the `memnmt` command and the benchmarks."""

from __future__ import annotations

import ctypes
import importlib.abc
import os
import sys

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
    return True
