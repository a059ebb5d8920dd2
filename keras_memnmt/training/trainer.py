"""Training loop pieces: corpora, model and optimizer from a config, BLEU validation, run dirs.

A run directory holds everything ``memnmt translate`` needs::

    run/config.json   the TrainConfig used
    run/vocab/        source.model, target.model, vocab.json
    run/model.keras   the latest weights (saved every validation)
    run/best.keras    the best weights by validation BLEU
    run/log.csv       per-epoch loss and validation scores
    run/tensorboard/  TensorBoard logs
    run/results.json  test scores after training
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
import warnings

import keras

from keras_memnmt.data import (
    CorpusError,
    DownloadError,
    SubwordVocab,
    load_multi30k,
    make_dataset,
    synthetic_corpus,
)
from keras_memnmt.inference import score, translate
from keras_memnmt.training.config import ConfigError, TrainConfig
from keras_memnmt.training.losses import MaskedCrossEntropy
from keras_memnmt.training.optimizers import FusedAdam

RUN_FILES = ("config.json", "vocab/vocab.json")


def load_corpora(config: TrainConfig, data_dir: str | None = None, log=print):
    """``(train, val, test, name)``; ``corpus="auto"`` falls back to synthetic data with a notice."""
    if config.corpus in ("multi30k", "auto"):
        try:
            train = load_multi30k(config.src, config.tgt, "train", data_dir)
            val = load_multi30k(config.src, config.tgt, "val", data_dir)
            test = load_multi30k(config.src, config.tgt, config.test_split, data_dir)
            name = f"multi30k {config.src}->{config.tgt}"
        except (DownloadError, CorpusError) as e:
            if config.corpus == "multi30k":
                raise
            log(f"Multi30k is not available ({str(e).splitlines()[0]}); "
                "training on the synthetic corpus instead")
            config = dataclasses.replace(config, corpus="synthetic")
    if config.corpus == "synthetic":
        train = synthetic_corpus(config.synthetic_size, seed=config.seed)
        val = synthetic_corpus(500, seed=config.seed + 1)
        test = synthetic_corpus(500, seed=config.seed + 2)
        name = "synthetic"
    return (train.take(config.train_limit), val.take(config.val_limit),
            test.take(config.test_limit), name)


def build_model(config: TrainConfig, vocab: SubwordVocab) -> keras.Model:
    from keras_memnmt.models import MODELS

    common = dict(
        embedding_dim=config.embedding_dim, encoder_units=config.encoder_units,
        decoder_units=config.decoder_units, readout_units=config.readout_units,
        attention_remat=config.attention_remat, tie_embeddings=config.tie_embeddings,
        **dropout_rates(config),
    )
    if config.model == "rnnsearch":
        common.update(attention_units=config.attention_units, feedback_attention=config.feedback_attention)
    if config.model == "memdec":
        common.update(attention_units=config.attention_units, **memdec_options(config))
    return MODELS[config.model](vocab.source.vocab_size, vocab.target.vocab_size, **common)


def dropout_rates(config: TrainConfig) -> dict:
    """The config's dropout rates, as every Seq2Seq model takes them (a warm start too)."""
    return dict(dropout=config.dropout, output_dropout=config.output_dropout,
                annotation_dropout=config.annotation_dropout)


# Config fields that only the MemDec cell reads, passed to it under the same names.
MEMDEC_FIELDS = ("memory_size", "memory_dim", "address_units", "address_nonlinearity", "addressing",
                 "shared_addressing", "init_noise_std", "init_noise", "query_state")


def memdec_options(config: TrainConfig) -> dict:
    return {**{name: getattr(config, name) for name in MEMDEC_FIELDS},
            "attention_remat": config.attention_remat}


def _share_vocab(run: str, out_dir: str) -> None:
    """A warm-started run uses its pre-trained run's vocabulary (copied into ``out_dir/vocab``)."""
    import shutil

    vocab_dir = os.path.join(out_dir, "vocab")
    if not os.path.isfile(os.path.join(vocab_dir, "vocab.json")):
        shutil.copytree(os.path.join(run, "vocab"), vocab_dir, dirs_exist_ok=True)


# Model options a same-model warm start may change: they shape no weight.
_WARM_START_FREE = ("name", "trainable", "dtype", "dropout", "output_dropout", "annotation_dropout",
                    "attention_remat")


def continued_model(config: TrainConfig, out_dir: str, log=print) -> keras.Model:
    """``config.model`` warm-started from ``config.pretrain_run``, a run of the same model.

    Its ``best.keras`` (or the kept checkpoint ``config.pretrain_checkpoint``) is
    copied into a model built from ``config``, which then trains with a fresh
    optimizer at ``config.learning_rate`` and ``config``'s dropout rates, on the
    run's vocabulary. This is the control for MemDec's fine-tuning (§4.2): the
    RNNsearch MemDec starts from, given the same restart and epochs. (Unlike
    ``--resume``, which also carries on the optimizer state and the run's clock.)
    """
    run = config.pretrain_run
    loaded, vocab, pre_config = load_run(run, config.pretrain_checkpoint)
    model = build_model(config, vocab)
    before = {k: v for k, v in loaded.get_config().items() if k not in _WARM_START_FREE}
    now = {k: v for k, v in model.get_config().items() if k not in _WARM_START_FREE}
    if pre_config.model != config.model or before != now:
        changed = [f"{k}={before.get(k)!r} (now {now.get(k)!r})" for k in sorted(set(before) | set(now))
                   if before.get(k) != now.get(k)]
        raise ConfigError(f"pretrain_run {run} holds a {pre_config.model!r} model that this config "
                          f"({config.model!r}) cannot continue: {', '.join(changed) or 'another model'}; "
                          "pass its values with --set")
    model.build_weights()
    model.set_weights(loaded.get_weights())
    _share_vocab(run, out_dir)
    log(f"{config.model} warm start from {run} ({config.pretrain_checkpoint or 'best.keras'}; "
        "fresh optimizer)")
    return model


def pretrain_stage_config(config: TrainConfig) -> TrainConfig:
    """The config of MemDec's RNNsearch pre-training stage (§4.2) for a MemDec ``config``."""
    rate = config.learning_rate if config.pretrain_learning_rate is None else config.pretrain_learning_rate
    return dataclasses.replace(config, model="rnnsearch", epochs=config.pretrain_epochs, pretrain_epochs=0,
                               pretrain_learning_rate=None, learning_rate=rate, keep_checkpoints=False)


def same_pretrain_stage(a: TrainConfig, b: TrainConfig) -> bool:
    """Whether two MemDec configs pre-train the same RNNsearch (they differ at most in MemDec's own
    fields: the cell's and the warm start's)."""
    b = dataclasses.replace(b, **{name: getattr(a, name) for name in (*MEMDEC_FIELDS, "warm_start_new")})
    return pretrain_stage_config(a) == pretrain_stage_config(b)


def pretrain_stage(config: TrainConfig, out_dir: str, data_dir: str | None, log=print,
                   resume: bool = False, overwrite: bool = False) -> str:
    """Trains MemDec's RNNsearch stage into ``out_dir/pretrain_rnnsearch`` unless it is
    finished (its ``results.json``); returns that run directory. With ``resume``, an
    interrupted stage continues from its ``model.keras``; with ``overwrite``, even a
    finished one is trained again from the start."""
    run = os.path.join(out_dir, "pretrain_rnnsearch")
    if overwrite or not os.path.isfile(os.path.join(run, "results.json")):
        log(f"pre-training RNNsearch for {config.pretrain_epochs} epochs in {run}")
        train(pretrain_stage_config(config), run, data_dir=data_dir, log=log, resume=resume,
              overwrite=overwrite)
    return run


def pretrained_memdec(config: TrainConfig, out_dir: str, data_dir: str | None, log=print,
                      resume: bool = False):
    """MemDec §4.2: ``(model, vocab)`` warm-started from an RNNsearch run (trained first if needed).

    The RNNsearch run is ``config.pretrain_run`` when given, else it is trained
    here for ``config.pretrain_epochs`` epochs into ``out_dir/pretrain_rnnsearch``
    at ``config.pretrain_learning_rate`` (default: the fine-tuning rate
    ``config.learning_rate``). A finished stage (its ``results.json``) is reused;
    with ``resume``, an interrupted one continues from its ``model.keras``. Its
    ``best.keras`` is copied, or the kept checkpoint ``config.pretrain_checkpoint``
    (so that MemDec and a continued RNNsearch can start from the same weights).
    MemDec then shares its vocabulary.
    """
    from keras_memnmt.models import memdec_from_rnnsearch

    run = config.pretrain_run
    if run is None:
        run = pretrain_stage(config, out_dir, data_dir, log, resume=resume)
    rnnsearch, vocab, pre_config = load_run(run, config.pretrain_checkpoint)
    if pre_config.model != "rnnsearch":
        raise ConfigError(f"pretrain_run {run} holds a {pre_config.model!r} model, not rnnsearch")
    if pre_config.tie_embeddings != config.tie_embeddings:  # the deep outputs' weights differ
        raise ConfigError(f"pretrain_run {run} has tie_embeddings={pre_config.tie_embeddings}, this "
                          f"config tie_embeddings={config.tie_embeddings}: they must agree")
    _share_vocab(run, out_dir)
    log(f"MemDec warm start from {run} ({config.pretrain_checkpoint or 'best.keras'}; "
        f"new read weights: {config.warm_start_new})")
    # The fine-tuning config's rates, not the copied RNNsearch config's, train MemDec.
    return memdec_from_rnnsearch(rnnsearch, new_weights=config.warm_start_new, **memdec_options(config),
                                 **dropout_rates(config)), vocab


def build_optimizer(config: TrainConfig) -> keras.optimizers.Optimizer:
    if config.optimizer == "adadelta":  # the paper's setting
        return keras.optimizers.Adadelta(learning_rate=config.learning_rate, rho=0.95, epsilon=1e-6,
                                         global_clipnorm=config.clipnorm)
    # One fused kernel per variable on TensorFlow (see optimizers.py); Keras's Adam elsewhere
    # (PyTorch: Keras's torch._foreach Adam, which it picks only for keras.optimizers.Adam).
    adam = FusedAdam if keras.backend.backend() == "tensorflow" else keras.optimizers.Adam
    return adam(learning_rate=config.learning_rate, global_clipnorm=config.clipnorm)


def compile_model(model: keras.Model, config: TrainConfig) -> None:
    model.compile(optimizer=build_optimizer(config),
                  loss=MaskedCrossEntropy(label_smoothing=config.label_smoothing),
                  jit_compile="auto" if config.jit_compile is None else config.jit_compile)


class BleuValidation(keras.callbacks.Callback):
    """Translates the validation set (greedy), logs BLEU, keeps the best model, stops early.

    Args:
        vocab: the run's vocabulary.
        sources / references: validation text.
        out_dir: where ``best.keras`` and ``model.keras`` go.
        every_steps: validate every N training steps (0 = at each epoch end).
        patience: validations without a BLEU gain before training stops.
        lr_decay: factor applied to the learning rate after ``lr_patience``
            validations without a BLEU gain (1.0 = constant rate), as the
            plateau schedulers of JoeyNMT and OpenNMT do; not below ``min_lr``.
    """

    def __init__(self, vocab, sources, references, out_dir, every_steps=0, patience=3, log=print,
                 keep_checkpoints=False, history=None, lr_decay=1.0, lr_patience=1, min_lr=0.0):
        super().__init__()
        self.vocab, self.sources, self.references = vocab, sources, references
        self.out_dir, self.every_steps, self.patience, self.log = out_dir, every_steps, patience, log
        self.keep_checkpoints = keep_checkpoints
        self.lr_decay, self.lr_patience, self.min_lr = lr_decay, lr_patience, min_lr
        # On resume, the earlier validations carry the best score, patience and clock on.
        self.history: list[dict] = list(history or [])
        self.best_bleu = max((h["val_bleu"] for h in self.history), default=-1.0)
        self.step = self.history[-1]["step"] if self.history else 0
        self.seconds_before = self.history[-1]["train_seconds"] if self.history else 0.0
        self.bad_rounds = self.lr_bad_rounds = 0
        best, rate = -1.0, None
        for h in self.history:
            improved = h["val_bleu"] > best
            best = max(best, h["val_bleu"])
            self.bad_rounds = 0 if improved else self.bad_rounds + 1
            decayed = rate is not None and h.get("learning_rate", rate) < rate
            self.lr_bad_rounds = 0 if improved or decayed else self.lr_bad_rounds + 1
            rate = h.get("learning_rate", rate)

    def on_train_begin(self, logs=None):
        self.t_begin = time.perf_counter()
        self.validation_seconds = 0.0

    def _plateau(self) -> None:
        """One more validation without a gain: decay the learning rate, maybe stop."""
        self.bad_rounds += 1
        self.lr_bad_rounds += 1
        rate = self.model.optimizer.learning_rate
        if self.lr_decay < 1.0 and self.lr_bad_rounds >= self.lr_patience:
            old = float(keras.ops.convert_to_numpy(rate))
            new = max(old * self.lr_decay, self.min_lr)
            if new < old:
                rate.assign(new)
                self.log(f"learning rate {old:.3g} -> {new:.3g}")
            self.lr_bad_rounds = 0
        if self.patience and self.bad_rounds >= self.patience:
            self.log(f"early stop: no BLEU gain in {self.bad_rounds} validations")
            self.model.stop_training = True

    def _validate(self, logs):
        t0 = time.perf_counter()
        train_seconds = self.seconds_before + t0 - self.t_begin - self.validation_seconds
        hyps = translate(self.model, self.vocab, self.sources, beam_size=1, progress=False)
        s = score(hyps, self.references)
        improved = s["bleu"] > self.best_bleu
        if improved:
            self.best_bleu, self.bad_rounds, self.lr_bad_rounds = s["bleu"], 0, 0
        else:
            self._plateau()  # before the saves below, so that a resumed run has the new rate
        entry = {"step": self.step, "train_seconds": round(train_seconds, 1), "val_bleu": s["bleu"],
                 "val_chrf": s["chrf"], "loss": float((logs or {}).get("loss", float("nan"))),
                 "learning_rate": float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))}
        self.history.append(entry)
        if logs is not None:
            logs["val_bleu"] = s["bleu"]
        self.model.save(os.path.join(self.out_dir, "model.keras"))
        with open(os.path.join(self.out_dir, "validations.json"), "w") as f:
            json.dump(self.history, f, indent=2)
        if self.keep_checkpoints:
            os.makedirs(os.path.join(self.out_dir, "checkpoints"), exist_ok=True)
            self.model.save(os.path.join(self.out_dir, "checkpoints", f"step{self.step}.keras"))
        if improved:
            self.model.save(os.path.join(self.out_dir, "best.keras"))
        self.log(f"step {self.step} ({train_seconds / 60:.1f} min): loss {entry['loss']:.3f}  "
                 f"val BLEU {s['bleu']:.2f} (best {self.best_bleu:.2f})  e.g. {hyps[0]!r}")
        self.validation_seconds += time.perf_counter() - t0

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.every_steps and self.step % self.every_steps == 0:
            self._validate(logs)

    def on_epoch_end(self, epoch, logs=None):
        if not self.every_steps:
            self._validate(logs)


# What `train` writes into a run directory; `overwrite=True` removes exactly these.
WRITTEN_BY_TRAIN = ("model.keras", "best.keras", "checkpoints", "validations.json", "log.csv",
                    "results.json", "config.json", "tensorboard", "vocab", "pretrain_rnnsearch")


def _clear_run(out_dir: str, resume: bool, overwrite: bool, log) -> None:
    """Refuses to train over an earlier run unless told to continue it or to start over."""
    import shutil

    trained = [n for n in ("model.keras", "best.keras", "validations.json")
               if os.path.exists(os.path.join(out_dir, n))]
    if not trained or resume:
        return
    if not overwrite:
        raise FileExistsError(f"{out_dir} already holds a trained run ({', '.join(trained)}); pass "
                              "--resume to continue it, --overwrite to start over, or another --out")
    for name in WRITTEN_BY_TRAIN:
        path = os.path.join(out_dir, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    log(f"overwrite: removed the earlier run in {out_dir}")


def read_config(run_dir: str) -> TrainConfig:
    """The ``TrainConfig`` a run directory was trained with (its ``config.json``)."""
    with open(os.path.join(run_dir, "config.json")) as f:
        raw = json.load(f)
    try:
        return TrainConfig(**raw)
    except TypeError as e:
        raise ConfigError(f"{run_dir}/config.json: {e}") from None


# Config fields that shape the model: a resumed run must keep its own.
ARCHITECTURE_FIELDS = ("model", "embedding_dim", "encoder_units", "decoder_units", "attention_units",
                       "readout_units", "feedback_attention", "memory_size", "memory_dim", "address_units",
                       "address_nonlinearity", "init_noise", "init_noise_std", "query_state")


def _check_resume_config(out_dir: str, config: TrainConfig) -> None:
    """A clear error, before anything is written, when ``config`` changes the resumed run's model."""
    from keras_memnmt.layers.memdec import resolve_addressing

    saved = read_config(out_dir)
    changed = [f"{name}={getattr(saved, name)!r} (now {getattr(config, name)!r})"
               for name in ARCHITECTURE_FIELDS if getattr(saved, name) != getattr(config, name)]
    if config.model == "memdec" == saved.model:
        before = resolve_addressing(saved.addressing, saved.shared_addressing)
        now = resolve_addressing(config.addressing, config.shared_addressing)
        if before != now:
            changed.append(f"addressing={before!r} (now {now!r})")
    if changed:
        raise ConfigError(f"cannot resume {out_dir}: it was trained with {', '.join(changed)}; "
                          "pass its values with --set")


def train(config: TrainConfig, out_dir: str, data_dir: str | None = None, log=print,
          resume: bool = False, overwrite: bool = False) -> dict:
    """Trains a model from ``config`` into the run directory ``out_dir``; returns the results.

    With ``resume=True`` and a ``model.keras`` in ``out_dir`` (written at every
    validation), training continues from it — weights and optimizer state — with
    the earlier validations' best score and clock carried on. A directory that
    already holds a trained run is an error (nothing is touched) unless
    ``resume`` or ``overwrite`` (remove that run's files first) is given.
    """
    if resume and overwrite:
        raise ConfigError("resume and overwrite exclude each other")
    _clear_run(out_dir, resume, overwrite, log)
    latest = os.path.join(out_dir, "model.keras")
    resuming = resume and os.path.isfile(latest)
    initial_epoch = 0
    if resuming:
        _check_resume_config(out_dir, config)
        with open(os.path.join(out_dir, "log.csv")) as f:
            initial_epoch = max(0, sum(1 for _ in f) - 1)  # CSVLogger: a header + one row per epoch
    # A resumed run is seeded anew. Keras does not save the dropout layers' seed
    # states (they are redrawn from the global seed when the model is loaded), and
    # a fresh process's first shuffle depends on the seed only: with the same seed
    # the resumed run would replay the first epoch, same batch order and same
    # dropout masks. Measured on MemDec: the logged training loss fell from 1.09
    # to 0.83 at a resume, because the model had already fitted those masks.
    seed = config.seed + initial_epoch
    keras.utils.set_random_seed(seed)
    os.makedirs(out_dir, exist_ok=True)
    t_start = time.perf_counter()
    train_c, val_c, test_c, corpus_name = load_corpora(config, data_dir, log)
    config = dataclasses.replace(config, corpus="multi30k" if corpus_name.startswith("multi30k") else "synthetic")
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(dataclasses.asdict(config), f, indent=2)
    log(f"corpus: {corpus_name}; {len(train_c)} training pairs ({train_c.dropped_empty} empty dropped)")

    warm_model = None
    if config.model == "memdec" and (config.pretrain_run or config.pretrain_epochs) and not resuming:
        warm_model, _ = pretrained_memdec(config, out_dir, data_dir, log, resume=resume)
    elif config.pretrain_run and not resuming:
        warm_model = continued_model(config, out_dir, log)
    vocab_dir = os.path.join(out_dir, "vocab")
    if os.path.isfile(os.path.join(vocab_dir, "vocab.json")):
        vocab = SubwordVocab.load(vocab_dir)
        log(f"vocabulary: reusing {vocab_dir}")
    else:
        vocab = SubwordVocab.train(train_c.source, train_c.target, size=config.vocab_size,
                                   model_type=config.vocab_type, joint=config.joint_vocab)
        vocab.save(vocab_dir)
    log(f"vocabulary: {vocab.source.vocab_size} source / {vocab.target.vocab_size} target pieces")

    ds, stats = make_dataset(train_c, vocab, batch_size=config.batch_size, batch_by=config.batch_by,
                             max_length=config.max_length, bucket_width=config.bucket_width,
                             seed=seed)
    log(f"pipeline: {stats.kept} pairs kept, {stats.dropped_too_long} longer than "
        f"{config.max_length} tokens dropped")

    history = []
    if resuming:
        import keras_memnmt.models  # noqa: F401  (registers the classes)

        model = keras.saving.load_model(latest)  # with its optimizer state
        with open(os.path.join(out_dir, "validations.json")) as f:
            history = json.load(f)
        log(f"resuming from {latest} after {initial_epoch} epochs, {len(history)} validations "
            f"(seed {seed})")
    else:
        model = warm_model or build_model(config, vocab)
        compile_model(model, config)
    validation = BleuValidation(vocab, val_c.source, val_c.target, out_dir,
                                every_steps=config.validate_every, patience=config.patience, log=log,
                                keep_checkpoints=config.keep_checkpoints, history=history,
                                lr_decay=config.lr_decay, lr_patience=config.lr_patience,
                                min_lr=config.min_lr)
    callbacks = [validation, keras.callbacks.CSVLogger(os.path.join(out_dir, "log.csv"), append=resume),
                 keras.callbacks.TensorBoard(os.path.join(out_dir, "tensorboard"), update_freq=50)]
    fit_kwargs = {"epochs": config.epochs}
    if config.max_steps:
        per_epoch = config.validate_every or config.max_steps
        ds = ds.repeat()
        fit_kwargs = {"epochs": math.ceil(config.max_steps / per_epoch),
                      "steps_per_epoch": min(per_epoch, config.max_steps)}
    with warnings.catch_warnings():
        # The bucketed dataset's length is unknown until it has been read once, so Keras
        # ends the first full epoch by running out of data and warns "Your input ran out
        # of data; interrupting training", though the epoch is complete and training goes
        # on. (With max_steps the dataset repeats and cannot run out.)
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        # shuffle=False: the pipeline shuffles; Keras ignores `shuffle` for a tf.data
        # dataset and warns when it is left at its default True.
        model.fit(ds, callbacks=callbacks, verbose=1 if sys.stderr.isatty() else 2,
                  initial_epoch=initial_epoch, shuffle=False, **fit_kwargs)
    train_seconds = validation.history[-1]["train_seconds"] if validation.history else 0.0

    best = load_model(out_dir)
    hyps = translate(best, vocab, test_c.source, beam_size=config.beam_size)
    results = {
        "corpus": corpus_name,
        "test_split": config.test_split if corpus_name != "synthetic" else "synthetic-test",
        "beam_size": config.beam_size,
        **score(hyps, test_c.target),
        "best_val_bleu": validation.best_bleu,
        "train_seconds": round(train_seconds, 1),  # excluding validation
        # Wall clock of this invocation only: a --resume run counts from its restart.
        "total_seconds": round(time.perf_counter() - t_start, 1),
        "backend": keras.backend.backend(),
        "validations": validation.history,
        "samples": [{"source": src, "reference": ref, "translation": hyp}
                    for src, ref, hyp in list(zip(test_c.source, test_c.target, hyps))[:3]],
    }
    for sample in results["samples"]:
        log(f"sample: {sample['source']!r} -> {sample['translation']!r} (reference {sample['reference']!r})")
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    return results


def load_model(run_dir: str, checkpoint: str | None = None) -> keras.Model:
    """The best (else the latest) model of a run directory; a clear error if there is none.

    ``checkpoint`` picks another model file instead: a name in ``run_dir/checkpoints``
    (``step3199``, with or without ``.keras``) or a path to a ``.keras`` file.
    """
    import keras_memnmt.models  # noqa: F401  (registers the classes for deserialization)

    if checkpoint is not None:
        name = checkpoint if checkpoint.endswith(".keras") else checkpoint + ".keras"
        candidates = [checkpoint, os.path.join(run_dir, "checkpoints", name)]
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
