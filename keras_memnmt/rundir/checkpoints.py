"""A run's model files: finding a checkpoint by name, the kept checkpoints, reading a
model file with clear errors, and averaging several checkpoints into one model."""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Sequence

import keras

from keras_memnmt.files import save_with
from keras_memnmt.models import option_differences


def checkpoint_path(run_dir: str, checkpoint: str) -> str:
    """The file ``checkpoint`` names: a name in ``run_dir/checkpoints`` (``step3199``, with or
    without ``.keras``), a file of the run (``model.keras``), or a path to a ``.keras`` file."""
    name = checkpoint if checkpoint.endswith(".keras") else checkpoint + ".keras"
    candidates = [checkpoint, os.path.join(run_dir, "checkpoints", name), os.path.join(run_dir, name)]
    for path in candidates:
        if os.path.isfile(path):
            return path
    kept = (
        sorted(os.listdir(os.path.join(run_dir, "checkpoints")))
        if os.path.isdir(os.path.join(run_dir, "checkpoints"))
        else []
    )
    raise FileNotFoundError(
        f"checkpoint {checkpoint!r} not found (tried {', '.join(candidates)}); "
        f"{run_dir}/checkpoints holds: {', '.join(kept) or 'nothing'}"
    )


class CheckpointError(ValueError):
    """A model file that exists but cannot be loaded (truncated, corrupt, not a ``.keras`` file)."""


def read_model_file(path: str, compile: bool = False) -> keras.Model:
    """``keras.saving.load_model(path, compile=compile)`` (``compile=True``: with its
    optimizer state, to train on), with a :class:`CheckpointError` that
    names the file when it is truncated or corrupt (Keras says "File not found" for a file
    that is there but is not a whole zip archive), or when its config names a class that
    Keras cannot make (not a Keras or registered class, e.g. ``subprocess.Popen``: Keras
    imports and calls nothing of it, and says "Could not locate class")."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model file not found: {path}")
    if not zipfile.is_zipfile(path):
        raise CheckpointError(
            f"{path} is truncated or corrupt ({os.path.getsize(path)} bytes, not a whole .keras archive)"
        )
    try:
        return keras.saving.load_model(path, compile=compile)
    except (ValueError, KeyError, TypeError, OSError, EOFError, zipfile.BadZipFile) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, TypeError):  # its first sentence: the rest repeats the whole config
            reason = reason.split(". ", 1)[0]
        raise CheckpointError(f"{path} cannot be loaded ({reason})") from e


def intact_alternatives(run_dir: str, broken: str) -> list[str]:
    """The run's other model files that are whole archives, newest kind first: ``model.keras``,
    ``best.keras``, then the kept checkpoints, latest first."""
    candidates = [
        os.path.join(run_dir, "model.keras"),
        os.path.join(run_dir, "best.keras"),
        *reversed(kept_checkpoints(run_dir)),
    ]
    return [
        p
        for p in candidates
        if os.path.abspath(p) != os.path.abspath(broken) and os.path.isfile(p) and zipfile.is_zipfile(p)
    ]


CHECKPOINT_NAME = re.compile(r"step(\d+)\.keras")


def kept_checkpoints(run_dir: str) -> list[str]:
    """The paths of ``run_dir/checkpoints/step{N}.keras``, oldest (smallest ``N``) first."""
    folder = os.path.join(run_dir, "checkpoints")
    if not os.path.isdir(folder):
        return []
    steps = [(int(m.group(1)), name) for name in os.listdir(folder) if (m := CHECKPOINT_NAME.fullmatch(name))]
    return [os.path.join(folder, name) for _, name in sorted(steps)]


def last_checkpoints(run_dir: str, k: int) -> list[str]:
    """The last ``k`` kept checkpoints of a run, oldest first; a clear error when it kept fewer."""
    if k < 1:
        raise ValueError(f"{run_dir}: the number of checkpoints to average must be >= 1, got {k}")
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"model directory not found: {run_dir}")
    folder = os.path.join(run_dir, "checkpoints")
    kept = kept_checkpoints(run_dir)
    if len(kept) >= k:
        return kept[-k:]
    held = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    hint = (
        ""
        if kept
        else " (a run keeps a checkpoint at every validation only with "
        "keep_checkpoints=True: `memnmt train ... --set keep_checkpoints=true`)"
    )
    where = f"{folder} holds: {', '.join(held) or 'nothing'}" if os.path.isdir(folder) else f"{folder} does not exist"
    raise FileNotFoundError(f"need the last {k} checkpoints, found {len(kept)}: {where}{hint}")


def average_checkpoints(paths: Sequence[str], out: str | None = None) -> keras.Model:
    """The element-wise mean of several checkpoints' weights, as a model (saved to ``out``).

    ``paths``: ``.keras`` files of the same model (class and weight-shaping options),
    oldest first. Every float variable is the mean of its values in the files (in
    float64, then cast back); integer state (a dropout's seed generator, a counter) is
    the newest's (the last path). The optimizer state is not kept: the result is a
    model to translate with, saved as a ``.keras`` file that ``keras.saving.load_model``
    and ``memnmt translate --checkpoint`` read.
    """
    import numpy as np

    paths = list(paths)
    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint")
    if out is not None and not out.endswith(".keras"):
        raise ValueError(f"the averaged model is a .keras file; got --out {out!r}")
    reference, sums = None, None  # the first checkpoint: (path, model, weight shapes)
    for path in paths:
        model = read_model_file(path)
        values = [keras.ops.convert_to_numpy(v.value) for v in model.variables]
        if reference is None:
            reference = (path, model, [v.shape for v in values])
            sums = [v.astype(np.float64) if _is_float(v) else None for v in values]
            continue
        first_path, first_model, shapes = reference
        changed = option_differences(first_model, model)
        if type(model) is not type(first_model) or changed:
            what = ", ".join(changed) or f"{type(first_model).__name__} against {type(model).__name__}"
            raise ValueError(f"cannot average {first_path} and {path}: different models ({what})")
        if [v.shape for v in values] != shapes:
            raise ValueError(f"cannot average {first_path} and {path}: their weights differ in shape")
        sums = [None if s is None else s + v for s, v in zip(sums, values, strict=True)]
    for variable, total in zip(model.variables, sums, strict=True):
        if total is not None:  # integer state keeps the newest's value
            variable.assign((total / len(paths)).astype(keras.backend.standardize_dtype(variable.dtype)))
    if out is not None:
        save_with(model.save, out)
    return model


def _is_float(array) -> bool:
    return "float" in keras.backend.standardize_dtype(array.dtype)
