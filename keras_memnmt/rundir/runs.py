"""Run directories: what ``memnmt train`` writes, and how a run is loaded again.

A run directory holds everything ``memnmt translate`` needs::

    run/config.json       the TrainConfig used
    run/vocab/            source.model, target.model, vocab.json
    run/model.keras       the latest weights and optimizer state (saved at every validation)
    run/best.keras        the best weights by validation BLEU
    run/checkpoints/      step{N}.keras at every validation (keep_checkpoints=True)
    run/validations.json  one entry per validation (step, BLEU, loss, learning rate, clock)
    run/log.csv           per-epoch loss (Keras's CSVLogger)
    run/tensorboard/      TensorBoard logs
    run/results.json      test scores after training
    run/record.json       how the run was made and every evaluation of it (keras_memnmt.rundir.records)
    run/hyps/             the evaluations' translations, {split}.beam{K}.{length penalty}.txt
    run/.lock             while a training writes into it: the process (host, pid, command)

Every file is written whole or not at all (:mod:`keras_memnmt.files`).

Loading a run needs the models and the data packages, never the training code.
:func:`load_ensemble` loads several runs (or checkpoints) as one
:class:`~keras_memnmt.models.Ensemble`; :func:`average_checkpoints` averages the
weights of a run's kept checkpoints into one model file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import socket
import sys
import zipfile
from collections.abc import Sequence

import keras

from keras_memnmt.config import ConfigError, TrainConfig, build_model, resolved_corpus
from keras_memnmt.data import SubwordVocab
from keras_memnmt.data.vocab import vocabulary_maker
from keras_memnmt.files import save_with, write_json
from keras_memnmt.models import option_differences
from keras_memnmt.rundir.records import (
    RECORD_FILE,
    REQUIRED_CONFIG_FIELDS,
    is_record,
    run_model_file,
)

RUN_FILES = ("config.json", "vocab/vocab.json")

# What `train` writes into a run directory; `overwrite=True` removes exactly these.
WRITTEN_BY_TRAIN = (
    "model.keras",
    "best.keras",
    "checkpoints",
    "validations.json",
    "log.csv",
    "results.json",
    "config.json",
    "tensorboard",
    "vocab",
    "record.json",
    "hyps",
    "train.log",
)
TRAIN_LOG = "train.log"  # what `memnmt train` logged, appended to by each --resume
# The ``made_by`` of the vocabulary a training trains (its ``vocab/vocab.json``).
TRAIN_COMMAND = "memnmt train"


def read_config(run_dir: str) -> TrainConfig:
    """The ``TrainConfig`` a run directory was trained with (its ``config.json``).

    A file that is not a JSON object holding the :data:`REQUIRED_CONFIG_FIELDS` (another
    command's JSON written over it, say) is a :class:`ConfigError` naming it, never a
    config of defaults. The fields a run made before they existed lacks take their defaults.
    """
    path = os.path.join(run_dir, "config.json")
    with open(path, encoding="utf-8") as f:
        try:
            raw = json.load(f)
        except ValueError as e:  # not JSON, or not UTF-8
            raise ConfigError(f"{path} is not a run's config ({e})") from None
    if not isinstance(raw, dict):
        missing = "not a JSON object"
    else:
        missing = ", ".join(k for k in REQUIRED_CONFIG_FIELDS if k not in raw)
        missing = missing and f"no field {missing}"
    if missing:
        raise ConfigError(
            f"{path} is not a run's config ({missing}): it was not written by `memnmt train`, or was replaced since"
        )
    try:
        return TrainConfig.from_dict(raw, source=path)
    except TypeError as e:
        raise ConfigError(f"{path}: {e}") from None


def write_config(run_dir: str, config: TrainConfig) -> None:
    write_json(os.path.join(run_dir, "config.json"), config.to_dict())


def prepare_run_dir(
    out_dir: str, resume: bool, overwrite: bool, log=print, written: tuple[str, ...] = WRITTEN_BY_TRAIN
) -> None:
    """Refuses to train over an earlier run unless told to continue it or to start over.

    An earlier run is any of the files a training writes (``written``), a run killed
    before its first validation (``config.json`` and ``vocab/`` only) included: its
    vocabulary is reused with ``--resume`` only, after its config is checked. With
    ``overwrite``, removes the earlier run's files (``written``) and nothing else. A
    folder whose files of those names are not a run's (:func:`not_a_run`) is refused
    either way: nothing in it is removed, continued or written over; so is ``overwrite``
    of a ``vocab/`` that another command made (``memnmt vocab build``, as its
    ``vocab.json`` says: :func:`~keras_memnmt.data.vocab.vocabulary_maker`).
    """
    if resume and overwrite:
        raise ConfigError("resume and overwrite exclude each other")
    found = [n for n in written if os.path.lexists(os.path.join(out_dir, n))]
    if not found:
        return
    why = not_a_run(out_dir, found)
    if why:  # a user's files of those names: neither continued nor removed
        raise FileExistsError(
            f"{out_dir} is not a run ({why}) but holds {', '.join(found)}, names "
            "that a run writes; --resume and --overwrite take only a run; choose another --out"
        )
    if resume:
        return
    if not overwrite:
        trained = [n for n in ("model.keras", "best.keras", "validations.json") if n in found]
        what = "a trained run" if trained else "the start of a run"
        raise FileExistsError(
            f"{out_dir} already holds {what} ({', '.join(trained or found)}); pass "
            "--resume to continue it, --overwrite to start over, or another --out"
        )
    made_by = vocabulary_maker(os.path.join(out_dir, "vocab")) if "vocab" in found else None
    if made_by not in (None, TRAIN_COMMAND):  # a user's vocabulary: never removed
        raise FileExistsError(
            f"{os.path.join(out_dir, 'vocab')} is a vocabulary that `{made_by}` made, "
            "not a training: --overwrite removes only what a training made; move it "
            "elsewhere, or choose another --out"
        )
    remove_run_files(out_dir, written)
    log(f"overwrite: removed the earlier run in {out_dir}")


def remove_run_files(out_dir: str, names: Sequence[str] = WRITTEN_BY_TRAIN, keep: Sequence[str] = ()) -> None:
    """Removes each of ``names`` (files or folders) from ``out_dir``, but those in ``keep``."""
    for name in names:
        path = os.path.join(out_dir, name)
        if name in keep:
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)


def not_a_run(out_dir: str, found: Sequence[str]) -> str | None:
    """Why ``out_dir``, which holds ``found`` (names a training writes), is not a run that
    ``memnmt train`` made (``None`` when it is one). The files' content decides, never
    their names alone: the run's ``config.json`` reads as a run config, its ``record.json``
    (where present) is a run record and its ``vocab/`` (where it holds ``vocab.json``) a
    saved vocabulary. A run killed while its vocabulary was written, before its
    ``config.json``, holds ``vocab/`` alone, and is a run when that is a vocabulary, whole
    or cut short (SentencePiece models, ``vocab.json`` last; nothing else).
    """
    from keras_memnmt.data.vocab import is_saved_vocabulary, is_vocabulary_in_progress

    vocab = os.path.join(out_dir, "vocab")
    if "config.json" in found:
        try:
            read_config(out_dir)
        except (ConfigError, OSError) as e:
            return f"its config.json is no run's config: {e}"
    elif list(found) != ["vocab"]:
        return "it has no config.json"
    elif not is_vocabulary_in_progress(vocab):
        return "it has no config.json, and vocab/ holds no vocabulary that a run saved"
    if RECORD_FILE in found and not is_record(os.path.join(out_dir, RECORD_FILE)):
        return f"its {RECORD_FILE} is no run record"
    if "vocab" in found and os.path.lexists(os.path.join(vocab, "vocab.json")) and not is_saved_vocabulary(vocab):
        return "its vocab/vocab.json is not a saved vocabulary"
    return None


LOCK_FILE = ".lock"


class RunLockedError(FileExistsError):
    """A run directory that another process is training into."""


def _process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, Linux's /proc), or None
    where that cannot be read: a pid and its start time name one process even after the
    pid is reused."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _running(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        pass
    now = _process_start(pid)
    return started is None or now is None or now == started


@contextlib.contextmanager
def lock_run_dir(out_dir: str, log=print):
    """Holds ``out_dir/.lock`` while the block runs: one writer per run directory.

    The lock file names the process (host, pid, its start time, the command). A second
    process is refused with a :class:`RunLockedError` naming the first while that one
    runs; a lock left by a process that is gone (killed) is taken over, with a notice.
    A lock from another host (a shared file system) cannot be checked, and is refused
    with the file to remove once that process is known to be gone. Nested blocks of one
    process (a recipe that locks its directory and trains into it) share the lock.
    """
    created = not os.path.isdir(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, LOCK_FILE)
    me = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": _process_start(os.getpid()),
        "command": " ".join(sys.argv),
    }
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                with open(path) as f:
                    other = json.load(f)
                host, pid = other["host"], int(other["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                other = None  # unreadable: a writer killed between open and write
            if other is not None and (host, pid, other.get("started")) == (me["host"], me["pid"], me["started"]):
                yield  # this process holds it already (a recipe's stages): the outer block releases it
                return
            if other is not None and host != me["host"]:
                raise RunLockedError(
                    f"{out_dir} is in use by process {pid} on host {host} "
                    f"({other.get('command', '?')}); if that process is gone, "
                    f"remove {path}"
                ) from None
            if other is not None and _running(pid, other.get("started")):
                raise RunLockedError(
                    f"{out_dir} is in use by process {pid} "
                    f"({other.get('command', '?')}); wait for it to end or "
                    "stop it, or train into another --out"
                ) from None
            log(f"removing a stale lock of process {other['pid'] if other else '?'}, which is not running ({path})")
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            continue
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        break
    else:
        raise RunLockedError(f"{out_dir}: another process took {path} at the same time")
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        if created:  # a run that failed before writing anything leaves no empty folder
            with contextlib.suppress(OSError):
                os.rmdir(out_dir)


# The config fields a resumed run may change: when it stops, how often it validates, logs
# and keeps checkpoints, its divergence threshold, the learning-rate decay from the next
# validation on, the devices it runs on, and the test after training. Every other field is
# what the steps so far were trained with (the data and their order, the vocabulary, the
# batches, the seed, the validation set its BLEU is compared on, the run it started from)
# or what model.keras holds (the model, the optimizer, the loss, the compile settings),
# which a resume takes as saved.
RESUME_FIELDS = (
    "epochs",
    "max_steps",
    "patience",
    "validate_every",
    "log_every",
    "val_loss_sentences",
    "tensorboard_pictures",
    "keep_checkpoints",
    "max_loss",
    "lr_decay",
    "lr_patience",
    "min_lr",
    "distribution",
    "beam_size",
    "test_split",
    "test_limit",
    "test_prefix",
)


def check_resume(out_dir: str, config: TrainConfig) -> None:
    """A clear error, before anything is written, when ``config`` changes a field of the
    resumed run that must stay as it was: every field but :data:`RESUME_FIELDS`
    (``corpus="auto"`` matches what the run resolved it to), and the model's options,
    compared on both configs' models (built without weights) by their ``get_config()``.
    The error names each changed field with the run's value and the new one."""
    saved = read_config(out_dir)
    before, now = build_model(saved, 8, 8), build_model(config, 8, 8)
    if saved.model != config.model:
        changed = [f"model={saved.model!r} (now {config.model!r})"]
    else:  # the options that shape no weight too: the resumed model is model.keras as saved
        changed = option_differences(before, now)
        a, b = before.get_config(), now.get_config()
        changed += [
            f"{k}={a.get(k)!r} (now {b.get(k)!r})" for k in getattr(now, "free_options", ()) if a.get(k) != b.get(k)
        ]
    for f in dataclasses.fields(TrainConfig):
        name = f.name
        if name in RESUME_FIELDS or name in ("model", "model_options"):
            continue
        was, new = getattr(saved, name), getattr(config, name)
        if name == "corpus":  # the saved config holds the corpus it resolved to
            new = resolved_corpus(config)
        if was != new and not (name == "corpus" and "auto" in (was, new)):
            changed.append(f"{name}={was!r} (now {new!r})")
    if changed:
        raise ConfigError(
            f"cannot resume {out_dir}: it was trained with {', '.join(changed)}; "
            "pass its values with --set (a resume may change only "
            f"{', '.join(RESUME_FIELDS)})"
        )


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


def _broken(run_dir: str, error: CheckpointError, path: str) -> CheckpointError:
    others = intact_alternatives(run_dir, path)
    hint = (
        f"; intact: {', '.join(others)} (pass one with --checkpoint)"
        if others
        else "; the run holds no intact model file"
    )
    return CheckpointError(f"{error}{hint}")


def load_model(run_dir: str, checkpoint: str | None = None, warn=None) -> keras.Model:
    """The best (else the latest) model of a run directory; a clear error if there is none.

    ``checkpoint`` picks another model file instead: a name in ``run_dir/checkpoints``
    (``step3199``, with or without ``.keras``), a file of the run (``model.keras``), or a
    path to a ``.keras`` file.

    A truncated or corrupt file is a :class:`CheckpointError` naming it and the run's
    intact model files, except in the one case where the choice is plain: with no
    ``checkpoint``, a broken ``best.keras`` falls back to ``model.keras`` (the latest
    weights), and ``warn`` (default: stderr) says so.
    """
    if checkpoint is not None:
        path = checkpoint_path(run_dir, checkpoint)
        try:
            return read_model_file(path)
        except CheckpointError as e:
            raise _broken(run_dir, e, path) from None
    best, latest = os.path.join(run_dir, "best.keras"), os.path.join(run_dir, "model.keras")
    if os.path.isfile(best):
        try:
            return read_model_file(best)
        except CheckpointError as e:
            if not os.path.isfile(latest):
                raise _broken(run_dir, e, best) from None
            try:
                model = read_model_file(latest)
            except CheckpointError:
                raise _broken(run_dir, e, best) from None
            (warn or _stderr)(f"{e}; using {latest} (the latest weights) instead")
            return model
    if os.path.isfile(latest):
        try:
            return read_model_file(latest)
        except CheckpointError as e:
            raise _broken(run_dir, e, latest) from None
    raise FileNotFoundError(
        f"no best.keras or model.keras in {run_dir}: is it a finished `memnmt train` run directory?"
    )


def _stderr(message: str) -> None:
    print(f"memnmt: warning: {message}", file=sys.stderr, flush=True)


def load_run(run_dir: str, checkpoint: str | None = None):
    """``(model, vocab, config)`` of a run directory, with clear errors for missing pieces.

    ``checkpoint``: see :func:`load_model` (default: ``best.keras``).
    """
    _check_run_files(run_dir)
    config = read_config(run_dir)
    return load_model(run_dir, checkpoint), SubwordVocab.load(os.path.join(run_dir, "vocab")), config


def load_ensemble(members: Sequence[str | tuple[str, str | None]]):
    """``(model, vocab, config)`` of one or several runs: an :class:`Ensemble` of several.

    ``members``: run directories, or ``(run_dir, checkpoint)`` pairs (``checkpoint``: see
    :func:`load_model`; ``None`` = ``best.keras``); a run may appear more than once
    (several of its checkpoints). The vocabulary and config are the first member's: its
    source vocabulary encodes, its target vocabulary decodes. Every member's run must
    have the same source and target vocabularies (see :func:`check_same_vocab`): a
    difference is a ``ValueError`` naming both runs. One member gives that model itself.
    """
    from keras_memnmt.models import Ensemble

    pairs = [(m, None) if isinstance(m, str) else tuple(m) for m in members]
    if not pairs:
        raise ValueError("load_ensemble needs at least one run directory")
    first_run, _ = pairs[0]
    models, vocab, config = [], None, None
    for run_dir, checkpoint in pairs:
        if run_dir == first_run and vocab is not None:  # the same run again: only its model
            models.append(load_model(run_dir, checkpoint))
            continue
        model, own_vocab, own_config = load_run(run_dir, checkpoint)
        if vocab is None:
            vocab, config = own_vocab, own_config
        else:
            check_same_vocab(first_run, vocab, run_dir, own_vocab)
        models.append(model)
    if len(models) == 1:
        return models[0], vocab, config
    return Ensemble(models, name="ensemble"), vocab, config


def _check_run_files(run_dir: str) -> None:
    """A ``FileNotFoundError`` unless ``run_dir`` is a folder with a run's config and vocabulary."""
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"model directory not found: {run_dir}")
    missing = [p for p in RUN_FILES if not os.path.isfile(os.path.join(run_dir, p))]
    if missing:
        raise FileNotFoundError(f"incomplete model directory {run_dir}: missing {', '.join(missing)}")


def check_ensemble(members: Sequence[str | tuple[str, str | None]]) -> None:
    """What :func:`load_ensemble` would refuse in ``members``, found without loading a
    model (only the vocabularies are read): a run without its config or vocabulary, a
    checkpoint it does not hold, a run with no model file, and vocabularies that differ
    from the first member's."""
    pairs = [(m, None) if isinstance(m, str) else tuple(m) for m in members]
    vocabs: dict[str, SubwordVocab] = {}
    for run_dir, checkpoint in pairs:
        _check_run_files(run_dir)
        if checkpoint is not None:
            checkpoint_path(run_dir, checkpoint)
        else:
            run_model_file(run_dir)
        if run_dir not in vocabs:
            vocabs[run_dir] = SubwordVocab.load(os.path.join(run_dir, "vocab"))
            first = pairs[0][0]
            check_same_vocab(first, vocabs[first], run_dir, vocabs[run_dir])


def check_same_vocab(run_a: str, vocab_a: SubwordVocab, run_b: str, vocab_b: SubwordVocab) -> None:
    """A ``ValueError`` naming both runs unless they have the same source and target
    vocabularies: identical SentencePiece models, or the same pieces in the same order."""
    for side in ("target", "source"):
        a, b = getattr(vocab_a, side), getattr(vocab_b, side)
        if a.proto == b.proto:
            continue
        if a.vocab_size == b.vocab_size and all(a.id_to_piece(i) == b.id_to_piece(i) for i in range(a.vocab_size)):
            continue
        raise ValueError(
            f"{run_a} and {run_b} have different {side} vocabularies "
            f"({a.vocab_size} and {b.vocab_size} pieces, {side}.model in their vocab/ "
            "folders differ): an ensemble's members must share both vocabularies"
        )


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


def share_vocab(run_dir: str, out_dir: str) -> None:
    """A warm-started run uses its pre-trained run's vocabulary (copied into ``out_dir/vocab``)."""
    vocab_dir = os.path.join(out_dir, "vocab")
    if not os.path.isfile(os.path.join(vocab_dir, "vocab.json")):
        shutil.copytree(os.path.join(run_dir, "vocab"), vocab_dir, dirs_exist_ok=True)
