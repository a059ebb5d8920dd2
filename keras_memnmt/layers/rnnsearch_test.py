"""Tests for RNNsearchCell (run once per backend).

The contract every cell meets (states, RNN run == stepping, masking, decoding,
serialization, fit and ``.keras``, the NumPy reference of the logits) is checked
by ``run_cell_test``; the tests below check what is RNNsearch's own.
"""

import keras
import numpy as np
import pytest

from keras_memnmt.layers import EncoderOutput
from keras_memnmt.layers.rnnsearch import RNNsearchCell
from keras_memnmt.testing import random_encoder_output, reference, run_cell_test
from keras_memnmt.testing.checks import (
    check_bad_arguments,
    check_input_dropout,
    check_mixed_precision,
    check_step_details,
)
from keras_memnmt.testing.utils import numpy, randomize_weights

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

B, TX, D, E, T = 3, 5, 6, 4, 3
UNITS, VOCAB, ATT, READ = 8, 11, 7, 9
ARGUMENTS = dict(units=UNITS, target_vocab_size=VOCAB, attention_units=ATT, readout_units=READ, annotation_units=D)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    annotations = rng.normal(size=(B, TX, D)).astype("float32")
    mask = np.ones((B, TX), "float32")
    mask[0, 3:] = 0.0  # padded source positions
    mask[2, 4] = 0.0
    embedded = rng.normal(size=(B, T, E)).astype("float32")
    return annotations, mask, embedded


def _make(**kwargs):
    return RNNsearchCell(**{**ARGUMENTS, **kwargs})


def _cell(seed=0, **kwargs):
    cell = _make(**kwargs)
    cell.build((None, E))
    randomize_weights(cell, seed=seed)
    return cell


def _step_weights(cell):
    weights = {
        "feedback_attention": cell.feedback_attention,
        "attention_query_kernel": numpy(cell.attention.query_kernel),
        "attention_key_kernel": numpy(cell.attention.key_kernel),
        "attention_score_vector": numpy(cell.attention.score_vector),
        "gru_kernel": numpy(cell.gru_cell.kernel),
        "gru_recurrent_kernel": numpy(cell.gru_cell.recurrent_kernel),
        "gru_bias": numpy(cell.gru_cell.bias),
    }
    if cell.feedback_attention:
        weights["feedback_kernel"] = numpy(cell.query_dense.kernel)
        weights["feedback_bias"] = numpy(cell.query_dense.bias)
    return weights


def _reference_outputs(cell, annotations, mask, embedded, summary=None):
    """Reference s_0 and T steps: the step outputs `(B, T, F)`."""
    kernel, bias = numpy(cell.init_dense.kernel), numpy(cell.init_dense.bias)
    if cell.init_state == "summary":
        state = np.tanh(reference.dense(summary, kernel, bias))
    else:
        state = reference.rnnsearch_initial_state(annotations, mask, kernel, bias)
    outputs = []
    for t in range(embedded.shape[1]):
        output, state, _ = reference.rnnsearch_step(embedded[:, t], state, annotations, mask, **_step_weights(cell))
        outputs.append(output)
    return np.stack(outputs, 1)


def _reference_logits(cell, encoded, embedded):
    outputs = _reference_outputs(cell, encoded.annotations, encoded.mask, embedded, encoded.summary)
    deep = cell.deep_output
    weights = (deep.hidden.kernel, deep.hidden.bias, deep.logits.kernel, deep.logits.bias)
    return reference.readout(outputs, *[numpy(w) for w in weights])


@pytest.mark.parametrize(
    "kwargs, fit",
    [
        ({"dropout": 0.1, "seed": 1}, True),  # feedback attention, s_0 from the mean
        ({"feedback_attention": False, "init_state": "summary"}, False),  # Bahdanau's
    ],
    ids=["feedback_attention", "bahdanau_query_summary_init_state"],
)
def test_cell_contract_and_numpy_reference(kwargs, fit):
    run_cell_test(lambda: _make(**kwargs), embedding_dim=E, reference=_reference_logits, fit=fit)


def test_initial_states_layout_and_reference():
    annotations, mask, _ = _data()
    cell = _cell()
    assert cell.state_size == [UNITS, None, None, None]
    assert cell.output_size == UNITS + D + E
    states = [numpy(s) for s in cell.initial_states(annotations, mask)]
    assert [s.shape for s in states] == [(B, UNITS), (B, TX * D), (B, TX * ATT), (B, TX)]
    s0 = reference.rnnsearch_initial_state(
        annotations, mask, numpy(cell.init_dense.kernel), numpy(cell.init_dense.bias)
    )
    np.testing.assert_allclose(states[0], s0, atol=1e-5)
    np.testing.assert_array_equal(states[1].reshape(B, TX, D), annotations)
    keys = annotations @ numpy(cell.attention.key_kernel)  # U_a h_j
    np.testing.assert_allclose(states[2].reshape(B, TX, ATT), keys, atol=1e-5)
    np.testing.assert_array_equal(states[3], mask)


def test_summary_initial_state():
    annotations, mask, _ = _data()
    cell = _cell(init_state="summary")
    summary = annotations[:, -1]
    s0 = numpy(cell.initial_states(annotations, mask, summary)[0])
    kernel, bias = numpy(cell.init_dense.kernel), numpy(cell.init_dense.bias)
    np.testing.assert_allclose(s0, np.tanh(summary @ kernel + bias), atol=1e-5)
    with pytest.raises(ValueError, match="summary"):
        cell.initial_states(annotations, mask)


def test_feedback_attention_makes_attention_depend_on_previous_word():
    annotations, mask, embedded = _data()
    other = embedded[:, 0] + 1.0
    for feedback, should_change in [(True, True), (False, False)]:
        cell = _cell(feedback_attention=feedback)
        states = cell.initial_states(annotations, mask)
        _, _, weights = cell.step(embedded[:, 0], states)
        _, _, weights_other = cell.step(other, states)
        changed = not np.allclose(numpy(weights), numpy(weights_other), atol=1e-6)
        assert changed == should_change


def test_target_mask_with_zero_output_for_mask():
    annotations, mask, embedded = _data()
    cell = _cell()
    target_mask = np.ones((B, T), bool)
    target_mask[1, 2:] = False
    rnn = keras.layers.RNN(cell, return_sequences=True, zero_output_for_mask=True)
    outputs = numpy(rnn(embedded, initial_state=cell.initial_states(annotations, mask), mask=target_mask))
    ref_outputs = _reference_outputs(cell, annotations, mask, embedded)
    np.testing.assert_allclose(outputs[target_mask], ref_outputs[target_mask], atol=1e-5)
    np.testing.assert_array_equal(outputs[~target_mask], 0.0)


def test_source_length_can_change_between_calls():
    cell = _cell()
    rnn = keras.layers.RNN(cell, return_sequences=True)
    for source_len in (2, 7):
        annotations = np.ones((B, source_len, D), "float32")
        mask = np.ones((B, source_len), "float32")
        outputs = rnn(np.ones((B, T, E), "float32"), initial_state=cell.initial_states(annotations, mask))
        assert tuple(outputs.shape) == (B, T, UNITS + D + E)


def test_dropout_only_in_training():
    """`dropout` is variational dropout of the input sequence, drawn by `drop_inputs`
    before the loop: one mask per sequence in training (the same features zero at every
    step), the input unchanged otherwise."""
    dropped = check_input_dropout(_cell(dropout=0.5, seed=0))
    assert 0.3 < (dropped[:, 0] == 0.0).mean() < 0.7


def test_the_models_cell_has_no_input_dropout():
    """`models.RNNsearch` drops the target embeddings itself (`dropout`) and builds its cell
    with `dropout=0`: the cell's `drop_inputs` leaves the model's inputs alone."""
    from keras_memnmt.models import RNNsearch

    model = RNNsearch(
        20,
        20,
        embedding_dim=E,
        encoder_units=3,
        decoder_units=UNITS,
        attention_units=ATT,
        readout_units=READ,
        dropout=0.5,
    )
    assert model.cell.dropout == 0.0
    embedded = np.random.default_rng(0).normal(size=(B, T, E)).astype("float32")
    np.testing.assert_array_equal(numpy(model.cell.drop_inputs(embedded, training=True)), embedded)


def test_bad_arguments_raise_value_error_naming_the_argument():
    check_bad_arguments(
        _make,
        [
            ({"attention_units": 1.5}, "attention_units"),
            ({"feedback_attention": 1}, "feedback_attention"),
            ({"attention_remat": "yes"}, "attention_remat"),
            ({"init_state": "first"}, "init_state"),
        ],
    )


def test_mixed_precision_policy_reaches_every_sublayer():
    check_mixed_precision(_make(dtype="mixed_bfloat16"), random_encoder_output(B, TX, D), E)


@pytest.mark.parametrize("feedback_attention", [True, False])
def test_step_details_hold_the_steps_attention(feedback_attention):
    annotations, mask, embedded = _data()
    cell = _cell(feedback_attention=feedback_attention)
    details = check_step_details(cell, EncoderOutput(annotations, mask), embedded, ["attention"])
    assert set(details[0]) == {"output", "attention"}
