"""Checks that every decoder cell's tests make: bad arguments, input dropout, mixed precision,
the step's details.

Each takes the cell (or a function that makes one) and raises ``AssertionError``
with what went wrong; none needs pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import keras
import numpy as np
from keras import ops

from keras_memnmt.layers.base import DecoderCell, EncoderOutput
from keras_memnmt.testing.utils import compiled, numpy, random_encoder_output

# Bad values of the arguments that `DecoderCell` itself checks, with the argument named.
SHARED_BAD_ARGUMENTS: tuple[tuple[dict, str], ...] = (
    ({"units": 0}, "units"),
    ({"target_vocab_size": -3}, "target_vocab_size"),
    ({"readout_units": None}, "readout_units"),
    ({"readout_units": 2.0}, "readout_units"),
    ({"annotation_units": "6"}, "annotation_units"),
    ({"output_dropout": 1.0}, "output_dropout"),
    ({"dropout": -0.1}, "dropout"),
    ({"dropout": "0.1"}, "dropout"),
    ({"tied_output": 1}, "tied_output"),
)


def check_bad_arguments(make_cell: Callable[..., DecoderCell], cases: Iterable[tuple[dict, str]] = ()) -> None:
    """``make_cell(**kwargs)`` raises a ``ValueError`` naming the argument, for every case.

    Args:
        make_cell: builds the cell from valid arguments updated with ``kwargs``.
        cases: ``(kwargs, argument)`` pairs, the cell's own arguments; the
            shared ones (:data:`SHARED_BAD_ARGUMENTS`) are always checked too.
            The error message must contain the argument's name in backquotes.
    """
    failures = []
    for kwargs, argument in (*SHARED_BAD_ARGUMENTS, *cases):
        try:
            make_cell(**kwargs)
        except ValueError as error:
            if f"`{argument}`" not in str(error):
                failures.append(f"{kwargs}: the error does not name `{argument}`: {error}")
            continue
        failures.append(f"{kwargs}: no ValueError")
    assert not failures, "bad arguments accepted or not named:\n" + "\n".join(failures)


def check_input_dropout(
    cell: DecoderCell, batch: int = 8, length: int = 5, features: int = 16, seed: int = 0
) -> np.ndarray:
    """``cell.drop_inputs`` is variational dropout of the ``(B, T, E)`` input sequence.

    Outside training it returns the input unchanged. In training, with
    ``cell.dropout > 0``: one mask per sequence (the same features are zero at
    every time step), the kept values scaled by ``1 / (1 - dropout)``, another
    mask for another sequence and for the next call. With ``cell.dropout == 0``
    training changes nothing either.

    Args:
        cell: the cell (built or not).
        batch, length, features: the shape of the random input; the mask has
            ``batch * features`` draws, enough for rates of about 0.05 and more.
        seed: seed of the input values (the mask comes from the cell's own seed).

    Returns:
        the ``(B, T, E)`` input dropped in training, as NumPy.
    """
    rng = np.random.default_rng(seed)
    inputs = rng.uniform(0.5, 1.5, size=(batch, length, features)).astype("float32")  # no zeros
    tensor = ops.convert_to_tensor(inputs)
    np.testing.assert_array_equal(
        numpy(cell.drop_inputs(tensor, training=False)),
        inputs,
        err_msg="drop_inputs changed the input outside training",
    )
    dropped = numpy(cell.drop_inputs(tensor, training=True))
    if cell.dropout == 0.0:
        np.testing.assert_array_equal(dropped, inputs, err_msg="dropout=0 changed the input")
        return dropped
    zero = dropped == 0.0  # (B, T, E)
    assert zero.any() and not zero.all(), f"dropout={cell.dropout} dropped {zero.mean():.0%}"
    np.testing.assert_array_equal(
        zero, np.broadcast_to(zero[:, :1], zero.shape), err_msg="the dropped features change along the sequence"
    )
    assert not np.all(zero[:, 0] == zero[:1, 0]), "every sequence got the same mask"
    np.testing.assert_allclose(dropped[~zero], inputs[~zero] / (1.0 - cell.dropout), rtol=1e-6)
    again = numpy(cell.drop_inputs(tensor, training=True)) == 0.0
    assert not np.array_equal(again, zero), "the next call drew the same mask"
    return dropped


def check_mixed_precision(cell: DecoderCell, encoded: EncoderOutput, embedding_dim: int = 4) -> tuple[Any, list]:
    """A cell made with a mixed policy (``dtype="mixed_bfloat16"``) computes in its compute dtype.

    The initial states, one step's states and the logits have the compute
    dtype, every trainable weight the variable dtype, and the logits (and the
    attention, if any) are finite, the attention summing to 1. The step runs
    compiled on JAX (:func:`~keras_memnmt.testing.utils.compiled`).

    Args:
        cell: an unbuilt cell with a mixed dtype policy.
        encoded: the encoder output the states start from.
        embedding_dim: size ``E`` of the input embedding.

    Returns:
        ``(logits, new_states)`` of one step.
    """
    policy = cell.dtype_policy
    compute, variable = policy.compute_dtype, policy.variable_dtype
    assert compute != variable, f"{policy.name} is not a mixed policy"
    batch = np.asarray(encoded.mask).shape[0]
    tokens = ops.full((batch,), 4, "int32")
    # As from an embedding under the policy, with what the cell's prepare_inputs adds.
    inputs = cell.prepare_inputs(ops.ones((batch, embedding_dim), compute), tokens)
    cell.build((None, int(inputs.shape[-1])))

    def one_step():
        states = cell.initial_states(encoded)
        output, new_states, attention = cell.step(inputs, states)
        return states, new_states, cell.readout(output), attention

    states, new_states, logits, attention = compiled(one_step)()

    def dtypes(tensors: list) -> list:
        return [keras.backend.standardize_dtype(t.dtype) for t in tensors]

    assert dtypes(states) == [compute] * len(states), f"initial states: {dtypes(states)}"
    assert dtypes(new_states) == [compute] * len(new_states), f"step states: {dtypes(new_states)}"
    assert dtypes([logits]) == [compute], f"logits: {dtypes([logits])}"
    assert all(w.dtype == variable for w in cell.trainable_weights)
    assert np.all(np.isfinite(numpy(ops.cast(logits, "float32"))))
    if attention is not None:
        weights = numpy(ops.cast(attention, "float32"))
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-2)
    return logits, new_states


# The details that are distributions over their last axis (see DecoderCell.step_details).
DISTRIBUTIONS = ("attention", "read_weights", "write_weights", "memory_attention", "past_attention")


def check_step_details(cell: DecoderCell, encoded: EncoderOutput, inputs: Any, names: Iterable[str]) -> list[dict]:
    """``cell.step_details`` runs the same step as ``cell.step``, with the named details.

    Steps through ``inputs`` ``(B, T, ·)`` (the step's inputs, after ``prepare_inputs``)
    from the states of ``encoded``. At every step ``step_details`` gives exactly
    ``step``'s output, states and attention, has every name in ``names`` (and no
    distribution that ``names`` leaves out), and each distribution of
    :data:`DISTRIBUTIONS` is non-negative and sums to 1 (or is all 0: nothing to
    attend to yet), with 0 on padded source positions for "attention".

    Returns:
        the details of every step as NumPy (None where the cell has no value).
    """
    names = set(names)
    mask = np.asarray(encoded.mask)
    states = cell.initial_states(encoded)
    found = []
    for t in range(int(inputs.shape[1])):
        details = cell.step_details(inputs[:, t], states)
        output, new_states, attention = cell.step(inputs[:, t], states)
        np.testing.assert_array_equal(numpy(details["output"]), numpy(output), err_msg=f"output, step {t}")
        for i, (a, b) in enumerate(zip(details["states"], new_states)):
            np.testing.assert_array_equal(numpy(a), numpy(b), err_msg=f"state {i}, step {t}")
        missing = names - {k for k, v in details.items() if v is not None}
        assert not missing, f"step {t}: no {sorted(missing)} in {sorted(details)}"
        extra = {k for k in DISTRIBUTIONS if details.get(k) is not None} - names
        assert not extra, f"step {t}: unexpected details {sorted(extra)}"
        if attention is None:
            assert details.get("attention") is None
        else:
            np.testing.assert_array_equal(numpy(details["attention"]), numpy(attention))
        values = {k: None if v is None else numpy(v) for k, v in details.items() if k != "states"}
        for name in names & set(DISTRIBUTIONS):
            weights = values[name]
            assert np.all(weights >= 0.0), (name, t, weights)
            sums = weights.sum(-1)
            assert np.all(np.isclose(sums, 1.0, atol=1e-5) | (sums == 0.0)), (name, t, sums)
            if name == "attention":
                assert np.all(weights[mask == 0] == 0.0), (t, weights)
        found.append(values)
        states = new_states
    return found


def check_stacked_hand_off(
    cell: DecoderCell,
    reference: Callable,
    first: int,
    annotation_units: int,
    embedding_dim: int,
    batch: int = 3,
    source_length: int = 5,
) -> None:
    """A built two-layer stacked-LSTM cell (``init_state="encoder"``) starts layer ``l`` from the
    encoder's layer ``l`` final ``[h, c]`` (its states ``first .. first + 3``), its first step
    equals ``reference(cell, encoded, embedded)``, and an encoder with too few layers is a
    ``ValueError`` naming the sizes."""
    rng = np.random.default_rng(3)
    units = cell.units
    final = tuple([rng.normal(size=(batch, units)).astype("float32") for _ in range(2)] for _ in range(2))
    encoded = random_encoder_output(batch, source_length, annotation_units)._replace(final_states=final)
    states = cell.initial_states(encoded)
    for i in range(4):
        np.testing.assert_array_equal(numpy(states[first + i]), final[i // 2][i % 2])
    embedded = rng.normal(size=(batch, 1, embedding_dim)).astype("float32")
    run = numpy(cell.readout(cell.step(embedded[:, 0], states)[0]))
    np.testing.assert_allclose(run, reference(cell, encoded, embedded)[:, 0], atol=1e-5)
    try:
        cell.initial_states(EncoderOutput(encoded.annotations, encoded.mask, None, final[:1]))
    except ValueError as error:
        assert f"{units} units for each of the decoder's 2 layers" in str(error), error
    else:
        raise AssertionError("an encoder with one layer for a two-layer decoder was accepted")


def check_layer_masks(cell: DecoderCell, index: int, annotation_units: int) -> None:
    """A built cell with ``layer_dropout=0.5`` draws its ``(B, L*units)`` dropout masks (state
    ``index``) in training only, scaled 0 or 2."""
    encoded = random_encoder_output(16, 5, annotation_units)
    masks = numpy(cell.initial_states(encoded, training=True)[index])
    assert set(np.unique(masks)) == {0.0, 2.0}
    assert np.all(numpy(cell.initial_states(encoded)[index]) == 1.0)
