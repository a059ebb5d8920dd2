"""Where a training step's time goes, on this backend: one row per part of the step.

    KERAS_BACKEND=torch python benchmarks/profile_step.py --data-dir $MEMNMT_DATA

The model, data and batches are those of `throughput.py` (``--recipe``, default
``multi30k_rnnsearch``; ``--model``; ``--set``). Each part is timed on its own, forward
and backward, over the same batches, in the way the backend's trainer runs it (a
``tf.function`` on TensorFlow, ``jax.jit`` on JAX, eager on PyTorch), and with the
gradients a real step computes (every trainable weight, and the part's float inputs
so that the backward pass goes on into the part before it):

- ``encoder``: the source embedding and encoder, up to the decoder's initial states;
- ``decoder``: the target embedding and its dropout, the cell's input preparation and
  the ``keras.layers.RNN`` loop over the target (the recurrent cell with its attention
  or memory), from fixed initial states;
- ``output_loss``: the deep output, the vocabulary projection and the loss, from fixed
  decoder outputs;
- ``optimizer``: one update of every weight (the recipe's optimizer with its clipping);
- ``train_step``: one whole step as ``model.fit`` runs it (``train_on_batch``);
- ``framework``: ``train_step`` minus the four parts (the trainer's own work: the
  gradient bookkeeping, metrics, the Python around the step, and whatever the parts
  measured alone share or miss);
- ``input_pipeline``: producing one batch with the library's ``tf.data`` pipeline (in
  training it runs on tf.data's own threads, beside the step).

Prints ``{part}_ms=`` (mean per batch, the best of ``--repeats`` passes) and
``{part}_share=`` (of ``train_step``) for each part, and the whole step's matmul rate,
``train_step_gflops_per_second=`` (`throughput.train_flops_per_batch`). Never asserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from throughput import train_flops_per_batch  # noqa: E402

PARTS = ("encoder", "decoder", "output_loss", "optimizer")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir",
        default=os.environ.get("MEMNMT_DATA"),
        help="local Multi30k folder (default: $MEMNMT_DATA, else the cache, else a download)",
    )
    p.add_argument("--model", default="", help="a registered model name (default: --recipe's model)")
    p.add_argument(
        "--recipe",
        default="multi30k_rnnsearch",
        help="recipe whose data and model settings are measured; 'none': TrainConfig's defaults",
    )
    p.add_argument("--batches", type=int, default=20, help="batches each part is timed over")
    p.add_argument("--repeats", type=int, default=3, help="passes over those batches (the best counts)")
    p.add_argument(
        "--train-limit", type=int, default=0, help="train on the first N pairs only (0: all; the vocabulary too)"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a TrainConfig field (model sizes, vocab_size, ...)",
    )
    args = p.parse_args()
    if args.batches < 1 or args.repeats < 1:
        p.error("--batches and --repeats must be >= 1")

    from keras_memnmt.runtime import import_tensorflow_without_jax, tune_malloc

    tune_malloc()  # as the `memnmt` command does
    import_tensorflow_without_jax()

    import keras
    from keras import ops

    from keras_memnmt.config import ConfigError, TrainConfig, apply_overrides, build_model
    from keras_memnmt.data import SubwordVocab, load_multi30k, make_dataset
    from keras_memnmt.recipes import load_recipe
    from keras_memnmt.training import compile_model

    try:  # an unknown recipe or a bad --set: the message, not a traceback
        base = TrainConfig() if args.recipe == "none" else load_recipe(args.recipe)
        config = apply_overrides(base, [f"model={args.model or base.model}", *args.set])
    except ConfigError as error:
        p.error(str(error))
    backend = keras.backend.backend()
    print(f"backend={backend}")
    print(f"recipe={args.recipe}")
    print(f"model={config.model}")
    train = load_multi30k("en", "de", "train", data_dir=args.data_dir)
    if args.train_limit:
        train = train.take(args.train_limit)
    vocab = SubwordVocab.train(train.source, train.target, size=config.vocab_size)
    ds, _ = make_dataset(
        train,
        vocab,
        batch_size=config.batch_size,
        batch_by=config.batch_by,
        max_length=config.max_length,
        bucket_width=config.bucket_width,
    )

    # The input pipeline: batches as training draws them (shuffled, bucketed, padded).
    it = iter(ds.repeat())
    next(it)
    start = time.perf_counter()
    batches = [next(it) for _ in range(args.batches)]
    pipeline_ms = 1000 * (time.perf_counter() - start) / args.batches
    batches = [
        (
            (keras.ops.convert_to_tensor(s.numpy()), keras.ops.convert_to_tensor(t.numpy())),
            keras.ops.convert_to_tensor(y.numpy()),
        )
        for (s, t), y in batches
    ]

    model = build_model(config, vocab.source.vocab_size, vocab.target.vocab_size)
    compile_model(model, config)
    for x, y in batches:  # builds the optimizer and compiles each batch shape
        model.train_on_batch(x, y)

    timers = {"train_step": lambda x, y: model.train_on_batch(x, y)}
    timers.update(part_timers(model, backend))
    times = {name: best_mean(fn, batches, args.repeats, backend) for name, fn in timers.items()}
    times["framework"] = times["train_step"] - sum(times[p] for p in PARTS)
    times["input_pipeline"] = pipeline_ms / 1000

    step = times["train_step"]
    for name in ("train_step", *PARTS, "framework", "input_pipeline"):
        print(f"{name}_ms={1000 * times[name]:.1f}")
        print(f"{name}_share={times[name] / step:.3f}")
    if model.matmul_macs() is None:  # the model declares no count: no FLOP rate
        print("matmul_flops=not_counted")
    else:
        flops = statistics.mean(train_flops_per_batch(model, int(ops.size(x[0])), int(ops.size(y))) for x, y in batches)
        print(f"train_step_gflops_per_second={flops / step / 1e9:.1f}")
    return 0


def best_mean(fn, batches, repeats: int, backend: str) -> float:
    """The best over ``repeats`` passes of the mean seconds per batch, after one untimed pass
    (which compiles each batch shape and computes each part's fixed inputs)."""
    for x, y in batches:
        out = fn(x, y)
    _wait(out, backend)
    passes = []
    for _ in range(repeats):
        start = time.perf_counter()
        for x, y in batches:
            out = fn(x, y)
        _wait(out, backend)
        passes.append((time.perf_counter() - start) / len(batches))
    return min(passes)


def _wait(out, backend: str) -> None:
    """Blocks until ``out`` is computed (JAX dispatches asynchronously)."""
    if backend == "jax":
        import jax

        jax.block_until_ready(out)


def part_timers(model, backend: str) -> dict:
    """``{part: fn(x, y)}``: each part forward and backward, and the optimizer's update.

    A part's ``fn`` returns its gradients, ``(per trainable weight, per float input)``
    (``None`` or zeros for a weight the part does not reach).
    """
    from keras import ops

    def encoder(x, y, inputs):
        return model.encode(x[0], training=True)

    def decoder_inputs(x, y):
        return model.encode(x[0], training=True)

    def decoder(x, y, states):  # as Seq2Seq.call runs it, from the initial states
        return model.decode_sequence(x[1], states, training=True)

    def output_inputs(x, y):
        return [decoder(x, y, decoder_inputs(x, y))]

    def output_loss(x, y, inputs):
        return model.loss(y, model.readout(inputs[0], training=True))

    def no_inputs(x, y):
        return []

    pieces = {
        "encoder": (no_inputs, encoder),
        "decoder": (decoder_inputs, decoder),
        "output_loss": (output_inputs, output_loss),
    }
    variables = model.trainable_variables
    grad = {"tensorflow": _tf_grad, "jax": _jax_grad, "torch": _torch_grad}[backend]
    timers = {name: grad(model, variables, make, fn) for name, (make, fn) in pieces.items()}

    grads = [ops.ones_like(v.value) * 1e-3 for v in variables]
    timers["optimizer"] = _optimizer_update(model, variables, grads, backend)
    return timers


def _float_inputs(values) -> list:
    from keras import ops

    return [v for v in values if "float" in str(ops.dtype(v))]


def _weighted_sum(outputs):
    """A scalar whose gradient reaches every float output (a loss already is one)."""
    from keras import ops

    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    return sum(ops.sum(o) * 1e-3 for o in _float_inputs(outputs))


def _fixed_inputs(make):
    """``make(x, y)``'s float tensors, computed once per batch (outside the timed calls)."""
    cache = {}

    def inputs(x, y):
        key = id(x[0])  # the batches stay alive for the whole run
        if key not in cache:
            cache[key] = _float_inputs(make(x, y))
        return cache[key]

    return inputs


def _tf_grad(model, variables, make, fn):
    import tensorflow as tf

    fixed = _fixed_inputs(make)

    @tf.function(reduce_retracing=True)
    def step(x, y, inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss = _weighted_sum(fn(x, y, inputs))
        return tape.gradient(loss, [*variables, *inputs])

    def run(x, y):
        grads = step(x, y, fixed(x, y))
        return grads[: len(variables)], grads[len(variables) :]

    return run


def _jax_grad(model, variables, make, fn):
    import jax
    import keras

    trainable = list(variables)
    others = [v for v in model.variables if all(v is not t for t in trainable)]
    fixed = _fixed_inputs(make)

    def loss(values, inputs, other_values, x, y):
        mapping = list(zip(trainable, values)) + list(zip(others, other_values))
        with keras.StatelessScope(state_mapping=mapping):
            return _weighted_sum(fn(x, y, inputs))

    step = jax.jit(jax.grad(loss, argnums=(0, 1)))

    def run(x, y):
        return step([v.value for v in trainable], fixed(x, y), [v.value for v in others], x, y)

    return run


def _torch_grad(model, variables, make, fn):
    fixed = _fixed_inputs(make)

    def run(x, y):
        inputs = [v.detach().clone().requires_grad_(True) for v in fixed(x, y)]
        for v in variables:
            v.value.grad = None
        _weighted_sum(fn(x, y, inputs)).backward()
        return [v.value.grad for v in variables], [v.grad for v in inputs]

    return run


def _optimizer_update(model, variables, grads, backend: str):
    optimizer = model.optimizer
    if backend == "tensorflow":
        import tensorflow as tf

        apply = tf.function(lambda: optimizer.apply(grads, variables))
        return lambda x, y: apply()
    if backend == "jax":
        import jax

        update = jax.jit(optimizer.stateless_apply)
        # The values are read at each call: `train_on_batch` donates (deletes) the arrays it is given.
        return lambda x, y: update([v.value for v in optimizer.variables], grads, [v.value for v in variables])
    import torch

    def apply(x, y):
        with torch.no_grad():
            optimizer.apply(grads, variables)

    return apply


if __name__ == "__main__":
    sys.exit(main())
