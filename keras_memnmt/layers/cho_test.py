"""Tests for ChoDecoderCell (run once per backend).

The contract every cell meets (states, RNN run == stepping, decoding,
serialization, input dropout, fit and ``.keras``, the NumPy reference of the
logits) is checked by ``run_cell_test``; the tests below check what is Cho's own.
"""

import numpy as np
import pytest

from keras_memnmt.layers.cho import ChoDecoderCell
from keras_memnmt.testing import random_encoder_output, reference, run_cell_test
from keras_memnmt.testing.checks import (
    check_bad_arguments,
    check_mixed_precision,
    check_step_details,
)
from keras_memnmt.testing.utils import numpy, randomize_weights

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

B, TX, D, E = 3, 5, 6, 4
UNITS, VOCAB, READ = 8, 11, 9
ARGUMENTS = dict(units=UNITS, target_vocab_size=VOCAB, readout_units=READ, annotation_units=D)


def _make(**kwargs):
    return ChoDecoderCell(**{**ARGUMENTS, **kwargs})


def _reference_initial_states(cell, summary):
    return reference.cho_initial_states(
        summary,
        numpy(cell.context_dense.kernel),
        numpy(cell.context_dense.bias),
        numpy(cell.init_dense.kernel),
        numpy(cell.init_dense.bias),
    )


def _reference_logits(cell, encoded, embedded):
    state, context = _reference_initial_states(cell, encoded.summary)
    gru = cell.gru_cell
    gru_weights = [numpy(w) for w in (gru.kernel, gru.recurrent_kernel, gru.bias)]
    outputs = []
    for t in range(embedded.shape[1]):
        output, state = reference.cho_step(embedded[:, t], state, context, *gru_weights)
        outputs.append(output)
    deep = cell.deep_output
    weights = (deep.hidden.kernel, deep.hidden.bias, deep.logits.kernel, deep.logits.bias)
    return reference.readout(np.stack(outputs, 1), *[numpy(w) for w in weights])


def test_cell_contract_and_numpy_reference():
    """With input dropout, which `fit` then draws through `drop_inputs`."""
    run_cell_test(lambda: _make(dropout=0.1, seed=1), embedding_dim=E, reference=_reference_logits, masking=False)


def test_initial_states_match_reference():
    encoded = random_encoder_output(B, TX, D)
    cell = _make()
    cell.build((None, E))
    randomize_weights(cell)
    assert cell.state_size == [UNITS, UNITS]
    assert cell.output_size == 2 * UNITS + E
    s0, context = [numpy(s) for s in cell.initial_states(encoded)]
    ref_s0, ref_context = _reference_initial_states(cell, encoded.summary)
    np.testing.assert_allclose(context, ref_context, atol=1e-5)
    np.testing.assert_allclose(s0, ref_s0, atol=1e-5)
    # The context is fixed: annotations and mask are not used, the summary is needed.
    s0_none, _ = cell.initial_states(None, None, encoded.summary)
    np.testing.assert_array_equal(numpy(s0_none), s0)
    with pytest.raises(ValueError, match="summary"):
        cell.initial_states(encoded.annotations, encoded.mask)


def test_bad_arguments_raise_value_error_naming_the_argument():
    check_bad_arguments(_make)


def test_mixed_precision_policy_reaches_every_sublayer():
    check_mixed_precision(_make(dtype="mixed_bfloat16"), random_encoder_output(B, TX, D), E)


def test_step_details_have_no_attention():
    cell = _make()
    cell.build((None, E))
    randomize_weights(cell)
    embedded = np.random.default_rng(0).normal(size=(B, 3, E)).astype("float32")
    details = check_step_details(cell, random_encoder_output(B, TX, D), embedded, [])
    assert set(details[0]) == {"output"}
