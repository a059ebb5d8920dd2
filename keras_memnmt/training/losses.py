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
        log_probs = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)  # (B, T, V)
        nll = -ops.squeeze(ops.take_along_axis(log_probs, ops.expand_dims(y_true, -1), axis=-1), -1)
        if self.label_smoothing:
            nll = (1.0 - self.label_smoothing) * nll - self.label_smoothing * ops.mean(log_probs, -1)
        mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")  # (B, T)
        return ops.sum(nll * mask) / ops.maximum(ops.sum(mask), 1.0)

    def get_config(self) -> dict:
        return {**super().get_config(), "label_smoothing": self.label_smoothing, "pad_id": self.pad_id}
