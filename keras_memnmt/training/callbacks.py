"""Training callbacks: BLEU validation with checkpoints, the plateau schedule and the early
stop; the divergence stop; the run's ``log.csv``."""

from __future__ import annotations

import math
import os
import time

import keras

from keras_memnmt.evaluation.translation import score, translate
from keras_memnmt.files import own_file, save_with, write_json
from keras_memnmt.training.distribution import save_model
from keras_memnmt.training.resume import save_resumable


class RunLog(keras.callbacks.CSVLogger):
    """Keras's ``CSVLogger``: a row per epoch, over every ``fit`` of a run (a run's
    training is several ``fit`` calls: the rest of a resumed epoch, the whole epochs, an
    epoch that ``max_steps`` cuts short). ``append``: continue the file from the first
    ``fit`` on (``--resume``, whose rows after its step are removed first:
    :func:`keras_memnmt.training.logs.forget_log_rows`); otherwise the first ``fit``
    starts the file and the later ones continue it.

    It never writes into a file that has other names: before each ``fit`` the file is
    made one of its own (:func:`keras_memnmt.files.own_file`), so that a resumed copy of
    a run made of hard links (``cp -al``) leaves the original's log as it was."""

    def on_train_begin(self, logs=None):
        own_file(self.filename)
        super().on_train_begin(logs)
        self.append = True  # the next fit of this run continues the file


class BleuValidation(keras.callbacks.Callback):
    """Translates the validation set (greedy), logs BLEU, keeps the best model, stops early.

    Validation, the plateau schedule and the early stop are one callback rather than
    Keras's ``ReduceLROnPlateau`` and ``EarlyStopping``: those act at epoch ends only,
    while a run may validate every N steps (``validate_every``); a resumed run restores
    their counters from ``validations.json``; and a decayed rate must be in the
    optimizer before ``model.keras`` is saved, so that a run resumed from it goes on
    at that rate.

    Args:
        vocab: the run's vocabulary.
        sources / references: validation text.
        out_dir: where ``best.keras`` and ``model.keras`` go.
        every_steps: validate every N training steps (0 = at each epoch end).
        patience: validations without a BLEU gain before training stops.
        lr_decay: factor applied to the learning rate after ``lr_patience``
            validations without a BLEU gain (1.0 = constant rate), as the
            plateau schedulers of JoeyNMT and OpenNMT do; not below ``min_lr``.
        max_steps: stop after this many steps in all (a resumed run's earlier steps
            included), validating at the last one.
        initial_step: the steps done before (a resumed run; default: the last
            validation's step in ``history``).
        on_validation: called after each validation as ``on_validation(step, scores,
            hypotheses, started=t0)`` (``TensorBoardMonitor.validated``); its time counts
            as validation time.
    """

    def __init__(
        self,
        vocab,
        sources,
        references,
        out_dir,
        every_steps=0,
        patience=3,
        log=print,
        keep_checkpoints=False,
        history=None,
        lr_decay=1.0,
        lr_patience=1,
        min_lr=0.0,
        on_validation=None,
        max_steps=None,
        initial_step=None,
    ):
        super().__init__()
        self.max_steps = max_steps
        self.on_validation = on_validation
        self.vocab, self.sources, self.references = vocab, sources, references
        self.out_dir, self.every_steps, self.patience, self.log = out_dir, every_steps, patience, log
        self.keep_checkpoints = keep_checkpoints
        self.lr_decay, self.lr_patience, self.min_lr = lr_decay, lr_patience, min_lr
        # On resume, the earlier validations carry the best score, patience and clock on.
        self.history: list[dict] = list(history or [])
        self.best_bleu, self.bad_rounds, self.lr_bad_rounds = plateau_counters(self.history)
        self.step = initial_step if initial_step is not None else (self.history[-1]["step"] if self.history else 0)
        self.seconds_before = self.history[-1]["train_seconds"] if self.history else 0.0

    def on_train_begin(self, logs=None):
        if not hasattr(self, "t_begin"):  # the clock runs on over a resumed run's two fits
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
        if not finite_weights(self.model):  # never a NaN model as best.keras or model.keras
            raise TrainingDiverged(
                f"training diverged at step {self.step}: the weights are not "
                f"finite; {last_good(self.out_dir)}; lower learning_rate (or clipnorm) "
                "and start again with --overwrite"
            )
        train_seconds = self.training_seconds(t0)
        hyps = translate(self.model, self.vocab, self.sources, beam_size=1, progress=False)
        s = score(hyps, self.references)
        improved = s["bleu"] > self.best_bleu
        if improved:
            self.best_bleu, self.bad_rounds, self.lr_bad_rounds = s["bleu"], 0, 0
        else:
            self._plateau()  # before the saves below, so that a resumed run has the new rate
        entry = {
            "step": self.step,
            "train_seconds": round(train_seconds, 1),
            "val_bleu": s["bleu"],
            "val_chrf": s["chrf"],
            "loss": float((logs or {}).get("loss", float("nan"))),
            "learning_rate": float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)),
        }
        self.history.append(entry)
        if logs is not None:
            logs["val_bleu"] = s["bleu"]
        # Each file whole or not at all (keras_memnmt.files): a kill mid-save leaves the
        # earlier version. validations.json last: it lists only validations whose model is saved.
        # model.keras first, holding this history too: a run killed before the files after
        # it are written completes them when it is resumed (save_validation_files).
        save_resumable(self.model, os.path.join(self.out_dir, "model.keras"), self.step, self.history)
        save_validation_files(self.model, self.out_dir, self.history, self.keep_checkpoints)
        if self.on_validation is not None:
            self.on_validation(self.step, s, hyps, started=t0)
        took = time.perf_counter() - t0
        self.validation_seconds += took
        # The training clock is on the progress lines (ProgressLog); this line's is its own.
        self.log(
            f"validation at step {self.step}: BLEU {s['bleu']:.2f} (best {self.best_bleu:.2f}), "
            f"chrF {s['chrf']:.2f}; validated in {took:.0f} s; e.g. {hyps[0]!r}"
        )

    def training_seconds(self, now: float | None = None) -> float:
        """The run's training time until ``now`` (``time.perf_counter()``): validation
        excluded, a resumed run's earlier training included (``validations.json``'s clock)."""
        now = time.perf_counter() if now is None else now
        return self.seconds_before + now - self.t_begin - self.validation_seconds

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        last = self.max_steps is not None and self.step >= self.max_steps
        if self.every_steps and (self.step % self.every_steps == 0 or last):
            self._validate(logs)
        if last:  # the last epoch may be longer than what is left of max_steps
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        if not self.every_steps:
            self._validate(logs)


class ProgressLog(keras.callbacks.Callback):
    """The log's lines while a run trains, each with one clock, labelled: the training
    time so far (validation excluded; :meth:`BleuValidation.training_seconds`).

    A line at each epoch's end, before its validation; and, where no progress bar is drawn
    (``bar=False``: the log goes to a file), a line every ``every_steps`` steps.

    Args:
        log: where the lines go.
        validation: the run's :class:`BleuValidation` (its clock).
        every_steps: steps between two step lines (``log_every``).
        last_step: the run's last step (``max_steps``, or its epochs' steps).
        per_epoch: batches in an epoch of the data.
        initial_step: steps done before (a resumed run).
        bar: whether Keras's progress bar is drawn (a terminal); no step lines then.
    """

    def __init__(
        self,
        log,
        validation: BleuValidation,
        every_steps: int,
        last_step: int,
        per_epoch: int,
        initial_step: int = 0,
        bar: bool = False,
    ):
        super().__init__()
        self.log, self.validation, self.every_steps = log, validation, every_steps
        self.last_step, self.per_epoch, self.step, self.bar = last_step, per_epoch, initial_step, bar
        self.epochs = math.ceil(last_step / per_epoch)

    def _where(self) -> str:
        return f"step {self.step}/{self.last_step}, epoch {(self.step - 1) // self.per_epoch + 1}/{self.epochs}"

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if not self.bar and self.every_steps and self.step % self.every_steps == 0 and self.step < self.last_step:
            self.log(
                f"{self._where()}: loss {float((logs or {}).get('loss', float('nan'))):.3f}; "
                f"training time {self.validation.training_seconds() / 60:.1f} min"
            )

    def on_epoch_end(self, epoch, logs=None):
        ended = "ended" if self.step % self.per_epoch == 0 else "stopped"  # max_steps inside an epoch
        self.log(
            f"epoch {epoch + 1}/{self.epochs} {ended} at step {self.step}: "
            f"loss {float((logs or {}).get('loss', float('nan'))):.3f}; "
            f"training time {self.validation.training_seconds() / 60:.1f} min"
        )


class EpochBar(keras.callbacks.ProgbarLogger):
    """Keras's progress bar, ending at the steps an epoch ran: Keras's own fills the bar
    to ``steps_per_epoch`` when an epoch stops early (the early stop inside an epoch)."""

    def _finalize_progbar(self, logs):
        target = self.target  # the fit's steps per epoch, for the next epoch's bar
        if self.seen and self.progbar is not None:
            self.target = self.progbar.target = self.seen
        super()._finalize_progbar(logs)
        self.target = target


def plateau_counters(history: list[dict]) -> tuple[float, int, int]:
    """``(best BLEU, validations without a gain, validations without a gain or a rate
    decay)`` after the validations ``history``: what the plateau schedule and the early
    stop count, given back to a resumed run."""
    best, bad, lr_bad, rate = -1.0, 0, 0, None
    for h in history:
        improved = h["val_bleu"] > best
        best = max(best, h["val_bleu"])
        bad = 0 if improved else bad + 1
        decayed = rate is not None and h.get("learning_rate", rate) < rate
        lr_bad = 0 if improved or decayed else lr_bad + 1
        rate = h.get("learning_rate", rate)
    return best, bad, lr_bad


def save_validation_files(
    model: keras.Model, out_dir: str, history: list[dict], keep_checkpoints: bool, only_missing: bool = False
) -> None:
    """The files of the validation ``history[-1]`` after ``model.keras``: its checkpoint
    (``keep_checkpoints``), ``best.keras`` when its BLEU beats the earlier validations'
    (both for translating: without the optimizer's state, which ``model.keras`` keeps),
    then ``validations.json`` (last: it lists only validations whose models are saved).
    ``only_missing``: the checkpoint only where the file is absent (a resumed run
    completing a validation that a kill cut short)."""
    step = history[-1]["step"]
    checkpoint = os.path.join(out_dir, "checkpoints", f"step{step}.keras")
    if keep_checkpoints and not (only_missing and os.path.isfile(checkpoint)):
        save_with(lambda path: save_model(model, path, optimizer=False), checkpoint)
    if history[-1]["val_bleu"] > plateau_counters(history[:-1])[0]:
        save_with(lambda path: save_model(model, path, optimizer=False), os.path.join(out_dir, "best.keras"))
    write_json(os.path.join(out_dir, "validations.json"), history)


class TrainingDiverged(FloatingPointError):
    """Training stopped on a non-finite or exploding loss, or non-finite weights."""


class DivergenceStop(keras.callbacks.Callback):
    """Stops training with :class:`TrainingDiverged` when the loss is not finite or above
    ``max_loss``.

    Keras's ``TerminateOnNaN`` sets ``stop_training``, after which ``fit`` returns as if
    the run had finished; this raises instead, so that the run fails (``memnmt train``
    exits 3) and no callback after it saves anything at that step. The checkpoints of
    earlier validations stay: they hold the last good weights.

    Args:
        out_dir: the run directory (named in the message).
        max_loss: the explosion threshold on the running mean training loss that Keras
            reports (a per-token cross-entropy; about ln(vocabulary size) at the start);
            ``None``: only a non-finite loss stops.
        initial_step: the step count already done (a resumed run).
    """

    def __init__(self, out_dir: str, max_loss: float | None = 100.0, initial_step: int = 0):
        super().__init__()
        self.out_dir, self.max_loss, self.step = out_dir, max_loss, initial_step

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        loss = float((logs or {}).get("loss", 0.0))
        if math.isfinite(loss) and (self.max_loss is None or loss <= self.max_loss):
            return
        what = "not finite" if not math.isfinite(loss) else f"above max_loss={self.max_loss:g}"
        raise TrainingDiverged(
            f"training diverged at step {self.step}: the loss is {loss:.4g} ({what}); "
            f"{last_good(self.out_dir)}; lower learning_rate (or clipnorm) and start again with --overwrite"
        )


def last_good(out_dir: str) -> str:
    """Which model files of ``out_dir`` hold the last good weights, in words."""
    kept = [n for n in ("model.keras", "best.keras") if os.path.isfile(os.path.join(out_dir, n))]
    if not kept:
        return "no checkpoint was saved (none had been reached)"
    return f"the last good weights are in {' and '.join(os.path.join(out_dir, n) for n in kept)}"


def finite_weights(model: keras.Model) -> bool:
    """Whether every float weight of ``model`` is finite."""
    import numpy as np

    for v in model.weights:
        if "float" in keras.backend.standardize_dtype(v.dtype):
            if not np.all(np.isfinite(keras.ops.convert_to_numpy(v.value))):
                return False
    return True
