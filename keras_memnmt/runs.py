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
    run/record.json       how the run was made and every evaluation of it (keras_memnmt.records)
    run/hyps/             the evaluations' translations, {split}.beam{K}.{length penalty}.txt

Loading a run needs the models and the data packages, never the training code.
:func:`load_ensemble` loads several runs (or checkpoints) as one
:class:`~keras_memnmt.models.Ensemble`; :func:`average_checkpoints` averages the
weights of a run's kept checkpoints into one model file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence

import keras

from keras_memnmt.config import ConfigError, TrainConfig, build_model
from keras_memnmt.data import SubwordVocab
from keras_memnmt.models import option_differences

RUN_FILES = ("config.json", "vocab/vocab.json")

# What `train` writes into a run directory; `overwrite=True` removes exactly these.
WRITTEN_BY_TRAIN = ("model.keras", "best.keras", "checkpoints", "validations.json", "log.csv",
                    "results.json", "config.json", "tensorboard", "vocab", "record.json", "hyps")


def read_config(run_dir: str) -> TrainConfig:
    """The ``TrainConfig`` a run directory was trained with (its ``config.json``)."""
    path = os.path.join(run_dir, "config.json")
    with open(path) as f:
        raw = json.load(f)
    try:
        return TrainConfig.from_dict(raw, source=path)
    except TypeError as e:
        raise ConfigError(f"{path}: {e}") from None


def write_config(run_dir: str, config: TrainConfig) -> None:
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump(config.to_dict(), f, indent=2)


def prepare_run_dir(out_dir: str, resume: bool, overwrite: bool, log=print,
                    written: tuple[str, ...] = WRITTEN_BY_TRAIN) -> None:
    """Refuses to train over an earlier run unless told to continue it or to start over.

    With ``overwrite``, removes the earlier run's files (``written``) and nothing else.
    """
    if resume and overwrite:
        raise ConfigError("resume and overwrite exclude each other")
    trained = [n for n in ("model.keras", "best.keras", "validations.json")
               if os.path.exists(os.path.join(out_dir, n))]
    if not trained or resume:
        return
    if not overwrite:
        raise FileExistsError(f"{out_dir} already holds a trained run ({', '.join(trained)}); pass "
                              "--resume to continue it, --overwrite to start over, or another --out")
    for name in written:
        path = os.path.join(out_dir, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    log(f"overwrite: removed the earlier run in {out_dir}")


def check_resume(out_dir: str, config: TrainConfig) -> None:
    """A clear error, before anything is written, when ``config`` changes the resumed run's
    model: both configs build their model (no weights) and the models' ``get_config()``
    are compared, less the options that shape no weight."""
    saved = read_config(out_dir)
    before, now = build_model(saved, 8, 8), build_model(config, 8, 8)
    changed = option_differences(before, now)
    if saved.model != config.model:
        changed.insert(0, f"model={saved.model!r} (now {config.model!r})")
    if changed:
        raise ConfigError(f"cannot resume {out_dir}: it was trained with {', '.join(changed)}; "
                          "pass its values with --set")


def checkpoint_path(run_dir: str, checkpoint: str) -> str:
    """The file ``checkpoint`` names: a name in ``run_dir/checkpoints`` (``step3199``, with or
    without ``.keras``), a file of the run (``model.keras``), or a path to a ``.keras`` file."""
    name = checkpoint if checkpoint.endswith(".keras") else checkpoint + ".keras"
    candidates = [checkpoint, os.path.join(run_dir, "checkpoints", name), os.path.join(run_dir, name)]
    for path in candidates:
        if os.path.isfile(path):
            return path
    kept = sorted(os.listdir(os.path.join(run_dir, "checkpoints"))) if os.path.isdir(
        os.path.join(run_dir, "checkpoints")) else []
    raise FileNotFoundError(f"checkpoint {checkpoint!r} not found (tried {', '.join(candidates)}); "
                            f"{run_dir}/checkpoints holds: {', '.join(kept) or 'nothing'}")


def load_model(run_dir: str, checkpoint: str | None = None) -> keras.Model:
    """The best (else the latest) model of a run directory; a clear error if there is none.

    ``checkpoint`` picks another model file instead: a name in ``run_dir/checkpoints``
    (``step3199``, with or without ``.keras``), a file of the run (``model.keras``), or a
    path to a ``.keras`` file.
    """
    if checkpoint is not None:
        return keras.saving.load_model(checkpoint_path(run_dir, checkpoint), compile=False)
    for name in ("best.keras", "model.keras"):
        path = os.path.join(run_dir, name)
        if os.path.isfile(path):
            return keras.saving.load_model(path, compile=False)
    raise FileNotFoundError(f"no best.keras or model.keras in {run_dir}: is it a finished "
                            "`memnmt train` run directory?")


def load_run(run_dir: str, checkpoint: str | None = None):
    """``(model, vocab, config)`` of a run directory, with clear errors for missing pieces.

    ``checkpoint``: see :func:`load_model` (default: ``best.keras``).
    """
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"model directory not found: {run_dir}")
    missing = [p for p in RUN_FILES if not os.path.isfile(os.path.join(run_dir, p))]
    if missing:
        raise FileNotFoundError(f"incomplete model directory {run_dir}: missing {', '.join(missing)}")
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


def check_same_vocab(run_a: str, vocab_a: SubwordVocab, run_b: str, vocab_b: SubwordVocab) -> None:
    """A ``ValueError`` naming both runs unless they have the same source and target
    vocabularies: identical SentencePiece models, or the same pieces in the same order."""
    for side in ("target", "source"):
        a, b = getattr(vocab_a, side), getattr(vocab_b, side)
        if a.proto == b.proto:
            continue
        if a.vocab_size == b.vocab_size and all(a.id_to_piece(i) == b.id_to_piece(i)
                                                for i in range(a.vocab_size)):
            continue
        raise ValueError(f"{run_a} and {run_b} have different {side} vocabularies "
                         f"({a.vocab_size} and {b.vocab_size} pieces, {side}.model in their vocab/ "
                         "folders differ): an ensemble's members must share both vocabularies")


CHECKPOINT_NAME = re.compile(r"step(\d+)\.keras")


def kept_checkpoints(run_dir: str) -> list[str]:
    """The paths of ``run_dir/checkpoints/step{N}.keras``, oldest (smallest ``N``) first."""
    folder = os.path.join(run_dir, "checkpoints")
    if not os.path.isdir(folder):
        return []
    steps = [(int(m.group(1)), name) for name in os.listdir(folder)
             if (m := CHECKPOINT_NAME.fullmatch(name))]
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
    hint = ("" if kept else " (a run keeps a checkpoint at every validation only with "
            "keep_checkpoints=True: `memnmt train ... --set keep_checkpoints=true`)")
    where = f"{folder} holds: {', '.join(held) or 'nothing'}" if os.path.isdir(folder) else \
        f"{folder} does not exist"
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
        model = keras.saving.load_model(path, compile=False)
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
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        model.save(out)
    return model


def _is_float(array) -> bool:
    return "float" in keras.backend.standardize_dtype(array.dtype)


def share_vocab(run_dir: str, out_dir: str) -> None:
    """A warm-started run uses its pre-trained run's vocabulary (copied into ``out_dir/vocab``)."""
    vocab_dir = os.path.join(out_dir, "vocab")
    if not os.path.isfile(os.path.join(vocab_dir, "vocab.json")):
        shutil.copytree(os.path.join(run_dir, "vocab"), vocab_dir, dirs_exist_ok=True)
