"""Small helpers shared by the layer tests."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np


def numpy(x: Any) -> np.ndarray:
    """Any backend tensor or variable as a NumPy array."""
    return np.asarray(keras.ops.convert_to_numpy(x))


def randomize_weights(layer: keras.layers.Layer, seed: int = 0, scale: float = 0.5) -> None:
    """Sets every trainable weight (biases included) to N(0, scale^2) values.

    Non-zero biases make the reference comparisons check the biases too.
    """
    rng = np.random.default_rng(seed)
    for weight in layer.trainable_weights:
        weight.assign(rng.normal(scale=scale, size=tuple(weight.shape)).astype(weight.dtype))
