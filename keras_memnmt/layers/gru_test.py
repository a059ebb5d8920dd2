"""GRUCell: the NumPy GRU step, and Keras's GRUCell's values and gradients, with the same weights."""

import keras
import numpy as np
import pytest

from keras_memnmt.layers.gru import GRUCell
from keras_memnmt.testing import reference
from keras_memnmt.testing.utils import numpy, randomize_weights, value_and_grads

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

B, IN, U = 3, 5, 4


def _pair(**kwargs):
    ours, theirs = GRUCell(U, **kwargs), keras.layers.GRUCell(U, **kwargs)
    ours.build((None, IN))
    theirs.build((None, IN))
    randomize_weights(ours)
    theirs.set_weights(ours.get_weights())
    return ours, theirs


def _inputs():
    rng = np.random.default_rng(0)
    return rng.normal(size=(B, IN)).astype("float32"), rng.normal(size=(B, U)).astype("float32")


def test_step_matches_the_numpy_gru():
    ours, _ = _pair()
    x, h = _inputs()
    out, (state,) = ours(x, [h])
    kernel, recurrent, bias = ours.get_weights()
    want = reference.gru_step(x, h, kernel, recurrent, bias)
    np.testing.assert_allclose(numpy(out), want, atol=1e-5)
    np.testing.assert_allclose(numpy(state), want, atol=1e-5)


def test_values_and_gradients_equal_keras_gru_cell():
    ours, theirs = _pair()
    x, h = _inputs()
    weights = np.random.default_rng(1).normal(size=(B, U)).astype("float32")

    def loss(cell):
        return lambda a, b: keras.ops.sum(cell(a, [b])[0] * keras.ops.convert_to_tensor(weights))

    value, grads = value_and_grads(loss(ours), x, h)
    want_value, want_grads = value_and_grads(loss(theirs), x, h)
    np.testing.assert_allclose(value, want_value, rtol=1e-5)
    for got, want in zip(grads, want_grads):
        np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("kwargs", [{"reset_after": False}, {"use_bias": False}])
def test_other_settings_run_keras_call(kwargs):
    ours, theirs = _pair(**kwargs)
    x, h = _inputs()
    np.testing.assert_allclose(numpy(ours(x, [h])[0]), numpy(theirs(x, [h])[0]), atol=1e-6)


def test_inside_keras_rnn_with_a_mask():
    cell, keras_cell = _pair()
    rng = np.random.default_rng(2)
    seq = rng.normal(size=(B, 6, IN)).astype("float32")
    mask = np.ones((B, 6), bool)
    mask[0, 4:] = False
    ours = keras.layers.RNN(cell, return_sequences=True, return_state=True)(seq, mask=mask)
    theirs = keras.layers.RNN(keras_cell, return_sequences=True, return_state=True)(seq, mask=mask)
    for got, want in zip(ours, theirs):
        np.testing.assert_allclose(numpy(got), numpy(want), atol=1e-5)


def test_config_round_trip():
    cell = GRUCell(U, name="gru")
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(cell))
    assert isinstance(restored, GRUCell) and restored.units == U and restored.reset_after
