"""FusedAdam: Adam's update (with global-norm clipping) against NumPy, and the gradient norm it
keeps, on every backend."""

import keras
import numpy as np
import pytest

from keras_memnmt.config import ConfigError, TrainConfig, validate
from keras_memnmt.training.optimizers import FusedAdam, InverseSqrtSchedule, build_optimizer

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SHAPES = [(5, 3), (3,), (7, 2)]


def _grads(steps):
    rng = np.random.default_rng(1)
    return [[rng.normal(0.0, 2.0, shape).astype("float32") for shape in SHAPES] for _ in range(steps)]


def _numpy_adam(weights, grads, lr, clip, beta_1=0.9, beta_2=0.999, eps=1e-7):
    """Keras 3's Adam in float64: m, v, bias correction in the rate, eps added to sqrt(v);
    ``lr`` a number or a function of the 0-based update count."""
    weights = [w.astype("float64") for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    for t, step_grads in enumerate(grads, start=1):
        g = [x.astype("float64") for x in step_grads]
        if clip:
            norm = np.sqrt(sum((x**2).sum() for x in g))
            g = [x * min(1.0, clip / norm) for x in g]
        alpha = (lr(t - 1) if callable(lr) else lr) * np.sqrt(1 - beta_2**t) / (1 - beta_1**t)
        for i, x in enumerate(g):
            m[i] += (x - m[i]) * (1 - beta_1)
            v[i] += (x**2 - v[i]) * (1 - beta_2)
            weights[i] -= alpha * m[i] / (np.sqrt(v[i]) + eps)
    return weights


@pytest.mark.parametrize("clip", [None, 1.0])
def test_update_matches_numpy_adam(clip):
    rng = np.random.default_rng(0)
    start = [rng.normal(size=shape).astype("float32") for shape in SHAPES]
    variables = [keras.Variable(w) for w in start]
    optimizer = FusedAdam(learning_rate=0.01, global_clipnorm=clip)
    grads = _grads(4)
    for step_grads in grads:
        optimizer.apply([keras.ops.convert_to_tensor(g) for g in step_grads], variables)
    want = _numpy_adam(start, grads, 0.01, clip)
    for variable, expected in zip(variables, want):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(variable), expected, rtol=1e-5, atol=1e-6)
    if clip:  # the gradients' norm is about 10: clipping changed the update
        unclipped = _numpy_adam(start, grads, 0.01, None)
        assert max(np.abs(a - b).max() for a, b in zip(want, unclipped)) > 1e-3


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.IndexedSlices gradients")
def test_sparse_gradient_gets_the_dense_update():
    import tensorflow as tf

    rng = np.random.default_rng(0)
    start = rng.normal(size=(6, 4)).astype("float32")
    rows = np.array([1, 4, 1])  # row 1 twice: the slices add up
    values = [rng.normal(size=(3, 4)).astype("float32") for _ in range(3)]
    dense = []
    for value in values:
        full = np.zeros_like(start)
        np.add.at(full, rows, value)
        dense.append([full])
    for clip in (None, 1.0):
        variable = keras.Variable(start)
        optimizer = FusedAdam(learning_rate=0.01, global_clipnorm=clip)
        for value in values:
            optimizer.apply(
                [tf.IndexedSlices(tf.constant(value), tf.constant(rows), tf.constant(start.shape))], [variable]
            )
        (want,) = _numpy_adam([start], dense, 0.01, clip)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(variable), want, rtol=1e-5, atol=1e-6)


def test_config_round_trip():
    optimizer = FusedAdam(learning_rate=3e-4, beta_1=0.8, global_clipnorm=1.0)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(optimizer))
    assert isinstance(restored, FusedAdam)
    config = restored.get_config()
    assert (config["beta_1"], config["global_clipnorm"]) == (0.8, 1.0)
    assert np.isclose(config["learning_rate"], 3e-4)


def test_adams_beta2_and_epsilon_are_settings():
    optimizer = build_optimizer(TrainConfig(adam_beta_2=0.98, adam_epsilon=1e-9))
    config = optimizer.get_config()
    assert (config["beta_2"], config["epsilon"]) == (0.98, 1e-9)
    assert (build_optimizer(TrainConfig()).get_config()["beta_2"], TrainConfig().adam_epsilon) == (0.999, 1e-7)
    for field, value in (("adam_beta_2", 1.0), ("adam_epsilon", 0.0)):
        with pytest.raises(ConfigError, match=f"config field {field}={value!r}"):
            validate(TrainConfig(**{field: value}))


def test_recipes_get_fused_adam_on_keras_own_update():
    # PyTorch: Keras replaces keras.optimizers.Adam (not a subclass) by its foreach Adam,
    # which FusedAdam derives from there.
    optimizer = build_optimizer(TrainConfig())
    assert isinstance(optimizer, keras.optimizers.Adam) and isinstance(optimizer, FusedAdam)
    assert optimizer._fused() == (keras.backend.backend() == "tensorflow")
    if keras.backend.backend() == "torch":
        from keras.src.backend.torch.optimizers.torch_adam import Adam as TorchAdam

        assert isinstance(optimizer, TorchAdam)


@pytest.mark.parametrize("clip", [None, 1.0])
def test_gradient_norm_is_the_last_updates_norm_before_clipping(clip):
    rng = np.random.default_rng(0)
    variables = [keras.Variable(rng.normal(size=shape).astype("float32")) for shape in SHAPES]
    optimizer = FusedAdam(learning_rate=0.01, global_clipnorm=clip)
    for step_grads in _grads(2):
        optimizer.apply([keras.ops.convert_to_tensor(g) for g in step_grads], variables)
        norm = np.sqrt(sum((g.astype("float64") ** 2).sum() for g in step_grads))
        np.testing.assert_allclose(float(keras.ops.convert_to_numpy(optimizer.gradient_norm)), norm, rtol=1e-5)
    assert optimizer.variables[-1] is optimizer.gradient_norm


def test_loads_an_optimizer_saved_without_the_gradient_norm():
    """A Keras Adam's saved state (one variable fewer) loads; the norm starts at 0."""
    rng = np.random.default_rng(0)
    grads = [keras.ops.convert_to_tensor(g) for g in _grads(1)[0]]
    old = keras.optimizers.Adam(learning_rate=0.01)
    old.apply(grads, [keras.Variable(rng.normal(size=shape).astype("float32")) for shape in SHAPES])
    store = {str(i): keras.ops.convert_to_numpy(v) for i, v in enumerate(old.variables)}
    optimizer = FusedAdam(learning_rate=0.01)
    optimizer.build([keras.Variable(np.zeros(shape, "float32")) for shape in SHAPES])
    optimizer.load_own_variables(store)
    for mine, saved in zip(optimizer.variables, old.variables):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(mine), keras.ops.convert_to_numpy(saved))
    assert float(keras.ops.convert_to_numpy(optimizer.gradient_norm)) == 0.0


def test_warmup_schedule_steps_adam_at_the_papers_rates():
    """``warmup_steps``: the rate of update n (0-based) is peak·min((n+1)/W, sqrt(W/(n+1)))."""
    optimizer = build_optimizer(TrainConfig(learning_rate=0.01, warmup_steps=2, lr_decay=1.0, clipnorm=0.0))
    assert isinstance(optimizer._learning_rate, InverseSqrtSchedule)

    def rate(n):
        return 0.01 * min((n + 1) / 2, np.sqrt(2 / (n + 1)))

    rng = np.random.default_rng(0)
    start = [rng.normal(size=shape).astype("float32") for shape in SHAPES]
    variables = [keras.Variable(w) for w in start]
    grads = _grads(5)
    seen = []
    for step_grads in grads:
        seen.append(float(keras.ops.convert_to_numpy(optimizer.learning_rate)))
        optimizer.apply([keras.ops.convert_to_tensor(g) for g in step_grads], variables)
    np.testing.assert_allclose(seen, [rate(n) for n in range(5)], rtol=1e-6)  # 0.005, 0.01, 0.0082, ...
    want = _numpy_adam(start, grads, rate, None)
    for variable, expected in zip(variables, want):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(variable), expected, rtol=1e-5, atol=1e-6)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(optimizer))
    assert restored._learning_rate.get_config() == {"peak": 0.01, "warmup_steps": 2}


@pytest.mark.backend_independent
def test_the_training_log_names_the_warmup_schedule():
    from keras_memnmt.training.distribution import Placement

    line = Placement(["cpu:0"]).describe(TrainConfig(learning_rate=1e-3, warmup_steps=1000, lr_decay=1.0), 1e-6)
    assert line.endswith("learning rate 1e-06 (a linear warm-up to 0.001 over 1000 updates, then 1/sqrt(step))")
    assert Placement(["cpu:0"]).describe(TrainConfig(learning_rate=1e-3)).endswith("learning rate 0.001")


def test_warmup_with_a_plateau_decay_is_an_error_naming_both():
    with pytest.raises(ConfigError, match="warmup_steps=100 and lr_decay=0.5"):
        TrainConfig(warmup_steps=100, lr_decay=0.5).replace()
    with pytest.raises(ConfigError, match="warmup_steps=-1"):
        TrainConfig().replace(warmup_steps=-1)
