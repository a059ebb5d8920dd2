"""Training and translation throughput of a model on Multi30k en→de (this backend).

Prints one ``name=value`` line per figure; never asserts. Run once per backend:

    KERAS_BACKEND=jax python benchmarks/throughput.py --data-dir $MEMNMT_DATA

Settings come from a recipe (``--recipe``, default ``multi30k_rnnsearch``: the
toolkit-comparison size, embeddings 256, bidirectional GRU
256+256 encoder, GRU 512 decoder, additive attention, batch 64 sentences,
SentencePiece vocabularies of 8k, and the recipe's length buckets, label
smoothing and tied output embeddings; ``--set tie_embeddings=false`` measures the
untied model), so the figures are those of the training in docs/results.md
(figures and commands: docs/benchmarks.md); ``--recipe none`` starts from
``TrainConfig``'s defaults instead (bucket width 8 rather than the recipe's 4, no
label smoothing, no embedding dropout, untied).

Figures, per model (``--model rnnsearch,memdec,rmn`` benchmarks several in one run,
each line prefixed by the model's name; default: the recipe's model): training sentence pairs/s and target
tokens/s (steady state, after the warm-up steps that compile each bucket shape),
the training cost per target token (µs), memory, the fraction of 100 GFLOP/s
reached (analytic matmul FLOPs, the model's own count, ``Seq2Seq.matmul_macs``:
forward ×3 for forward+backward; a model that declares none prints
``{name}_matmul_flops=not_counted`` instead), and translation time of test_2016_flickr
(greedy, beam 5), first pass (with compilation) and second pass. With several models,
each one's cost per token relative to the first one's (``--model rnnsearch,memdec``:
``memdec_cost_per_token_vs_rnnsearch``, from the timed wall clock) and its median step
relative to the first one's on the same batches (``memdec_median_step_vs_rnnsearch``,
which one slow stretch of the machine does not move). ``_train_steps_share_of_wall`` is the part of the wall clock spent inside
training steps (the rest is ``fit``'s own work and the input pipeline).

Memory: the kernel's peak-RSS mark is reset (``/proc/self/clear_refs``) after
the data and vocabulary are ready, so ``peak_rss_mb_training`` is the process's
peak during the model's build and training alone (library code included), and
``training_memory_mb`` that peak minus the resident size just before the build.

``--peak N`` also measures this backend's matmul rate on its default device for an
N×N×N product in float32 and in bfloat16 (``matmul_gflops_{N}_{dtype}``) and prints
each model's ``{name}_fraction_of_peak``: its analytic GFLOP/s over the rate of its
compute dtype (bfloat16 under ``--set precision=mixed_bfloat16``, float16 under
``mixed_float16``). On a GPU, N of 8192 or more is needed to approach the chip's peak.

Where TensorFlow is not installed (a GPU machine with only JAX, say), the batches and
vocabulary are made elsewhere: ``--save-batches DIR`` writes them (and the test
sentences) and stops; ``--load-batches DIR`` reads them instead of ``--data-dir``, and
``model.fit`` is fed from a Python generator instead of ``tf.data``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def train_flops_per_batch(model, src_tokens: int, tgt_tokens: int) -> float | None:
    """Matmul FLOPs (forward ×3) for one batch with the given padded token counts, from the
    model's own count (``Seq2Seq.matmul_macs``); None for a model that declares none."""
    macs = model.matmul_macs()
    if macs is None:
        return None
    per_source, per_target = macs
    return 3 * 2 * (src_tokens * per_source + tgt_tokens * per_target)


def matmul_rate(m: int, k: int, n: int, dtype: str = "float32", calls: int = 1, repeats: int = 5) -> float:
    """Best-of-``repeats`` GFLOP/s of ``keras.ops.matmul`` of (m×k)·(k×n) in ``dtype`` on this
    backend's default device; each timed repeat runs ``calls`` products and waits for the last."""
    import keras
    import numpy as np

    rng = np.random.default_rng(0)
    a = keras.ops.convert_to_tensor(rng.standard_normal((m, k), "float32"), dtype=dtype)
    b = keras.ops.convert_to_tensor(rng.standard_normal((k, n), "float32"), dtype=dtype)
    keras.ops.convert_to_numpy(keras.ops.matmul(a, b))  # warm-up (and compile, where any)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = keras.ops.matmul(a, b)
        keras.ops.convert_to_numpy(out[:1, :1])  # wait for the device
        best = min(best, (time.perf_counter() - t0) / calls)
    return 2 * m * k * n / best / 1e9


def as_dataset(batches: list):
    """What ``model.fit`` reads ``batches`` from, in order: a ``tf.data`` dataset, or a Python
    generator where TensorFlow is not installed."""
    try:
        import tensorflow as tf
    except ImportError:  # a machine without TensorFlow: Keras reads a Python generator
        return (batch for batch in batches)
    return tf.data.Dataset.from_generator(
        lambda: iter(batches),
        output_signature=(
            (tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.int32)),
            tf.TensorSpec([None, None], tf.int32),
        ),
    )


def save_batches(directory: str, batches: list, vocab, test, settings: dict) -> None:
    """Writes the batches (``batches.npz``, with ``settings`` in ``batches.json``), the vocabulary (``vocab/``) and the test
    sentences (``test.source.txt``, ``test.target.txt``) that ``load_batches`` reads."""
    import numpy as np

    os.makedirs(directory, exist_ok=True)
    arrays = {}
    for i, ((source, target_in), target_out) in enumerate(batches):
        arrays.update({f"source_{i}": source, f"target_in_{i}": target_in, f"target_out_{i}": target_out})
    np.savez_compressed(os.path.join(directory, "batches.npz"), **arrays)
    with open(os.path.join(directory, "batches.json"), "w") as f:  # how they were made
        json.dump(settings, f)
    vocab.save(os.path.join(directory, "vocab"))
    for side in ("source", "target"):
        with open(os.path.join(directory, f"test.{side}.txt"), "w") as f:
            f.write("".join(line + "\n" for line in (getattr(test, side) if test is not None else [])))


def load_batches(directory: str) -> tuple:
    """Reads what ``save_batches`` wrote: ``(batches, settings, vocab, test_sources, test_targets)``."""
    import numpy as np

    from keras_memnmt.data import SubwordVocab

    path = os.path.join(directory, "batches.npz")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--load-batches: {path} not found (write it with --save-batches)")
    with np.load(path) as arrays:
        count = sum(1 for key in arrays.files if key.startswith("source_"))
        batches = [((arrays[f"source_{i}"], arrays[f"target_in_{i}"]), arrays[f"target_out_{i}"]) for i in range(count)]
    with open(os.path.join(directory, "batches.json")) as f:
        settings = json.load(f)
    test = []
    for side in ("source", "target"):
        with open(os.path.join(directory, f"test.{side}.txt")) as f:
            test.append(f.read().splitlines())
    return batches, settings, SubwordVocab.load(os.path.join(directory, "vocab")), test[0], test[1]


def _proc_status_mb(field: str) -> float:
    """A ``/proc/self/status`` memory field (VmRSS, VmHWM) in MB; 0 where there is none."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _reset_peak_rss() -> bool:
    """Resets the kernel's peak-RSS mark of this process (Linux ≥ 4.0); False if it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir",
        default=os.environ.get("MEMNMT_DATA"),
        help="local Multi30k folder (default: $MEMNMT_DATA, else the cache, else a download)",
    )
    p.add_argument(
        "--model",
        default="",
        help="registered model name(s), comma-separated; the others are compared with the "
        "first (default: --recipe's model)",
    )
    p.add_argument(
        "--model-recipes",
        default="",
        help="comma-separated recipes, one per --model entry, whose model settings that "
        "model takes (e.g. multi30k_rnnsearch,multi30k_attentive_general); the data "
        "settings and --set stay --recipe's. Default: every model from --recipe",
    )
    p.add_argument(
        "--recipe",
        default="multi30k_rnnsearch",
        help="recipe whose data and model settings are measured (bucket width, batch, "
        "sizes, label smoothing); 'none': TrainConfig's defaults",
    )
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--warmup-steps", type=int, default=60)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--translate", type=int, default=1000, help="test sentences to translate (0: skip)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a TrainConfig field (model sizes, batch_by, precision, ...)",
    )
    p.add_argument(
        "--peak",
        type=int,
        default=0,
        metavar="N",
        help="also measure the N×N×N matmul rate in float32 and bfloat16 and print each "
        "model's fraction of it (0: skip)",
    )
    p.add_argument(
        "--save-batches", metavar="DIR", help="write the batches, vocabulary and test sentences to DIR and stop"
    )
    p.add_argument(
        "--load-batches",
        metavar="DIR",
        help="read the batches, vocabulary and test sentences from DIR (written by "
        "--save-batches) instead of --data-dir; needs no TensorFlow",
    )
    args = p.parse_args()
    if args.peak < 0:
        p.error(f"--peak: {args.peak} is negative")
    models = [m.strip() for m in args.model.split(",") if m.strip()]

    from keras_memnmt.runtime import import_tensorflow_without_jax, tune_malloc

    malloc_tuned = tune_malloc()  # as the `memnmt` command does (MEMNMT_MALLOC_TUNING=0: off)
    tf_without_jax = import_tensorflow_without_jax()  # as the `memnmt` command does

    import keras

    from keras_memnmt.config import TrainConfig, apply_overrides
    from keras_memnmt.data import ParallelCorpus, SubwordVocab, load_multi30k, make_dataset

    print(f"backend={keras.backend.backend()}")
    print(f"malloc_tuned={int(malloc_tuned)}")
    print(f"tensorflow_imported_without_jax={int(tf_without_jax)}")
    from keras_memnmt.config import ConfigError
    from keras_memnmt.recipes import load_recipe

    try:  # an unknown recipe or a bad --set: the message, not a traceback
        base = TrainConfig() if args.recipe == "none" else load_recipe(args.recipe)
        config = apply_overrides(
            dataclasses.replace(base, vocab_size=args.vocab_size, batch_size=args.batch_size), args.set
        )
    except ConfigError as error:
        p.error(str(error))
    models = models or [config.model]
    from keras_memnmt.models import model_names

    unknown = sorted(set(models) - set(model_names()))
    if unknown:
        p.error(f"--model: unknown model(s) {unknown}; choose from {', '.join(model_names())}")
    print(f"recipe={args.recipe}")
    if not args.load_batches:  # loaded batches print their own (batches_bucket_width=)
        print(f"bucket_width={config.bucket_width}")
    print(f"tie_embeddings={int(config.tie_embeddings)}")  # the Multi30k recipes tie the output embedding
    test = None
    if args.load_batches:
        try:
            batches, settings, vocab, test_source, test_target = load_batches(args.load_batches)
        except (OSError, ValueError) as error:
            p.error(str(error))
        for key, value in settings.items():  # how the batches were made, not --recipe's values
            print(f"batches_{key}={value}")
        if len(batches) < args.warmup_steps + args.steps:
            p.error(
                f"--load-batches: {args.load_batches} holds {len(batches)} batches, fewer than "
                f"--warmup-steps + --steps ({args.warmup_steps + args.steps})"
            )
        batches = batches[: args.warmup_steps + args.steps]
        if args.translate:
            test = ParallelCorpus(test_source, test_target, name="test").take(args.translate)
    else:
        train = load_multi30k("en", "de", "train", data_dir=args.data_dir)
        vocab = SubwordVocab.train(train.source, train.target, size=config.vocab_size)
        ds, _ = make_dataset(
            train,
            vocab,
            batch_size=config.batch_size,
            batch_by=config.batch_by,
            max_length=config.max_length,
            bucket_width=config.bucket_width,
        )
        batches = list(ds.repeat().take(args.warmup_steps + args.steps).as_numpy_iterator())
        if args.translate:
            test = load_multi30k("en", "de", "test_2016_flickr", data_dir=args.data_dir).take(args.translate)
    if args.save_batches:
        save_batches(
            args.save_batches,
            batches,
            vocab,
            test,
            {
                "recipe": args.recipe,
                "batch_size": config.batch_size,
                "batch_by": config.batch_by,
                "bucket_width": config.bucket_width,
                "max_length": config.max_length,
            },
        )
        print(f"saved_batches={len(batches)}")
        return
    peaks = {}
    for dtype in ("float32", "bfloat16") if args.peak else ():
        peaks[dtype] = matmul_rate(args.peak, args.peak, args.peak, dtype)
        print(f"matmul_gflops_{args.peak}_{dtype}={peaks[dtype]:.1f}")
    own = [r.strip() for r in args.model_recipes.split(",") if r.strip()]
    if own and len(own) != len(models):
        p.error(f"--model-recipes: {len(own)} recipes for {len(models)} models")
    cost = {}
    for i, model_name in enumerate(models):
        if own:  # that recipe's model and options (--set reaches --recipe's config only)
            recipe = load_recipe(own[i])
            if recipe.model != model_name:
                p.error(f"--model-recipes: {own[i]} trains {recipe.model!r}, not {model_name!r}")
            model_config = config.replace(model=recipe.model, **recipe.model_options)
            print(f"{model_name}_recipe={own[i]}")
        else:
            model_config = apply_overrides(config, [f"model={model_name}"])
        cost[model_name] = benchmark(model_name, model_config, vocab, batches, args.warmup_steps, test, peaks)
    first = models[0]  # the others are compared with it
    for name, (value, median) in cost.items():
        if name != first:
            print(f"{name}_cost_per_token_vs_{first}={value / cost[first][0]:.2f}")
            # The same batches for both models, so the ratio of median steps estimates the
            # same cost ratio, without the slow stretches of this machine that move a mean.
            print(f"{name}_median_step_vs_{first}={median / cost[first][1]:.2f}")


def benchmark(name: str, config, vocab, batches: list, warmup_steps: int, test, peaks: dict) -> tuple:
    """Prints one model's figures; returns its training cost per target token and median step (s)."""
    import gc

    import keras
    import numpy as np

    from keras_memnmt.config import build_model
    from keras_memnmt.evaluation.translation import translate
    from keras_memnmt.training import apply_precision, compile_model
    from keras_memnmt.training.distribution import pad_batches, placement

    apply_precision(config)  # the dtype policy, before the build
    print(f"{name}_precision={config.precision}")
    # --set distribution=data_parallel: the devices, scope and padding `memnmt train` uses.
    place = placement(config)
    print(f"{name}_devices={len(place.devices)}")
    gc.collect()
    exact_peak = _reset_peak_rss()
    rss_before = _proc_status_mb("VmRSS")
    with place.scope():
        model = build_model(config, vocab.source.vocab_size, vocab.target.vocab_size)
        compile_model(model, config)

    class Timer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.times = []

        def on_train_batch_begin(self, batch, logs=None):
            self.t0 = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.times.append(time.perf_counter() - self.t0)

    timed = batches[warmup_steps:]
    # Warm-up: the first steps plus one batch of every shape timed later, so that no
    # compilation (one per bucket shape under jit) falls inside the timed steps.
    by_shape = {(b[0][0].shape, b[1].shape): b for b in timed}

    def fit(model, batches, **kwargs):
        dataset = as_dataset(batches)
        if place.pad_to > 1:  # rows that divide among the devices, as in training
            dataset = pad_batches(dataset, place.pad_to)
        with place.scope():
            model.fit(dataset, verbose=0, shuffle=False, **kwargs)

    fit(model, batches[:warmup_steps] + list(by_shape.values()))
    timer = Timer()
    t0 = time.perf_counter()
    fit(model, timed, callbacks=[timer])
    wall = time.perf_counter() - t0
    pairs = sum(len(b[1]) for b in timed)
    tokens = sum(int((b[1] != 0).sum()) for b in timed)
    counted = model.matmul_macs() is not None
    flops = sum(train_flops_per_batch(model, b[0][0].size, b[1].size) for b in timed) if counted else 0.0
    peak = _proc_status_mb("VmHWM") if exact_peak else (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(f"{name}_train_pairs_per_second={pairs / wall:.1f}")
    print(f"{name}_train_target_tokens_per_second={tokens / wall:.0f}")
    print(f"{name}_train_microseconds_per_target_token={1e6 * wall / tokens:.1f}")
    if not counted:  # the model declares no matmul_macs: timings without a FLOP rate
        print(f"{name}_matmul_flops=not_counted")
    else:
        print(f"{name}_train_gflops_per_second={flops / wall / 1e9:.1f}")
        print(f"{name}_train_fraction_of_100_gflops={flops / wall / 1e11:.2f}")
    compute = keras.config.dtype_policy().compute_dtype
    if counted and compute in peaks:
        print(f"{name}_fraction_of_peak={flops / wall / 1e9 / peaks[compute]:.4f}")
    median = float(np.median(timer.times))
    print(f"{name}_train_median_step_ms={1000 * median:.1f}")
    print(f"{name}_train_steps_share_of_wall={sum(timer.times) / wall:.3f}")
    print(f"{name}_train_max_step_ms={1000 * max(timer.times):.1f}")
    print(f"{name}_parameters={model.count_params()}")
    print(f"{name}_peak_rss_mb_training={peak:.0f}")
    if exact_peak:
        print(f"{name}_training_memory_mb={peak - rss_before:.0f}")

    if test is not None:
        for beam in (1, 5):
            kind = "greedy" if beam == 1 else f"beam{beam}"
            for attempt in ("first", "second"):
                t0 = time.perf_counter()
                translate(model, vocab, test.source, beam_size=beam, progress=False)
                print(f"{name}_translate_{len(test)}_{kind}_{attempt}_pass_seconds={time.perf_counter() - t0:.2f}")
    del model
    keras.backend.clear_session()
    return wall / tokens, median


if __name__ == "__main__":
    main()
