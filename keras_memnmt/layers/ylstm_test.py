"""Tests for the Y-LSTM cells (run once per backend).

``run_cell_test`` checks the decoder cell's contract (states, RNN run == stepping, masking,
greedy and beam search, serialization, fit and ``.keras``) and the NumPy reference below,
written from Bradbury & Socher 2016, §2.1; the encoder cell has its own reference of the
tracker exchange.
"""

import keras
import numpy as np
import pytest

from keras_memnmt.layers.ylstm import YLSTMCell
from keras_memnmt.layers.ylstm_encoder import YLSTMEncoderCell
from keras_memnmt.testing import random_encoder_output, reference, run_cell_test
from keras_memnmt.testing.checks import (
    check_bad_arguments,
    check_mixed_precision,
    check_step_details,
)
from keras_memnmt.testing.utils import numpy, randomize_weights, weights_of

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

B, TX, E, T = 3, 5, 4, 5
UNITS, VOCAB, TRACKER = 8, 11, 6
ARGUMENTS = dict(
    units=UNITS,
    target_vocab_size=VOCAB,
    readout_units=UNITS,
    annotation_units=2 * TRACKER,
    num_layers=3,
    tracker_layer=2,
    tracker_units=TRACKER,
)


def _make(**kwargs):
    return YLSTMCell(**{**ARGUMENTS, **kwargs})


def _tracked_stack_step(cell, x, states, tracker, above_tracker=None, masks=None):
    """Bradbury & Socher §2.1's a^l_t, a^m_t and a^tracker_t in NumPy: ``(top, states, h', k')``.

    ``above_tracker``: None, or a function of ``h'`` called once the tracker has run; what
    it returns (None: nothing) every layer above m also reads (``same_step_context``).
    ``masks``: ``(B, L*units)`` dropout masks on each layer's output (None: none); the
    tracker reads layer m's output after its mask, or before it (``tracker_reads_masked``
    False)."""
    middle, context = cell.tracker_layer - 1, None
    for i in range(cell.num_layers):
        if i == middle:
            x = np.concatenate([x, tracker[0]], -1)  # a^m_t = [h^{m-1}_t; h^m_{t-1}; h^tracker_{t-1}]
        if context is not None:
            x = np.concatenate([x, context], -1)  # [x^l; h~^tracker_t], l > m
        h, c = reference.lstm_step(x, states[2 * i], states[2 * i + 1], *weights_of(cell.lstms[i]))
        dropped = h if masks is None else h * masks[:, i * cell.units : (i + 1) * cell.units]
        states[2 * i], states[2 * i + 1], x = h, c, dropped
        if i == middle:  # a^tracker_t
            read = dropped if cell.tracker_reads_masked else h
            h_tracker, c_tracker = reference.lstm_step(read, tracker[0], tracker[1], *weights_of(cell.tracker))
            context = above_tracker(h_tracker) if above_tracker is not None else None
    return x, states, h_tracker, c_tracker


def _reference_logits(cell, encoded, embedded):
    """The decoder of Bradbury & Socher §2.1 in NumPy, one step at a time (no dropout: inference)."""
    annotations, mask = (np.asarray(x, np.float64) for x in encoded[:2])
    t_units = cell.tracker_units
    H, C = annotations[..., :t_units], annotations[..., t_units:]
    states = [np.zeros((annotations.shape[0], cell.units))] * (2 * cell.num_layers)
    uniform = mask / mask.sum(-1, keepdims=True)  # equal scores over the real positions
    tracker = [np.einsum("bs,bsd->bd", uniform, H), np.einsum("bs,bsd->bd", uniform, C)]
    kernel = numpy(cell.tracker_attention.kernel) if cell.score == "general" else None
    outputs = []
    attended = {}

    def attend(query):  # the step's attention, queried by the tracker's h'
        _, attended["alpha"] = reference.luong_attention(query, H, mask, cell.score, kernel)  # softmax_s score(h', h_s)
        h_tilde = np.einsum("bs,bsd->bd", attended["alpha"], H)  # h~^tracker_t
        return h_tilde if cell.same_step_context else None

    for t in range(embedded.shape[1]):
        top, states, _, _ = _tracked_stack_step(cell, embedded[:, t], states, tracker, above_tracker=attend)
        alpha = attended["alpha"]
        tracker = [np.einsum("bs,bsd->bd", alpha, H), np.einsum("bs,bsd->bd", alpha, C)]  # h~, c~
        if cell.output_context:  # o_t = tanh(W_c [h^L_t; h~^tracker_t]) (Luong et al. 2015, Eq. 5)
            top = np.tanh(np.concatenate([top, tracker[0]], -1) @ numpy(cell.context_output.kernel))
        outputs.append(top)
    logits = cell.deep_output.logits
    return reference.dense(np.stack(outputs, 1), numpy(logits.kernel), numpy(logits.bias))  # W_out h^L + b


@pytest.mark.parametrize(
    "kwargs, fit",
    [
        ({"layer_dropout": 0.3, "dropout": 0.1, "seed": 2}, True),  # the paper's dot score
        ({"score": "general", "num_layers": 1, "tracker_layer": 1}, True),
        ({"tracker_layer": 3, "tracker_units": None, "annotation_units": 2 * UNITS}, False),  # top layer
        ({"same_step_context": True, "num_layers": 4, "layer_dropout": 0.3, "seed": 2}, True),
        ({"same_step_context": True, "score": "general", "num_layers": 2, "tracker_layer": 1}, False),
        (
            {
                "output_context": True,
                "same_step_context": True,
                "layer_dropout": 0.3,
                "tracker_reads_masked": False,
                "seed": 2,
            },
            True,
        ),
    ],
    ids=[
        "dot_middle",
        "general_one_layer",
        "top_layer_tracker",
        "same_step_context",
        "same_step_context_bottom_tracker",
        "output_context",
    ],
)
def test_cell_contract_and_numpy_reference(kwargs, fit):
    run_cell_test(lambda: _make(**kwargs), embedding_dim=E, target_length=T, reference=_reference_logits, fit=fit)


def test_the_tracker_starts_from_the_mean_encoder_state_and_the_source_is_reached_only_by_attention():
    cell = _make()
    cell.build((None, E))
    randomize_weights(cell, seed=1)
    encoded = random_encoder_output(B, TX, 2 * TRACKER)
    states = cell.initial_states(encoded)
    layers = 2 * cell.num_layers
    mask = encoded.mask
    mean = (encoded.annotations * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    np.testing.assert_allclose(numpy(states[layers]), mean[:, :TRACKER], atol=1e-6)
    np.testing.assert_allclose(numpy(states[layers + 1]), mean[:, TRACKER:], atol=1e-6)
    assert all(np.all(numpy(s) == 0.0) for s in states[:layers])
    e = np.random.default_rng(2).normal(size=(B, E)).astype("float32")
    _, new_states, attention = cell.step(e, states)
    np.testing.assert_allclose(numpy(attention).sum(-1), 1.0, atol=1e-6)
    assert np.all(numpy(attention)[0, TX - 2 :] == 0.0)  # padded positions


def test_encoder_cell_matches_the_papers_tracker_exchange():
    cell = YLSTMEncoderCell(UNITS, num_layers=3, tracker_layer=2, tracker_units=TRACKER)
    cell.build((None, E))
    randomize_weights(cell, seed=3)
    rng = np.random.default_rng(4)
    states = cell.initial_states(B)
    np_states = [np.zeros((B, UNITS))] * 6
    np_tracker = [np.zeros((B, TRACKER))] * 2
    for _ in range(3):
        x = rng.normal(size=(B, E)).astype("float32")
        output, states = cell(x, states)
        top, np_states, h, c = _tracked_stack_step(cell, x, np_states, np_tracker)
        np_tracker = [h, c]
        np.testing.assert_allclose(numpy(output), np.concatenate([top, h, c], -1), atol=1e-5)


@pytest.mark.parametrize("tracker_reads_masked", [True, False])
def test_the_tracker_reads_layer_m_after_or_before_its_dropout_mask(tracker_reads_masked):
    """With the dropout masks of training drawn, the step's tracker attention is the NumPy
    reference's whose tracker reads layer m's output masked (default) or unmasked."""
    cell = _make(layer_dropout=0.5, seed=5, tracker_reads_masked=tracker_reads_masked)
    cell.build((None, E))
    randomize_weights(cell, seed=1)
    encoded = random_encoder_output(B, TX, 2 * TRACKER)
    states = cell.initial_states(encoded, training=True)
    layers = 2 * cell.num_layers
    masks = numpy(states[layers + 2])
    assert (masks == 0).any()  # some units dropped
    e = np.random.default_rng(2).normal(size=(B, E)).astype("float32")
    _, _, attention = cell.step(e, states)
    np_states = [np.zeros((B, UNITS))] * layers
    tracker = [numpy(states[layers]), numpy(states[layers + 1])]
    _, _, query, _ = _tracked_stack_step(cell, e.astype(np.float64), np_states, tracker, masks=masks)
    annotations, mask = encoded.annotations, encoded.mask
    _, alpha = reference.luong_attention(query, annotations[..., :TRACKER], mask, "dot", None)
    np.testing.assert_allclose(numpy(attention), alpha, atol=1e-5)


def test_bad_arguments_raise_value_error_naming_the_argument():
    check_bad_arguments(
        _make,
        [
            ({"num_layers": 0}, "num_layers"),
            ({"tracker_layer": 4}, "tracker_layer"),
            ({"tracker_units": 0}, "tracker_units"),
            ({"score": "concat"}, "score"),
            ({"readout_units": 5}, "readout_units"),
            ({"annotation_units": 6}, "annotation_units"),
            ({"layer_dropout": 1.0}, "layer_dropout"),
            ({"same_step_context": "yes"}, "same_step_context"),
            ({"tracker_reads_masked": "no"}, "tracker_reads_masked"),
            ({"output_context": 1}, "output_context"),
            ({"same_step_context": True, "tracker_layer": 3}, "same_step_context"),
        ],
    )
    with pytest.raises(ValueError, match="tracker_layer"):
        YLSTMEncoderCell(UNITS, num_layers=2, tracker_layer=3)


def test_mixed_precision_policy_reaches_every_sublayer():
    check_mixed_precision(_make(dtype="mixed_bfloat16"), random_encoder_output(B, TX, 2 * TRACKER), E)


def test_encoder_cell_serializes():
    cell = YLSTMEncoderCell(UNITS, num_layers=2, tracker_layer=1, tracker_units=TRACKER, layer_dropout=0.1, seed=3)
    again = YLSTMEncoderCell.from_config(cell.get_config())
    assert again.get_config() == cell.get_config()
    assert isinstance(
        keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(cell)), YLSTMEncoderCell
    )


def test_step_details_hold_the_tracker_attention():
    """The tracker's attention over the encoder's tracker states is the Y-LSTM's "attention"."""
    cell = _make()
    cell.build((None, E))
    randomize_weights(cell)
    embedded = np.random.default_rng(4).normal(size=(B, 4, E)).astype("float32")
    details = check_step_details(cell, random_encoder_output(B, TX, 2 * TRACKER), embedded, ["attention"])
    assert set(details[0]) == {"output", "attention"} and details[0]["attention"].shape == (B, TX)
