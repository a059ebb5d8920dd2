"""One call that checks a decoder cell against the contract (after keras-hub's ``run_layer_test``).

``run_cell_test(make_cell)`` builds the cell on a small random batch and checks:

1. the state contract: before ``build``, ``output_size`` and
   ``get_initial_state`` raise; every initial state is 2-D and batch first, as
   many as ``state_size`` says, ``states[0]`` of ``state_size[0]`` features,
   the same from an ``EncoderOutput`` as from its tensors, and a step output
   has ``output_size`` features;
2. the training run equals stepping: ``keras.layers.RNN(cell)`` over a target
   sequence (its ``project_inputs``: a cell with an input side computes it for the whole
   sequence before the loop) gives the logits of ``cell.step`` called one position at a
   time, which computes it per step;
3. masking: the annotations at padded source positions change nothing, and the
   attention the step returns (if any) gives them exactly zero weight and sums to 1;
4. the NumPy reference, when given: ``reference(cell, encoded, embedded)``
   (``embedded`` the step inputs, ``cell.prepare_inputs`` of the embeddings) returns the ``(B, T, V)`` logits computed from the paper's equations with the
   cell's weights; they must match to ``atol``;
5. input dropout, when the cell has ``dropout > 0``: ``drop_inputs`` draws one
   mask per sequence in training and is the identity otherwise
   (:func:`~keras_memnmt.testing.checks.check_input_dropout`), and the step
   adds none of its own: stepping through the dropped inputs gives the same
   logits in training as in inference;
6. decoding through the step (both searches compiled on JAX): greedy search's tokens are the argmax of the
   teacher-forced logits on its own output (but at the last allowed position, where the
   length rule gives eos), its scores their log-probabilities (eos's included)
   and its attention (if any) the teacher-forced attention; every beam-search
   hypothesis scores the log-probability that teacher forcing gives its tokens
   (so the states follow their beams), and the n-best lists are finite and sorted;
7. serialization: ``deserialize_keras_object(serialize_keras_object(cell))``
   gives the same class and config and, with the same weights, the same logits;
8. one ``fit`` step of a model around the cell (``TinyDecoderModel``, which
   calls the cell as the models do) changes every trainable weight, and a
   ``.keras`` save and load gives the same cell config and logits.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

import keras
import numpy as np
from keras import ops

from keras_memnmt.layers.base import DecoderCell, EncoderOutput
from keras_memnmt.testing.checks import check_input_dropout
from keras_memnmt.testing.decoder_model import TinyDecoderModel
from keras_memnmt.testing.utils import compiled, numpy, random_encoder_output, randomize_weights

BOS, EOS = 2, 3
DECODE_LENGTH = 3
BEAM_SIZE = 3


def _run(cell: DecoderCell, encoded: EncoderOutput, embedded: np.ndarray) -> np.ndarray:
    """Teacher-forced logits ``(B, T, V)`` through ``keras.layers.RNN``, as the models run it:
    on ``cell.project_inputs`` (the input side computed for the whole sequence)."""
    states = cell.initial_states(encoded)
    inputs = cell.project_inputs(ops.convert_to_tensor(embedded))
    with cell.outside_the_loop():
        outputs = keras.layers.RNN(cell, return_sequences=True)(inputs, initial_state=states)
    return numpy(cell.readout(outputs))


def _step_all(cell: DecoderCell, encoded: EncoderOutput, embedded: np.ndarray, training=False):
    """The same logits by calling ``cell.step`` per position, and the ``(B, T, Tx)`` attention.

    The attention is None for a cell whose step returns none. The readout is
    always in inference (``training`` reaches the step only).
    """
    states = cell.initial_states(encoded)
    logits, attention = [], []
    for t in range(embedded.shape[1]):
        inputs = ops.convert_to_tensor(embedded[:, t])
        output, states, weights = cell.step(inputs, states, training=training)
        logits.append(numpy(cell.readout(output)))
        attention.append(None if weights is None else numpy(weights))
    return np.stack(logits, 1), None if attention[0] is None else np.stack(attention, 1)


def _check_unbuilt(cell: DecoderCell) -> None:
    try:
        _ = cell.output_size
    except ValueError:
        pass
    else:
        raise AssertionError("output_size of an unbuilt cell did not raise ValueError")
    try:
        cell.get_initial_state(batch_size=2)
    except ValueError as error:
        assert "initial_states" in str(error), f"get_initial_state's error: {error}"
    else:
        raise AssertionError("get_initial_state did not raise: the cell needs the encoder output")


def _check_states(cell: DecoderCell, encoded: EncoderOutput, batch: int, input_dim: int) -> None:
    states = cell.initial_states(encoded)
    sizes = cell.state_size if isinstance(cell.state_size, (list, tuple)) else [cell.state_size]
    assert len(states) == len(sizes), f"{len(states)} initial states, state_size has {len(sizes)}"
    for i, (state, size) in enumerate(zip(states, sizes)):
        shape = tuple(state.shape)
        assert len(shape) == 2 and shape[0] == batch, f"state {i} has shape {shape}, not (B, features)"
        if size is not None:
            assert shape[1] == size, f"state {i} has {shape[1]} features, state_size says {size}"
    from_tensors = cell.initial_states(encoded.annotations, encoded.mask, encoded.summary)
    for i, (a, b) in enumerate(zip(states, from_tensors)):
        np.testing.assert_array_equal(numpy(b), numpy(a), err_msg=f"state {i}: tensors != EncoderOutput")
    output, new_states, _ = cell.step(ops.zeros((batch, input_dim)), states)
    assert tuple(output.shape) == (batch, cell.output_size), "step output is not output_size wide"
    assert len(new_states) == len(states)


def _run_and_check_masking(cell, encoded, embedded, masking, atol) -> np.ndarray:
    """The ``keras.layers.RNN`` logits; with ``masking``, in one run with a copy of the
    batch whose padded annotations are changed, which must give the same logits."""
    if not masking:
        return _run(cell, encoded, embedded)
    changed = np.array(encoded.annotations)
    changed[np.asarray(encoded.mask) == 0] = 1e3
    both = EncoderOutput(*(None if x is None else np.concatenate([x, x]) for x in encoded[:3]))
    both = both._replace(annotations=np.concatenate([encoded.annotations, changed]))
    batch = embedded.shape[0]
    logits = _run(cell, both, np.concatenate([embedded, embedded]))
    np.testing.assert_allclose(
        logits[batch:], logits[:batch], atol=atol, err_msg="padded source positions changed the logits"
    )
    return logits[:batch]


def _check_attention(attention: np.ndarray | None, mask: np.ndarray) -> None:
    if attention is None:
        return
    assert np.all(attention[np.broadcast_to(mask[:, None] == 0, attention.shape)] == 0.0), "padding got attention"
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)


def _check_no_dropout_in_step(cell, encoded, embedded, atol) -> None:
    dropped = numpy(cell.drop_inputs(ops.convert_to_tensor(embedded), training=True))[:, :2]
    np.testing.assert_allclose(
        _step_all(cell, encoded, dropped, training=True)[0],
        _step_all(cell, encoded, dropped)[0],
        atol=atol,
        err_msg="the step drops more than drop_inputs in training",
    )


def _log_probs(logits: np.ndarray) -> np.ndarray:
    """float64 log-softmax over the last axis, pad and bos at ``-inf`` (as the searches)."""
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    logp[..., [0, BOS]] = -np.inf
    return logp


def _hypothesis_scores(logp, tokens, lengths) -> np.ndarray:
    """``log P(Y)`` of each hypothesis (up to and including eos, which every one ends with:
    the length rule of ``keras_memnmt.decoding.common``) under ``logp (N, L, V)``."""
    scores = []
    for row, (ids, n) in enumerate(zip(tokens.tolist(), lengths.tolist())):
        assert 1 <= n <= DECODE_LENGTH and ids[n - 1] == EOS, (row, ids, n)
        scores.append(sum(logp[row, t, ids[t]] for t in range(n)))
    return np.array(scores)


def _check_decoding(cell, encoded, table, with_attention, atol) -> None:
    from keras_memnmt.decoding import beam_search, greedy_search

    batch = np.asarray(encoded.mask).shape[0]
    table_tensor = ops.convert_to_tensor(table)
    # The B greedy rows, then the B*K beam rows (hypothesis k of sentence b at b*K + k).
    rows = np.concatenate([np.arange(batch), np.repeat(np.arange(batch), BEAM_SIZE)])
    forced_source = EncoderOutput(*(None if x is None else np.asarray(x)[rows] for x in encoded[:3]))

    def next_fn(tokens, states):
        inputs = cell.prepare_inputs(ops.take(table_tensor, tokens, axis=0), tokens)
        output, states, weights = cell.step(inputs, states)
        return cell.readout(output), list(states), weights

    def searches_and_teacher_forcing():
        greedy = greedy_search(
            next_fn, cell.initial_states(encoded), batch, DECODE_LENGTH, return_attention=with_attention
        )
        beam = beam_search(next_fn, cell.initial_states(encoded), batch, BEAM_SIZE, DECODE_LENGTH, n_best=BEAM_SIZE)
        # Teacher forcing on every hypothesis: bos, then its own tokens (after eos: eos).
        tokens = ops.concatenate([greedy["tokens"], ops.reshape(beam["tokens"], (batch * BEAM_SIZE, DECODE_LENGTH))])
        target_in = ops.where(ops.equal(tokens, 0), EOS, tokens)
        target_in = ops.concatenate([ops.full((len(rows), 1), BOS, "int32"), target_in[:, :-1]], 1)
        states, logits, attention = cell.initial_states(forced_source), [], []
        for t in range(DECODE_LENGTH):
            inputs = cell.prepare_inputs(ops.take(table_tensor, target_in[:, t], axis=0), target_in[:, t])
            output, states, weights = cell.step(inputs, states)
            logits.append(cell.readout(output))
            attention.append(weights)
        attention = None if attention[0] is None else ops.stack(attention, 1)
        return greedy, beam, ops.stack(logits, 1), attention

    # One program on JAX, as `generate` runs the searches.
    greedy, beam, logits, attention = compiled(searches_and_teacher_forcing)()
    greedy = {key: numpy(value) for key, value in greedy.items()}
    beam = {key: numpy(value) for key, value in beam.items()}
    logp = _log_probs(numpy(logits))  # (B + B*K, L, V)

    for row, (ids, n) in enumerate(zip(greedy["tokens"].tolist(), greedy["lengths"].tolist())):
        # At the last allowed position (DECODE_LENGTH) the token is eos by the length rule
        # (`_hypothesis_scores` checks every row ends with eos); before it, the argmax.
        free = n - 1 if n == DECODE_LENGTH else n
        argmax = logp[row, :free].argmax(-1).tolist()
        assert ids[:free] == argmax, f"greedy row {row}: {ids[:n]} != teacher-forced argmax {argmax}"
        if with_attention:
            np.testing.assert_allclose(
                greedy["attention"][row, :n],
                numpy(attention)[row, :n],
                atol=atol,
                err_msg="greedy attention != teacher forcing",
            )
    np.testing.assert_allclose(
        greedy["scores"],
        _hypothesis_scores(logp[:batch], greedy["tokens"], greedy["lengths"]),
        rtol=1e-5,
        atol=10 * atol,
        err_msg="greedy scores != teacher-forced log-probabilities",
    )

    # Every beam hypothesis scores what teacher forcing gives it: its states followed its beam.
    scores = beam["scores"]  # (B, K)
    assert np.all(np.isfinite(scores)), scores
    assert np.all(np.diff(scores, axis=1) <= atol), f"n-best not sorted: {scores}"
    forced = _hypothesis_scores(
        logp[batch:], beam["tokens"].reshape(batch * BEAM_SIZE, -1), beam["lengths"].reshape(-1)
    )
    np.testing.assert_allclose(
        beam["raw_scores"].reshape(-1),
        forced,
        rtol=1e-5,
        atol=10 * atol,
        err_msg="beam hypotheses' scores != teacher-forced log-probabilities",
    )


def _check_serialization(cell, encoded, embedded, logits, input_dim, atol) -> None:
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(cell))
    assert type(clone) is type(cell), f"deserialized as {type(clone).__name__}"
    assert clone.get_config() == cell.get_config(), "get_config does not round-trip"
    if not clone.built:
        clone.build((None, input_dim))
    clone.set_weights(cell.get_weights())
    np.testing.assert_allclose(
        _step_all(clone, encoded, embedded[:, :1])[0],
        logits[:, :1],
        atol=atol,
        err_msg="the deserialized cell gives other logits",
    )


def _check_fit_and_save(make_cell, encoded, embedding_dim, atol, seed) -> None:
    source_vocab = 9
    model = TinyDecoderModel(make_cell(), source_vocab_size=source_vocab, embedding_dim=embedding_dim)
    rng = np.random.default_rng(seed + 1)
    batch, source_length = np.asarray(encoded.mask).shape
    source = rng.integers(1, source_vocab, size=(batch, source_length))
    source[0, -2:] = 0
    target = rng.integers(4, model.decoder.cell.target_vocab_size, size=(batch, 4))
    inputs = {"source": source, "target": target}
    model(inputs)
    # Weights drawn from ``seed``, not from the initializers' global generator: the check
    # must not depend on what drew from it before (a gradient too small to move a
    # float32 weight under some draws).
    randomize_weights(model, seed=seed)
    # Plain SGD (its train step compiles faster than Adam's) with a step large enough
    # that any non-zero gradient moves its weight.
    model.compile(
        optimizer=keras.optimizers.SGD(1.0), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    before = [numpy(w) for w in model.trainable_weights]
    history = model.fit(inputs, target, batch_size=batch, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0]), "fit step loss is not finite"
    unchanged = [w.path for w, b in zip(model.trainable_weights, before) if np.array_equal(numpy(w), b)]
    assert not unchanged, f"one fit step left these weights unchanged: {unchanged}"
    expected = numpy(model(inputs))
    assert np.all(np.isfinite(expected)), "the logits after one fit step are not finite"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cell.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, compile=False)
    cell = model.decoder.cell
    assert type(loaded.decoder.cell) is type(cell), type(loaded.decoder.cell).__name__
    assert loaded.decoder.cell.get_config() == cell.get_config(), ".keras changed the cell config"
    np.testing.assert_allclose(
        numpy(loaded(inputs)), expected, atol=atol, err_msg=".keras save and load gives other logits"
    )


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
    _check_unbuilt(cell)
    encoded = random_encoder_output(batch_size, source_length, cell.annotation_units, seed)
    rng = np.random.default_rng(seed + 1)
    table = rng.normal(size=(cell.target_vocab_size, embedding_dim)).astype("float32")
    tokens = rng.integers(0, cell.target_vocab_size, size=(batch_size, target_length)).astype("int32")
    # The step's inputs: the embeddings, with whatever the cell's prepare_inputs adds.
    input_dim = int(cell.prepare_inputs(table[tokens], tokens).shape[-1])
    cell.build((None, input_dim))
    randomize_weights(cell, seed=seed)
    embedded = numpy(cell.prepare_inputs(table[tokens], tokens))

    _check_states(cell, encoded, batch_size, input_dim)
    logits = _run_and_check_masking(cell, encoded, embedded, masking, atol)
    assert logits.shape == (batch_size, target_length, cell.target_vocab_size)
    stepped, attention = _step_all(cell, encoded, embedded)
    np.testing.assert_allclose(stepped, logits, atol=atol, err_msg="stepping != keras.layers.RNN")
    if masking:
        _check_attention(attention, np.asarray(encoded.mask))
    if reference is not None:
        np.testing.assert_allclose(
            reference(cell, encoded, embedded), logits, atol=atol, err_msg="the cell does not match its NumPy reference"
        )
    if cell.dropout > 0.0:
        check_input_dropout(cell, seed=seed)
        _check_no_dropout_in_step(cell, encoded, embedded, atol)
    _check_decoding(cell, encoded, table, attention is not None, atol)
    _check_serialization(cell, encoded, embedded, logits, input_dim, atol)
    if fit:
        _check_fit_and_save(make_cell, encoded, embedding_dim, atol, seed)
    return cell
