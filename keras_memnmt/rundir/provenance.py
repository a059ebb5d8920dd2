"""What made a file: the command line and its folder, the date, the code, the
environment and the machine (:func:`provenance`), as run records hold them
(:mod:`keras_memnmt.rundir.records`).

    command, cwd          the command line (:func:`set_command`, else ``sys.argv``) and its folder
    date                  ISO 8601 with the UTC offset, to the second (:func:`now`)
    code                  the library's version, and its git commit and dirty flag in a checkout
    environment           the Keras backend; Python, Keras, TensorFlow, sacreBLEU, NumPy,
                          SentencePiece and the backend library's versions
    machine               CPU model, cores (all and usable), memory, the backend's GPUs

:func:`cpu_model` and :func:`cpu_extensions` (the CPU's matmul-relevant instruction set
extensions) also describe the machine a benchmark ran on.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from collections.abc import Sequence

_command: list[str] | None = None


def set_command(argv: Sequence[str]) -> None:
    """The command line that records name (``memnmt`` sets it; else ``sys.argv``)."""
    global _command
    _command = list(argv)


def command() -> list[str]:
    """The command line of this process, as :func:`set_command` gave it (else ``sys.argv``)."""
    return list(_command) if _command is not None else list(sys.argv)


def now() -> str:
    """The local date and time, ISO 8601 with the UTC offset, to the second."""
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def code_version() -> dict:
    """``{"version", "git_commit", "git_dirty"}``: the package version, and where the package
    is a git checkout's, ``git rev-parse HEAD`` and whether tracked or untracked
    (not ignored) files differ from it; without git, the version only."""
    import keras_memnmt

    info: dict = {"version": keras_memnmt.__version__}
    root = os.path.dirname(os.path.dirname(os.path.abspath(keras_memnmt.__file__)))

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=20, check=True
        ).stdout.strip()

    try:
        top = git("rev-parse", "--show-toplevel")
        if os.path.realpath(top) == os.path.realpath(root):
            info["git_commit"] = git("rev-parse", "HEAD")
            info["git_dirty"] = bool(git("status", "--porcelain"))
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict:
    """The Keras backend and the versions of Python and the libraries a score depends on."""
    import keras

    backend = keras.backend.backend()
    names = ["keras", "tensorflow", "sacrebleu", "numpy", "sentencepiece"]
    names += {"jax": ["jax", "jaxlib"], "torch": ["torch"]}.get(backend, [])
    versions = {name: _version(name) for name in names}
    return {
        "backend": backend,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {k: v for k, v in versions.items() if v},
    }


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (Linux), else ``platform.processor()``."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware")) and ":" in line:
                    name = line.split(":", 1)[1].strip()
                    if name:
                        return name
    except OSError:
        pass
    return platform.processor() or None


# The vector and matrix extensions that decide a CPU's float32/bfloat16 matmul rate.
MATMUL_EXTENSIONS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
)


def cpu_extensions() -> list[str]:
    """The CPU's matmul-relevant instruction set extensions (``MATMUL_EXTENSIONS`` that
    /proc/cpuinfo's flags list), in that order; empty where /proc/cpuinfo is absent."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("flags") and ":" in line:
                    flags = set(line.split(":", 1)[1].split())
                    return [name for name in MATMUL_EXTENSIONS if name in flags]
    except OSError:
        pass
    return []


def _memory_gb() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def gpus() -> list[str]:
    """The accelerators the Keras backend sees, by name (empty on a CPU-only machine)."""
    import keras

    backend = keras.backend.backend()
    try:
        if backend == "tensorflow":
            import tensorflow as tf

            return [
                tf.config.experimental.get_device_details(d).get("device_name", d.name)
                for d in tf.config.list_physical_devices("GPU")
            ]
        if backend == "jax":
            import jax

            return [d.device_kind for d in jax.devices() if d.platform != "cpu"]
        if backend == "torch":
            import torch

            return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # a record never fails a run for want of a GPU name
        return []
    return []


def machine() -> dict:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gb": _memory_gb(),
        "gpus": gpus(),
    }


def provenance() -> dict:
    """What made a file: ``command``, ``cwd``, ``date``, ``code``, ``environment``, ``machine``."""
    return {
        "command": command(),
        "cwd": os.getcwd(),
        "date": now(),
        "code": code_version(),
        "environment": environment(),
        "machine": machine(),
    }
