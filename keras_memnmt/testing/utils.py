"""Small helpers shared by the layer tests (and by ``cells`` and ``checks``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import keras
import numpy as np

from keras_memnmt.layers.base import EncoderOutput


def numpy(x: Any) -> np.ndarray:
    """Any backend tensor or variable as a NumPy array."""
    return np.asarray(keras.ops.convert_to_numpy(x))


def weights_of(layer: keras.layers.Layer) -> list[np.ndarray]:
    """A layer's weights as NumPy arrays, in ``layer.weights`` order."""
    return [numpy(w) for w in layer.weights]


def random_encoder_output(batch: int, source_length: int, annotation_units: int, seed: int = 0) -> EncoderOutput:
    """Normal annotations and summary; row 0 has its last two source positions padded."""
    rng = np.random.default_rng(seed)
    annotations = rng.normal(size=(batch, source_length, annotation_units)).astype("float32")
    mask = np.ones((batch, source_length), "float32")
    mask[0, source_length - 2 :] = 0.0
    summary = rng.normal(size=(batch, annotation_units)).astype("float32")
    return EncoderOutput(annotations, mask, summary)


def stacked_reference_start(cell: keras.layers.Layer, encoded: Any) -> tuple:
    """What a NumPy reference of a stacked-LSTM cell (Luong, Attentive) starts from:
    ``(annotations, mask, [h^1, c^1, ..., h^L, c^L], W_a or None, v_a or None)`` in float64,
    the LSTM states from the encoder's layers (``init_state="encoder"``) or zeros."""
    annotations, mask = (np.asarray(x, np.float64) for x in encoded[:2])
    if cell.init_state == "encoder":
        states = [np.asarray(s, np.float64) for layer in encoded.final_states for s in layer]
    else:
        states = [np.zeros((annotations.shape[0], cell.units))] * (2 * cell.num_layers)
    attention = cell.source_attention
    kernel = numpy(attention.kernel) if cell.score != "dot" else None
    score_vector = numpy(attention.score_vector) if cell.score == "concat" else None
    return annotations, mask, states, kernel, score_vector


def randomize_weights(layer: keras.layers.Layer, seed: int = 0, scale: float = 0.5) -> None:
    """Sets every trainable weight (biases included) to N(0, scale^2) values.

    Non-zero biases make the reference comparisons check the biases too.
    """
    rng = np.random.default_rng(seed)
    for weight in layer.trainable_weights:
        weight.assign(rng.normal(scale=scale, size=tuple(weight.shape)).astype(weight.dtype))


def compiled(fn: Callable) -> Callable:
    """``fn`` as one compiled program on JAX (``jax.jit``), unchanged on the other backends.

    Run op by op, JAX compiles every operation on its own the first time it meets
    its shapes, which makes a test body that runs many operations once (a search
    loop, a step under a new dtype policy) slower than compiling it whole. The
    program runs once, so XLA's backend optimizations are skipped
    (``xla_backend_optimization_level=0``): they take longer than they save.
    ``fn`` takes no tensor arguments (the layers' weights are read inside) and must
    not create variables or draw from a ``SeedGenerator``.
    """
    if keras.backend.backend() != "jax":
        return fn
    import jax

    def run():
        return jax.jit(fn).lower().compile({"xla_backend_optimization_level": 0})()

    return run


def value_and_grads(fn, *arrays: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """``fn(*tensors)`` (a scalar) and its gradients w.r.t. every array, by this backend's autodiff.

    Keeps the input dtypes (float16 in → float16 gradient), so tests can check them.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        xs = [tf.constant(a) for a in arrays]
        with tf.GradientTape() as tape:
            tape.watch(xs)
            value = fn(*xs)
        return float(value), [g.numpy() for g in tape.gradient(value, xs)]
    if backend == "jax":
        import jax

        value, grads = jax.value_and_grad(fn, argnums=tuple(range(len(arrays))))(*arrays)
        return float(value), [np.asarray(g) for g in grads]
    if backend == "torch":
        import torch

        xs = [torch.tensor(a, requires_grad=True) for a in arrays]
        value = fn(*xs)
        value.backward()
        return float(value.detach()), [x.grad.numpy() for x in xs]
    raise NotImplementedError(f"no gradient helper for backend {backend}")


def assert_stepping_matches(
    model: keras.Model, source_ids: np.ndarray, target_in: np.ndarray, logits: np.ndarray, atol: float = 1e-5
) -> None:
    """``model.decode_step`` (the decoders' path), fed ``target_in`` one token at a time from
    ``model.encode``, gives the teacher-forced ``logits (B, T, V)`` of ``model.call``."""
    states = model.encode(source_ids)
    for t in range(target_in.shape[1]):
        step_logits, states, _ = model.decode_step(keras.ops.convert_to_tensor(target_in[:, t]), states)
        np.testing.assert_allclose(numpy(step_logits), logits[:, t], atol=atol)


def small_batch(source_vocab: int = 30, target_vocab: int = 25, seed: int = 1) -> tuple:
    """``(source (3, 6), target_in (3, 7))`` int32 ids for model tests: row 0 has two padded
    source positions, every target starts with bos (2)."""
    rng = np.random.default_rng(seed)
    source = rng.integers(4, source_vocab, size=(3, 6)).astype("int32")
    source[0, 4:] = 0
    target = rng.integers(4, target_vocab, size=(3, 7)).astype("int32")
    target[:, 0] = 2
    return source, target


def assert_model_round_trip(
    model: keras.Model, source_ids: np.ndarray, target_in: np.ndarray, directory: str, atol: float = 1e-6
) -> np.ndarray:
    """A model's teacher-forced logits equal its decoding steps, a ``.keras`` save and load
    in ``directory`` keeps its class, config and logits, and beam search runs.

    Returns:
        the teacher-forced logits ``(B, T, V)``.
    """
    logits = numpy(model((source_ids, target_in)))
    assert_stepping_matches(model, source_ids, target_in, logits)
    path = os.path.join(str(directory), "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, compile=False)
    assert type(loaded) is type(model) and loaded.get_config() == model.get_config()
    np.testing.assert_allclose(numpy(loaded((source_ids, target_in))), logits, atol=atol)
    out = model.generate(source_ids, beam_size=3, max_length_a=1.0, max_length_b=2)
    assert numpy(out["tokens"]).shape[:2] == (source_ids.shape[0], 1)
    return logits


def word_ids(corpus) -> tuple:
    """``(vocabulary size, source ids, target-in ids, target-out ids)`` of a word-level corpus
    (the synthetic one): one id per word (0 pad, 2 bos, 3 eos), padded arrays."""
    words = sorted({w for line in corpus.source + corpus.target for w in line.split()})
    ids = {w: i + 4 for i, w in enumerate(words)}  # 0 pad, 2 bos, 3 eos

    def encode(lines, bos):
        rows = [([2] if bos else []) + [ids[w] for w in line.split()] + ([] if bos else [3]) for line in lines]
        out = np.zeros((len(rows), max(map(len, rows))), "int32")
        for i, row in enumerate(rows):
            out[i, : len(row)] = row
        return out

    return len(ids) + 4, encode(corpus.source, False), encode(corpus.target, True), encode(corpus.target, False)
