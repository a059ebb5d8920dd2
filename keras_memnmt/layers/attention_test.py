"""Tests for AdditiveAttention and LuongAttention (run once per backend)."""

import keras
import numpy as np
import pytest

from keras_memnmt.layers.attention import AdditiveAttention, LuongAttention, masked_softmax
from keras_memnmt.testing import reference
from keras_memnmt.testing.utils import numpy, randomize_weights, value_and_grads

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

B, TX, D = 3, 5, 6
Q = D  # "dot" needs Q == D; the other scores are also tested with Q != D below.


def _data(query_dim=Q, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(B, query_dim)).astype("float32")
    annotations = rng.normal(size=(B, TX, D)).astype("float32")
    mask = np.ones((B, TX), "float32")
    mask[0, 3:] = 0.0  # two padded source positions
    mask[2, 4] = 0.0  # one padded source position
    return query, annotations, mask


LAYERS = {
    "additive": lambda: AdditiveAttention(units=7),
    "dot": lambda: LuongAttention("dot"),
    "general": lambda: LuongAttention("general"),
    "concat": lambda: LuongAttention("concat", units=7),
}


def _built(name, query_dim=Q, seed=0):
    layer = LAYERS[name]()
    layer.build((None, query_dim), (None, None, D))
    randomize_weights(layer, seed=seed)
    return layer


def _run(layer, query, annotations, mask):
    keys = layer.precompute_keys(annotations)
    context, weights = layer(query, keys, annotations, mask=mask)
    return numpy(context), numpy(weights)


def _reference(layer, query, annotations, mask):
    if isinstance(layer, AdditiveAttention):
        return reference.additive_attention(
            query,
            annotations,
            mask,
            numpy(layer.query_kernel),
            numpy(layer.key_kernel),
            numpy(layer.score_vector),
        )
    kernel = None if layer.score == "dot" else numpy(layer.kernel)
    vector = numpy(layer.score_vector) if layer.score == "concat" else None
    return reference.luong_attention(query, annotations, mask, layer.score, kernel, vector)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_matches_numpy_reference(name):
    query, annotations, mask = _data()
    layer = _built(name)
    context, weights = _run(layer, query, annotations, mask)
    ref_context, ref_weights = _reference(layer, query, annotations, mask)
    np.testing.assert_allclose(weights, ref_weights, atol=1e-5)
    np.testing.assert_allclose(context, ref_context, atol=1e-5)


@pytest.mark.parametrize("name", ["additive", "general", "concat"])
def test_query_size_differs_from_annotation_size(name):
    query, annotations, mask = _data(query_dim=4)
    layer = _built(name, query_dim=4)
    assert tuple(layer.precompute_keys(annotations).shape)[:2] == (B, TX)
    context, weights = _run(layer, query, annotations, mask)
    ref_context, ref_weights = _reference(layer, query, annotations, mask)
    np.testing.assert_allclose(weights, ref_weights, atol=1e-5)
    np.testing.assert_allclose(context, ref_context, atol=1e-5)
    assert context.shape == (B, D)


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("mask_dtype", ["float32", "bool"])
def test_weights_sum_to_one_and_masked_positions_are_exactly_zero(name, mask_dtype):
    query, annotations, mask = _data()
    annotations *= 10.0  # large scores: the softmax is far from uniform
    layer = _built(name)
    _, weights = _run(layer, query, annotations, mask.astype(mask_dtype))
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    assert np.all(weights[mask == 0] == 0.0)
    assert np.all(weights[mask == 1] > 0.0)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_padded_positions_do_not_change_the_output(name):
    query, annotations, mask = _data()
    layer = _built(name)
    context, weights = _run(layer, query, annotations, mask)
    changed = annotations.copy()
    changed[mask == 0] = 100.0
    context2, weights2 = _run(layer, query, changed, mask)
    np.testing.assert_allclose(context2, context, atol=1e-6)
    np.testing.assert_allclose(weights2, weights, atol=1e-7)


def test_no_mask_equals_all_ones_mask():
    query, annotations, _ = _data()
    layer = _built("additive")
    keys = layer.precompute_keys(annotations)
    context, weights = layer(query, keys, annotations)
    context1, weights1 = layer(query, keys, annotations, mask=np.ones((B, TX), "float32"))
    np.testing.assert_allclose(numpy(weights), numpy(weights1), atol=1e-7)
    np.testing.assert_allclose(numpy(context), numpy(context1), atol=1e-6)


def test_fully_masked_row_gives_zeros_not_nan():
    scores = np.random.default_rng(0).normal(size=(2, 4)).astype("float32")
    mask = np.array([[1, 1, 0, 0], [0, 0, 0, 0]], "float32")
    weights = numpy(masked_softmax(keras.ops.convert_to_tensor(scores), mask))
    assert np.all(np.isfinite(weights))
    np.testing.assert_array_equal(weights[1], 0.0)
    np.testing.assert_allclose(weights[0].sum(), 1.0, atol=1e-6)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_config_round_trip_gives_identical_outputs(name):
    query, annotations, mask = _data()
    layer = _built(name)
    clone = layer.__class__.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    clone.build((None, Q), (None, None, D))
    clone.set_weights(layer.get_weights())
    for got, want in zip(_run(clone, query, annotations, mask), _run(layer, query, annotations, mask)):
        np.testing.assert_array_equal(got, want)


def test_constructor_arguments_are_attributes():
    layer = LuongAttention(score="concat", units=5)
    assert (layer.score, layer.units) == ("concat", 5)
    assert AdditiveAttention(units=3).units == 3


@pytest.mark.parametrize(
    "make, argument",
    [
        (lambda: AdditiveAttention(units=0), "units"),
        (lambda: AdditiveAttention(units=2.5), "units"),
        (lambda: AdditiveAttention(units=True), "units"),
        (lambda: LuongAttention(score="cosine"), "score"),
        (lambda: LuongAttention(score="concat"), "units"),
        (lambda: LuongAttention(score="dot", units=4), "units"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_argument(make, argument):
    with pytest.raises(ValueError, match=f"`{argument}`"):
        make()


def test_precompute_keys_before_build_raises():
    with pytest.raises(ValueError, match="not built"):
        AdditiveAttention(units=3).precompute_keys(np.zeros((1, 2, 3), "float32"))


def test_dot_score_needs_equal_sizes():
    with pytest.raises(ValueError, match="dot"):
        LuongAttention("dot").build((None, 4), (None, None, 6))


def _grads(fn, *arrays):
    """Gradients of `sum(fn(*arrays) * r)` (fixed random r) w.r.t. every array, on this backend."""
    r = np.random.default_rng(9).normal(size=(B, TX)).astype("float32")
    return value_and_grads(lambda *xs: keras.ops.sum(fn(*xs) * keras.ops.convert_to_tensor(r)), *arrays)[1]


def test_rematerialized_scores_have_the_same_values_and_gradients():
    from keras_memnmt.layers.attention import _tanh_scores, _tanh_scores_remat

    rng = np.random.default_rng(3)
    args = (rng.normal(size=(B, 7)), rng.normal(size=(B, TX, 7)), rng.normal(size=(7,)))
    args = [a.astype("float32") for a in args]
    np.testing.assert_allclose(numpy(_tanh_scores_remat(*args)), numpy(_tanh_scores(*args)), atol=1e-6)
    for got, want in zip(_grads(_tanh_scores_remat, *args), _grads(_tanh_scores, *args)):
        assert np.abs(want).max() > 1e-3  # a real gradient, not zeros
        np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("name", ["additive", "concat"])
def test_rematerialize_off_gives_identical_outputs(name):
    query, annotations, mask = _data()
    layer = _built(name)
    plain = layer.__class__.from_config({**layer.get_config(), "rematerialize": False})
    plain.build((None, Q), (None, None, D))
    plain.set_weights(layer.get_weights())
    assert layer.rematerialize and not plain.rematerialize
    for got, want in zip(_run(plain, query, annotations, mask), _run(layer, query, annotations, mask)):
        np.testing.assert_allclose(got, want, atol=1e-6)
