"""Tests for RMNCell (run once per backend).

The contract every cell meets (states, RNN run == stepping, masking, decoding with
the memory reordered by beam search, serialization, fit and ``.keras``, the NumPy
reference of the logits) is checked by ``run_cell_test``; the tests below check what
is RMN's own: the lookups ``prepare_inputs`` appends, and the memory attention.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_memnmt.layers.rmn import RMNCell
from keras_memnmt.testing import random_encoder_output, reference, run_cell_test
from keras_memnmt.testing.checks import (
    check_bad_arguments,
    check_mixed_precision,
    check_step_details,
)
from keras_memnmt.testing.utils import numpy, randomize_weights

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

B, TX, D, E, T = 3, 5, 6, 4, 5
UNITS, VOCAB, ATT, READ = 8, 11, 7, 9
ARGUMENTS = dict(
    units=UNITS, target_vocab_size=VOCAB, attention_units=ATT, readout_units=READ, annotation_units=D, memory_size=3
)


def _make(**kwargs):
    return RMNCell(**{**ARGUMENTS, **kwargs})


def _weights(layer):
    return [numpy(w) for w in layer.weights]


def _reference_logits(cell, encoded, inputs):
    """Eq. 8-19 of Yum & Mu in NumPy, from the step inputs ``[e; M(y); C(y)]``."""
    n, d = cell.memory_size, cell.memory_dim
    width = inputs.shape[-1] - 2 * d
    annotations, mask, summary = (np.asarray(x, np.float64) for x in encoded[:3])
    batch = annotations.shape[0]
    if cell.context == "fixed":
        context = np.tanh(reference.dense(summary, *_weights(cell.context_dense)))
        z = np.tanh(reference.dense(context, *_weights(cell.init_dense)))
    else:
        z = reference.rnnsearch_initial_state(annotations, mask, *_weights(cell.init_dense))
    k = np.zeros_like(z)
    top_h, top_c = np.zeros_like(z), np.zeros_like(z)
    words = []  # (M(y_i), C(y_i)) rows, the most recent first
    outputs = []
    for t in range(inputs.shape[1]):
        e = inputs[:, t, :width]
        if cell.context == "attention":
            if cell.feedback_attention:
                query = np.tanh(reference.dense(np.concatenate([z, e], -1), *_weights(cell.query_dense)))
            else:
                query = z
            attention = cell.attention
            context, _ = reference.additive_attention(
                query,
                annotations,
                mask,
                numpy(attention.query_kernel),
                numpy(attention.key_kernel),
                numpy(attention.score_vector),
            )
        lstm_input = e if cell.context_once == "output" else np.concatenate([e, context], -1)
        z, k = reference.lstm_step(lstm_input, z, k, *_weights(cell.lstm))
        words = [(inputs[:, t, width : width + d], inputs[:, t, width + d :])] + words[: n - 1]
        keys, values = np.zeros((batch, n, d)), np.zeros((batch, n, d))
        for i, (key, value) in enumerate(words):
            keys[:, i], values[:, i] = key, value
        if cell.temporal_embeddings:
            keys, values = keys + numpy(cell.temporal_keys), values + numpy(cell.temporal_values)
        memory_query = z if cell.memory_query is None else reference.dense(z, *_weights(cell.memory_query))
        read, _ = reference.memory_block_read(memory_query, keys, values, len(words))
        h = reference.gated_merge(read, z, *_weights(cell.gate))
        if cell.top_lstm:
            top_h, top_c = reference.lstm_step(h, top_h, top_c, *_weights(cell.top))
            h = top_h
        outputs.append(h if cell.context_once == "input" else np.concatenate([h, context], -1))
    deep = cell.deep_output
    return reference.readout(
        np.stack(outputs, 1),
        *[numpy(w) for w in (deep.hidden.kernel, deep.hidden.bias, deep.logits.kernel, deep.logits.bias)],
    )


@pytest.mark.parametrize(
    "kwargs, fit",
    [
        ({"dropout": 0.1, "seed": 1}, True),  # attention, context twice, temporal rows, d = units
        (
            {
                "context": "fixed",
                "context_once": "output",
                "memory_dim": 5,
                "temporal_embeddings": False,
                "top_lstm": True,
            },
            True,
        ),  # the report's fixed context; RMR; a memory query map
        ({"context_once": "input", "feedback_attention": False, "memory_size": 2}, False),
    ],
    ids=["rmn_attention", "rmr_fixed_context_output_once", "input_once_bahdanau_query"],
)
def test_cell_contract_and_numpy_reference(kwargs, fit):
    masking = kwargs.get("context") != "fixed"
    run_cell_test(
        lambda: _make(**kwargs), embedding_dim=E, target_length=T, reference=_reference_logits, masking=masking, fit=fit
    )


def _built(seed=0, **kwargs):
    cell = _make(**kwargs)
    cell.build((None, E + 2 * cell.memory_dim))
    randomize_weights(cell, seed=seed)
    return cell


def test_prepare_inputs_appends_the_memory_embeddings_rows():
    cell = _built(memory_dim=5)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, VOCAB, size=(B, T)).astype("int32")
    embedded = rng.normal(size=(B, T, E)).astype("float32")
    inputs = numpy(cell.prepare_inputs(embedded, tokens))
    keys, values = numpy(cell.key_embedding.embeddings), numpy(cell.value_embedding.embeddings)
    np.testing.assert_array_equal(inputs, np.concatenate([embedded, keys[tokens], values[tokens]], -1))
    assert numpy(cell.prepare_inputs(embedded[:, 0], tokens[:, 0])).shape == (B, E + 10)


def test_memory_attention_covers_only_the_words_so_far():
    """P_t sums to 1 over the min(t, n) filled slots and is exactly 0 on the others."""
    cell = _built(memory_size=4)
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, VOCAB, size=(B, 7)).astype("int32")
    inputs = cell.prepare_inputs(rng.normal(size=(B, 7, E)).astype("float32"), tokens)
    states = cell.initial_states(random_encoder_output(B, TX, D))
    for t in range(7):
        weights = numpy(cell.memory_attention(inputs[:, t], states))
        filled = min(t + 1, 4)
        assert np.all(weights[:, filled:] == 0.0), (t, weights)
        assert np.all(weights[:, :filled] > 0.0), (t, weights)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
        _, states, _ = cell.step(inputs[:, t], states)
    # The memory holds the last 4 words, newest first.
    keys = numpy(states[2]).reshape(B, 4, cell.memory_dim)
    table = numpy(cell.key_embedding.embeddings)
    np.testing.assert_array_equal(keys, table[tokens[:, ::-1][:, :4]])
    np.testing.assert_array_equal(numpy(states[4]), np.ones((B, 4)))


def test_memory_attention_depends_on_the_query():
    """Different LSTM states weigh the same words differently (the block reads content)."""
    cell = _built(memory_size=4)
    rng = np.random.default_rng(3)
    tokens = rng.integers(4, VOCAB, size=(1, 4)).astype("int32")
    inputs = cell.prepare_inputs(rng.normal(size=(1, 4, E)).astype("float32"), tokens)
    inputs = ops.concatenate([inputs, inputs], 0)
    encoded = random_encoder_output(2, TX, D, seed=4)
    states = cell.initial_states(encoded)
    for t in range(3):
        _, states, _ = cell.step(inputs[:, t], states)
    weights = numpy(cell.memory_attention(inputs[:, 3], states))
    assert np.abs(weights[0] - weights[1]).max() > 1e-3, weights


def test_bad_arguments_raise_value_error_naming_the_argument():
    check_bad_arguments(
        _make,
        [
            ({"memory_size": 0}, "memory_size"),
            ({"memory_dim": -1}, "memory_dim"),
            ({"context": "summary"}, "context"),
            ({"context_once": "both"}, "context_once"),
            ({"top_lstm": 1}, "top_lstm"),
            ({"temporal_embeddings": "yes"}, "temporal_embeddings"),
            ({"attention_units": 0}, "attention_units"),
        ],
    )


def test_build_names_inputs_that_skipped_prepare_inputs():
    cell = _make()
    with pytest.raises(ValueError, match="prepare_inputs"):
        cell.build((None, 2 * UNITS))


def test_mixed_precision_policy_reaches_every_sublayer():
    check_mixed_precision(_make(dtype="mixed_bfloat16", top_lstm=True), random_encoder_output(B, TX, D), E)


def test_serializes_with_a_custom_memory_initializer():
    cell = _make(memory_initializer=keras.initializers.Zeros())
    clone = RMNCell.from_config(cell.get_config())
    assert clone.get_config() == cell.get_config()


@pytest.mark.parametrize("context", ["attention", "fixed"])
def test_step_details_hold_the_memory_attention(context):
    """``step_details``'s "memory_attention" is ``memory_attention``'s ``P_t``: one `_step` for both."""
    cell = _built(memory_size=4, context=context, top_lstm=context == "fixed")
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, VOCAB, size=(B, 6)).astype("int32")
    inputs = cell.prepare_inputs(rng.normal(size=(B, 6, E)).astype("float32"), tokens)
    encoded = random_encoder_output(B, TX, D)
    names = ["memory_attention"] + (["attention"] if context == "attention" else [])
    details = check_step_details(cell, encoded, inputs, names)
    states = cell.initial_states(encoded)
    for t, step in enumerate(details):
        np.testing.assert_array_equal(step["memory_attention"], numpy(cell.memory_attention(inputs[:, t], states)))
        np.testing.assert_allclose(step["memory_attention"].sum(-1), 1.0, atol=1e-6)  # y_{t-1} is always there
        _, states, _ = cell.step(inputs[:, t], states)
