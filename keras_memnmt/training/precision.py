"""A run's numeric precision: the Keras dtype policy its model is built (or loaded) under.

``TrainConfig.precision`` names a Keras policy. ``"float32"`` computes and stores in
float32. The mixed policies keep every weight (and the optimizer's state) in float32
and compute the layers in float16 or bfloat16; the cells keep their softmaxes, sums
over the source and memory updates in float32 (each cell's docstring says where), and
the loss casts the logits to float32. With ``"mixed_float16"``, ``model.compile`` wraps
the optimizer in Keras's ``LossScaleOptimizer`` (dynamic loss scaling: the loss is
multiplied by a scale before the backward pass, the gradients are divided by it
before the wrapped optimizer, and its clipping, sees them; a step with a non-finite
gradient is skipped and the scale halved). bfloat16 has float32's exponent range and
needs no scaling. docs/reliability.md, "Mixed precision".
"""

from __future__ import annotations

import keras


def apply_precision(config) -> str:
    """Sets Keras's global dtype policy to ``config.precision`` (before the model is built or
    loaded) and returns a line for the log saying what it set.

    The policy is process-wide and stays set after training (as the random seed does):
    every model built afterwards in the process takes it, and a loaded model keeps the
    policy it was saved with.
    """
    name = config.precision
    keras.config.set_dtype_policy(name)
    policy = keras.config.dtype_policy()
    if policy.compute_dtype == policy.variable_dtype:
        return f"precision: {name}"
    scaling = "dynamic loss scaling" if policy.compute_dtype == "float16" else "no loss scaling"
    return f"precision: {name} (compute in {policy.compute_dtype}, weights in {policy.variable_dtype}; {scaling})"
