"""The files of a run directory, and its config.

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
"""

from __future__ import annotations

import json
import os

from keras_memnmt.config import ConfigError, TrainConfig
from keras_memnmt.files import write_json
from keras_memnmt.rundir.records import REQUIRED_CONFIG_FIELDS

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
