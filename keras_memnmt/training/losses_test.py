"""MaskedCrossEntropy: value and gradient against NumPy, with and without smoothing."""

import keras
import numpy as np
import pytest

from keras_memnmt.testing.utils import numpy as to_numpy
from keras_memnmt.testing.utils import value_and_grads
from keras_memnmt.training.losses import MaskedCrossEntropy

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

B, T, V = 3, 5, 11


def _inputs():
    rng = np.random.default_rng(0)
    logits = rng.normal(0.0, 3.0, (B, T, V)).astype("float32")
    targets = rng.integers(1, V, (B, T)).astype("int32")
    targets[0, 3:] = 0  # padding (pad id 0) at the ends of two rows
    targets[2, 1:] = 0
    return targets, logits


def _reference(targets, logits, eps):
    """The docstring's formula and its gradient with respect to the logits, in float64."""
    z = logits.astype("float64")
    log_p = z - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)) - z.max(-1, keepdims=True)
    one_hot = np.eye(V)[targets]
    per_token = -(1 - eps) * (one_hot * log_p).sum(-1) - eps * log_p.mean(-1)
    mask = (targets != 0).astype("float64")
    loss = (per_token * mask).sum() / mask.sum()
    grad = (np.exp(log_p) - (1 - eps) * one_hot - eps / V) * mask[..., None] / mask.sum()
    return loss, grad


def _value_and_grad(loss_fn, targets, logits):
    value, (grad,) = value_and_grads(lambda z: loss_fn(keras.ops.convert_to_tensor(targets), z), logits)
    return value, grad


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5])
def test_value_and_gradient_match_the_formula(eps):
    targets, logits = _inputs()
    want_loss, want_grad = _reference(targets, logits, eps)
    loss, grad = _value_and_grad(MaskedCrossEntropy(label_smoothing=eps), targets, logits)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    np.testing.assert_allclose(grad, want_grad, atol=1e-6)
    assert np.all(grad[targets == 0] == 0.0)  # padded positions get no gradient


def test_smoothing_changes_the_loss_and_is_validated():
    targets, logits = _inputs()
    plain = to_numpy(MaskedCrossEntropy()(targets, logits))
    smooth = to_numpy(MaskedCrossEntropy(label_smoothing=0.1)(targets, logits))
    assert not np.isclose(plain, smooth)
    with pytest.raises(ValueError, match="label_smoothing"):
        MaskedCrossEntropy(label_smoothing=1.0)
    config = MaskedCrossEntropy(label_smoothing=0.2, pad_id=3).get_config()
    assert (config["label_smoothing"], config["pad_id"]) == (0.2, 3)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_trains_under_model_fit(eps):
    # model.fit compiles the step (tf.function / jax.jit); the hand-written gradient
    # must trace there too, and lower the loss.
    targets, _ = _inputs()
    inputs = np.roll(targets, 1, axis=1)
    model = keras.Sequential([keras.Input((T,), dtype="int32"), keras.layers.Embedding(V, 8), keras.layers.Dense(V)])
    model.compile(keras.optimizers.Adam(0.05), MaskedCrossEntropy(label_smoothing=eps))
    history = model.fit(inputs, targets, epochs=20, batch_size=B, verbose=0).history["loss"]
    assert np.isfinite(history).all() and history[-1] < 0.5 * history[0]


def test_float16_logits_get_a_float16_gradient():
    targets, logits = _inputs()
    loss, grad = _value_and_grad(MaskedCrossEntropy(label_smoothing=0.1), targets, logits.astype("float16"))
    want_loss, want_grad = _reference(targets, logits.astype("float16").astype("float32"), 0.1)
    assert grad.dtype == np.float16
    np.testing.assert_allclose(loss, want_loss, rtol=1e-3)
    np.testing.assert_allclose(grad, want_grad, atol=1e-3)
