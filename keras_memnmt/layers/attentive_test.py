"""Tests for AttentiveCell (run once per backend).

``run_cell_test`` checks the contract every cell meets (states, RNN run == stepping,
masking, greedy and beam search with the past-states buffer reordered, serialization,
fit and ``.keras``) and the NumPy reference below, written from Salton et al.'s Eq. 5-16;
the other tests check the past-state attention, the hand-off and the arguments.
"""

import numpy as np
import pytest

from keras_memnmt.layers.attentive import AttentiveCell
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
    init_state="zeros",
    history_length=3,
)


def _make(**kwargs):
    return AttentiveCell(**{**ARGUMENTS, **kwargs})


def _reference_logits(cell, encoded, embedded):
    """Eq. 5-16 of Salton et al. 2017 in NumPy, one step at a time (no dropout: inference)."""
    annotations, mask, states, kernel, score_vector = stacked_reference_start(cell, encoded)
    batch, units = annotations.shape[0], cell.units
    past = []  # top states h_1..h_{t-1}, the most recent first
    outputs = []
    for t in range(embedded.shape[1]):
        x = embedded[:, t]
        for i in range(cell.num_layers):
            h, c = reference.lstm_step(x, states[2 * i], states[2 * i + 1], *weights_of(cell.lstms[i]))
            states[2 * i], states[2 * i + 1], x = h, c, h
        top = x
        # Eq. 11-13 over the last history_length states; c^d = 0 before any.
        window = past[: cell.history_length]
        if window:
            scores = np.zeros((batch, len(window)))
            for i, h_i in enumerate(window):
                pre = reference.dense(h_i, *weights_of(cell.past_key))
                if cell.self_score == "combined":
                    pre = pre + reference.dense(top, *weights_of(cell.past_query))
                scores[:, i] = np.tanh(pre) @ numpy(cell.past_score).astype(np.float64)
            weights = reference.masked_softmax(scores, None)
            past_context = sum(weights[:, i : i + 1] * h_i for i, h_i in enumerate(window))
        else:
            past_context = np.zeros((batch, units))
        merged_past = np.tanh(
            reference.dense(np.concatenate([top, past_context], -1), *weights_of(cell.past_merge))
        )  # Eq. 14
        context, _ = reference.luong_attention(top, annotations, mask, cell.score, kernel, score_vector)
        merged_source = np.tanh(
            reference.dense(np.concatenate([top, context], -1), *weights_of(cell.source_merge))
        )  # Eq. 10
        outputs.append(np.concatenate([merged_source, merged_past], -1))
        past = [top] + past
    deep = cell.deep_output
    return reference.readout(
        np.stack(outputs, 1),
        *[numpy(w) for w in (deep.hidden.kernel, deep.hidden.bias, deep.logits.kernel, deep.logits.bias)],
    )  # Eq. 16, 15


@pytest.mark.parametrize(
    "kwargs, fit",
    [
        ({"layer_dropout": 0.3, "dropout": 0.1, "seed": 2}, True),  # general, single score (Eq. 13)
        (
            {
                "score": "dot",
                "annotation_units": UNITS,
                "self_score": "combined",
                "num_layers": 1,
                "self_attention_units": 5,
            },
            True,
        ),
        ({"score": "concat", "concat_units": 7, "history_length": 10}, False),  # no sliding
    ],
    ids=["general_single", "dot_combined_one_layer", "concat_long_buffer"],
)
def test_cell_contract_and_numpy_reference(kwargs, fit):
    run_cell_test(lambda: _make(**kwargs), embedding_dim=E, target_length=T, reference=_reference_logits, fit=fit)


def _built(seed=0, **kwargs):
    cell = _make(**kwargs)
    cell.build((None, E))
    randomize_weights(cell, seed=seed)
    return cell


def test_past_attention_covers_only_the_states_so_far():
    """Eq. 12 sums to 1 over the min(t - 1, K) past states and is exactly 0 elsewhere."""
    cell = _built(history_length=4)
    embedded = np.random.default_rng(1).normal(size=(B, 7, E)).astype("float32")
    states = cell.initial_states(random_encoder_output(B, TX, 6))
    for t in range(7):
        weights = numpy(cell.past_attention(embedded[:, t], states))
        filled = min(t, 4)
        assert np.all(weights[:, filled:] == 0.0), (t, weights)
        if filled:
            assert np.all(weights[:, :filled] > 0.0)
            np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
        _, states, _ = cell.step(embedded[:, t], states)


def test_encoder_hand_off_starts_each_layer_from_its_encoder_layer():
    check_stacked_hand_off(
        _built(init_state="encoder"), _reference_logits, first=0, annotation_units=6, embedding_dim=E
    )


def test_layer_dropout_masks_are_drawn_once_per_sequence_in_training_only():
    check_layer_masks(_built(layer_dropout=0.5, seed=4), index=4, annotation_units=6)


def test_bad_arguments_raise_value_error_naming_the_argument():
    check_bad_arguments(
        _make,
        [
            ({"num_layers": 0}, "num_layers"),
            ({"score": "additive"}, "score"),
            ({"score": "dot"}, "score"),  # annotation_units 6 != units 8
            ({"self_score": "both"}, "self_score"),
            ({"history_length": 0}, "history_length"),
            ({"layer_dropout": 1.0}, "layer_dropout"),
            ({"init_state": "mean"}, "init_state"),
            ({"self_attention_units": -2}, "self_attention_units"),
        ],
    )


def test_mixed_precision_policy_reaches_every_sublayer():
    check_mixed_precision(_make(dtype="mixed_bfloat16"), random_encoder_output(B, TX, 6), E)


def test_step_details_hold_the_past_attention():
    """``step_details``'s "past_attention" is ``past_attention``'s Eq. 12: one `_step` for both."""
    cell = _built(history_length=3, self_score="combined")
    embedded = np.random.default_rng(2).normal(size=(B, 5, E)).astype("float32")
    encoded = random_encoder_output(B, TX, 6)
    details = check_step_details(cell, encoded, embedded, ["attention", "past_attention"])
    assert np.all(details[0]["past_attention"] == 0.0)  # no past at t = 1
    states = cell.initial_states(encoded)
    for t, step in enumerate(details):
        np.testing.assert_array_equal(step["past_attention"], numpy(cell.past_attention(embedded[:, t], states)))
        if t:
            np.testing.assert_allclose(step["past_attention"].sum(-1), 1.0, atol=1e-6)
        _, states, _ = cell.step(embedded[:, t], states)
