"""Tests for MemDecCell (run once per backend).

The contract every cell meets (states, RNN run == stepping, masking, decoding,
serialization, fit and ``.keras``, the NumPy reference of the logits) is checked
by ``run_cell_test`` for each configuration; the tests below check MemDec's own
invariants: the step's intermediate values, addressing weights and gates, the
three addressing modes, the printed Eq. 12, the memory noise, the weight names.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_memnmt.layers.memdec import ADDRESSINGS, MemDecCell
from keras_memnmt.testing import random_encoder_output, reference, run_cell_test
from keras_memnmt.testing.checks import (
    check_bad_arguments,
    check_mixed_precision,
    check_step_details,
)
from keras_memnmt.testing.utils import numpy, randomize_weights

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

B, TX, D, E, T = 3, 5, 6, 4, 3
UNITS, VOCAB, ATT, READ = 8, 11, 7, 9
N, M, ADDR = 4, 5, 6  # memory cells, cell size (!= UNITS), addressing units (!= ATT)
ARGUMENTS = dict(units=UNITS, target_vocab_size=VOCAB, attention_units=ATT, readout_units=READ, annotation_units=D)
ZEROS = dict(kernel_initializer="zeros", recurrent_initializer="zeros")  # for randomize_weights


def _data(seed=0):
    rng = np.random.default_rng(seed)
    annotations = rng.normal(size=(B, TX, D)).astype("float32")
    mask = np.ones((B, TX), "float32")
    mask[0, 3:] = 0.0  # padded source positions
    mask[2, 4] = 0.0
    embedded = rng.normal(size=(B, T, E)).astype("float32")
    return annotations, mask, embedded


def _make(**kwargs):
    return MemDecCell(**{**ARGUMENTS, "memory_size": N, "memory_dim": M, "address_units": ADDR, **kwargs})


def _cell(seed=0, **kwargs):
    cell = _make(**kwargs)
    cell.build((None, E))
    randomize_weights(cell, seed=seed)
    if cell.memory_noise is not None:
        # The fixed Eq. 14 noise is non-trainable and drawn by the backend's generator:
        # set it from NumPy too, large enough that the addressing is clearly non-uniform
        # on every backend (the same test data everywhere).
        rng = np.random.default_rng(seed + 1)
        shape = (cell.memory_size, cell.memory_dim)
        cell.memory_noise.assign(rng.normal(scale=0.5, size=shape).astype("float32"))
    return cell


def _addressing_weights(layer):
    names = ("memory_kernel", "state_kernel", "score_vector", "gate_kernel", "gate_bias")
    return {name: numpy(getattr(layer, name)) for name in names}


def _step_weights(cell):
    weights = {
        "address_nonlinearity": cell.address_nonlinearity,
        "addressing": cell.addressing,
        "write": cell.write,
        "query_state": cell.query_state,
        "read_addressing": _addressing_weights(cell.read_addressing),
        "query_kernel": numpy(cell.query_dense.kernel),
        "query_bias": numpy(cell.query_dense.bias),
        "attention_query_kernel": numpy(cell.attention.query_kernel),
        "attention_key_kernel": numpy(cell.attention.key_kernel),
        "attention_score_vector": numpy(cell.attention.score_vector),
        "gru_kernel": numpy(cell.gru_cell.kernel),
        "gru_recurrent_kernel": numpy(cell.gru_cell.recurrent_kernel),
        "gru_bias": numpy(cell.gru_cell.bias),
    }
    if cell.write_addressing is not None:
        weights["write_addressing"] = _addressing_weights(cell.write_addressing)
    if cell.write:
        weights["erase_kernel"] = numpy(cell.erase_dense.kernel)
        weights["erase_bias"] = numpy(cell.erase_dense.bias)
        weights["add_kernel"] = numpy(cell.add_dense.kernel)
        weights["add_bias"] = numpy(cell.add_dense.bias)
    return weights


def _reference_initial_states(cell, annotations, mask):
    fixed = None if cell.memory_noise is None else numpy(cell.memory_noise)[None]  # (1, n, m)
    return reference.memdec_initial_states(
        annotations,
        mask,
        numpy(cell.init_dense.kernel),
        numpy(cell.init_dense.bias),
        numpy(cell.memory_init_dense.kernel),
        numpy(cell.memory_init_dense.bias),
        cell.memory_size,
        noise=fixed,
    )


def _noisy_states(cell, annotations, mask):
    """Initial states with the memory noise: distinct cells, so the addressing matters.

    (The fixed noise is there at inference too; `training=True` also covers
    `init_noise="sample"`.) Without noise every cell of M_0 is identical and stays so (see
    `test_without_noise_the_cells_stay_identical`): a sequence test would then
    never see non-uniform addressing weights.
    """
    return cell.initial_states(annotations, mask, training=True)


def _reference_sequence(cell, annotations, mask, embedded, states):
    """T reference steps from `states` (`s`, `M` and `w` first, the layer's or the
    reference's): (outputs (B, T, F), step dicts)."""
    state, memory, weights = (numpy(s) for s in states[:3])
    memory = memory.reshape(-1, cell.memory_size, cell.memory_dim)
    outputs, steps = [], []
    for t in range(embedded.shape[1]):
        result = reference.memdec_step(embedded[:, t], state, memory, weights, annotations, mask, **_step_weights(cell))
        state, memory, weights = result["state"], result["memory"], result["weights"]
        outputs.append(result["output"])
        steps.append(result)
    return np.stack(outputs, 1), steps


def _reference_logits(cell, encoded, embedded):
    """The reference logits from the reference initial states (with the fixed noise)."""
    states = _reference_initial_states(cell, encoded.annotations, encoded.mask)
    outputs, steps = _reference_sequence(cell, encoded.annotations, encoded.mask, embedded, states)
    # The noisy cells make the addressing non-trivial from the first addressing on
    # (with "shared_weights" the first read uses the uniform w_0).
    first_read = 1 if cell.addressing == "shared_weights" else 0
    assert all(np.abs(step["read_weights"] - 1.0 / N).max() > 1e-2 for step in steps[first_read:])
    assert all(
        np.abs(step["write_weights"] - 1.0 / N).max() > 1e-2 for step in steps if step["write_weights"] is not None
    )
    deep = cell.deep_output
    weights = (deep.hidden.kernel, deep.hidden.bias, deep.logits.kernel, deep.logits.bias)
    return reference.readout(outputs, *[numpy(w) for w in weights])


def _random_memory_states(cell, annotations, mask, seed=1):
    """Initial states with a random memory and random previous weights (harder to fake)."""
    rng = np.random.default_rng(seed)
    states = cell.initial_states(annotations, mask)
    memory = rng.normal(size=(B, N, M)).astype("float32")
    previous = rng.uniform(0.1, 1.0, size=(B, N)).astype("float32")
    previous /= previous.sum(-1, keepdims=True)
    states[1] = ops.convert_to_tensor(memory.reshape(B, N * M))
    states[2] = ops.convert_to_tensor(previous)
    return states, memory, previous


# One `run_cell_test` a configuration, covering the three addressing modes, the printed
# Eq. 12, the query with the state and no write (with M != units throughout); the `fit`
# runs with "separate", which has every sublayer. The memory noise (std 0.5, fixed) makes
# the cells distinct, so that the addressing is not uniform (checked by `_reference_logits`).
CONFIGURATIONS = {
    "separate": ({"addressing": "separate"}, True),
    "shared_weights": ({}, False),
    "shared_parameters_printed_eq12_query_state": (
        {"addressing": "shared_parameters", "address_nonlinearity": "none", "query_state": True},
        False,
    ),
    "separate_no_write": ({"addressing": "separate", "write": False}, False),
}


@pytest.mark.parametrize("kwargs, fit", CONFIGURATIONS.values(), ids=CONFIGURATIONS.keys())
def test_cell_contract_and_numpy_reference(kwargs, fit):
    run_cell_test(
        lambda: _make(init_noise_std=0.5, seed=0, **kwargs), embedding_dim=E, reference=_reference_logits, fit=fit
    )


def test_initial_states_layout_and_reference():
    annotations, mask, _ = _data()
    cell = _cell(init_noise_std=0.1)
    assert cell.state_size == [UNITS, N * M, N, None, None, None]
    assert cell.output_size == UNITS + D + E
    states = [numpy(s) for s in cell.initial_states(annotations, mask)]  # with the fixed noise
    assert [s.shape for s in states] == [
        (B, UNITS),
        (B, N * M),
        (B, N),
        (B, TX * D),
        (B, TX * ATT),
        (B, TX),
    ]
    s0, memory, weights = _reference_initial_states(cell, annotations, mask)
    np.testing.assert_allclose(states[0], s0, atol=1e-5)
    np.testing.assert_allclose(states[1].reshape(B, N, M), memory, atol=1e-5)
    np.testing.assert_allclose(states[2], weights, atol=1e-7)
    np.testing.assert_array_equal(states[3].reshape(B, TX, D), annotations)
    keys = annotations @ numpy(cell.attention.key_kernel)  # U_a h_j
    np.testing.assert_allclose(states[4].reshape(B, TX, ATT), keys, atol=1e-5)
    np.testing.assert_array_equal(states[5], mask)


@pytest.mark.parametrize("address_nonlinearity", ["tanh", "none"])
@pytest.mark.parametrize("addressing", ADDRESSINGS)
def test_step_matches_numpy_reference(address_nonlinearity, addressing):
    annotations, mask, embedded = _data()
    cell = _cell(address_nonlinearity=address_nonlinearity, addressing=addressing)
    assert (cell.write_addressing is None) == (addressing != "separate")
    states, memory, previous = _random_memory_states(cell, annotations, mask)
    details = cell.step_details(embedded[:, 0], states)
    output, new_states, attention = cell.step(embedded[:, 0], states)

    ref = reference.memdec_step(
        embedded[:, 0],
        numpy(states[0]),
        memory,
        previous,
        annotations,
        mask,
        **_step_weights(cell),
    )
    np.testing.assert_allclose(numpy(details["read_weights"]), ref["read_weights"], atol=1e-5)
    np.testing.assert_allclose(numpy(details["write_weights"]), ref["write_weights"], atol=1e-5)
    np.testing.assert_allclose(numpy(attention), ref["attention"], atol=1e-5)
    np.testing.assert_allclose(numpy(new_states[0]), ref["state"], atol=1e-5)
    np.testing.assert_allclose(numpy(new_states[1]).reshape(B, N, M), ref["memory"], atol=1e-5)
    np.testing.assert_allclose(numpy(new_states[2]), ref["weights"], atol=1e-5)
    np.testing.assert_allclose(numpy(output), ref["output"], atol=1e-5)
    assert numpy(output).shape == (B, cell.output_size) == (B, UNITS + D + E)
    for before, after in zip(states[3:], new_states[3:]):  # pass-through states
        np.testing.assert_array_equal(numpy(after), numpy(before))
    # The memory really changed, and step == step_details.
    assert not np.allclose(numpy(new_states[1]).reshape(B, N, M), memory, atol=1e-3)
    np.testing.assert_array_equal(numpy(details["output"]), numpy(output))


@pytest.mark.parametrize("addressing", ADDRESSINGS)
def test_addressing_weights_sum_to_one_and_gates_in_unit_interval(addressing):
    annotations, mask, embedded = _data()
    cell = _cell(addressing=addressing, seed=2)
    states, _, _ = _random_memory_states(cell, annotations, mask)
    for t in range(T):
        details = cell.step_details(embedded[:, t], states)
        for key in (
            "read_weights",
            "read_content_weights",
            "write_weights",
            "write_content_weights",
            "attention",
        ):
            if details[key] is None:  # "shared_weights": the read computes no addressing
                assert addressing == "shared_weights" and key == "read_content_weights"
                continue
            weights = numpy(details[key])
            assert np.all(weights >= 0.0), key
            np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5, err_msg=key)
        np.testing.assert_allclose(numpy(details["states"][2]).sum(-1), 1.0, atol=1e-5)
        assert np.all(numpy(details["attention"])[mask == 0] == 0.0)
        for key in ("erase", "add", "read_gate", "write_gate"):
            if details[key] is None:
                assert addressing == "shared_weights" and key == "read_gate"
                continue
            values = numpy(details[key])
            assert np.all((values >= 0.0) & (values <= 1.0)), key
        states = details["states"]


def test_shared_weights_read_with_the_previous_write_weights():
    """addressing="shared_weights" (§3.2): w^r_{t+1} is w^w_t itself, one addressing a step."""
    annotations, mask, embedded = _data()
    cell = _cell()
    assert cell.addressing == "shared_weights"
    states = _noisy_states(cell, annotations, mask)
    np.testing.assert_allclose(
        numpy(cell.step_details(embedded[:, 0], states)["read_weights"]), 1.0 / N, atol=1e-7
    )  # w_0
    previous_write = None
    for t in range(T):
        details = cell.step_details(embedded[:, t], states)
        assert details["read_content_weights"] is None and details["read_gate"] is None
        if previous_write is not None:
            np.testing.assert_array_equal(numpy(details["read_weights"]), previous_write)
        memory = numpy(states[1]).reshape(B, N, M)
        expected_read = np.einsum("bn,bnm->bm", numpy(details["read_weights"]), memory)
        np.testing.assert_allclose(numpy(details["read"]), expected_read, atol=1e-5)
        previous_write = numpy(details["write_weights"])
        states = details["states"]


@pytest.mark.parametrize("legacy, mode", [(True, "shared_parameters"), (False, "separate")])
def test_models_saved_with_shared_addressing_keep_their_mode(legacy, mode):
    """Configs written before `addressing` existed carry `shared_addressing`."""
    annotations, mask, embedded = _data()
    cell = _cell(addressing=mode)
    config = cell.get_config()
    assert "shared_addressing" not in config
    del config["addressing"]
    old = MemDecCell.from_config({**config, "shared_addressing": legacy})
    assert old.addressing == mode
    old.build((None, E))
    old.set_weights(cell.get_weights())
    states = _noisy_states(cell, annotations, mask)
    np.testing.assert_array_equal(
        numpy(old.step(embedded[:, 0], states)[0]), numpy(cell.step(embedded[:, 0], states)[0])
    )


def test_printed_eq12_content_weights_ignore_the_state():
    """Without the tanh, `v^T U_a s` is the same for every cell and cancels (Eq. 12)."""
    annotations, mask, embedded = _data()
    for nonlinearity, should_change in [("none", False), ("tanh", True)]:
        cell = _cell(address_nonlinearity=nonlinearity, addressing="shared_parameters")
        states, _, _ = _random_memory_states(cell, annotations, mask)
        other = list(states)
        other[0] = states[0] + 1.0
        first = numpy(cell.step_details(embedded[:, 0], states)["read_content_weights"])
        second = numpy(cell.step_details(embedded[:, 0], other)["read_content_weights"])
        assert (not np.allclose(first, second, atol=1e-6)) == should_change


@pytest.mark.parametrize("addressing", ADDRESSINGS)
def test_without_write_the_memory_stays_constant(addressing):
    annotations, mask, embedded = _data()
    cell = _cell(write=False, addressing=addressing)
    assert cell.erase_dense is None and cell.add_dense is None and cell.write_addressing is None
    states = _noisy_states(cell, annotations, mask)
    memory = numpy(states[1])
    step_states = states
    for t in range(T):
        step_states = cell.step(embedded[:, t], step_states)[1]
        np.testing.assert_array_equal(numpy(step_states[1]), memory)


def test_without_noise_the_cells_stay_identical():
    """M_0's cells are all equal without nu_i (Eq. 14): addressing is uniform and stays so.

    This symmetry is why the noise matters; it is what `init_noise="sample"` with
    `noise_at_inference=False` decodes with.
    """
    annotations, mask, embedded = _data()
    cell = _cell(addressing="separate", init_noise="sample")
    states = cell.initial_states(annotations, mask)
    for t in range(T):
        details = cell.step_details(embedded[:, t], states)
        states = details["states"]
        memory = numpy(states[1]).reshape(B, N, M)
        np.testing.assert_allclose(memory, np.repeat(memory[:, :1], N, axis=1), atol=1e-6)
        for key in ("read_weights", "write_weights"):
            np.testing.assert_allclose(numpy(details[key]), 1.0 / N, atol=1e-6)


def test_fixed_memory_noise_is_the_same_in_training_and_decoding():
    """init_noise="fixed": one nu (n, m) ~ N(0, std^2), added to every sentence's M_0."""
    annotations, mask, embedded = _data()
    cell = MemDecCell(**ARGUMENTS, **ZEROS, memory_size=16, memory_dim=32, init_noise_std=0.1, seed=0)
    cell.build((None, E))
    randomize_weights(cell)
    assert cell.memory_noise is not None and not cell.memory_noise.trainable
    nu = numpy(cell.memory_noise)
    assert nu.shape == (16, 32) and 0.08 < nu.std() < 0.12
    train = numpy(cell.initial_states(annotations, mask, training=True)[1])
    decode = numpy(cell.initial_states(annotations, mask)[1])
    np.testing.assert_array_equal(train, decode)
    no_noise = MemDecCell.from_config({**cell.get_config(), "init_noise_std": 0.0})
    no_noise.build((None, E))
    assert no_noise.memory_noise is None
    no_noise.set_weights([numpy(v) for v in cell.weights if v is not cell.memory_noise])
    clean = numpy(no_noise.initial_states(annotations, mask)[1])
    np.testing.assert_allclose((decode - clean).reshape(B, 16, 32), np.broadcast_to(nu, (B, 16, 32)), atol=1e-6)
    # The cells differ at inference, so the addressing is not uniform there.
    details = cell.step_details(embedded[:, 0], cell.initial_states(annotations, mask))
    assert np.abs(numpy(details["write_content_weights"]) - 1.0 / 16).max() > 1e-3


def test_sampled_memory_noise_only_in_training_unless_asked():
    annotations, mask, _ = _data()
    big_batch = np.concatenate([annotations] * 4)  # more samples for the std estimate
    big_mask = np.concatenate([mask] * 4)
    cell = _cell(init_noise_std=0.1, init_noise="sample", seed=0)
    clean = numpy(cell.initial_states(big_batch, big_mask)[1])
    np.testing.assert_array_equal(numpy(cell.initial_states(big_batch, big_mask, training=False)[1]), clean)
    noisy = numpy(cell.initial_states(big_batch, big_mask, training=True)[1])
    noise = (noisy - clean).reshape(-1, N, M)
    assert 0.06 < noise.std() < 0.15
    assert not np.allclose(noise[:, 0], noise[:, 1])  # an independent draw per cell
    # s_0 and w_0 are never noisy.
    for i in (0, 2):
        np.testing.assert_array_equal(
            numpy(cell.initial_states(big_batch, big_mask, training=True)[i]),
            numpy(cell.initial_states(big_batch, big_mask)[i]),
        )
    at_inference = _cell(init_noise_std=0.1, init_noise="sample", noise_at_inference=True)
    assert not np.allclose(numpy(at_inference.initial_states(big_batch, big_mask)[1]), clean)
    no_noise = _cell(init_noise_std=0.0, init_noise="sample")
    np.testing.assert_array_equal(numpy(no_noise.initial_states(big_batch, big_mask, training=True)[1]), clean)


def test_target_mask_with_zero_output_for_mask():
    annotations, mask, embedded = _data()
    cell = _cell()
    target_mask = np.ones((B, T), bool)
    target_mask[1, 2:] = False
    rnn = keras.layers.RNN(cell, return_sequences=True, zero_output_for_mask=True)
    states = _noisy_states(cell, annotations, mask)
    outputs = numpy(rnn(embedded, initial_state=states, mask=target_mask))
    ref_outputs, _ = _reference_sequence(cell, annotations, mask, embedded, states)
    np.testing.assert_allclose(outputs[target_mask], ref_outputs[target_mask], atol=1e-5)
    np.testing.assert_array_equal(outputs[~target_mask], 0.0)


def test_default_sizes_and_weight_names():
    # Names and shapes do not depend on the values: zeros build faster than random draws.
    cell = MemDecCell(**ARGUMENTS, **ZEROS)
    assert (cell.memory_size, cell.memory_dim, cell.address_units) == (8, UNITS, ATT)
    assert cell.state_size == [UNITS, 8 * UNITS, 8, None, None, None]
    cell.build((None, E))
    # RNNsearch-compatible names and shapes for the pre-training copy (class docstring).
    assert tuple(cell.gru_cell.kernel.shape) == (E + D + UNITS, 3 * UNITS)
    assert tuple(cell.query_dense.kernel.shape) == (UNITS + E, UNITS)
    with_state = MemDecCell(**ARGUMENTS, **ZEROS, memory_dim=M, query_state=True)
    with_state.build((None, E))
    assert tuple(with_state.query_dense.kernel.shape) == (M + UNITS + E, UNITS)  # [r; s; e]
    names = {w.path.split("/", 1)[1] for w in cell.weights if "seed_generator" not in w.path}
    for name in (
        "init_state/kernel",
        "feedback_query/kernel",
        "attention/query_kernel",
        "gru/kernel",
        "deep_output/logits/kernel",
        "memory_init/kernel",
        "read_addressing/gate_kernel",
        "erase/kernel",
        "add/bias",
    ):
        assert name in names, (name, sorted(names))


def test_bad_arguments_raise_value_error_naming_the_argument():
    check_bad_arguments(
        lambda **kwargs: MemDecCell(**{**ARGUMENTS, **kwargs}),
        [
            ({"attention_units": 1.5}, "attention_units"),
            ({"memory_size": 0}, "memory_size"),
            ({"memory_dim": -1}, "memory_dim"),
            ({"address_units": 2.0}, "address_units"),
            ({"address_nonlinearity": "relu"}, "address_nonlinearity"),
            ({"shared_addressing": 1}, "shared_addressing"),
            ({"addressing": "both"}, "addressing"),
            ({"addressing": "separate", "shared_addressing": True}, "addressing"),
            ({"init_noise_std": -0.1}, "init_noise_std"),
            ({"init_noise_std": True}, "init_noise_std"),
            ({"noise_at_inference": "yes"}, "noise_at_inference"),
            ({"init_noise": "per_step"}, "init_noise"),
            ({"write": None}, "write"),
            ({"query_state": 0}, "query_state"),
            ({"init_state": "first"}, "init_state"),
        ],
    )


def test_mixed_precision_policy_reaches_every_sublayer():
    """Every state in the compute dtype, the memory (with its fixed noise) included."""
    check_mixed_precision(_make(dtype="mixed_bfloat16"), random_encoder_output(B, TX, D), E)


@pytest.mark.parametrize("addressing", ADDRESSINGS)
def test_step_details_hold_the_memory_addressing_and_the_erase_add_means(addressing):
    annotations, mask, embedded = _data()
    cell = _cell(addressing=addressing, seed=3)
    names = ["attention", "read_weights", "write_weights", "erase_mean", "add_mean"]
    details = check_step_details(cell, random_encoder_output(B, TX, D), embedded, names)
    for step in details:
        for name in ("erase", "add"):
            assert step[f"{name}_mean"].shape == (B,)
            np.testing.assert_allclose(step[f"{name}_mean"], step[name].mean(-1), rtol=1e-6)
            assert np.all((step[f"{name}_mean"] >= 0.0) & (step[f"{name}_mean"] <= 1.0))
    without_write = check_step_details(
        _cell(addressing=addressing, write=False),
        random_encoder_output(B, TX, D),
        embedded,
        ["attention", "read_weights"] + ([] if addressing == "separate" else ["write_weights"]),
    )
    assert without_write[0]["erase_mean"] is None and without_write[0]["add_mean"] is None
