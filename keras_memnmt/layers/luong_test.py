"""Tests for LuongCell (run once per backend).

``run_cell_test`` checks the contract every cell meets (states, RNN run == stepping,
masking, greedy and beam search, serialization, fit and ``.keras``) and the NumPy
reference below, written from Bradbury & Socher 2016, §2 (Luong et al. 2015, Eq. 5-8,
input feeding).
"""

import keras
import numpy as np
import pytest

from keras_memnmt.layers.luong import LuongCell
from keras_memnmt.testing import random_encoder_output, reference, run_cell_test
from keras_memnmt.testing.checks import (
    check_bad_arguments,
    check_layer_masks,
    check_mixed_precision,
    check_stacked_hand_off,
    check_step_details,
)
from keras_memnmt.testing.utils import numpy, randomize_weights, stacked_reference_start, weights_of

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

B, TX, E, T = 3, 5, 4, 5
UNITS, VOCAB, READ = 8, 11, 9
ARGUMENTS = dict(
    units=UNITS,
    target_vocab_size=VOCAB,
    readout_units=READ,
    annotation_units=6,
    num_layers=2,
    score="general",
    init_state="zeros",
)


def _make(**kwargs):
    return LuongCell(**{**ARGUMENTS, **kwargs})


def _reference_logits(cell, encoded, embedded):
    """Bradbury & Socher §2 in NumPy, one step at a time (no dropout: inference)."""
    annotations, mask, states, kernel, score_vector = stacked_reference_start(cell, encoded)
    fed = np.zeros((annotations.shape[0], cell.readout_units))  # h̃_0 = 0
    outputs = []
    for t in range(embedded.shape[1]):
        x = np.concatenate([embedded[:, t], fed], -1) if cell.input_feeding else embedded[:, t]
        for i in range(cell.num_layers):
            h, c = reference.lstm_step(x, states[2 * i], states[2 * i + 1], *weights_of(cell.lstms[i]))
            states[2 * i], states[2 * i + 1], x = h, c, h
        context, _ = reference.luong_attention(x, annotations, mask, cell.score, kernel, score_vector)
        (w_att,) = weights_of(cell.attentional)  # no bias
        fed = np.tanh(reference.dense(np.concatenate([x, context], -1), w_att))  # h̃_t
        outputs.append(fed)
    logits = cell.deep_output.logits
    return reference.dense(np.stack(outputs, 1), numpy(logits.kernel), numpy(logits.bias))  # W_out h̃ + b


@pytest.mark.parametrize(
    "kwargs, fit",
    [
        ({"layer_dropout": 0.3, "dropout": 0.1, "seed": 2}, True),  # general, input feeding
        ({"score": "dot", "annotation_units": UNITS, "num_layers": 1}, True),  # the paper's score
        ({"score": "concat", "concat_units": 7, "input_feeding": False}, False),
    ],
    ids=["general_feeding", "dot_one_layer", "concat_no_feeding"],
)
def test_cell_contract_and_numpy_reference(kwargs, fit):
    run_cell_test(lambda: _make(**kwargs), embedding_dim=E, target_length=T, reference=_reference_logits, fit=fit)


def _built(seed=0, **kwargs):
    cell = _make(**kwargs)
    cell.build((None, E))
    randomize_weights(cell, seed=seed)
    return cell


def test_input_feeding_carries_the_attentional_vector_to_the_next_step():
    """states[0] after a step is the step's output h̃_t, and it changes the next step."""
    cell = _built()
    rng = np.random.default_rng(5)
    states = cell.initial_states(random_encoder_output(B, TX, 6))
    assert np.all(numpy(states[0]) == 0.0)
    e = rng.normal(size=(B, E)).astype("float32")
    output, states, _ = cell.step(e, states)
    np.testing.assert_array_equal(numpy(states[0]), numpy(output))
    changed = [numpy(states[0]), rng.normal(size=(B, READ)).astype("float32")]
    nexts = [numpy(cell.step(e, [keras.ops.convert_to_tensor(f), *states[1:]])[0]) for f in changed]
    assert not np.allclose(nexts[0], nexts[1])


def test_encoder_hand_off_starts_each_layer_from_its_encoder_layer():
    check_stacked_hand_off(
        _built(init_state="encoder"), _reference_logits, first=1, annotation_units=6, embedding_dim=E
    )


def test_layer_dropout_masks_are_drawn_once_per_sequence_in_training_only():
    check_layer_masks(_built(layer_dropout=0.5, seed=4), index=5, annotation_units=6)


@pytest.mark.parametrize("on_top", [True, False])
def test_layer_dropout_on_top_decides_whether_the_attention_query_is_dropped(on_top):
    """The top layer's mask acts on the query only with ``layer_dropout_on_top``; the masks
    between layers act either way."""
    cell = _built(layer_dropout=0.5, layer_dropout_on_top=on_top)
    states = cell.initial_states(random_encoder_output(B, TX, 6))
    e = np.random.default_rng(6).normal(size=(B, E)).astype("float32")

    def output(bottom_mask, top_mask):
        masks = np.concatenate([np.full((B, UNITS), bottom_mask), np.full((B, UNITS), top_mask)], -1)
        return numpy(cell.step(e, [*states[:5], keras.ops.convert_to_tensor(masks.astype("float32")), *states[6:]])[0])

    undropped = output(1.0, 1.0)
    assert np.allclose(output(1.0, 0.0), undropped) != on_top
    assert not np.allclose(output(0.0, 1.0), undropped)


def test_bad_arguments_raise_value_error_naming_the_argument():
    check_bad_arguments(
        _make,
        [
            ({"num_layers": 0}, "num_layers"),
            ({"score": "additive"}, "score"),
            ({"score": "dot"}, "score"),  # annotation_units 6 != units 8
            ({"layer_dropout": 1.0}, "layer_dropout"),
            ({"init_state": "mean"}, "init_state"),
            ({"input_feeding": "yes"}, "input_feeding"),
            ({"layer_dropout_on_top": "no"}, "layer_dropout_on_top"),
        ],
    )


def test_mixed_precision_policy_reaches_every_sublayer():
    check_mixed_precision(_make(dtype="mixed_bfloat16"), random_encoder_output(B, TX, 6), E)


def test_step_details_hold_the_steps_attention():
    cell = _make()
    cell.build((None, E))
    randomize_weights(cell)
    embedded = np.random.default_rng(3).normal(size=(B, 4, E)).astype("float32")
    details = check_step_details(cell, random_encoder_output(B, TX, 6), embedded, ["attention"])
    assert set(details[0]) == {"output", "attention"}
