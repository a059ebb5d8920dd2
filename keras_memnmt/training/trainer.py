"""The fit loop: corpora, vocabulary, pipeline, a model (new, warm-started or resumed),
``model.fit`` with BLEU validation, and the test scores.

It knows no model by name: ``config.model`` names a registered class
(:func:`keras_memnmt.models.get_model`), whose options ``config`` carries and whose
``warm_start`` decides what it can start from. What a run directory holds, and how a
run is loaded, is in :mod:`keras_memnmt.rundir.layout` and :mod:`keras_memnmt.rundir.loading`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
import zipfile
from collections.abc import Callable

import keras

from keras_memnmt.config import ConfigError, TrainConfig, build_model, resolved_corpus
from keras_memnmt.data import (
    CorpusError,
    DownloadError,
    SubwordVocab,
    batches_per_epoch,
    load_multi30k,
    make_dataset,
    prefix_files,
    read_prefix,
    synthetic_splits,
)
from keras_memnmt.data.stream import CorpusFiles, make_stream_dataset, sample_pairs, stream_stats
from keras_memnmt.evaluation.splits import run_test_split, translate_split
from keras_memnmt.evaluation.translation import score
from keras_memnmt.files import remove_temporaries, set_writer, write_json, writes
from keras_memnmt.models import get_model
from keras_memnmt.rundir.checkpoints import CheckpointError, read_model_file
from keras_memnmt.rundir.layout import TRAIN_COMMAND, TRAIN_LOG, write_config
from keras_memnmt.rundir.loading import load_run
from keras_memnmt.rundir.lock import LOCK_FILE, lock_run_dir
from keras_memnmt.rundir.prepare import check_resume, prepare_run_dir, remove_run_files, share_vocab
from keras_memnmt.rundir.records import fail_record, finish_record, start_record
from keras_memnmt.runtime import enable_compilation_cache
from keras_memnmt.training import hosts
from keras_memnmt.training.callbacks import (
    BleuValidation,
    DivergenceStop,
    EpochBar,
    ProgressLog,
    RunLog,
    TrainingDiverged,
    plateau_counters,
    save_validation_files,
)
from keras_memnmt.training.distribution import Placement, pad_batches, placement
from keras_memnmt.training.logs import forget_after
from keras_memnmt.training.losses import MaskedCrossEntropy
from keras_memnmt.training.monitor import TensorBoardMonitor, TokenCounter
from keras_memnmt.training.optimizers import build_optimizer
from keras_memnmt.training.precision import apply_precision
from keras_memnmt.training.resume import GeneratorsAcrossFits, RestoreGenerators, read_state


def load_corpora(config: TrainConfig, data_dir: str | None = None, log=print):
    """``(train, val, test, name)``; ``corpus="auto"`` falls back to synthetic data with a notice.

    With ``config.train_prefix``, the training pairs are that prefix's files, streamed
    (a :class:`~keras_memnmt.data.stream.CorpusFiles`; nothing is read here); with
    ``val_prefix`` / ``test_prefix``, the validation and test pairs are read from theirs.
    With all three prefixes (whatever ``corpus`` says: a recipe's ``multi30k`` too) the
    corpus is those files, nothing else is read, and the name is theirs. The name says
    where each part comes from.
    """
    prefixes = {"train": config.train_prefix, "val": config.val_prefix, "test": config.test_prefix}
    corpus = resolved_corpus(config)
    train = val = test = None
    name = "files"
    if corpus in ("multi30k", "auto"):
        try:
            train = None if prefixes["train"] else load_multi30k(config.src, config.tgt, "train", data_dir)
            val = None if prefixes["val"] else load_multi30k(config.src, config.tgt, "val", data_dir)
            test = None if prefixes["test"] else load_multi30k(config.src, config.tgt, config.test_split, data_dir)
            name = "multi30k"
        except (DownloadError, CorpusError) as e:
            if corpus == "multi30k":
                raise
            log(f"Multi30k is not available ({str(e).splitlines()[0]}); training on the synthetic corpus instead")
            corpus = "synthetic"
    if corpus == "synthetic":
        train, val, test = synthetic_splits(config.synthetic_size, seed=config.seed)
        name = "synthetic"
    if prefixes["train"]:
        train = CorpusFiles(*prefix_files(prefixes["train"], config.src, config.tgt)).check()
        log(f"training pairs: streamed from {train.name}")
    if prefixes["val"]:
        val = read_prefix(prefixes["val"], config.src, config.tgt)
    if prefixes["test"]:
        test = read_prefix(prefixes["test"], config.src, config.tgt)
    given = [f"{part} {prefix}" for part, prefix in prefixes.items() if prefix]
    if name != "synthetic":
        name += f" {config.src}->{config.tgt}"
    if given:
        name += f" ({', '.join(given)})"
    return (train.take(config.train_limit), val.take(config.val_limit), test.take(config.test_limit), name)


def compile_arguments(config: TrainConfig) -> dict:
    """``model.compile``'s arguments for ``config``: the optimizer and learning-rate
    schedule of :func:`~keras_memnmt.training.optimizers.build_optimizer` (Adam or
    Adadelta, gradient clipping, the warm-up schedule), the masked cross-entropy with the
    config's label smoothing, and ``jit_compile``."""
    return dict(
        optimizer=build_optimizer(config),
        loss=MaskedCrossEntropy(label_smoothing=config.label_smoothing),
        jit_compile="auto" if config.jit_compile is None else config.jit_compile,
    )


def compile_model(model: keras.Model, config: TrainConfig) -> None:
    """``model.compile(**compile_arguments(config))``, as every training here compiles."""
    model.compile(**compile_arguments(config))


def warm_start(config: TrainConfig, out_dir: str, log=print) -> keras.Model:
    """``config``'s model started from the run ``config.pretrain_run`` (its ``best.keras``, or
    the kept checkpoint ``config.pretrain_checkpoint``), with a fresh optimizer.

    The model class's ``warm_start`` decides what it can start from (by default a run
    of the same model with the same weight-shaping options; MemDec also from RNNsearch)
    and copies the weights; ``config``'s options set the rest (the dropout rates). The
    run's vocabulary is shared. Unlike ``--resume``, which also carries on the
    optimizer state and the run's clock.
    """
    run = config.pretrain_run
    loaded, _, pre_config = load_run(run, config.pretrain_checkpoint)
    try:
        model = get_model(config.model).warm_start(
            loaded, config.init_options(), log=log, **config.warm_start_options()
        )
    except ValueError as e:
        raise ConfigError(
            f"pretrain_run {run} holds a {pre_config.model!r} model that this config "
            f"({config.model!r}) cannot continue: {e}; pass its values with --set"
        ) from None
    if writes():  # on several processes, process 0 (the others read it there)
        share_vocab(run, out_dir)
    log(f"{config.model} warm start from {run} ({config.pretrain_checkpoint or 'best.keras'}; fresh optimizer)")
    return model


def train(
    config: TrainConfig,
    out_dir: str,
    data_dir: str | None = None,
    log=print,
    resume: bool = False,
    overwrite: bool = False,
) -> dict:
    """Trains a model from ``config`` into the run directory ``out_dir``; returns the results.

    With ``resume=True`` and a ``model.keras`` in ``out_dir`` (written at every
    validation), training continues from it — weights and optimizer state — with
    the earlier validations' best score and clock carried on. A directory that
    already holds a trained run is an error (nothing is touched) unless
    ``resume`` or ``overwrite`` (remove that run's files first) is given. While it
    trains, the directory is locked (:func:`~keras_memnmt.rundir.lock.lock_run_dir`): a second
    training into it is refused. An error before the first training step ends removes
    what this call created in ``out_dir`` (nothing that was there before).
    """
    log = _LogFile(log)  # also RUN/train.log, from when the run directory is taken
    cache = enable_compilation_cache()  # JAX: each batch shape's step compiled once per machine
    if cache:
        log(f"JAX compilation cache: {cache}")
    place = placement(config)  # before any model is built; refuses what the backend cannot do
    # Several processes: an error in one stops all, each with one line (hosts.failing_together).
    with hosts.failing_together(place.processes > 1), contextlib.ExitStack() as stack:
        if place.processes > 1:  # the same command in every process, before the run directory is taken
            hosts.agree_on_run(
                {**config.to_dict(), "--out": os.path.abspath(out_dir), "--resume": resume, "--overwrite": overwrite}
            )
        stack.enter_context(set_writer(place.writer))  # several processes: process 0 alone writes
        held: list[list[str]] = []  # once the run directory is taken: what it held then

        def take_run_dir():
            stack.enter_context(lock_run_dir(out_dir, log))
            hosts.release_on_abort(os.path.join(out_dir, LOCK_FILE))  # several processes: see hosts
            for folder in ("", "checkpoints", "vocab", "hyps"):  # a killed writer's partial files
                remove_temporaries(os.path.join(out_dir, folder))
            prepare_run_dir(out_dir, resume, overwrite, log)
            held.append(os.listdir(out_dir))

        place.on_writer(take_run_dir)
        stack.enter_context(place.scope())
        stepped = _FirstStep()
        try:
            return _train(config, out_dir, data_dir, log, resume, place, stepped)
        except BaseException:
            # An error before the first training step ended (bad input found late, a
            # mismatch between processes, Ctrl-C) leaves no half-made run: what this
            # command created goes, so that a plain rerun works once the input is fixed.
            if held and not stepped.done:
                remove_run_files(out_dir, keep=held[0])
            raise
        finally:
            log.close()


class _LogFile:
    """``log`` that also appends each line to the run's ``train.log`` once :meth:`open`
    names it (the lines before are written then), which a training does once it goes on
    past its checks (a refused command, or a resume with nothing to do, writes nothing):
    the file starts each invocation with the command and the run directory, and a
    ``--resume`` continues it."""

    def __init__(self, log):
        self.log, self.early, self.file = log, [], None

    def __call__(self, message: str) -> None:
        self.log(message)
        if self.file is None:
            self.early.append(message)
        else:
            self._write(message)

    def open(self, path: str, out_dir: str) -> None:
        from keras_memnmt.files import own_file
        from keras_memnmt.rundir.provenance import command, now

        if not writes():  # a process of several that is not process 0
            return
        own_file(path)  # a copy made with `cp -al` gets a log of its own
        self.file = open(path, "a", encoding="utf-8")
        self._write(f"{now()} command: {' '.join(command())}")
        self._write(f"run directory: {os.path.abspath(out_dir)}")
        for message in self.early:
            self._write(message)
        self.early = []

    def _write(self, message: str) -> None:
        self.file.write(message.rstrip("\n") + "\n")
        self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class _ModelSize(keras.callbacks.Callback):
    """Logs the model's parameter count once, when it is known: at once for a loaded
    model, after the first training step (which builds a new one) otherwise."""

    parameters: int | None = None

    def __init__(self, log):
        super().__init__()
        self.log = log

    def count(self, model: keras.Model) -> None:
        if self.parameters is None:
            self.parameters = int(model.count_params())
            self.log(f"model: {type(model).__name__}, {self.parameters:,} parameters")

    def on_train_batch_end(self, batch, logs=None):
        self.count(self.model)


class _FirstStep(keras.callbacks.Callback):
    """Whether a training step has ended in this ``fit`` (the first of the callbacks)."""

    done = False

    def on_train_batch_end(self, batch, logs=None):
        self.done = True


class _ClusterSteps(keras.callbacks.Callback):
    """Tells :mod:`hosts`' step watch when each training step begins and ends (several
    processes: a step that does not end in time means a stuck process)."""

    def __init__(self, done: int):
        super().__init__()
        self.step = done

    def on_train_batch_begin(self, batch, logs=None):
        self.step += 1
        hosts.step_began(self.step)

    def on_train_batch_end(self, batch, logs=None):
        hosts.step_ended()


_SHARED_DIR = (
    ": on several processes the run directory is one folder that every process reads at "
    "the same path (a shared file system; docs/scaling.md)"
)


def _cannot_resume(out_dir: str, error: Exception) -> CheckpointError:
    return CheckpointError(
        f"cannot resume {out_dir}: {error}; start it again with --overwrite, or start a "
        f"new run from one of its checkpoints with --set pretrain_run={out_dir} --set "
        "pretrain_checkpoint=NAME"
    )


def _resume_state(latest: str, out_dir: str) -> dict | None:
    """The step and generator states inside ``latest`` (:mod:`training.resume`)."""
    try:
        return read_state(latest)
    except (zipfile.BadZipFile, ValueError, KeyError) as e:
        raise _cannot_resume(out_dir, CheckpointError(f"{latest} is truncated or corrupt ({e})")) from None


def _read_validations(out_dir: str) -> list[dict]:
    """``validations.json`` of a run, or ``[]`` where a kill came before its first one was written."""
    path = os.path.join(out_dir, "validations.json")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _finished(config: TrainConfig, history: list[dict], done: int, last_step: int) -> str | None:
    """Why a run at step ``done`` with the validations ``history`` has no training left
    (it reached its last step, or its early stop), in words; ``None`` while it has."""
    if done >= last_step:
        return f"step {done} of {last_step}"
    bad = plateau_counters(history)[1]
    if config.patience and bad >= config.patience:
        return f"early stop at step {done}: no BLEU gain in {bad} validations"
    return None


def _results_stored(out_dir: str) -> bool:
    """Whether the run's test scores are stored (``results.json``, and a record whose last
    training finished)."""
    from keras_memnmt.rundir.records import read_record

    record = read_record(out_dir) or {}
    last = (record.get("resumes") or [record])[-1]
    return os.path.isfile(os.path.join(out_dir, "results.json")) and bool(last.get("finished"))


def fit_phases(done: int, last_step: int, per_epoch: int) -> list[tuple[int, int, int, int]]:
    """The ``model.fit`` calls that train from step ``done`` to ``last_step``, as ``(first
    step, Keras's initial epoch, steps per epoch, epochs)``: the rest of an epoch a resumed
    run is inside, the whole epochs, the steps of an epoch that ``last_step`` cuts short."""
    epoch, into = divmod(done, per_epoch)
    phases = []
    if into:
        phases.append((done, epoch, min(per_epoch - into, last_step - done), epoch + 1))
        epoch += 1
    whole = last_step // per_epoch
    if epoch < whole:
        phases.append((epoch * per_epoch, epoch, per_epoch, whole))
        epoch = whole
    if epoch * per_epoch < last_step:
        phases.append((epoch * per_epoch, epoch, last_step - epoch * per_epoch, epoch + 1))
    return phases


def _fit(model: keras.Model, dataset, callbacks: list, done: int, last_step: int, per_epoch: int, bar: bool) -> None:
    """``model.fit`` from step ``done`` to ``last_step`` (the validation callback stops it
    there, or earlier), Keras's epochs being the data's epochs of ``per_epoch`` batches.

    ``dataset(start)``: the endless batches from step ``start`` on. A run resumed inside
    an epoch first trains the rest of that epoch (a ``fit`` of its remaining steps, so that
    Keras's epoch, its running loss and the epoch-end callbacks end where the data's do),
    then the whole epochs, then the steps of an epoch that ``last_step`` cuts short (a
    ``fit`` of those steps: no progress bar counts steps that will not run). ``bar``:
    Keras's progress bar (a terminal; ``callbacks`` hold an :class:`EpochBar`), else
    nothing from Keras (the run's :class:`ProgressLog` writes the lines).
    """
    for start, initial, steps, until in fit_phases(done, last_step, per_epoch):
        # shuffle=False: the pipeline shuffles; Keras ignores `shuffle` for a tf.data
        # dataset and warns when it is left at its default True.
        model.fit(
            dataset(start),
            callbacks=callbacks,
            verbose=1 if bar else 0,
            shuffle=False,
            epochs=until,
            steps_per_epoch=steps,
            initial_epoch=initial,
        )
        if model.stop_training:  # the last step, or the early stop
            return


@dataclasses.dataclass
class _Start:
    """Where a training starts in its run directory."""

    latest: str  # the run's model.keras
    resuming: bool  # --resume and a model.keras: the training continues from it
    state: dict | None  # the step and generator states inside model.keras (None: none saved)
    written: list[dict]  # the validations that validations.json holds
    history: list[dict]  # the validations so far
    done: int  # the training steps done
    seed: int  # the seed of this invocation's random generators


def _starting_point(config: TrainConfig, out_dir: str, resume: bool, place: Placement) -> _Start:
    """Where the training into ``out_dir`` starts: step 0, or (``resume``) the step that its
    ``model.keras`` was saved at, with the validations so far and the seed to go on with;
    on several processes, the same in every process."""
    latest = os.path.join(out_dir, "model.keras")
    resuming = resume and os.path.isfile(latest)
    if resume and os.path.isfile(os.path.join(out_dir, "config.json")):
        check_resume(out_dir, config)  # also a run killed before its first validation: its vocabulary
    state = _resume_state(latest, out_dir) if resuming else None
    written = _read_validations(out_dir) if resuming else []
    # The validations that model.keras was saved with, where it holds them: they include
    # its own, which validations.json lacks when a kill came before that file was written.
    history = state["validations"] if state and state.get("validations") is not None else written
    done = state["step"] if state else (history[-1]["step"] if history else 0)
    if place.processes > 1:
        hosts.agree(f"the step {out_dir} resumes from", done, _SHARED_DIR)
    # The seed draws the initial weights and every epoch's data order ((seed, epoch),
    # make_dataset's start_step). A run resumed from a model file that holds its seed
    # generators' states goes on with them; from an older file it is seeded with
    # seed + steps done instead: the same seed would redraw the first epoch's dropout
    # masks, which the model has fitted already (measured on MemDec: the logged training
    # loss fell from 1.09 to 0.83 at such a resume).
    seed = config.seed if state or not resuming else config.seed + done
    return _Start(latest, resuming, state, written, history, done, seed)


def _corpora(config: TrainConfig, data_dir: str | None, log):
    """``(config, train, val, test, name)``: the corpora of :func:`load_corpora`, logged, and
    ``config`` with the corpus they come from (multi30k, synthetic or files)."""
    train_c, val_c, test_c, corpus_name = load_corpora(config, data_dir, log)
    config = dataclasses.replace(config, corpus=corpus_name.split()[0])  # multi30k, synthetic or files
    if not isinstance(train_c, CorpusFiles):  # a streamed corpus is counted with its pipeline
        log(f"corpus: {corpus_name}; {len(train_c)} training pairs ({train_c.dropped_empty} empty dropped)")
    return config, train_c, val_c, test_c, corpus_name


def _run_vocabulary(config: TrainConfig, train_c, out_dir: str, place: Placement, log) -> SubwordVocab:
    """The run's vocabulary (:func:`training_vocabulary`), made by process 0; on several
    processes the others read it, and every process checks that all read the same."""
    vocab_dir = os.path.join(out_dir, "vocab")
    vocab = place.on_writer(lambda: training_vocabulary(config, train_c, vocab_dir, log))
    if place.processes > 1:  # the others read what process 0 wrote
        try:
            vocab = vocab if vocab is not None else SubwordVocab.load(vocab_dir)
        except FileNotFoundError as e:
            raise ConfigError(f"process {place.process} cannot read {vocab_dir} ({e.strerror}){_SHARED_DIR}") from None
        hosts.agree(
            "their vocabulary",
            hosts.fingerprint(
                json.dumps(vocab.config, sort_keys=True) + vocab.source.proto.hex() + vocab.target.proto.hex()
            ),
            _SHARED_DIR,
        )
    log(f"vocabulary: {vocab.source.vocab_size} source / {vocab.target.vocab_size} target pieces")
    return vocab


def _start_run_files(config: TrainConfig, out_dir: str, log: _LogFile) -> None:
    """Writes a new run's ``config.json``, its record and (from then on) its ``train.log``."""
    write_config(out_dir, config)
    start_record(out_dir, config.to_dict())  # completed by finish_record
    # After config.json: a folder that a kill leaves with a vocabulary alone is a run's.
    log.open(os.path.join(out_dir, TRAIN_LOG), out_dir)


def _resume_run_files(config: TrainConfig, out_dir: str, log: _LogFile) -> None:
    """Continues a resumed run's ``train.log`` and writes its ``config.json`` and the record
    of this resume."""
    log.open(os.path.join(out_dir, TRAIN_LOG), out_dir)
    write_config(out_dir, config)
    start_record(out_dir, config.to_dict(), resume=True)


@dataclasses.dataclass
class _Pipeline:
    """The training batches: ``dataset(start)`` yields them from step ``start`` on, this
    process's rows of each; ``tokens`` counts their target tokens."""

    dataset: Callable[[int], object]
    per_epoch: int  # batches in an epoch
    tokens: TokenCounter


def _pipeline(config: TrainConfig, train_c, vocab: SubwordVocab, corpus_name: str, place: Placement, log) -> _Pipeline:
    """The training batches of ``train_c``, counted (and logged) first: a corpus that no batch
    can come from is refused here."""
    streamed = isinstance(train_c, CorpusFiles)
    shape = dict(
        batch_size=config.batch_size,
        batch_by=config.batch_by,
        max_length=config.max_length,
        bucket_width=config.bucket_width,
    )
    if streamed:
        stats = stream_stats(train_c, vocab, config.max_length, log)
        log(f"corpus: {corpus_name}; {stats.pairs} training pairs ({stats.dropped_empty} empty dropped), streamed")
        if stats.kept == 0:
            raise CorpusError(
                f"all {stats.pairs} pairs of {train_c.name} are longer than "
                f"max_length={config.max_length} subword tokens"
            )
    else:
        _, stats = make_dataset(train_c, vocab, seed=config.seed, start_step=0, **shape)  # refusals first
    per_epoch = batches_per_epoch(stats, **shape)
    tokens = TokenCounter()

    def dataset(start: int):
        """The training batches from step ``start`` on."""
        if streamed:
            ds = make_stream_dataset(
                train_c, vocab, stats, seed=config.seed, start_step=start, shuffle_buffer=config.shuffle_buffer, **shape
            )
        else:
            ds = make_dataset(train_c, vocab, seed=config.seed, start_step=start, stats=stats, **shape)[0]
        # The batch divides among the devices (and this process keeps its share); target
        # tokens per second (of the global batch) in TensorBoard.
        return place.local_rows(tokens.wrap(pad_batches(ds, place.pad_to)))

    log(
        f"pipeline: {stats.kept} pairs kept, {stats.dropped_too_long} longer than "
        f"{config.max_length} tokens dropped; {per_epoch} batches per epoch"
    )
    return _Pipeline(dataset, per_epoch, tokens)


def _resumed_model(out_dir: str, start: _Start, keep_checkpoints: int, log) -> tuple[keras.Model, list[dict]]:
    """``start.latest``'s model with its optimizer state, and the validations up to its step
    (a validation that a kill cut short gets its missing files)."""
    try:
        model = read_model_file(start.latest, compile=True)  # with its optimizer state
    except CheckpointError as e:
        raise _cannot_resume(out_dir, e) from None
    history = [h for h in start.history if h["step"] <= start.done]
    if history and history[-1]["step"] not in {h["step"] for h in start.written}:  # killed before validations.json
        log(f"completing the validation at step {start.done}, which was cut short")
        save_validation_files(model, out_dir, history, keep_checkpoints, only_missing=True)
    return model, history


def _stored_results(out_dir: str, finished: str, log) -> dict:
    """The results of a run that has finished (``finished``: how) and stored them."""
    log(f"nothing to do: {out_dir} has finished ({finished}); its results are in results.json")
    with open(os.path.join(out_dir, "results.json"), encoding="utf-8") as f:
        return json.load(f)


def _resuming_line(start: _Start, finished: str | None, per_epoch: int) -> str:
    """The line that says where a resumed run goes on from, and with which generators."""
    done = start.done
    return (
        f"resuming from {start.latest} at step {done} (epoch {done // per_epoch + 1}, batch "
        f"{done % per_epoch + 1}), {len(start.history)} validations; "
        + (
            f"finished ({finished}): only the test remains"
            if finished
            else "its random generators as saved"
            if start.state
            else f"random generators seeded anew (seed {start.seed})"
        )
    )


def _new_model(config: TrainConfig, vocab: SubwordVocab, warm_model, resume: bool, latest: str, log) -> keras.Model:
    """The compiled model of a run that starts from step 0: ``warm_model``, else a new one."""
    if resume:  # --resume of a run killed before its first model.keras: nothing to continue
        log(f"no {latest} yet: the run starts from step 0")
    model = warm_model or build_model(config, vocab.source.vocab_size, vocab.target.vocab_size)
    compile_model(model, config)
    return model


def _model_size(model: keras.Model, log) -> _ModelSize:
    """The callback that logs ``model``'s parameter count: at once where it is built."""
    size = _ModelSize(log)
    if model.built:  # loaded; a new model is built by fit's first batch
        size.count(model)
    return size


def _callbacks(
    config: TrainConfig,
    out_dir: str,
    vocab: SubwordVocab,
    val_c,
    start: _Start,
    last_step: int,
    pipeline: _Pipeline,
    place: Placement,
    first: list[keras.callbacks.Callback],
    resume: bool,
    bar: bool,
    log,
) -> tuple[BleuValidation, list[keras.callbacks.Callback]]:
    """The BLEU validation, and every callback of the run's ``model.fit`` in order (``first``
    first): monitoring, validation, logs, and the random generators carried across fits."""
    done, per_epoch = start.done, pipeline.per_epoch
    monitor = TensorBoardMonitor(
        os.path.join(out_dir, "tensorboard"),
        vocab,
        val_c.source,
        val_c.target,
        every_steps=config.log_every,
        initial_step=done,
        loss_sentences=config.val_loss_sentences,
        pictures=config.tensorboard_pictures,
        batch_size=config.batch_size if config.batch_by == "sentences" else 64,
        token_counter=pipeline.tokens,
    )
    validation = BleuValidation(
        vocab,
        val_c.source,
        val_c.target,
        out_dir,
        every_steps=config.validate_every,
        patience=config.patience,
        log=log,
        keep_checkpoints=config.keep_checkpoints,
        history=start.history,
        lr_decay=config.lr_decay,
        lr_patience=config.lr_patience,
        min_lr=config.min_lr,
        on_validation=monitor.validated,
        max_steps=last_step,
        initial_step=done,
    )
    # First: a diverged step raises before any callback saves it. Keras's callback writes the
    # epoch_* scalars; the monitor everything else.
    divergence = DivergenceStop(out_dir, max_loss=config.max_loss, initial_step=validation.step)
    progress = ProgressLog(
        log,
        validation,
        every_steps=config.log_every,
        last_step=last_step,
        per_epoch=per_epoch,
        initial_step=done,
        bar=bar,
    )
    callbacks = [*first, divergence, progress, validation] + ([EpochBar()] if bar else [])
    if place.processes > 1:  # first: a step's end, before the validation that may follow it
        callbacks.insert(0, _ClusterSteps(done))
    if place.writer:
        if start.resuming:  # what was logged after step `done` is trained again: logged once
            forget_after(out_dir, done, per_epoch)
        callbacks += [
            RunLog(os.path.join(out_dir, "log.csv"), append=resume),
            keras.callbacks.TensorBoard(os.path.join(out_dir, "tensorboard"), update_freq="epoch"),
        ]
    callbacks.append(monitor)  # on every process: its values are computations of the model
    if start.state:  # after the other callbacks: just before the first step
        callbacks.append(
            RestoreGenerators(start.state, log, mid_epoch=done % per_epoch != 0, on_metrics=monitor.loss_restored)
        )
    callbacks.append(GeneratorsAcrossFits())  # last: a resumed epoch and the next are two fits
    return validation, callbacks


def _train_steps(
    model: keras.Model,
    pipeline: _Pipeline,
    callbacks: list,
    start: _Start,
    last_step: int,
    bar: bool,
    out_dir: str,
    place: Placement,
) -> None:
    """Trains ``model`` from ``start.done`` to ``last_step`` (:func:`_fit`); a training that
    diverges is recorded as the run's failure."""
    try:
        hosts.training_started()  # several processes: a failure from here on exits 3
        _fit(model, pipeline.dataset, callbacks, start.done, last_step, pipeline.per_epoch, bar)
    except TrainingDiverged as e:
        if place.writer:
            fail_record(out_dir, str(e))
        raise


def _test(
    config: TrainConfig,
    out_dir: str,
    test_c,
    corpus_name: str,
    validation: BleuValidation,
    size: _ModelSize,
    t_start: float,
    log,
) -> tuple[dict, list[str]]:
    """The run's results (``best.keras``'s test scores, and the training's) and its test
    translations, logged."""
    train_seconds = validation.history[-1]["train_seconds"] if validation.history else 0.0
    test_split = run_test_split(config)
    search = {k: v for k, v in config.test_search().items() if k != "beam_size"}
    log(f"test: translating {test_split} ({len(test_c)} sentences, beam {config.beam_size}) with best.keras")
    # The run's best.keras, as `memnmt evaluate` translates it; finish_record stores the
    # translations with the rest of the record.
    hyps = translate_split(
        [(out_dir, None)], test_c, test_split, config.beam_size, **search, store=False, reuse=False, progress=None
    )["hypotheses"]
    results = {
        "corpus": corpus_name,
        "test_split": test_split,
        "beam_size": config.beam_size,
        **search,
        **score(hyps, test_c.target),
        "best_val_bleu": validation.best_bleu,
        "train_seconds": round(train_seconds, 1),  # excluding validation
        # Wall clock of this invocation only: a --resume run counts from its restart.
        "total_seconds": round(time.perf_counter() - t_start, 1),
        "backend": keras.backend.backend(),
        "parameters": size.parameters,
        "validations": validation.history,
        "samples": [
            {"source": src, "reference": ref, "translation": hyp}
            for src, ref, hyp in list(zip(test_c.source, test_c.target, hyps))[:3]
        ],
    }
    for sample in results["samples"]:
        log(f"sample: {sample['source']!r} -> {sample['translation']!r} (reference {sample['reference']!r})")
    log(
        f"test {test_split}, beam {config.beam_size}: BLEU {results['bleu']:.2f} (lowercased "
        f"{results['bleu_lowercase']:.2f}), chrF {results['chrf']:.2f}, TER {results['ter']:.2f}"
    )
    return results, hyps


def _store_results(config: TrainConfig, out_dir: str, results: dict, hyps: list[str], test_c) -> None:
    """Writes ``results.json`` and completes the run's record with the test translations."""
    write_json(os.path.join(out_dir, "results.json"), results)
    finish_record(
        out_dir,
        results,
        hyps,
        test_c.target,
        results["test_split"],
        limit=config.test_limit,
        length_penalty=config.length_penalty,
        alpha=config.alpha,
    )


def _train(
    config: TrainConfig,
    out_dir: str,
    data_dir: str | None,
    log,
    resume: bool,
    place: Placement,
    stepped: keras.callbacks.Callback,
) -> dict:
    """Trains into ``out_dir`` (which :func:`train` has taken) and tests the result: where the
    run starts, its corpora, vocabulary, batches and model, the training, the test."""
    start = _starting_point(config, out_dir, resume, place)
    keras.utils.set_random_seed(start.seed)
    log(apply_precision(config))  # the dtype policy, before any model is built or loaded
    t_start = time.perf_counter()
    config, train_c, val_c, test_c, corpus_name = _corpora(config, data_dir, log)
    warm_model = warm_start(config, out_dir, log) if config.pretrain_run and not start.resuming else None
    vocab = _run_vocabulary(config, train_c, out_dir, place, log)
    if not start.resuming and place.writer:  # after the vocabulary: a run that fails before it leaves no files behind
        _start_run_files(config, out_dir, log)
    pipeline = _pipeline(config, train_c, vocab, corpus_name, place, log)
    last_step = config.max_steps or config.epochs * pipeline.per_epoch
    finished = None
    if start.resuming:
        model, start.history = _resumed_model(out_dir, start, config.keep_checkpoints, log)
        finished = _finished(config, start.history, start.done, last_step)
        if finished and _results_stored(out_dir):  # before anything else is written
            return _stored_results(out_dir, finished, log)
        if place.writer:  # the resume goes on: from here, its log is the run's too
            _resume_run_files(config, out_dir, log)
        log(_resuming_line(start, finished, pipeline.per_epoch))
    else:
        model = _new_model(config, vocab, warm_model, resume, start.latest, log)
    size = _model_size(model, log)
    log(place.describe(config, float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))))
    bar = sys.stderr.isatty()
    first = [stepped, size]
    validation, callbacks = _callbacks(
        config, out_dir, vocab, val_c, start, last_step, pipeline, place, first, resume, bar, log
    )
    if not finished:
        _train_steps(model, pipeline, callbacks, start, last_step, bar, out_dir, place)
    if place.processes > 1:  # process 0 has written best.keras
        hosts.barrier("trained")
    results, hyps = _test(config, out_dir, test_c, corpus_name, validation, size, t_start, log)
    if place.writer:
        _store_results(config, out_dir, results, hyps, test_c)
    return results


def _given_vocabulary(config: TrainConfig, vocab_dir: str, log, made_by: str = TRAIN_COMMAND) -> SubwordVocab:
    """``config.vocab_dir``'s vocabulary, copied into ``vocab_dir`` as it is (its
    SentencePiece models byte for byte; ``vocab.json`` names the folder it came from).
    A folder that holds no vocabulary, or one that the model's settings cannot use (two
    vocabularies where ``joint_vocab`` asks for one), is a ``ConfigError`` in one line."""
    given = config.vocab_dir
    if not os.path.isfile(os.path.join(given, "vocab.json")):
        raise ConfigError(
            f"config field vocab_dir={given!r}: no vocabulary there (a folder that "
            "`memnmt vocab build --out` wrote, or a run's vocab/, holds vocab.json)"
        )
    vocab = SubwordVocab.load(given)  # a file SentencePiece cannot read: a one-line VocabularyError
    if config.joint_vocab and vocab.source.proto != vocab.target.proto:
        raise ConfigError(
            f"config field vocab_dir={given!r} holds two vocabularies (source and target), "
            "and joint_vocab=true asks for one: build it with `memnmt vocab build --joint`"
        )
    vocab.config["copied_from"] = os.path.abspath(given)
    vocab.save(vocab_dir, made_by=made_by)
    log(f"vocabulary: {given}, as it is (vocab_size and vocab_type are the folder's)")
    return vocab


def training_vocabulary(
    config: TrainConfig, train_c, vocab_dir: str, log=print, made_by: str = TRAIN_COMMAND
) -> SubwordVocab:
    """The run's vocabulary: the one in ``vocab_dir`` (a resumed or warm-started run),
    else ``config.vocab_dir``'s copied there, else trained on the training pairs (a streamed
    corpus: its first ``vocab_sample``) and saved there; ``vocab.json`` names ``made_by``."""
    if os.path.isfile(os.path.join(vocab_dir, "vocab.json")):
        log(f"vocabulary: reusing {vocab_dir}")
        return SubwordVocab.load(vocab_dir)
    if config.vocab_dir:
        return _given_vocabulary(config, vocab_dir, log, made_by)
    streamed = isinstance(train_c, CorpusFiles)
    source, target = sample_pairs(train_c, config.vocab_sample) if streamed else (train_c.source, train_c.target)
    try:
        vocab = SubwordVocab.train(
            source,
            target,
            size=config.vocab_size,
            model_type=config.vocab_type,
            joint=config.joint_vocab,
            progress=None,
        )  # a bar on a terminal only
    except ValueError as e:
        raise ConfigError(f"config field vocab_size={config.vocab_size}: {e}") from None
    if streamed:  # recorded in vocab.json
        vocab.config["sample_pairs"] = len(source)
        log(f"vocabulary: trained on the first {len(source)} pairs (vocab_sample={config.vocab_sample})")
    vocab.save(vocab_dir, made_by=made_by)
    return vocab
