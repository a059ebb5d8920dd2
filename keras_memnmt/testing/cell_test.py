"""One call that checks a decoder cell against the contract (after keras-hub's ``run_layer_test``).

``run_cell_test(make_cell)`` builds the cell on a small random batch and checks:

1. the state contract: every initial state 2-D and batch first, as many as
   ``state_size`` says, ``states[0]`` of ``state_size[0]`` features, and a step
   output of ``output_size`` features;
2. the training run equals stepping: ``keras.layers.RNN(cell)`` over a target
   sequence gives the logits of ``cell.step`` called one position at a time;
3. masking: the annotations at padded source positions change nothing, and the
   attention the step returns (if any) gives them exactly zero weight and sums to 1;
4. decoding through the step: greedy search's tokens are the argmax of the
   teacher-forced logits on its own output, beam search with one beam equals
   greedy, and beam search's n-best scores are finite and sorted;
5. serialization: ``from_config(get_config())`` gives the same config and, with
   the same weights, the same logits; so does a ``.keras`` save and load of a
   model around the cell, after
6. one ``fit`` step, which changes every trainable weight;
7. the NumPy reference, when given: ``reference(cell, encoded, embedded)``
   returns the ``(B, T, V)`` logits computed from the paper's equations with the
   cell's weights; they must match to ``atol``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

import keras
import numpy as np
from keras import ops

from keras_memnmt.layers.base import DecoderCell, EncoderOutput
from keras_memnmt.testing.decoder_model import TinyDecoderModel
from keras_memnmt.testing.utils import numpy, randomize_weights

BOS, EOS = 2, 3


def random_encoder_output(batch: int, source_length: int, annotation_units: int,
                          seed: int = 0) -> EncoderOutput:
    """Normal annotations and summary; row 0 has its last two source positions padded."""
    rng = np.random.default_rng(seed)
    annotations = rng.normal(size=(batch, source_length, annotation_units)).astype("float32")
    mask = np.ones((batch, source_length), "float32")
    mask[0, source_length - 2:] = 0.0
    summary = rng.normal(size=(batch, annotation_units)).astype("float32")
    return EncoderOutput(annotations, mask, summary)


def _run(cell: DecoderCell, encoded: EncoderOutput, embedded: np.ndarray) -> np.ndarray:
    """Teacher-forced logits ``(B, T, V)`` through ``keras.layers.RNN``."""
    states = cell.initial_states(encoded)
    outputs = keras.layers.RNN(cell, return_sequences=True)(embedded, initial_state=states)
    return numpy(cell.readout(outputs))


def _step_all(cell: DecoderCell, encoded: EncoderOutput, embedded: np.ndarray):
    """The same logits by calling ``cell.step`` per position, and the attention of each step."""
    states = cell.initial_states(encoded)
    logits, attention = [], []
    for t in range(embedded.shape[1]):
        output, states, weights = cell.step(ops.convert_to_tensor(embedded[:, t]), states)
        logits.append(numpy(cell.readout(output)))
        attention.append(None if weights is None else numpy(weights))
    return np.stack(logits, 1), attention


def _check_states(cell: DecoderCell, encoded: EncoderOutput, batch: int, embedding_dim: int) -> None:
    states = cell.initial_states(encoded)
    sizes = cell.state_size if isinstance(cell.state_size, (list, tuple)) else [cell.state_size]
    assert len(states) == len(sizes), f"{len(states)} initial states, state_size has {len(sizes)}"
    for i, (state, size) in enumerate(zip(states, sizes)):
        shape = tuple(state.shape)
        assert len(shape) == 2 and shape[0] == batch, f"state {i} has shape {shape}, not (B, features)"
        if size is not None:
            assert shape[1] == size, f"state {i} has {shape[1]} features, state_size says {size}"
    output, new_states, _ = cell.step(ops.zeros((batch, embedding_dim)), states)
    assert tuple(output.shape) == (batch, cell.output_size), "step output is not output_size wide"
    assert len(new_states) == len(states)


def _check_masking(cell, encoded, embedded, logits, attention, atol) -> None:
    changed = np.array(encoded.annotations)
    changed[np.asarray(encoded.mask) == 0] = 1e3
    np.testing.assert_allclose(_run(cell, encoded._replace(annotations=changed), embedded), logits,
                               atol=atol, err_msg="padded source positions changed the logits")
    for weights in attention:
        if weights is not None:
            assert np.all(weights[np.asarray(encoded.mask) == 0] == 0.0), "padding got attention"
            np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def _check_decoding(cell, encoded, table, batch, atol) -> None:
    from keras_memnmt.decoding import beam_search, greedy_search

    def next_fn(tokens, states):
        output, states, weights = cell.step(ops.take(table, tokens, axis=0), states)
        return cell.readout(output), list(states), weights

    length = 6
    greedy = greedy_search(next_fn, cell.initial_states(encoded), batch, length)
    tokens = numpy(greedy["tokens"])  # (B, L)
    target_in = np.concatenate([np.full((batch, 1), BOS), tokens[:, :-1]], axis=1)
    target_in = np.where(target_in == 0, EOS, target_in)  # after eos: anything
    forced = _run(cell, encoded, numpy(ops.take(table, target_in, axis=0)))
    forced[..., [0, BOS]] = -np.inf  # the search never emits pad or bos
    forced = forced.argmax(-1)
    for row in range(batch):
        ids = tokens[row].tolist()
        n = ids.index(EOS) + 1 if EOS in ids else len(ids)
        assert ids[:n] == forced[row, :n].tolist(), f"greedy row {row}: {ids[:n]} != argmax"
    one = beam_search(next_fn, cell.initial_states(encoded), batch, 1, length)
    np.testing.assert_array_equal(numpy(one["tokens"])[:, 0], tokens, err_msg="beam 1 != greedy")
    wide = beam_search(next_fn, cell.initial_states(encoded), batch, 3, length, n_best=3)
    scores = numpy(wide["scores"])  # (B, 3)
    assert np.all(np.isfinite(scores)) and np.all(np.diff(scores, axis=1) <= atol), scores


def _check_serialization_and_fit(make_cell, cell, encoded, embedded, logits, embedding_dim,
                                 atol, fit) -> None:
    clone = type(cell).from_config(cell.get_config())
    assert clone.get_config() == cell.get_config(), "get_config does not round-trip"
    clone.build((None, embedding_dim))
    clone.set_weights(cell.get_weights())
    np.testing.assert_allclose(_run(clone, encoded, embedded), logits, atol=atol,
                               err_msg="from_config(get_config()) gives other logits")
    if not fit:
        return
    source_vocab = 9
    model = TinyDecoderModel(make_cell(), source_vocab_size=source_vocab, embedding_dim=embedding_dim)
    rng = np.random.default_rng(1)
    batch, source_length = np.asarray(encoded.mask).shape
    source = rng.integers(1, source_vocab, size=(batch, source_length))
    source[0, -2:] = 0
    target = rng.integers(4, model.decoder.cell.target_vocab_size, size=(batch, 4))
    inputs = {"source": source, "target": target}
    model(inputs)
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = [numpy(w) for w in model.trainable_weights]
    history = model.fit(inputs, target, batch_size=batch, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0]), "fit step loss is not finite"
    unchanged = [w.path for w, b in zip(model.trainable_weights, before) if np.array_equal(numpy(w), b)]
    assert not unchanged, f"one fit step left these weights unchanged: {unchanged}"
    expected = numpy(model(inputs))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cell.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, compile=False)
    np.testing.assert_allclose(numpy(loaded(inputs)), expected, atol=atol,
                               err_msg=".keras save and load gives other logits")


def run_cell_test(
    make_cell: Callable[[], DecoderCell],
    embedding_dim: int = 4,
    batch_size: int = 3,
    source_length: int = 5,
    target_length: int = 4,
    reference: Callable[[DecoderCell, EncoderOutput, np.ndarray], np.ndarray] | None = None,
    masking: bool = True,
    fit: bool = True,
    atol: float = 1e-5,
    seed: int = 0,
) -> DecoderCell:
    """Checks the cell that ``make_cell()`` returns (a fresh one per call) in one call.

    Args:
        make_cell: builds the cell, always with the same arguments.
        embedding_dim: size ``E`` of the input embeddings.
        batch_size, source_length, target_length: the random batch's shape.
        reference: optional ``(cell, encoded, embedded) -> logits (B, T, V)`` in NumPy,
            from the paper's equations with the cell's weights.
        masking: check that padded source positions change nothing (False for a cell
            that reads the source through the summary alone, where it holds trivially).
        fit: also check one ``fit`` step and a ``.keras`` round trip.
        atol: tolerance of every logit comparison.
        seed: seed of the data and of the random weights.

    Returns:
        the built cell with random weights (for further checks by the caller).
    """
    cell = make_cell()
    encoded = random_encoder_output(batch_size, source_length, cell.annotation_units, seed)
    rng = np.random.default_rng(seed + 1)
    table = rng.normal(size=(cell.target_vocab_size, embedding_dim)).astype("float32")
    embedded = table[rng.integers(0, cell.target_vocab_size, size=(batch_size, target_length))]
    cell.build((None, embedding_dim))
    randomize_weights(cell, seed=seed)

    _check_states(cell, encoded, batch_size, embedding_dim)
    logits = _run(cell, encoded, embedded)
    assert logits.shape == (batch_size, target_length, cell.target_vocab_size)
    stepped, attention = _step_all(cell, encoded, embedded)
    np.testing.assert_allclose(stepped, logits, atol=atol, err_msg="stepping != keras.layers.RNN")
    if masking:
        _check_masking(cell, encoded, embedded, logits, attention, atol)
    if reference is not None:
        np.testing.assert_allclose(reference(cell, encoded, embedded), logits, atol=atol,
                                   err_msg="the cell does not match its NumPy reference")
    _check_decoding(cell, encoded, ops.convert_to_tensor(table), batch_size, atol)
    _check_serialization_and_fit(make_cell, cell, encoded, embedded, logits, embedding_dim, atol, fit)
    return cell
