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
        scale = mask / ops.maximum(ops.sum(mask), 1.0)  # (B, T)

        # Written with its gradient: autodiff through log_softmax, take_along_axis and
        # the smoothing mean keeps several (B, T, V) tensors alive at once (64·40·8000
        # floats = 82 MB each); here the backward pass keeps the logits and builds one.
        @ops.custom_gradient
        def masked_ce(raw_logits):
            logits = ops.cast(raw_logits, "float32")
            lse = ops.logsumexp(logits, axis=-1)  # (B, T)
            picked = ops.squeeze(ops.take_along_axis(logits, ops.expand_dims(y_true, -1), axis=-1), -1)
            nll = lse - picked  # -log p(y_t)
            if eps:
                nll = (1.0 - eps) * nll + eps * (lse - ops.mean(logits, axis=-1))  # mean_v -log p(v)
            loss = ops.sum(nll * scale)

            def grad(*args, upstream=None):
                upstream = args[0] if upstream is None else upstream
                vocab = ops.shape(logits)[-1]
                probs = ops.exp(logits - ops.expand_dims(lse, -1))  # softmax (B, T, V)
                is_target = ops.equal(ops.arange(vocab, dtype="int32"), ops.expand_dims(y_true, -1))
                g = ops.where(is_target, probs - (1.0 - eps), probs)
                if eps:
                    g = g - eps / vocab
                g = g * ops.expand_dims(ops.cast(upstream, "float32") * scale, -1)
                return ops.cast(g, raw_logits.dtype)

            return loss, grad

        return masked_ce(y_pred)

    def get_config(self) -> dict:
        return {**super().get_config(), "label_smoothing": self.label_smoothing, "pad_id": self.pad_id}
