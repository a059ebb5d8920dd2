"""TensorBoard monitoring of a training run: curves, validation scores, samples and pictures.

:class:`TensorBoardMonitor` writes into ``RUN/tensorboard/train`` and
``RUN/tensorboard/validation``, the folders of Keras's own ``TensorBoard`` callback
(which adds the per-epoch ``epoch_*`` scalars; no graph: Keras 3's TensorFlow trainer
gives the callback no ``tf.function`` to draw), with ``tf.summary`` writers of its own
(tensor summaries, as Keras's); every tag is listed in docs/monitoring.md. It works
the same under the three backends: the values come from the model's loss tracker, the
optimizer's ``gradient_norm`` (:class:`~keras_memnmt.training.optimizers.GradientNormTracking`),
a token counter in the input pipeline, and the model's own predictions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import keras
import numpy as np

from keras_memnmt.data import encode_sources
from keras_memnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID, SubwordVocab

SAMPLES = 3  # sample translations written at each validation
PICTURE_MAX_TOKENS = 30  # pictures are of validation pairs with at most this many subwords a side


class TokenCounter:
    """Counts the target tokens (not padding) of the batches an input pipeline delivers.

    ``wrap(ds)`` adds the count to a ``tf.data`` pipeline of ``(inputs, targets)`` batches;
    the count runs a few batches ahead of the optimizer (the pipeline's prefetching),
    which the rate over a logging interval hardly sees.
    """

    def __init__(self) -> None:
        import tensorflow as tf

        self.variable = tf.Variable(0, dtype=tf.int64, trainable=False)

    def wrap(self, ds):
        import tensorflow as tf

        def count(inputs, targets):
            self.variable.assign_add(tf.math.count_nonzero(targets, dtype=tf.int64))
            return inputs, targets

        return ds.map(count)

    def value(self) -> int:
        return int(self.variable.numpy())


def teacher_forced_batches(
    vocab: SubwordVocab, sources: Sequence[str], references: Sequence[str], batch_size: int = 64, pad_multiple: int = 8
) -> list[tuple]:
    """``(source_ids, target_in, target_out)`` int32 batches of the pairs, in order, each
    padded to a multiple of ``pad_multiple`` (the shapes repeat at every validation)."""
    source_ids = encode_sources(vocab, list(sources))
    target_ids = [row + [EOS_ID] for row in vocab.target.encode([r.strip() for r in references])]

    def pad(rows: list[list[int]]) -> np.ndarray:
        width = -(-max(len(r) for r in rows) // pad_multiple) * pad_multiple
        out = np.full((len(rows), width), PAD_ID, np.int32)
        for i, row in enumerate(rows):
            out[i, : len(row)] = row
        return out

    batches = []
    for start in range(0, len(source_ids), batch_size):
        src, tgt = source_ids[start : start + batch_size], target_ids[start : start + batch_size]
        target_out = pad(tgt)
        target_in = np.concatenate([np.full((len(tgt), 1), BOS_ID, np.int32), target_out[:, :-1]], axis=1)
        target_in[target_in == EOS_ID] = PAD_ID  # eos is never an input
        batches.append((pad(src), target_in, target_out))
    return batches


def _predict(model: keras.Model, source, target_in):
    """``model.predict_on_batch``; a direct call under a TensorFlow ``tf.distribute`` strategy,
    whose ``predict_on_batch`` runs the whole batch on every replica and concatenates
    their outputs (``replicas × B`` rows), and under a JAX distribution over several
    processes."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        direct = tf.distribute.has_strategy() and tf.distribute.get_strategy().num_replicas_in_sync > 1
    else:  # JAX's predict_on_batch would take each process's batch as its share of a global one
        direct = getattr(keras.distribution.distribution(), "_is_multi_process", False)
    if direct:
        return keras.ops.convert_to_numpy(model((source, target_in), training=False))
    return model.predict_on_batch((source, target_in))


def cross_entropy(model: keras.Model, batches: list[tuple]) -> float:
    """Mean per-token cross-entropy (nats, no label smoothing) of ``model``'s teacher-forced
    predictions over the batches' real target tokens."""
    total, tokens = 0.0, 0
    for source, target_in, target_out in batches:
        logits = np.asarray(_predict(model, source, target_in), np.float32)  # (B, T, V)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_norm = np.log(np.exp(shifted).sum(axis=-1))  # (B, T)
        picked = np.take_along_axis(shifted, target_out[..., None].astype(np.int64), axis=-1)[..., 0]
        mask = target_out != PAD_ID
        total += float(((log_norm - picked) * mask).sum())
        tokens += int(mask.sum())
    return total / max(tokens, 1)


def picture_pairs(
    vocab: SubwordVocab, sources: Sequence[str], references: Sequence[str], count: int
) -> list[tuple[str, str]]:
    """The first ``count`` pairs with 1 to 30 subwords a side (readable pictures)."""
    pairs = []
    for source, reference in zip(sources, references):
        if len(pairs) == count:
            break
        lengths = (len(vocab.source.encode([source])[0]), len(vocab.target.encode([reference])[0]))
        if 0 < min(lengths) and max(lengths) <= PICTURE_MAX_TOKENS:
            pairs.append((source, reference))
    return pairs


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or " "


class TensorBoardMonitor(keras.callbacks.Callback):
    """Writes TensorBoard summaries of training (every ``every_steps``) and of each validation.

    Training (``train/``, at the global step): ``loss`` (the mean training loss over the
    interval), ``perplexity`` (its exp), ``learning_rate``, ``gradient_norm`` (of the
    interval's last update, before clipping; when the optimizer keeps it) and
    ``target_tokens_per_second`` (over the interval, validation time left out).
    Validation (``validation/``, by :meth:`validated`, which
    :class:`~keras_memnmt.training.callbacks.BleuValidation` calls): ``loss`` and
    ``perplexity`` (teacher-forced, on the first ``loss_sentences`` validation pairs),
    ``bleu`` and ``chrf`` (its greedy translation), ``samples`` (text: three sources,
    references and hypotheses) and ``pictures/i`` (images: :mod:`keras_memnmt.pictures.plots` of
    ``pictures`` fixed validation pairs, forced on their references).

    Args:
        log_dir: the run's ``tensorboard`` folder.
        vocab: the run's vocabulary.
        sources / references: the validation text.
        every_steps: training scalars every N steps.
        initial_step: the steps done before (a resumed run).
        loss_sentences: validation pairs of the teacher-forced loss (0: none).
        pictures: validation pairs drawn at each validation (0: none): the first ones
            with at most 30 subwords a side.
        batch_size: sentences per batch of the validation loss.
        token_counter: the :class:`TokenCounter` of the training pipeline (None: no
            tokens per second).
    """

    def __init__(
        self,
        log_dir: str,
        vocab: SubwordVocab,
        sources: Sequence[str],
        references: Sequence[str],
        every_steps: int = 50,
        initial_step: int = 0,
        loss_sentences: int = 512,
        pictures: int = 2,
        batch_size: int = 64,
        token_counter: TokenCounter | None = None,
    ) -> None:
        super().__init__()
        import tensorflow as tf

        self.tf = tf
        self.log_dir, self.vocab = log_dir, vocab
        self.sources, self.references = list(sources), list(references)
        self.every_steps, self.step = every_steps, initial_step
        self.token_counter = token_counter
        self.loss_batches = (
            teacher_forced_batches(vocab, self.sources[:loss_sentences], self.references[:loss_sentences], batch_size)
            if loss_sentences and self.sources
            else []
        )
        self.picture_pairs = picture_pairs(vocab, self.sources, self.references, pictures)
        self.writers: dict = {}

    def _writer(self, name: str):
        if name not in self.writers:
            import os

            from keras_memnmt.files import writes

            # A process that writes nothing (keras_memnmt.files.set_writer) still computes
            # every value: on several processes the model's computations need them all.
            self.writers[name] = (
                self.tf.summary.create_file_writer(os.path.join(self.log_dir, name))
                if writes()
                else self.tf.summary.create_noop_writer()
            )
        return self.writers[name]

    # ------------------------------------------------------------------ training
    def on_train_begin(self, logs=None):
        self._interval_start = time.perf_counter()
        self._paused = 0.0
        self._tokens = self.token_counter.value() if self.token_counter else 0
        self._loss_base = (0.0, 0.0)

    def on_epoch_begin(self, epoch, logs=None):
        self._loss_base = (0.0, 0.0)  # Keras resets its loss tracker at every epoch

    def loss_restored(self) -> None:
        """The loss tracker was set to a resumed run's running mean (RestoreGenerators): the
        next logged interval starts from it."""
        self._loss_base = self._loss_tracker_state() or (0.0, 0.0)

    def _loss_tracker_state(self) -> tuple[float, float] | None:
        """``(total, count)`` of Keras's running loss mean, or None where the model has none."""
        tracker = next((m for m in self.model.metrics if m.name == "loss"), None)
        if tracker is None or not hasattr(tracker, "total"):
            return None
        return (float(keras.ops.convert_to_numpy(tracker.total)), float(keras.ops.convert_to_numpy(tracker.count)))

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.step % self.every_steps == 0:
            self._log_training()

    def _log_training(self) -> None:
        model = self.model  # on JAX, reading it brings the training state back to the variables
        values = {}
        tracked = self._loss_tracker_state()
        if tracked is not None:
            total, count = tracked
            if count > self._loss_base[1]:
                values["loss"] = (total - self._loss_base[0]) / (count - self._loss_base[1])
                values["perplexity"] = math.exp(min(values["loss"], 50.0))
            self._loss_base = (total, count)
        values["learning_rate"] = float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
        # Under mixed_float16 the optimizer is Keras's LossScaleOptimizer around ours.
        norm = getattr(getattr(model.optimizer, "inner_optimizer", model.optimizer), "gradient_norm", None)
        if norm is not None:
            values["gradient_norm"] = float(keras.ops.convert_to_numpy(norm))
        now = time.perf_counter()
        seconds = now - self._interval_start - self._paused
        if self.token_counter is not None:
            tokens = self.token_counter.value()
            if seconds > 0:
                values["target_tokens_per_second"] = (tokens - self._tokens) / seconds
            self._tokens = tokens
        self._interval_start, self._paused = now, 0.0
        with self._writer("train").as_default():
            for name, value in values.items():
                self.tf.summary.scalar(name, value, step=self.step)
        self._writer("train").flush()

    # ---------------------------------------------------------------- validation
    def validated(self, step: int, scores: dict, hypotheses: Sequence[str], started: float) -> None:
        """Writes one validation's summaries at ``step``: ``scores`` (sacreBLEU's, of the
        greedy ``hypotheses`` of the validation set), the teacher-forced loss, samples and
        pictures. ``started``: when the validation began (``time.perf_counter()``), so that
        its time is left out of the training rate."""
        from keras_memnmt.pictures.inspection import inspect_pair
        from keras_memnmt.pictures.plots import image_array

        tf, model = self.tf, self.model
        with self._writer("validation").as_default():
            tf.summary.scalar("bleu", scores["bleu"], step=step, description="sacreBLEU, greedy")
            tf.summary.scalar("chrf", scores["chrf"], step=step, description="sacreBLEU chrF, greedy")
            if self.loss_batches:
                loss = cross_entropy(model, self.loss_batches)
                tf.summary.scalar("loss", loss, step=step, description="teacher-forced cross-entropy per target token")
                tf.summary.scalar("perplexity", math.exp(min(loss, 50.0)), step=step)
            rows = ["| source | reference | hypothesis |", "|---|---|---|"]
            rows += [
                f"| {_cell(s)} | {_cell(r)} | {_cell(h)} |"
                for s, r, h in list(zip(self.sources, self.references, hypotheses))[:SAMPLES]
            ]
            tf.summary.text("samples", "\n".join(rows), step=step)
            for i, (source, reference) in enumerate(self.picture_pairs):
                picture = image_array(inspect_pair(model, self.vocab, source, reference))
                tf.summary.image(f"pictures/{i}", picture[None], step=step, description=f"{source} → {reference}")
        self._writer("validation").flush()
        self._paused += time.perf_counter() - started

    def on_train_end(self, logs=None):
        for writer in self.writers.values():
            writer.close()
        self.writers = {}
