"""Mixed precision (``TrainConfig.precision``): every model trains under ``mixed_float16`` and
``mixed_bfloat16`` with float32 weights; loss scaling hands the optimizer unscaled gradients;
a saved mixed-precision model loads with its policy and trains on; ``memnmt train --set
precision=...`` trains and translates.

The dtype policy is Keras's global state: every test here leaves it at float32.
"""

import json
import os

import keras
import numpy as np
import pytest

from keras_memnmt.cli import main
from keras_memnmt.config import ConfigError, TrainConfig
from keras_memnmt.data import BOS_ID
from keras_memnmt.layers.attention import masked_softmax
from keras_memnmt.models import get_model
from keras_memnmt.testing.tiny_runs import TINY_OPTIONS, TINY_TRAIN_ARGS, library_model_params
from keras_memnmt.training import apply_precision, compile_model
from keras_memnmt.training.losses import MaskedCrossEntropy
from keras_memnmt.training.optimizers import FusedAdam, build_optimizer

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

POLICIES = ("mixed_float16", "mixed_bfloat16")
COMPUTE = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


@pytest.fixture(autouse=True)
def _float32_afterwards():
    yield
    keras.config.set_dtype_policy("float32")


def _batch():
    rng = np.random.default_rng(0)
    source = rng.integers(4, 30, size=(4, 6)).astype("int32")
    source[0, 4:] = 0  # a padded sentence
    target = rng.integers(4, 25, size=(4, 6)).astype("int32")
    target_in = np.concatenate([np.full((4, 1), BOS_ID, "int32"), target[:, :-1]], axis=1)
    return (source, target_in), target


def _dtype(x) -> str:
    return keras.backend.standardize_dtype(x.dtype)


class _LogitsDtype(keras.metrics.Metric):
    """Records the dtype of the logits (``y_pred``) the training step computes."""

    def __init__(self):
        super().__init__(name="logits_dtype")
        self.seen = set()

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.seen.add(_dtype(y_pred))

    def result(self):
        return keras.ops.zeros(())


def test_precision_is_a_checked_config_field():
    assert TrainConfig().precision == "float32"
    assert TrainConfig().replace(precision="mixed_bfloat16").precision == "mixed_bfloat16"
    with pytest.raises(ConfigError, match="precision='float16'"):
        TrainConfig().replace(precision="float16")


@pytest.mark.parametrize("policy", POLICIES)
def test_apply_precision_sets_the_policy_and_says_so(policy):
    line = apply_precision(TrainConfig(precision=policy))
    assert keras.config.dtype_policy().name == policy
    assert policy in line and COMPUTE[policy] in line
    assert ("dynamic loss scaling" in line) == (policy == "mixed_float16")
    assert apply_precision(TrainConfig()) == "precision: float32"
    assert keras.config.dtype_policy().name == "float32"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_masked_softmax_is_computed_in_float32(dtype):
    """Scores far apart, a masked position and a row with every position masked: the
    weights come back in the scores' dtype, finite, exactly 0 where masked."""
    scores = keras.ops.convert_to_tensor(np.array([[3e4, -3e4, 7.0, 1.0], [1.0, 2.0, 3.0, 4.0]]), dtype)
    mask = np.array([[1, 1, 1, 0], [0, 0, 0, 0]], "float32")
    weights = masked_softmax(scores, keras.ops.convert_to_tensor(mask, dtype))
    assert _dtype(weights) == dtype
    values = keras.ops.convert_to_numpy(keras.ops.cast(weights, "float32"))
    np.testing.assert_array_equal(values, [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", library_model_params())
def test_every_model_trains_under_the_policy(name, policy):
    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(0)
    model = get_model(name)(30, 25, **TINY_OPTIONS[name])
    if policy == "mixed_float16" and _fused_attention_on_jax_cpu(model):
        pytest.skip("jax.nn.dot_product_attention in float16 does not compile on XLA's CPU backend")
    logits = _LogitsDtype()
    model.compile(
        optimizer=build_optimizer(TrainConfig(learning_rate=1e-2)), loss=MaskedCrossEntropy(), metrics=[logits]
    )
    x, y = _batch()
    losses = model.fit(x, y, epochs=3, verbose=0).history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses
    assert {_dtype(v) for v in model.weights} == {"float32"}
    assert logits.seen == {COMPUTE[policy]}
    inner = model.optimizer
    if policy == "mixed_float16":  # compile wraps the optimizer for dynamic loss scaling
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
        inner = model.optimizer.inner_optimizer
    assert isinstance(inner, FusedAdam)
    norm = float(keras.ops.convert_to_numpy(inner.gradient_norm))
    assert 0.0 < norm < 100.0  # the unscaled gradients' norm (the scale starts at 2**15)


def _fused_attention_on_jax_cpu(model) -> bool:
    """Whether ``model`` has a ``keras.layers.MultiHeadAttention`` without attention dropout
    and runs on JAX's CPU: Keras then calls ``jax.nn.dot_product_attention``, which asks XLA
    for a float16 x float16 -> float32 product that its CPU backend cannot compile (the
    Transformer's; a JAX limitation, not the model's)."""
    if keras.backend.backend() != "jax":
        return False
    import jax

    model.build_weights()  # keras-hub's layers make their attention layers when built
    return jax.default_backend() == "cpu" and any(
        isinstance(layer, keras.layers.MultiHeadAttention) and not layer._dropout for layer in model._flatten_layers()
    )


def _apply(optimizer, grads, variables):
    if keras.backend.backend() != "jax":
        optimizer.apply(grads, variables)
        return
    # Keras's LossScaleOptimizer.apply branches with a traced cond, which cannot assign
    # variables on JAX; JAX's training step runs stateless_apply, as here.
    values, state = optimizer.stateless_apply(
        [v.value for v in optimizer.variables], grads, [v.value for v in variables]
    )
    for variable, value in zip([*variables, *optimizer.variables], [*values, *state]):
        variable.assign(value)


def test_loss_scaling_hands_unscaled_gradients_to_the_clipping():
    """LossScaleOptimizer(FusedAdam) on scaled gradients updates as FusedAdam on the gradients
    themselves, clipping and the kept gradient norm included; a non-finite step is skipped."""
    rng = np.random.default_rng(0)
    shapes = [(5, 3), (3,)]
    start = [rng.normal(size=s).astype("float32") for s in shapes]
    grads = [[rng.normal(0.0, 2.0, size=s).astype("float32") for s in shapes] for _ in range(3)]
    plain = [keras.Variable(w) for w in start]
    scaled = [keras.Variable(w) for w in start]
    reference = FusedAdam(learning_rate=0.01, global_clipnorm=1.0)
    wrapped = keras.optimizers.LossScaleOptimizer(FusedAdam(learning_rate=0.01, global_clipnorm=1.0))
    wrapped.build(scaled)
    for step in grads:
        scale = float(keras.ops.convert_to_numpy(wrapped.dynamic_scale))
        reference.apply([keras.ops.convert_to_tensor(g) for g in step], plain)
        _apply(wrapped, [keras.ops.convert_to_tensor(g * scale) for g in step], scaled)
        unscaled_norm = np.sqrt(sum((g.astype("float64") ** 2).sum() for g in step))
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(wrapped.inner_optimizer.gradient_norm), unscaled_norm, rtol=1e-5
        )
    for a, b in zip(plain, scaled):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(b), keras.ops.convert_to_numpy(a), rtol=1e-6)
    before = [keras.ops.convert_to_numpy(v) for v in scaled]
    scale = float(keras.ops.convert_to_numpy(wrapped.dynamic_scale))
    _apply(wrapped, [keras.ops.convert_to_tensor(np.full(s, np.inf, "float32")) for s in shapes], scaled)
    for b, v in zip(before, scaled):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(v), b)
    assert float(keras.ops.convert_to_numpy(wrapped.dynamic_scale)) == scale / 2


def test_a_saved_mixed_float16_model_loads_with_its_policy_and_trains_on(tmp_path):
    """Loaded where the global policy is float32 (a new process, ``--resume``), every layer
    computes in the saved policy, the outputs are the saved model's, the loss scale and the
    optimizer state come back, and training goes on."""
    keras.config.set_dtype_policy("mixed_float16")
    keras.utils.set_random_seed(0)
    model = get_model("rnnsearch")(30, 25, **TINY_OPTIONS["rnnsearch"])
    compile_model(model, TrainConfig(learning_rate=1e-2))
    x, y = _batch()
    before = keras.ops.convert_to_numpy(model(x))
    model.optimizer.build(model.trainable_variables)
    model.optimizer.dynamic_scale.assign(2.0**10)  # as a run that met overflows leaves it
    path = str(tmp_path / "model.keras")
    model.save(path)

    keras.config.set_dtype_policy("float32")
    loaded = keras.saving.load_model(path, compile=True)
    assert {layer.dtype_policy.name for layer in loaded._flatten_layers()} == {"mixed_float16"}
    after = keras.ops.convert_to_numpy(loaded(x))
    assert after.dtype == np.float16
    np.testing.assert_array_equal(after, before)
    assert isinstance(loaded.optimizer, keras.optimizers.LossScaleOptimizer)
    assert float(keras.ops.convert_to_numpy(loaded.optimizer.dynamic_scale)) == 2.0**10
    losses = loaded.fit(x, y, epochs=3, verbose=0).history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses
    assert int(keras.ops.convert_to_numpy(loaded.optimizer.iterations)) == 3


TINY = [*TINY_TRAIN_ARGS, "--set", "validate_every=2", "--set", "beam_size=1"]


def test_train_and_translate_in_mixed_bfloat16(tmp_path, capsys):
    out = str(tmp_path / "run")
    args = ["train", "quickstart", "--out", out, *TINY, "--set", "max_steps=2"]
    assert main([*args, "--set", "precision=mixed_bfloat16"]) == 0
    assert "[memnmt] precision: mixed_bfloat16 (compute in bfloat16, weights in float32" in capsys.readouterr().err
    assert json.load(open(os.path.join(out, "config.json")))["precision"] == "mixed_bfloat16"
    assert main([*args, "--set", "max_steps=4", "--resume"]) == 2  # precision=float32
    assert "precision='mixed_bfloat16' (now 'float32')" in capsys.readouterr().err

    keras.config.set_dtype_policy("float32")  # as in a new process
    from keras_memnmt.rundir.runs import load_model

    assert load_model(out).dtype_policy.name == "mixed_bfloat16"
    source = tmp_path / "in.txt"
    source.write_text("the cat sees a dog\nthe dogs sleep\n")
    translated = tmp_path / "out.txt"
    assert (
        main(
            ["translate", "--model", out, "--beam", "1", "--input", str(source), "--output", str(translated), "--quiet"]
        )
        == 0
    )
    assert len(translated.read_text().split("\n")) == 3  # one line per input
