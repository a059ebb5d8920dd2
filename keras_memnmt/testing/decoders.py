"""One call that checks a model against the encoder–decoder contract, with or without a
decoder cell (after keras-hub's ``run_layer_test``; ``run_cell_test`` checks a cell).

``run_decoder_test(make_model)`` builds the model on a small random batch and checks:

1. build: ``build_weights`` creates the weights, and teacher forcing (``call``) gives
   finite ``(B, T, V)`` logits;
2. padding: extra pad columns in the source change no logit;
3. the search contract: every state of ``search_states`` and ``encode`` is batch first,
   ``decode_step`` returns as many states with the same shapes after the batch axis and
   the same dtypes, and stepping one target position at a time from either gives the
   teacher-forced logits; ``step_details`` gives the logits of ``decode_step``;
4. serialization: ``deserialize_keras_object(serialize_keras_object(model))`` gives the
   same class and config and, with the same weights, the same logits;
5. ``generate``: greedy search's tokens are the argmax of the teacher-forced logits on its
   own output (but at the last allowed position, where the length rule gives eos: every
   output ends with eos) and its scores their log-probabilities, eos's included; every
   beam-search hypothesis scores
   the log-probability that teacher forcing gives its tokens (so the states followed their
   beams), and the n-best lists are sorted;
6. one ``fit`` step gives a finite loss and changes the logits, and a ``.keras`` save and
   load gives the same class, config and logits.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

import keras
import numpy as np
from keras import ops

from keras_memnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from keras_memnmt.decoding.common import shapes_may_change
from keras_memnmt.models.base import EncoderDecoder
from keras_memnmt.testing.cells import _log_probs
from keras_memnmt.testing.utils import numpy, randomize_weights

BEAM_SIZE = 3


def _batch(model: EncoderDecoder, batch: int, source_length: int, target_length: int, seed: int) -> tuple:
    """``(source (B, Tx), target_in (B, T), target_out (B, T))``; row 0 has two padded
    source positions, every target_in starts with bos."""
    rng = np.random.default_rng(seed)
    source = rng.integers(4, model.source_vocab_size, size=(batch, source_length)).astype("int32")
    source[0, -2:] = PAD_ID
    target = rng.integers(4, model.target_vocab_size, size=(batch, target_length + 1)).astype("int32")
    target[:, 0] = BOS_ID
    return source, target[:, :-1], target[:, 1:]


def _check_states(states: list, new_states: list, batch: int) -> None:
    assert len(new_states) == len(states), f"decode_step returned {len(new_states)} states for {len(states)}"
    for i, (old, new) in enumerate(zip(states, new_states)):
        assert len(old.shape) >= 1 and old.shape[0] == batch, (
            f"state {i} of shape {tuple(old.shape)} is not batch first"
        )
        grew = [a for a in range(1, len(old.shape)) if new.shape[a] != old.shape[a]]
        # A state may gain one position per step along one axis where the search loop's
        # shapes may change (keras_memnmt.decoding.common, "A state may also grow").
        assert len(new.shape) == len(old.shape) and (
            not grew or (shapes_may_change() and len(grew) == 1 and new.shape[grew[0]] == old.shape[grew[0]] + 1)
        ), f"state {i}: {tuple(old.shape)} -> {tuple(new.shape)}"
        old_dtype, new_dtype = (keras.backend.standardize_dtype(s.dtype) for s in (old, new))
        assert new_dtype == old_dtype, f"state {i}: {old_dtype} -> {new_dtype}"


def _check_stepping(model: EncoderDecoder, source, target_in, logits, atol) -> None:
    batch, length = target_in.shape
    for name, states in (("search_states", model.search_states(source, length)), ("encode", model.encode(source))):
        states = list(states)
        for t in range(length):
            tokens = ops.convert_to_tensor(target_in[:, t])
            if t == 0 and name == "search_states":
                details = model.step_details(tokens, states)
                step_logits, new_states, _ = model.decode_step(tokens, states)
                np.testing.assert_allclose(
                    numpy(details["logits"]),
                    numpy(step_logits),
                    atol=atol,
                    err_msg="step_details gives other logits than decode_step",
                )
            step_logits, new_states, _ = model.decode_step(tokens, states)
            _check_states(states, list(new_states), batch)
            np.testing.assert_allclose(
                numpy(step_logits),
                logits[:, t],
                atol=atol,
                err_msg=f"decode_step from {name} != teacher forcing at position {t}",
            )
            states = list(new_states)


def _check_serialization(model: EncoderDecoder, source, target_in, logits, atol) -> None:
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model))
    assert type(clone) is type(model), f"deserialized as {type(clone).__name__}"
    assert clone.get_config() == model.get_config(), "get_config does not round-trip"
    clone.build_weights()
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(
        numpy(clone((source, target_in))), logits, atol=atol, err_msg="the deserialized model gives other logits"
    )


def _teacher_forced(model: EncoderDecoder, source, tokens: np.ndarray) -> tuple:
    """``(log-probabilities (N, L, V), lengths (N,))`` that teacher forcing gives the
    hypotheses ``tokens (N, L)`` (pad after eos) of the sources ``source (N, Tx)``."""
    ended = tokens == EOS_ID
    lengths = np.where(ended.any(1), ended.argmax(1) + 1, (tokens != PAD_ID).sum(1))
    target_in = np.concatenate([np.full((len(tokens), 1), BOS_ID, "int32"), tokens[:, :-1]], 1)
    target_in = np.where(target_in == PAD_ID, EOS_ID, target_in).astype("int32")
    return _log_probs(numpy(ops.cast(model((source, target_in)), "float32"))), lengths


def _check_generate(model: EncoderDecoder, source, max_length: int, atol) -> None:
    batch = len(source)
    greedy = model.generate(source, beam_size=1, max_length_a=0.0, max_length_b=max_length)
    tokens = numpy(greedy["tokens"])[:, 0]  # (B, L)
    logp, lengths = _teacher_forced(model, source, tokens)
    for row, n in enumerate(lengths):
        # Every output ends with eos: at the last allowed position (`max_length`) by the
        # length rule (keras_memnmt.decoding.common), before it as the argmax.
        assert 1 <= n <= max_length and tokens[row, n - 1] == EOS_ID, f"greedy row {row}: {tokens[row]}"
        free = n - 1 if n == max_length else n  # the positions the argmax chose
        argmax = logp[row, :free].argmax(-1).tolist()
        assert tokens[row, :free].tolist() == argmax, f"greedy row {row}: {tokens[row, :n]} != argmax {argmax}"
    forced = [logp[row, np.arange(n), tokens[row, :n]].sum() for row, n in enumerate(lengths)]
    np.testing.assert_allclose(
        numpy(greedy["scores"])[:, 0],
        forced,
        rtol=1e-5,
        atol=10 * atol,
        err_msg="greedy scores != teacher-forced log-probabilities (eos included)",
    )

    beam = model.generate(
        source, beam_size=BEAM_SIZE, n_best=BEAM_SIZE, max_length_a=0.0, max_length_b=max_length, length_penalty="none"
    )
    scores = numpy(beam["scores"])  # (B, K), the raw log-probabilities
    assert np.all(np.isfinite(scores)), scores
    assert np.all(np.diff(scores, axis=1) <= atol), f"n-best not sorted: {scores}"
    tokens = numpy(beam["tokens"]).reshape(batch * BEAM_SIZE, -1)
    logp, lengths = _teacher_forced(model, np.repeat(source, BEAM_SIZE, axis=0), tokens)
    forced = [logp[row, np.arange(n), tokens[row, :n]].sum() for row, n in enumerate(lengths)]
    np.testing.assert_allclose(
        scores.reshape(-1),
        forced,
        rtol=1e-5,
        atol=10 * atol,
        err_msg="beam hypotheses' scores != teacher-forced log-probabilities",
    )


def _check_fit_and_save(model: EncoderDecoder, source, target_in, target_out, atol) -> None:
    model.compile(
        optimizer=keras.optimizers.SGD(1.0), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    before = numpy(model((source, target_in)))
    history = model.fit((source, target_in), target_out, batch_size=len(source), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0]), "fit step loss is not finite"
    expected = numpy(model((source, target_in)))
    assert np.all(np.isfinite(expected)), "the logits after one fit step are not finite"
    assert not np.allclose(expected, before), "one fit step left the logits unchanged"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, compile=False)
    assert type(loaded) is type(model), type(loaded).__name__
    assert loaded.get_config() == model.get_config(), ".keras changed the config"
    np.testing.assert_allclose(
        numpy(loaded((source, target_in))), expected, atol=atol, err_msg="the loaded model gives other logits"
    )


def run_decoder_test(
    make_model: Callable[[], EncoderDecoder],
    batch_size: int = 3,
    source_length: int = 6,
    target_length: int = 5,
    fit: bool = True,
    atol: float = 1e-5,
    seed: int = 0,
) -> EncoderDecoder:
    """Checks the model that ``make_model()`` returns in one call (see the module docstring).

    Args:
        make_model: builds the model (an :class:`~keras_memnmt.models.EncoderDecoder`,
            any decoder), unbuilt, without dropout on the outputs it compares.
        batch_size, source_length, target_length: the random batch's shape (source ids
            from 4 to ``source_vocab_size``, target ids from 4 to ``target_vocab_size``).
        fit: also check one ``fit`` step and a ``.keras`` round trip.
        atol: tolerance of every logit comparison.
        seed: seed of the data and of the random weights.

    Returns:
        the model with random weights (fitted one step with ``fit``), for further checks.
    """
    model = make_model()
    source, target_in, target_out = _batch(model, batch_size, source_length, target_length, seed)
    model.build_weights()
    assert model.built and model.trainable_weights, "build_weights created no weights"
    # Weights drawn from `seed`: logits far from uniform, the same whatever ran before.
    randomize_weights(model, seed=seed)
    logits = numpy(model((source, target_in)))
    assert logits.shape == (batch_size, target_length, model.target_vocab_size), logits.shape
    assert np.all(np.isfinite(logits)), "the teacher-forced logits are not finite"

    wide = np.pad(source, ((0, 0), (0, 3)))
    np.testing.assert_allclose(
        numpy(model((wide, target_in))), logits, atol=atol, err_msg="extra source padding changed the logits"
    )
    _check_stepping(model, source, target_in, logits, atol)
    _check_serialization(model, source, target_in, logits, atol)
    _check_generate(model, source, target_length, atol)
    if fit:
        _check_fit_and_save(model, source, target_in, target_out, atol)
    return model
