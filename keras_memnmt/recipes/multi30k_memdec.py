"""MemDec on Multi30k en→de with RNNsearch pre-training (paper §4.2), in one command:
RNNsearch is trained first into OUT/pretrain_rnnsearch (or reused: --set
pretrain_run=RUN_DIR), its weights are copied into MemDec (``MemDec.warm_start``),
then everything is fine-tuned.

    memnmt train multi30k_memdec --data-dir $MEMNMT_DATA --out runs/memdec

The stages are this recipe's ``run``, written with the public API; ``--set`` reaches
the fields of ``Options`` below as well as the config's fields and MemDec's options.
"""

from __future__ import annotations

import dataclasses
import os

from keras_memnmt.config import ConfigError, TrainConfig
from keras_memnmt.recipes.multi30k_rnnsearch import CONFIG as RNNSEARCH
from keras_memnmt.rundir.lock import lock_run_dir
from keras_memnmt.rundir.prepare import prepare_run_dir
from keras_memnmt.training import train


@dataclasses.dataclass
class Options:
    """The recipe's own settings (``--set pretrain_epochs=5``)."""

    pretrain_epochs: int = 20  # the RNNsearch stage's epochs (0 = no stage: from scratch or pretrain_run)
    pretrain_learning_rate: float | None = None  # that stage's rate (None = the config's learning_rate)

    def __post_init__(self) -> None:
        if self.pretrain_epochs < 0:
            raise ConfigError(f"pretrain_epochs={self.pretrain_epochs!r}: expected an int >= 0")
        if self.pretrain_learning_rate is not None and not self.pretrain_learning_rate >= 0.0:
            raise ConfigError(f"pretrain_learning_rate={self.pretrain_learning_rate!r}: expected a number >= 0")


# The RNNsearch stage: 20 epochs of the RNNsearch recipe (tied embeddings, smoothing 0.1,
# annotation dropout 0.2, plateau patience 2; all inherited here) at its rate, then 10 of
# MemDec: the recipes' 30-epoch budget.
OPTIONS = Options(pretrain_epochs=20, pretrain_learning_rate=RNNSEARCH.learning_rate)

CONFIG = RNNSEARCH.replace(
    model="memdec",
    memory_size=8,  # n memory cells (Table 2's best range)
    memory_dim=None,  # m = decoder_units (the paper uses 1024 for both)
    address_nonlinearity="tanh",  # Eq. 12 read with tanh (see MemDecCell)
    addressing="shared_weights",  # §3.2: one weighting from s_t writes at t and reads at t+1
    init_noise_std=0.1,  # Eq. 14 noise, std 0.1
    init_noise="fixed",  # Eq. 14 noise drawn once, used in training and decoding
    pretrain_run=None,  # or an existing RNNsearch run directory to warm-start from
    # Fine-tuning at 2.5e-4, the RNNsearch recipe's rate after 20 epochs in the measured run.
    learning_rate=2.5e-4,
    # Our addition to Eq. 5 (see MemDecCell): the warm-started MemDec computes exactly the
    # RNNsearch it comes from, instead of losing the W s_{t-1} query term. From one RNNsearch
    # run's epoch 20: val BLEU 36.39 after one epoch against 33.45 with Eq. 5 as printed, and
    # test_2016_flickr 37.75 lowercased against 37.39 (docs/results.md).
    query_state=True,
    warm_start_new="zeros",  # the read's GRU rows and W^r start at zero (see memdec_from_rnnsearch)
    epochs=10,  # MemDec fine-tuning epochs
)


def stage_config(config: TrainConfig, options: Options) -> TrainConfig:
    """The RNNsearch pre-training stage of a MemDec ``config``: the same data, sizes and
    schedule, ``options.pretrain_epochs`` epochs at ``options.pretrain_learning_rate``."""
    rate = config.learning_rate if options.pretrain_learning_rate is None else options.pretrain_learning_rate
    return config.replace(
        model="rnnsearch",
        epochs=options.pretrain_epochs,
        learning_rate=rate,
        keep_checkpoints=False,
        pretrain_run=None,
        pretrain_checkpoint=None,
    )


def pretrain_stage(
    config: TrainConfig,
    options: Options,
    out_dir: str,
    data_dir: str | None = None,
    log=print,
    resume: bool = False,
    overwrite: bool = False,
) -> str:
    """Trains the RNNsearch stage into ``out_dir/pretrain_rnnsearch`` unless it is finished
    (its ``results.json``); returns that run directory. With ``resume``, an interrupted
    stage continues from its ``model.keras``; with ``overwrite``, even a finished one is
    trained again from the start."""
    stage = os.path.join(out_dir, "pretrain_rnnsearch")
    if overwrite or not os.path.isfile(os.path.join(stage, "results.json")):
        log(f"pre-training RNNsearch for {options.pretrain_epochs} epochs in {stage}")
        train(stage_config(config, options), stage, data_dir=data_dir, log=log, resume=resume, overwrite=overwrite)
    return stage


def run(
    config: TrainConfig,
    out_dir: str,
    options: Options = OPTIONS,
    data_dir: str | None = None,
    log=print,
    resume: bool = False,
    overwrite: bool = False,
) -> dict:
    """The RNNsearch stage (unless ``config.pretrain_run`` is given, or
    ``options.pretrain_epochs`` is 0), then MemDec warm-started from it."""
    with lock_run_dir(out_dir, log):  # both stages: one writer
        resuming_memdec = resume and os.path.isfile(os.path.join(out_dir, "model.keras"))
        if config.pretrain_run is None and options.pretrain_epochs and not resuming_memdec:
            prepare_run_dir(out_dir, resume, overwrite, log)  # refuse before the stage trains
            stage = pretrain_stage(config, options, out_dir, data_dir, log, resume, overwrite)
            config = config.replace(pretrain_run=stage)
        return train(config, out_dir, data_dir=data_dir, log=log, resume=resume, overwrite=overwrite)
