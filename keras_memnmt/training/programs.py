"""What a plain-Keras training program needs from a named preset: its settings, its data
and the arguments of ``model.compile``, so that the program's own ``model.fit`` trains as
``memnmt train PRESET`` does (the same seed gives the same losses).

The programs of the repository's ``recipes/`` folder use it; so can a program of one's own::

    config = program_config(load_recipe(args.preset), args)  # with --set, --epochs, --steps
    keras.utils.set_random_seed(config.seed)
    data = program_data(config, args.data_dir, args.out)
    model = RNNsearch(data.source_vocab_size, data.target_vocab_size, **config.init_options())
    model.compile(**compile_arguments(config))
    model.fit(data.train, validation_data=data.val, epochs=data.epochs,
              steps_per_epoch=data.steps_per_epoch, callbacks=[...])
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os

from keras_memnmt.config import ConfigError, TrainConfig, apply_overrides
from keras_memnmt.data import (
    ParallelCorpus,
    SubwordVocab,
    batches_per_epoch,
    make_dataset,
    read_prefix,
)
from keras_memnmt.data.stream import CorpusFiles
from keras_memnmt.training.precision import apply_precision
from keras_memnmt.training.trainer import compile_arguments, load_corpora, training_vocabulary

__all__ = ["ProgramData", "compile_arguments", "program_config", "program_data", "program_parser"]


def program_parser(
    preset: str, description: str | None = None, presets: tuple[str, ...] = ()
) -> argparse.ArgumentParser:
    """The command line of a training program that starts from the preset ``preset``.

    Flags: ``--data-dir`` (a local Multi30k folder; default ``$MEMNMT_DATA``, the cache or
    a download), ``--out`` (the program's folder), ``--epochs`` (train this many epochs;
    a preset's ``max_steps`` no longer applies), ``--steps`` (at most this many updates in
    all), ``--set KEY=VALUE`` (any config field or model option, as ``memnmt train``) and
    ``--no-export``; with ``presets`` (other presets of the same model), ``--preset``.
    """
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", help="local Multi30k folder (default: $MEMNMT_DATA, the cache, a download)")
    parser.add_argument("--out", default=os.path.join("runs", f"{preset}_fit"), help="output folder")
    parser.add_argument("--epochs", type=int, help="epochs to train (default: the preset's)")
    parser.add_argument("--steps", type=int, help="stop after this many updates in all (default: the preset's)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field or a model option, as `memnmt train --set`",
    )
    parser.set_defaults(preset=preset)
    if presets:
        parser.add_argument(
            "--preset", default=preset, choices=(preset, *presets), help=f"the preset to start from (default: {preset})"
        )
    parser.add_argument("--no-export", action="store_true", help="write no SavedModel")
    return parser


def program_config(preset: TrainConfig, args: argparse.Namespace) -> TrainConfig:
    """``preset`` (a preset's ``CONFIG``: ``keras_memnmt.recipes.load_recipe(args.preset)``)
    with ``args.set``, ``args.epochs`` and ``args.steps`` applied (``--epochs N``:
    ``epochs=N`` and no ``max_steps``; ``--steps N``: ``max_steps=N``); then the config's
    dtype policy is set (before any model is built), as ``memnmt train`` does. Settings that
    a program does not follow (``pretrain_run``, ``validate_every``, ``distribution``) are
    a :class:`~keras_memnmt.config.ConfigError`."""
    overrides = list(args.set)
    if args.epochs is not None:
        overrides += [f"epochs={args.epochs}", "max_steps=None"]
    if args.steps is not None:
        overrides.append(f"max_steps={args.steps}")
    config = apply_overrides(preset, overrides)
    # What memnmt train does and these programs leave to their own code: a refusal, not a
    # setting that is silently ignored.
    if config.pretrain_run:
        raise ConfigError("pretrain_run: a program warm-starts in its own code (as recipes/memdec_pretrained.py)")
    if config.validate_every:
        raise ConfigError(
            f"validate_every={config.validate_every}: a program validates at each epoch's end "
            "(where Keras's EarlyStopping reads val_bleu); memnmt train validates every N steps"
        )
    if config.distribution != "none":
        raise ConfigError(
            f"distribution={config.distribution!r}: a program trains on one device; "
            "memnmt train places the model (docs/scaling.md)"
        )
    apply_precision(config)
    return config


@dataclasses.dataclass
class ProgramData:
    """A program's data, made by :func:`program_data`.

    Attributes:
        vocab: the subword vocabulary trained on the training pairs (saved in ``OUT/vocab``).
        train: the endless ``((source, target_in), target_out)`` training batches of
            ``make_dataset`` (each epoch in an order drawn from ``(seed, epoch)``): fit
            it with ``steps_per_epoch``.
        val: one pass over the validation pairs' batches (Keras's ``val_loss``).
        val_pairs / test_pairs: the validation and test text (BLEU).
        steps_per_epoch: training batches in an epoch.
        last_step: the updates in all (``max_steps``, else ``epochs`` epochs).
        corpus: which corpus was read, in words.
    """

    vocab: SubwordVocab
    train: object
    val: object
    val_pairs: ParallelCorpus
    test_pairs: ParallelCorpus
    steps_per_epoch: int
    last_step: int
    corpus: str

    @property
    def epochs(self) -> int:
        """The ``epochs`` of ``model.fit`` that hold ``last_step`` updates (the validation
        callback's ``max_steps`` ends the last one there)."""
        return math.ceil(self.last_step / self.steps_per_epoch)

    @property
    def source_vocab_size(self) -> int:
        return self.vocab.source.vocab_size

    @property
    def target_vocab_size(self) -> int:
        return self.vocab.target.vocab_size


def program_data(config: TrainConfig, data_dir: str | None, out_dir: str, log=print) -> ProgramData:
    """The corpora, vocabulary and ``tf.data`` pipelines of ``config``, as ``memnmt train``
    makes them: :func:`~keras_memnmt.training.load_corpora` (``corpus="auto"`` falls back
    to the synthetic corpus with a notice; ``"multi30k"`` needs the data), a SentencePiece
    vocabulary trained on the training pairs (or ``config.vocab_dir``'s), and
    :func:`~keras_memnmt.data.make_dataset` with the config's seed and batch shape.
    A ``train_prefix`` corpus is read into memory here (``memnmt train`` streams it)."""
    import tensorflow as tf

    train_pairs, val_pairs, test_pairs, corpus = load_corpora(config, data_dir, log)
    if isinstance(train_pairs, CorpusFiles):
        train_pairs = read_prefix(config.train_prefix, config.src, config.tgt).take(config.train_limit)
    vocab = training_vocabulary(config, train_pairs, os.path.join(out_dir, "vocab"), log, made_by="a recipes/ program")
    shape = dict(
        batch_size=config.batch_size,
        batch_by=config.batch_by,
        max_length=config.max_length,
        bucket_width=config.bucket_width,
    )
    train, stats = make_dataset(train_pairs, vocab, seed=config.seed, start_step=0, **shape)
    val, val_stats = make_dataset(val_pairs, vocab, shuffle=False, **shape)
    # Its length, which bucketing hides: Keras then reads it to its end without a warning.
    val = val.apply(tf.data.experimental.assert_cardinality(batches_per_epoch(val_stats, **shape)))
    per_epoch = batches_per_epoch(stats, **shape)
    log(
        f"corpus: {corpus}; {stats.kept} training pairs kept, {per_epoch} batches per epoch; vocabulary: "
        f"{vocab.source.vocab_size} source / {vocab.target.vocab_size} target pieces"
    )
    return ProgramData(
        vocab, train, val, val_pairs, test_pairs, per_epoch, config.max_steps or config.epochs * per_epoch, corpus
    )
