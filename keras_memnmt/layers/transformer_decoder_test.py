"""Tests for TransformerDecoder (run once per backend): a NumPy reference of one cached step
fed the layer's own weights, its attention's invariants, teacher forcing against the
steps, and keras-hub's ``TransformerDecoder``: the same weights, the same outputs to the bit."""

import keras
import numpy as np
import pytest

from keras_memnmt.layers.transformer_decoder import TransformerDecoder
from keras_memnmt.testing.utils import numpy, randomize_weights

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

B, TX, D, H, F = 3, 5, 8, 2, 16


def _data(seed=0):
    """``(target (B, 4, D), memory (B, TX, D), mask (B, TX) bool)``; rows 0 and 2 padded."""
    rng = np.random.default_rng(seed)
    mask = np.ones((B, TX), bool)
    mask[0, 3:] = False
    mask[2, 4] = False
    return (rng.normal(size=(B, 4, D)).astype("float32"), rng.normal(size=(B, TX, D)).astype("float32"), mask)


def _layer(seed=0, **kwargs):
    layer = TransformerDecoder(F, H, **kwargs)
    layer.build((None, None, D), (None, None, D))
    randomize_weights(layer, seed=seed)
    return layer


def _layer_norm(x, norm):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + norm.epsilon) * numpy(norm.gamma) + numpy(norm.beta)


def _projection(x, dense):
    """An attention's input projection ``(B, T, D) → (B, T, H, K)``."""
    return np.einsum("btd,dhk->bthk", x, numpy(dense.kernel)) + numpy(dense.bias)


def _attention(layer, query_input, key_input, keys=None, values=None, mask=None):
    """Multi-head attention (Vaswani et al. 2017, Eq. 1 and §3.2.2) with the weights of the
    Keras ``MultiHeadAttention`` ``layer``: ``(output (B, T, D), weights (B, H, T, S))``."""
    q = _projection(query_input, layer._query_dense)
    k = _projection(key_input, layer._key_dense) if keys is None else keys
    v = _projection(key_input, layer._value_dense) if values is None else values
    scores = np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask[:, None, None, :], scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    context = np.einsum("bhts,bshk->bthk", weights, v)
    output = np.einsum("bthk,hkd->btd", context, numpy(layer._output_dense.kernel))
    return output + numpy(layer._output_dense.bias), weights


def reference_step(layer, x, memory, mask, past_keys, past_values):
    """One position of a pre-norm decoder layer in float64, from the layer's own weights:
    ``x (B, 1, D)`` attends to the past positions' keys and values ``(B, t, H, K)`` and to
    itself, then to the source ``memory (B, Tx, D)`` where ``mask (B, Tx)``, then the
    feed-forward network (relu). Returns ``(outputs (B, 1, D), attention (B, Tx), keys,
    values)``: the cross-attention weights averaged over the heads, and the keys and values
    of the positions so far ``(B, t + 1, H, K)``."""
    x, memory = np.asarray(x, np.float64), np.asarray(memory, np.float64)
    own = layer._self_attention_layer
    normed = _layer_norm(x, layer._self_attention_layer_norm)
    keys = np.concatenate([past_keys, _projection(normed, own._key_dense)], axis=1)
    values = np.concatenate([past_values, _projection(normed, own._value_dense)], axis=1)
    x = x + _attention(own, normed, None, keys, values)[0]
    attended, weights = _attention(
        layer._cross_attention_layer,
        _layer_norm(x, layer._cross_attention_layer_norm),
        memory,
        mask=np.asarray(mask, bool),
    )
    x = x + attended
    normed = _layer_norm(x, layer._feedforward_layer_norm)
    hidden = np.maximum(
        normed @ numpy(layer._feedforward_intermediate_dense.kernel)
        + numpy(layer._feedforward_intermediate_dense.bias),
        0.0,
    )
    x = x + hidden @ numpy(layer._feedforward_output_dense.kernel) + numpy(layer._feedforward_output_dense.bias)
    return x, weights.mean(axis=1)[:, 0], keys, values


@pytest.mark.filterwarnings("ignore:You are using a softmax over axis")  # the first step's one key
@pytest.mark.parametrize("dropout", [0.0, 0.1], ids=["fused_attention", "explicit_attention"])
@pytest.mark.parametrize("grow", [True, False], ids=["appended", "written_at_index"])
def test_a_step_matches_the_numpy_reference_and_its_attention_is_a_distribution(grow, dropout):
    """Two steps over a cache (appended to, or written at its slot of a fixed cache of 4):
    the outputs and the head-averaged cross-attention equal the reference's; each
    attention row sums to 1 over the unpadded source and padding gets exactly 0. Keras
    computes the weights itself with attention dropout and beside its fused kernel without."""
    layer = _layer(dropout=dropout)
    target, memory, mask = _data()
    cross = layer.source_keys_values(memory)
    cache = np.zeros((B, 2, 0 if grow else 4, H, D // H), "float32")
    keys = values = np.zeros((B, 0, H, D // H))
    for t in range(2):
        x = target[:, t : t + 1]
        out, cache, attention = layer(
            x,
            memory,
            encoder_padding_mask=mask,
            self_attention_cache=cache,
            self_attention_cache_update_index=None if grow else t,
            cross_attention_cache=cross,
            return_attention=True,
        )
        expected, expected_attention, keys, values = reference_step(layer, x, memory, mask, keys, values)
        np.testing.assert_allclose(numpy(out), expected, atol=1e-5)
        np.testing.assert_allclose(numpy(cache)[:, 0, : t + 1], keys, atol=1e-5)
        np.testing.assert_allclose(numpy(cache)[:, 1, : t + 1], values, atol=1e-5)
        attention = numpy(attention)[:, 0]  # (B, TX)
        assert attention.dtype == np.float32
        np.testing.assert_allclose(attention, expected_attention, atol=1e-6)
        np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-6)
        assert (attention[~mask] == 0.0).all() and (attention[mask] > 0.0).all()
    assert numpy(cache).shape[2] == (2 if grow else 4)
    if not grow:  # the slots after the step's are left as they were
        assert (numpy(cache)[:, :, 2:] == 0.0).all()


def test_teacher_forcing_equals_the_steps():
    """The whole target at once (causal self-attention) gives each position the outputs and
    attention that stepping over a cache gives it."""
    layer = _layer(seed=1)
    target, memory, mask = _data(1)
    whole, attention = layer(target, memory, encoder_padding_mask=mask, return_attention=True)
    assert tuple(whole.shape) == (B, 4, D) and tuple(attention.shape) == (B, 4, TX)
    cache, cross = np.zeros((B, 2, 0, H, D // H), "float32"), layer.source_keys_values(memory)
    for t in range(4):
        out, cache, step_attention = layer(
            target[:, t : t + 1],
            memory,
            encoder_padding_mask=mask,
            self_attention_cache=cache,
            cross_attention_cache=cross,
            return_attention=True,
        )
        np.testing.assert_allclose(numpy(out)[:, 0], numpy(whole)[:, t], atol=1e-5)
        np.testing.assert_allclose(numpy(step_attention)[:, 0], numpy(attention)[:, t], atol=1e-6)
    np.testing.assert_array_equal(numpy(layer(target, memory, encoder_padding_mask=mask)), numpy(whole))


class _Holder(keras.Model):
    """A model whose one decoder layer is in a list, as the Transformer holds them."""

    def __init__(self, layer):
        super().__init__()
        self.decoder_layers = [layer]
        self.built = True  # its layer is


@pytest.mark.filterwarnings("ignore:You are using a softmax over axis")  # the first step's one key
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_keras_hubs_layer_with_the_same_weights_gives_the_same_bits(dropout, tmp_path):
    """keras-hub's ``TransformerDecoder`` (pre-norm): its weights load into this layer by
    their saved paths, and teacher forcing and both kinds of cached step give the very
    same outputs and caches, with or without the attention asked for."""
    from keras_hub.layers import TransformerDecoder as HubDecoder

    target, memory, mask = _data(2)
    hub = HubDecoder(F, H, dropout=dropout, normalize_first=True)
    hub(target, memory, encoder_padding_mask=mask)
    randomize_weights(hub, seed=4)
    layer = TransformerDecoder(F, H, dropout=dropout)
    layer(target, memory, encoder_padding_mask=mask)
    assert [w.path.split("/", 1)[1] for w in layer.weights] == [w.path.split("/", 1)[1] for w in hub.weights]
    # A model keeps its decoder layers in a list, where a layer's saved path is its class's name.
    _Holder(hub).save_weights(str(tmp_path / "hub.weights.h5"))
    _Holder(layer).load_weights(str(tmp_path / "hub.weights.h5"))
    for attend in (False, True):
        ours = layer(target, memory, encoder_padding_mask=mask, return_attention=attend)
        np.testing.assert_array_equal(
            numpy(ours[0] if attend else ours), numpy(hub(target, memory, encoder_padding_mask=mask))
        )
    cross = numpy(layer.source_keys_values(memory))
    hub_cross = np.zeros_like(cross)
    x = target[:, :1]
    for grow in (True, False):
        cache = np.zeros((B, 2, 0 if grow else 3, H, D // H), "float32")
        if grow:  # keras-hub reads a cache that already holds the position (what the model appended)
            normed = hub._self_attention_layer_norm(x)
            position = keras.ops.stack(
                [hub._self_attention_layer._key_dense(normed), hub._self_attention_layer._value_dense(normed)], axis=1
            )
            hub_cache = keras.ops.concatenate([cache, position], axis=2)
            expected, expected_cache, hub_cross = hub(
                x,
                memory,
                encoder_padding_mask=mask,
                self_attention_cache=hub_cache,
                cross_attention_cache=numpy(hub_cross),
                cross_attention_cache_update_index=0,
                use_causal_mask=False,
            )
        else:
            expected, expected_cache, _ = hub(
                x,
                memory,
                encoder_padding_mask=mask,
                self_attention_cache=cache,
                self_attention_cache_update_index=0,
                cross_attention_cache=cross,
            )
        np.testing.assert_array_equal(numpy(hub_cross), cross)
        for attend in (False, True):
            out, new_cache, *_ = layer(
                x,
                memory,
                encoder_padding_mask=mask,
                self_attention_cache=cache,
                self_attention_cache_update_index=None if grow else 0,
                cross_attention_cache=cross,
                return_attention=attend,
            )
            np.testing.assert_array_equal(numpy(out), numpy(expected))
            np.testing.assert_array_equal(numpy(new_cache), numpy(expected_cache))


def test_mixed_bfloat16_computes_in_bfloat16_and_returns_float32_attention():
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        layer = _layer()
        target, memory, mask = _data()
        out, attention = layer(target, memory, encoder_padding_mask=mask, return_attention=True)
        assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
        assert keras.backend.standardize_dtype(attention.dtype) == "float32"
        np.testing.assert_allclose(numpy(attention).sum(-1), 1.0, atol=2e-2)
        assert (numpy(attention)[np.broadcast_to(~mask[:, None], attention.shape)] == 0).all()
    finally:
        keras.config.set_dtype_policy("float32")


def test_serialization_round_trip():
    layer = _layer(dropout=0.1, activation="gelu", layer_norm_epsilon=1e-6)
    again = TransformerDecoder.from_config(layer.get_config())
    assert again.get_config() == layer.get_config()
    target, memory, mask = _data()
    again(target, memory, encoder_padding_mask=mask)
    again.set_weights(layer.get_weights())
    np.testing.assert_array_equal(
        numpy(again(target, memory, encoder_padding_mask=mask)), numpy(layer(target, memory, encoder_padding_mask=mask))
    )


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(intermediate_dim=0, num_heads=2), "intermediate_dim"),
        (dict(intermediate_dim=8, num_heads=0), "num_heads"),
        (dict(intermediate_dim=8, num_heads=2, dropout=1.0), "dropout"),
    ],
)
def test_bad_arguments_are_errors_naming_them(arguments, message):
    with pytest.raises(ValueError, match=message):
        TransformerDecoder(**arguments)


def test_bad_calls_are_errors():
    layer = TransformerDecoder(F, 3)
    target, memory, mask = _data()
    with pytest.raises(ValueError, match="multiple of num_heads=3"):
        layer(target, memory)
    with pytest.raises(ValueError, match="attends to an encoder"):
        TransformerDecoder(F, H)(target)
    layer = _layer()
    with pytest.raises(ValueError, match="together"):
        layer(target[:, :1], memory, self_attention_cache=np.zeros((B, 2, 0, H, D // H), "float32"))
