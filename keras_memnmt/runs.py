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

Loading a run needs the models and the data packages, never the training code.
"""

from __future__ import annotations

import json
import os
import shutil

import keras

from keras_memnmt.config import ConfigError, TrainConfig, build_model
from keras_memnmt.data import SubwordVocab
from keras_memnmt.models import option_differences

RUN_FILES = ("config.json", "vocab/vocab.json")

# What `train` writes into a run directory; `overwrite=True` removes exactly these.
WRITTEN_BY_TRAIN = ("model.keras", "best.keras", "checkpoints", "validations.json", "log.csv",
                    "results.json", "config.json", "tensorboard", "vocab")


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


def load_model(run_dir: str, checkpoint: str | None = None) -> keras.Model:
    """The best (else the latest) model of a run directory; a clear error if there is none.

    ``checkpoint`` picks another model file instead: a name in ``run_dir/checkpoints``
    (``step3199``, with or without ``.keras``), a file of the run (``model.keras``), or a
    path to a ``.keras`` file.
    """
    if checkpoint is not None:
        name = checkpoint if checkpoint.endswith(".keras") else checkpoint + ".keras"
        candidates = [checkpoint, os.path.join(run_dir, "checkpoints", name), os.path.join(run_dir, name)]
        for path in candidates:
            if os.path.isfile(path):
                return keras.saving.load_model(path, compile=False)
        kept = sorted(os.listdir(os.path.join(run_dir, "checkpoints"))) if os.path.isdir(
            os.path.join(run_dir, "checkpoints")) else []
        raise FileNotFoundError(f"checkpoint {checkpoint!r} not found (tried {', '.join(candidates)}); "
                                f"{run_dir}/checkpoints holds: {', '.join(kept) or 'nothing'}")
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


def share_vocab(run_dir: str, out_dir: str) -> None:
    """A warm-started run uses its pre-trained run's vocabulary (copied into ``out_dir/vocab``)."""
    vocab_dir = os.path.join(out_dir, "vocab")
    if not os.path.isfile(os.path.join(vocab_dir, "vocab.json")):
        shutil.copytree(os.path.join(run_dir, "vocab"), vocab_dir, dirs_exist_ok=True)
