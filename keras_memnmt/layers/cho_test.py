"""Tests for ChoDecoderCell (run once per backend)."""

import keras
import numpy as np
import pytest

from keras_memnmt.layers.cho import ChoDecoderCell
from keras_memnmt.testing import reference
from keras_memnmt.testing.decoder_model import TinyDecoderModel
from keras_memnmt.testing.utils import numpy, randomize_weights

B, TX, D, E, T = 3, 5, 6, 4, 3
UNITS, VOCAB, READ = 8, 11, 9


def _data(seed=0):
    rng = np.random.default_rng(seed)
    annotations = rng.normal(size=(B, TX, D)).astype("float32")
    mask = np.ones((B, TX), "float32")
    mask[0, 3:] = 0.0
    summary = rng.normal(size=(B, D)).astype("float32")
    embedded = rng.normal(size=(B, T, E)).astype("float32")
    return annotations, mask, summary, embedded


def _cell(seed=0, **kwargs):
    cell = ChoDecoderCell(UNITS, VOCAB, readout_units=READ, annotation_units=D, **kwargs)
    cell.build((None, E))
    randomize_weights(cell, seed=seed)
    return cell


def _gru_weights(cell):
    gru = cell.gru_cell
    return numpy(gru.kernel), numpy(gru.recurrent_kernel), numpy(gru.bias)


def _reference_initial_states(cell, summary):
    return reference.cho_initial_states(
        summary,
        numpy(cell.context_dense.kernel),
        numpy(cell.context_dense.bias),
        numpy(cell.init_dense.kernel),
        numpy(cell.init_dense.bias),
    )


def _reference_logits(cell, summary, embedded):
    state, context = _reference_initial_states(cell, summary)
    outputs = []
    for t in range(embedded.shape[1]):
        output, state = reference.cho_step(embedded[:, t], state, context, *_gru_weights(cell))
        outputs.append(output)
    outputs = np.stack(outputs, 1)
    deep = cell.deep_output
    weights = [
        numpy(w)
        for w in (deep.hidden.kernel, deep.hidden.bias, deep.logits.kernel, deep.logits.bias)
    ]
    return outputs, reference.readout(outputs, *weights)


def test_initial_states_match_reference():
    annotations, mask, summary, _ = _data()
    cell = _cell()
    s0, context = [numpy(s) for s in cell.initial_states(annotations, mask, summary)]
    ref_s0, ref_context = _reference_initial_states(cell, summary)
    np.testing.assert_allclose(context, ref_context, atol=1e-5)
    np.testing.assert_allclose(s0, ref_s0, atol=1e-5)
    # The context is fixed: annotations and mask are not used.
    s0_none, _ = cell.initial_states(None, None, summary)
    np.testing.assert_array_equal(numpy(s0_none), s0)


def test_step_matches_numpy_reference():
    annotations, mask, summary, embedded = _data()
    cell = _cell()
    states = cell.initial_states(annotations, mask, summary)
    output, new_states, weights = cell.step(embedded[:, 0], states)
    assert weights is None
    ref_output, ref_state = reference.cho_step(
        embedded[:, 0], numpy(states[0]), numpy(states[1]), *_gru_weights(cell)
    )
    np.testing.assert_allclose(numpy(new_states[0]), ref_state, atol=1e-5)
    np.testing.assert_allclose(numpy(output), ref_output, atol=1e-5)
    np.testing.assert_array_equal(numpy(new_states[1]), numpy(states[1]))
    assert numpy(output).shape == (B, cell.output_size) == (B, 2 * UNITS + E)


def test_rnn_sequence_and_readout_match_reference():
    annotations, mask, summary, embedded = _data()
    cell = _cell()
    outputs = keras.layers.RNN(cell, return_sequences=True)(
        embedded, initial_state=cell.initial_states(annotations, mask, summary)
    )
    ref_outputs, ref_logits = _reference_logits(cell, summary, embedded)
    np.testing.assert_allclose(numpy(outputs), ref_outputs, atol=1e-5)
    logits = numpy(cell.readout(outputs))
    assert logits.shape == (B, T, VOCAB)
    np.testing.assert_allclose(logits, ref_logits, atol=1e-5)


def test_config_round_trip_gives_identical_outputs():
    annotations, mask, summary, embedded = _data()
    cell = _cell(output_dropout=0.2, dropout=0.1, seed=2)
    clone = ChoDecoderCell.from_config(cell.get_config())
    assert clone.get_config() == cell.get_config()
    clone.build((None, E))
    clone.set_weights(cell.get_weights())
    results = []
    for c in (cell, clone):
        outputs = keras.layers.RNN(c, return_sequences=True)(
            embedded, initial_state=c.initial_states(annotations, mask, summary)
        )
        results.append(numpy(c.readout(outputs)))
    np.testing.assert_array_equal(results[0], results[1])


def _model_inputs(seed=0):
    rng = np.random.default_rng(seed)
    source = rng.integers(1, 9, size=(4, 5))
    source[0, 3:] = 0
    return {"source": source, "target": rng.integers(1, VOCAB, size=(4, 3))}


def test_keras_save_load_and_fit(tmp_path):
    cell = ChoDecoderCell(UNITS, VOCAB, READ, annotation_units=D, dropout=0.1, seed=1)
    model = TinyDecoderModel(cell, source_vocab_size=9, embedding_dim=E)
    inputs = _model_inputs()
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model(inputs)
    before = [numpy(w) for w in cell.trainable_weights]
    history = model.fit(inputs, inputs["target"], batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [numpy(w) for w in cell.trainable_weights]
    assert all(not np.array_equal(b, a) for b, a in zip(before, after))

    path = str(tmp_path / "cho.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.decoder.cell, ChoDecoderCell)
    other = _model_inputs(1)
    np.testing.assert_array_equal(numpy(loaded(other)), numpy(model(other)))


def test_sizes_and_errors():
    cell = ChoDecoderCell(UNITS, VOCAB, READ, annotation_units=D)
    assert cell.state_size == [UNITS, UNITS]
    with pytest.raises(ValueError, match="output_size"):
        _ = cell.output_size
    with pytest.raises(ValueError, match="initial_states"):
        cell.get_initial_state(batch_size=2)


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"units": 0}, "units"),
        ({"target_vocab_size": 0}, "target_vocab_size"),
        ({"readout_units": 2.0}, "readout_units"),
        ({"annotation_units": -1}, "annotation_units"),
        ({"output_dropout": 1.5}, "output_dropout"),
        ({"dropout": "0.1"}, "dropout"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_argument(kwargs, argument):
    arguments = dict(units=UNITS, target_vocab_size=VOCAB, readout_units=READ, annotation_units=D)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=f"`{argument}`"):
        ChoDecoderCell(**arguments)
