"""Padding-masked cross-entropy with optional label smoothing.

Keras's ``SparseCategoricalCrossentropy`` has ``ignore_class`` but no label
smoothing, and ``CategoricalCrossentropy`` needs one-hot targets (B×T×V, large for an
8k vocabulary); this loss does both on sparse ids without materializing one-hot.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_memnmt.data.vocab import PAD_ID


@keras.saving.register_keras_serializable(package="keras_memnmt")
class MaskedCrossEntropy(keras.losses.Loss):
    """Token-averaged cross-entropy over non-pad target positions.

    ``loss = Σ_{t: y_t≠pad} [(1-ε)·(-log p(y_t)) + ε·mean_v(-log p(v))] / #{t: y_t≠pad}``

    Args:
        label_smoothing: ε in [0, 1).
        pad_id: the target id that is ignored.

    Call arguments:
        y_true: ``(B, T)`` int target ids.
        y_pred: ``(B, T, V)`` logits.
    """

    def __init__(self, label_smoothing: float = 0.0, pad_id: int = PAD_ID, name: str = "masked_ce", **kwargs):
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        super().__init__(name=name, **kwargs)
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")  # (B, T)
        eps = float(self.label_smoothing)
        scale = mask / ops.maximum(_global_tokens(ops.sum(mask)), 1.0)  # (B, T)

        # Written with its gradient, and with as few passes over the `(B, T, V)` logits as
        # possible: they are the largest tensors of a training step (64·20·8000 floats =
        # 41 MB), and without XLA (TensorFlow, PyTorch) every elementwise op is its own
        # pass. The forward keeps `e = exp(z - max z)` (as many bytes as the logits it
        # replaces) so the backward is `e·w/Σe - ε·w/V` plus a write of the target entries
        # in place (`scatter_update`) instead of a `(B, T, V)` comparison and `where`.
        # Forward and backward of the loss with the `(64·20, 256) x (256, 8000)` projection
        # under it: TensorFlow 68.8 -> 49.8 ms, JAX 45.9 -> 43.9, PyTorch 106.6 -> 97.6
        # (docs/benchmarks.md, "Training step profile").
        @ops.custom_gradient
        def masked_ce(raw_logits):
            logits = ops.cast(raw_logits, "float32")
            top = ops.max(logits, axis=-1, keepdims=True)  # (B, T, 1)
            e = ops.exp(logits - top)  # (B, T, V), kept for the backward pass
            total = ops.sum(e, axis=-1)  # (B, T)
            lse = ops.log(total) + ops.squeeze(top, -1)  # log Σ_v exp z_v
            picked = ops.squeeze(ops.take_along_axis(logits, ops.expand_dims(y_true, -1), axis=-1), -1)
            nll = lse - picked  # -log p(y_t)
            if eps:
                nll = (1.0 - eps) * nll + eps * (lse - ops.mean(logits, axis=-1))  # mean_v -log p(v)
            loss = ops.sum(nll * scale)

            def grad(*args, upstream=None):
                upstream = args[0] if upstream is None else upstream
                vocab = ops.shape(e)[-1]
                weight = ops.cast(upstream, "float32") * scale  # (B, T)
                g = e * ops.expand_dims(weight / total, -1)  # p(v)·w
                if eps:
                    g = g - ops.expand_dims(weight * (eps / vocab), -1)
                # The target entries: (p(y_t) - ε/V - (1 - ε))·w.
                target = weight * (ops.exp(picked - lse) - eps / vocab - (1.0 - eps))
                rows = ops.reshape(g, (-1, vocab))
                where = ops.stack([ops.arange(ops.shape(rows)[0], dtype="int32"), ops.reshape(y_true, (-1,))], axis=1)
                rows = ops.scatter_update(rows, where, ops.reshape(target, (-1,)))
                return ops.cast(ops.reshape(rows, ops.shape(e)), raw_logits.dtype)

            return loss, grad

        return masked_ce(y_pred)

    def get_config(self) -> dict:
        return {**super().get_config(), "label_smoothing": self.label_smoothing, "pad_id": self.pad_id}


def _global_tokens(count):
    """``count``, the batch's target tokens; under a TensorFlow ``tf.distribute`` strategy,
    the sum of every replica's count instead.

    Keras leaves a loss that is already a scalar unscaled and sums the replicas'
    gradients: with the global count as denominator, each replica's loss is its share
    of the whole batch's token average and the sum is that average, as on one device,
    however the tokens fall between the replicas. (Keras's loss tracker multiplies each
    replica's value by the number of replicas and averages them over rows: with the
    replicas' slices of equal rows, as ``training.distribution.pad_batches`` makes
    them, it logs the whole batch's loss.) JAX's data parallelism computes the loss of
    the whole batch, sharded, and needs nothing.
    """
    if keras.backend.backend() != "tensorflow":
        return count
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return count
    return context.all_reduce(tf.distribute.ReduceOp.SUM, count)
