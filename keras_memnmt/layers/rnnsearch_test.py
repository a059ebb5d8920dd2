"""Tests for RNNsearchCell (run once per backend)."""

import keras
import numpy as np
import pytest

from keras_memnmt.layers.rnnsearch import RNNsearchCell
from keras_memnmt.testing import reference
from keras_memnmt.testing.decoder_model import TinyDecoderModel
from keras_memnmt.testing.utils import numpy, randomize_weights

B, TX, D, E, T = 3, 5, 6, 4, 3
UNITS, VOCAB, ATT, READ = 8, 11, 7, 9


def _data(seed=0):
    rng = np.random.default_rng(seed)
    annotations = rng.normal(size=(B, TX, D)).astype("float32")
    mask = np.ones((B, TX), "float32")
    mask[0, 3:] = 0.0  # padded source positions
    mask[2, 4] = 0.0
    embedded = rng.normal(size=(B, T, E)).astype("float32")
    return annotations, mask, embedded


def _cell(feedback_attention=True, seed=0, **kwargs):
    cell = RNNsearchCell(
        UNITS,
        VOCAB,
        attention_units=ATT,
        readout_units=READ,
        annotation_units=D,
        feedback_attention=feedback_attention,
        **kwargs,
    )
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


def _readout_weights(cell):
    deep = cell.deep_output
    return [
        numpy(w)
        for w in (deep.hidden.kernel, deep.hidden.bias, deep.logits.kernel, deep.logits.bias)
    ]


def _reference_sequence(cell, annotations, mask, embedded):
    """Reference s_0 and T steps; returns (outputs (B,T,F), logits, last weights)."""
    state = reference.rnnsearch_initial_state(
        annotations, mask, numpy(cell.init_dense.kernel), numpy(cell.init_dense.bias)
    )
    outputs, attention = [], []
    for t in range(embedded.shape[1]):
        output, state, weights = reference.rnnsearch_step(
            embedded[:, t], state, annotations, mask, **_step_weights(cell)
        )
        outputs.append(output)
        attention.append(weights)
    outputs = np.stack(outputs, 1)
    return outputs, reference.readout(outputs, *_readout_weights(cell)), attention


def test_initial_states_layout_and_reference():
    annotations, mask, _ = _data()
    cell = _cell()
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


@pytest.mark.parametrize("feedback_attention", [True, False])
def test_step_matches_numpy_reference(feedback_attention):
    annotations, mask, embedded = _data()
    cell = _cell(feedback_attention)
    states = cell.initial_states(annotations, mask)
    output, new_states, weights = cell.step(embedded[:, 0], states)

    s0 = numpy(states[0])
    ref_output, ref_state, ref_weights = reference.rnnsearch_step(
        embedded[:, 0], s0, annotations, mask, **_step_weights(cell)
    )
    np.testing.assert_allclose(numpy(weights), ref_weights, atol=1e-5)
    np.testing.assert_allclose(numpy(new_states[0]), ref_state, atol=1e-5)
    np.testing.assert_allclose(numpy(output), ref_output, atol=1e-5)
    assert numpy(output).shape == (B, cell.output_size) == (B, UNITS + D + E)
    for before, after in zip(states[1:], new_states[1:]):  # pass-through states
        np.testing.assert_array_equal(numpy(after), numpy(before))
    np.testing.assert_allclose(numpy(weights).sum(-1), 1.0, atol=1e-6)
    assert np.all(numpy(weights)[mask == 0] == 0.0)


@pytest.mark.parametrize("feedback_attention", [True, False])
def test_rnn_sequence_and_readout_match_reference(feedback_attention):
    annotations, mask, embedded = _data()
    cell = _cell(feedback_attention)
    outputs = keras.layers.RNN(cell, return_sequences=True)(
        embedded, initial_state=cell.initial_states(annotations, mask)
    )
    ref_outputs, ref_logits, _ = _reference_sequence(cell, annotations, mask, embedded)
    np.testing.assert_allclose(numpy(outputs), ref_outputs, atol=1e-5)
    np.testing.assert_allclose(numpy(cell.readout(outputs)), ref_logits, atol=1e-5)


def test_readout_is_the_same_on_a_sequence_and_per_step():
    annotations, mask, embedded = _data()
    cell = _cell()
    outputs = keras.layers.RNN(cell, return_sequences=True)(
        embedded, initial_state=cell.initial_states(annotations, mask)
    )
    logits = numpy(cell.readout(outputs))
    assert logits.shape == (B, T, VOCAB)
    for t in range(T):
        np.testing.assert_allclose(numpy(cell.readout(outputs[:, t])), logits[:, t], atol=1e-6)


def test_feedback_attention_makes_attention_depend_on_previous_word():
    annotations, mask, embedded = _data()
    other = embedded[:, 0] + 1.0
    for feedback, should_change in [(True, True), (False, False)]:
        cell = _cell(feedback)
        states = cell.initial_states(annotations, mask)
        _, _, weights = cell.step(embedded[:, 0], states)
        _, _, weights_other = cell.step(other, states)
        changed = not np.allclose(numpy(weights), numpy(weights_other), atol=1e-6)
        assert changed == should_change


def test_padded_source_positions_do_not_change_the_output():
    annotations, mask, embedded = _data()
    cell = _cell()
    rnn = keras.layers.RNN(cell, return_sequences=True)
    outputs = numpy(rnn(embedded, initial_state=cell.initial_states(annotations, mask)))
    changed = annotations.copy()
    changed[mask == 0] = 50.0
    outputs2 = numpy(rnn(embedded, initial_state=cell.initial_states(changed, mask)))
    np.testing.assert_allclose(outputs2, outputs, atol=1e-6)


def test_target_mask_with_zero_output_for_mask():
    annotations, mask, embedded = _data()
    cell = _cell()
    target_mask = np.ones((B, T), bool)
    target_mask[1, 2:] = False
    rnn = keras.layers.RNN(cell, return_sequences=True, zero_output_for_mask=True)
    outputs = numpy(
        rnn(embedded, initial_state=cell.initial_states(annotations, mask), mask=target_mask)
    )
    ref_outputs, _, _ = _reference_sequence(cell, annotations, mask, embedded)
    np.testing.assert_allclose(outputs[target_mask], ref_outputs[target_mask], atol=1e-5)
    np.testing.assert_array_equal(outputs[~target_mask], 0.0)


def test_source_length_can_change_between_calls():
    cell = _cell()
    rnn = keras.layers.RNN(cell, return_sequences=True)
    for source_len in (2, 7):
        annotations = np.ones((B, source_len, D), "float32")
        mask = np.ones((B, source_len), "float32")
        outputs = rnn(
            np.ones((B, T, E), "float32"), initial_state=cell.initial_states(annotations, mask)
        )
        assert tuple(outputs.shape) == (B, T, UNITS + D + E)


def test_dropout_only_in_training():
    annotations, mask, embedded = _data()
    cell = _cell(dropout=0.5, output_dropout=0.5, seed=0)
    rnn = keras.layers.RNN(cell, return_sequences=True)
    states = cell.initial_states(annotations, mask)
    inference = numpy(cell.readout(rnn(embedded, initial_state=states)))
    _, ref_logits, _ = _reference_sequence(cell, annotations, mask, embedded)
    np.testing.assert_allclose(inference, ref_logits, atol=1e-5)
    outputs = rnn(embedded, initial_state=states, training=True)
    training = numpy(cell.readout(outputs, training=True))
    assert not np.allclose(training, inference, atol=1e-3)
    # Variational dropout: one embedding mask for all time steps.
    dropped = numpy(outputs)[..., UNITS + D :] == 0.0
    np.testing.assert_array_equal(dropped, np.broadcast_to(dropped[:, :1], dropped.shape))


def test_config_round_trip_gives_identical_outputs():
    annotations, mask, embedded = _data()
    cell = _cell(feedback_attention=False, output_dropout=0.3, dropout=0.1, seed=3)
    clone = RNNsearchCell.from_config(cell.get_config())
    assert clone.get_config() == cell.get_config()
    clone.build((None, E))
    clone.set_weights(cell.get_weights())
    results = []
    for c in (cell, clone):
        outputs = keras.layers.RNN(c, return_sequences=True)(
            embedded, initial_state=c.initial_states(annotations, mask)
        )
        results.append(numpy(c.readout(outputs)))
    np.testing.assert_array_equal(results[0], results[1])


def _model_inputs(seed=0):
    rng = np.random.default_rng(seed)
    source = rng.integers(1, 9, size=(4, 5))
    source[0, 3:] = 0  # padding
    target = rng.integers(1, VOCAB, size=(4, 3))
    return {"source": source, "target": target}


def _model(cell):
    model = TinyDecoderModel(cell, source_vocab_size=9, embedding_dim=E)
    model(_model_inputs())
    return model


def test_fit_one_step_then_keras_save_load_round_trip(tmp_path):
    cell = RNNsearchCell(UNITS, VOCAB, ATT, READ, annotation_units=D, dropout=0.1, seed=1)
    model = _model(cell)
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    inputs = _model_inputs()
    before = [numpy(w) for w in cell.trainable_weights]
    history = model.fit(inputs, inputs["target"], batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [numpy(w) for w in cell.trainable_weights]
    assert all(not np.array_equal(b, a) for b, a in zip(before, after))

    path = str(tmp_path / "rnnsearch.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.decoder.cell, RNNsearchCell)
    assert loaded.decoder.cell.get_config() == cell.get_config()
    other = _model_inputs(1)
    np.testing.assert_array_equal(numpy(loaded(other)), numpy(model(other)))


def test_sizes_and_errors():
    cell = RNNsearchCell(UNITS, VOCAB, ATT, READ, annotation_units=D)
    assert cell.state_size == [UNITS, None, None, None]
    with pytest.raises(ValueError, match="output_size"):
        _ = cell.output_size
    with pytest.raises(ValueError, match="initial_states"):
        cell.get_initial_state(batch_size=2)
    cell.build((None, E))
    assert cell.output_size == UNITS + D + E


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"units": 0}, "units"),
        ({"target_vocab_size": -3}, "target_vocab_size"),
        ({"attention_units": 1.5}, "attention_units"),
        ({"readout_units": None}, "readout_units"),
        ({"annotation_units": "6"}, "annotation_units"),
        ({"feedback_attention": 1}, "feedback_attention"),
        ({"output_dropout": 1.0}, "output_dropout"),
        ({"dropout": -0.1}, "dropout"),
        ({"init_state": "first"}, "init_state"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_argument(kwargs, argument):
    arguments = dict(
        units=UNITS,
        target_vocab_size=VOCAB,
        attention_units=ATT,
        readout_units=READ,
        annotation_units=D,
    )
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=f"`{argument}`"):
        RNNsearchCell(**arguments)


def test_mixed_precision_policy_reaches_every_sublayer():
    annotations, mask, embedded = _data()
    cell = RNNsearchCell(UNITS, VOCAB, ATT, READ, annotation_units=D, dtype="mixed_bfloat16")
    cell.build((None, E))
    output, _, _ = cell.step(embedded[:, 0], cell.initial_states(annotations, mask))
    logits = cell.readout(output)
    assert keras.backend.standardize_dtype(logits.dtype) == "bfloat16"
    assert all(w.dtype == "float32" for w in cell.trainable_weights)
    assert np.all(np.isfinite(numpy(keras.ops.cast(logits, "float32"))))
