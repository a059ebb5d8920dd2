"""Training speed, fraction of the matmul peak and compile time per batch shape, at 64
sentences and at about 4k and 8k target tokens per batch (this backend).

Prints one ``name=value`` line per figure; never asserts. Made for one GPU, run once per
backend (the batches made where TensorFlow is, as in ``throughput.py``):

    KERAS_BACKEND=tensorflow python benchmarks/gpu_batches.py --data-dir $MEMNMT_DATA \\
        --set bucket_width=16 --save-batches gpu/batches
    # on the GPU machine:
    KERAS_BACKEND=jax python benchmarks/gpu_batches.py --load-batches gpu/batches
    KERAS_BACKEND=torch python benchmarks/gpu_batches.py --load-batches gpu/batches

Settings come from a recipe (``--recipe``, default ``multi30k_rnnsearch``) and ``--set``, as
in ``throughput.py``; the training pairs from ``--data-dir`` (default ``$MEMNMT_DATA``) or
from ``--load-batches DIR``, which ``--save-batches DIR`` writes (one folder per batching).
``--batchings`` names the batchings, default ``sentences64,tokens4096,tokens8192``:
``sentencesN`` is ``batch_by=sentences`` with ``batch_size=N``; ``tokensN`` is
``batch_by=tokens`` with ``batch_size=N``, so that a batch of the length bucket padded to
``L`` tokens holds ``N // L`` sentences (at most ``N`` padded tokens on its longer side).
Each bucket gives one shape, and the last, smaller batch of a bucket in an epoch another.

One model is built, then for each batching, in order:

1. Compile: for each distinct batch shape among the batching's batches (``--steps`` of
   them), the most frequent first, ``model.fit`` runs twice on one batch of that shape,
   each call timed until the model's weights are on the host. ``{b}_compile_s_per_shape``
   is the mean over the shapes of the first call's time minus the second's: tracing and
   compiling the training step for that shape (on JAX with the persistent cache, reading
   the compiled step back where the cache holds it). The first shape of the first
   batching also carries the optimizer's build and ``fit``'s first-call work. PyTorch
   compiles nothing: there it is the difference of two steps, which can be negative.
2. Time: ``model.fit`` over the batches whose shape was compiled, from the first step's
   start until the model's weights are on the host after the last: ``{b}_pairs_per_s``,
   ``{b}_target_tokens_per_s`` (non-padding target tokens) and ``{b}_fraction_of_peak``
   (the analytic matmul FLOPs of ``throughput.train_flops_per_batch`` per second, over the
   ``--peak N`` matmul rate in the compute dtype).

Other figures per batching: ``{b}_shapes`` (distinct shapes among its batches),
``{b}_shapes_compiled``, ``{b}_timed_steps``, ``{b}_sentences_per_batch`` and
``{b}_target_tokens_per_batch`` (means over the timed batches). On JAX the script turns on
the persistent compilation cache (``keras_memnmt.runtime.enable_compilation_cache``:
``$MEMNMT_COMPILATION_CACHE``, ``off`` to run without it) and prints its folder, its
entries before and after, the compilations read from it (``compilation_cache_hits``) and
written to it (``compilation_cache_writes``), and ``{b}_timed_compiles``, the compilations
during the timed steps (0 when every timed shape was compiled before). A second run on the
same machine reads every shape from the cache.

Time bound: the compiles and timed steps of all batchings share ``--max-seconds`` (default
300). Batching ``i`` of ``k`` ends at ``(i + 1) / k`` of it from the start (what one leaves
unspent goes to the next); it starts compiling a new shape only in the first half of its
remaining time, and times steps until its end or ``--steps`` (default 100). Each batching
compiles at least one shape and times at least one step. A compile in progress is not cut
short, so the part ends past ``--max-seconds`` by at most about one compile: the default
run takes under 8 minutes on one GPU where one compile takes under 90 s and the start-up,
the batches and ``--peak`` under 1.5 minutes (XLA compiled RNNsearch's step in 40–78 s on
an H100, docs/benchmarks.md).

``--peak N``: the N×N×N matmul rate of this backend's default device in the compute dtype
(default 8192 on a GPU, 1024 on a CPU; 0: skip). ``--smoke``: a seconds-long check on a CPU
(the synthetic corpus of 2,000 pairs, the tiny sizes of the CLI tests, one length bucket,
``--steps 3``, ``--peak 256``); ``--set`` applies on top of it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # throughput.py beside this file

from throughput import (  # noqa: E402
    as_dataset,
    load_batches,
    matmul_rate,
    save_batches,
    train_flops_per_batch,
)

BATCHINGS = "sentences64,tokens4096,tokens8192"
# --smoke: the synthetic corpus, the CLI tests' tiny sizes, one length bucket (max_length 30,
# padded to 31), no dropout on the output.
SMOKE_SETTINGS = [
    "corpus=synthetic",
    "synthetic_size=2000",
    "max_length=30",
    "bucket_width=32",
    "embedding_dim=16",
    "encoder_units=8",
    "decoder_units=16",
    "attention_units=8",
    "readout_units=16",
    "vocab_size=200",
    "output_dropout=0.0",
]


def parse_batchings(text: str) -> list[tuple[str, str, int]]:
    """``"sentences64,tokens4096"`` → ``[("sentences64", "sentences", 64), ("tokens4096", "tokens", 4096)]``."""
    found = []
    for name in (part.strip() for part in text.split(",")):
        match = re.fullmatch(r"(sentences|tokens)([1-9][0-9]*)", name)
        if not match:
            raise ValueError(f"--batchings: {name!r} is not sentencesN or tokensN")
        found.append((name, match.group(1), int(match.group(2))))
    if len({name for name, _, _ in found}) != len(found):
        raise ValueError(f"--batchings: {text!r} names a batching twice")
    return found


def shape_of(batch) -> tuple:
    """A batch's ``(source shape, target shape)``."""
    (source, _), target = batch
    return tuple(source.shape), tuple(target.shape)


def shapes_by_frequency(batches: list) -> list[tuple]:
    """The distinct shapes of ``batches``, the most frequent first (ties: first seen first)."""
    counts: dict[tuple, int] = {}
    for batch in batches:
        counts[shape_of(batch)] = counts.get(shape_of(batch), 0) + 1
    return sorted(counts, key=lambda shape: -counts[shape])  # sorted() is stable


def on_gpu() -> bool:
    """Whether this backend's default device is a GPU."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.default_backend() in ("gpu", "cuda", "rocm")
    if backend == "torch":
        import torch

        return torch.cuda.is_available()
    if backend == "tensorflow":
        import tensorflow as tf

        return bool(tf.config.list_physical_devices("GPU"))
    return False


class JaxEvents:
    """Counts JAX's compilations (``/jax/core/compile/backend_compile_duration``, cache reads
    included) and the persistent cache's hits and writes, from the time it is made."""

    COMPILE = "/jax/core/compile/backend_compile_duration"
    HIT, WRITE = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/cache_misses"

    def __init__(self):
        import jax

        self.counts = {self.COMPILE: 0, self.HIT: 0, self.WRITE: 0}
        jax.monitoring.register_event_listener(self._event)
        jax.monitoring.register_event_duration_secs_listener(self._duration)

    def _event(self, event: str, **kwargs) -> None:
        if event in self.counts:
            self.counts[event] += 1

    def _duration(self, event: str, duration: float, **kwargs) -> None:
        self._event(event)


def make_batches(config, batchings: list, steps: int, data_dir: str | None) -> tuple[dict, object]:
    """``({name: batches}, vocab)``: ``steps`` batches of each batching from the recipe's
    training pairs (repeated where one epoch holds fewer)."""
    from keras_memnmt.data import SubwordVocab, make_dataset
    from keras_memnmt.training import load_corpora

    train = load_corpora(config, data_dir, log=lambda line: print(f"# {line}"))[0]
    vocab = SubwordVocab.train(
        train.source,
        train.target,
        size=config.vocab_size,
        model_type=config.vocab_type,
        joint=config.joint_vocab,
        progress=None,
    )
    batches = {}
    for name, batch_by, size in batchings:
        ds, _ = make_dataset(
            train,
            vocab,
            batch_size=size,
            batch_by=batch_by,
            max_length=config.max_length,
            bucket_width=config.bucket_width,
            seed=config.seed,
        )
        batches[name] = list(ds.repeat().take(steps).as_numpy_iterator())
    return batches, vocab


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir",
        default=os.environ.get("MEMNMT_DATA"),
        help="local Multi30k folder (default: $MEMNMT_DATA, else the cache, else a download)",
    )
    p.add_argument(
        "--recipe",
        default="multi30k_rnnsearch",
        help="recipe whose data and model settings are measured; 'none': TrainConfig's defaults",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a TrainConfig field (model sizes, bucket_width, precision, ...)",
    )
    p.add_argument(
        "--batchings", default=BATCHINGS, help=f"sentencesN / tokensN, comma-separated (default {BATCHINGS})"
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="batches per batching, and the most steps timed (default 100; --smoke: 3)",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=300.0,
        help="the compiles and timed steps of all batchings together (see the docstring)",
    )
    p.add_argument(
        "--peak",
        type=int,
        default=None,
        metavar="N",
        help="N×N×N matmul in the compute dtype (default 8192 on a GPU, 1024 on a CPU; 0: skip)",
    )
    p.add_argument("--save-batches", metavar="DIR", help="write each batching's batches to DIR/NAME and stop")
    p.add_argument(
        "--load-batches", metavar="DIR", help="read DIR/NAME (written by --save-batches) instead of --data-dir"
    )
    p.add_argument("--smoke", action="store_true", help="seconds-long settings for a check on a CPU")
    args = p.parse_args(argv)
    try:
        batchings = parse_batchings(args.batchings)
    except ValueError as error:
        p.error(str(error))
    if args.smoke:
        args.set = [*SMOKE_SETTINGS, *args.set]
        args.steps = 3 if args.steps is None else args.steps
        args.peak = 256 if args.peak is None else args.peak
    args.steps = 100 if args.steps is None else args.steps
    if args.steps < 1 or args.max_seconds <= 0 or (args.peak or 0) < 0:
        p.error("--steps and --max-seconds must be positive, --peak not negative")

    from keras_memnmt.runtime import (
        enable_compilation_cache,
        import_tensorflow_without_jax,
        tune_malloc,
    )

    malloc_tuned = tune_malloc()  # as the `memnmt` command does
    import_tensorflow_without_jax()
    import keras

    from keras_memnmt.config import ConfigError, TrainConfig, apply_overrides
    from keras_memnmt.recipes import load_recipe

    try:
        config = apply_overrides(TrainConfig() if args.recipe == "none" else load_recipe(args.recipe), args.set)
    except ConfigError as error:
        p.error(str(error))
    backend = keras.backend.backend()
    print(f"backend={backend}")
    print(f"malloc_tuned={int(malloc_tuned)}")
    print(f"recipe={args.recipe}")
    print(f"model={config.model}")
    if args.load_batches:
        batches, vocab = {}, None
        for name, _, _ in batchings:
            try:
                loaded, settings, vocab, _, _ = load_batches(os.path.join(args.load_batches, name))
            except (OSError, ValueError) as error:
                p.error(str(error))
            batches[name] = loaded[: args.steps]
            for key, value in settings.items():  # how they were made, not --recipe's values
                print(f"{name}_batches_{key}={value}")
    else:
        print(f"bucket_width={config.bucket_width}")
        batches, vocab = make_batches(config, batchings, args.steps, args.data_dir)
    if args.save_batches:
        for name, batch_by, size in batchings:
            save_batches(
                os.path.join(args.save_batches, name),
                batches[name],
                vocab,
                None,
                {
                    "recipe": args.recipe,
                    "batch_size": size,
                    "batch_by": batch_by,
                    "bucket_width": config.bucket_width,
                    "max_length": config.max_length,
                },
            )
            print(f"{name}_saved_batches={len(batches[name])}")
        return

    cache = enable_compilation_cache()  # before the first compilation
    if backend == "jax":
        print(f"compilation_cache_dir={cache or 'off'}")
        if cache:
            print(f"compilation_cache_entries_before={_entries(cache)}")
    events = JaxEvents() if backend == "jax" else None
    gpu = on_gpu()
    print(f"device={'gpu' if gpu else 'cpu'}")

    from keras_memnmt.config import build_model
    from keras_memnmt.training import apply_precision, compile_model

    apply_precision(config)
    compute = keras.config.dtype_policy().compute_dtype
    print(f"precision={config.precision}")
    peak_n = (8192 if gpu else 1024) if args.peak is None else args.peak
    peak = matmul_rate(peak_n, peak_n, peak_n, compute) if peak_n else None
    if peak:
        print(f"matmul_gflops_{peak_n}_{compute}={peak:.1f}")
    model = build_model(config, vocab.source.vocab_size, vocab.target.vocab_size)
    compile_model(model, config)

    start = time.perf_counter()
    for i, (name, _, _) in enumerate(batchings):
        deadline = start + args.max_seconds * (i + 1) / len(batchings)
        benchmark(name, model, batches[name], deadline, peak, events)
    print(f"parameters={model.count_params()}")
    if events is not None:
        print(f"compilation_cache_hits={events.counts[JaxEvents.HIT]}")
        print(f"compilation_cache_writes={events.counts[JaxEvents.WRITE]}")
        if cache:
            print(f"compilation_cache_entries_after={_entries(cache)}")


def _entries(folder: str) -> int:
    """The files in the cache folder (one per compiled program, as JAX writes them when nothing is
    evicted)."""
    return sum(1 for entry in os.scandir(folder) if entry.is_file()) if os.path.isdir(folder) else 0


def benchmark(name: str, model, batches: list, deadline: float, peak: float | None, events: JaxEvents | None) -> None:
    """Compiles ``batches``' shapes and times steps on them until ``deadline``; prints the figures."""
    import keras
    import numpy as np

    # Each fit reads a generator of unknown length to its end: Keras's "ran out of data" is expected.
    warnings.filterwarnings("ignore", message="Your input ran out of data")
    began = time.perf_counter()
    compile_until = began + (deadline - began) / 2
    shapes = shapes_by_frequency(batches)
    compile_s = []
    for shape in shapes:
        if compile_s and time.perf_counter() >= compile_until:
            break
        batch = next(b for b in batches if shape_of(b) == shape)
        calls = []
        for _ in range(2):  # the first call compiles, the second is a step of that shape
            t0 = time.perf_counter()
            model.fit(as_dataset([batch]), verbose=0, shuffle=False)
            keras.ops.convert_to_numpy(model.trainable_variables[0].value)  # waits for the step
            calls.append(time.perf_counter() - t0)
        compile_s.append(calls[0] - calls[1])
    compiled = set(shapes[: len(compile_s)])
    timed = [b for b in batches if shape_of(b) in compiled]

    class Stop(keras.callbacks.Callback):
        """Records when the first step starts; stops ``fit`` at ``deadline`` (after one step)."""

        def __init__(self):
            super().__init__()
            self.first = self.steps = 0

        def on_train_batch_begin(self, batch, logs=None):
            if batch == 0:
                self.first = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.steps = batch + 1
            if time.perf_counter() >= deadline:
                self.model.stop_training = True

    stop = Stop()
    compiles_before = events.counts[JaxEvents.COMPILE] if events else 0
    model.fit(as_dataset(timed), verbose=0, shuffle=False, callbacks=[stop])
    keras.ops.convert_to_numpy(model.trainable_variables[0].value)  # waits for the last step
    wall = time.perf_counter() - stop.first
    done = timed[: stop.steps]
    pairs = sum(len(b[1]) for b in done)
    tokens = sum(int((b[1] != 0).sum()) for b in done)
    print(f"{name}_shapes={len(shapes)}")
    print(f"{name}_shapes_compiled={len(compile_s)}")
    print(f"{name}_compile_s_per_shape={float(np.mean(compile_s)):.2f}")
    print(f"{name}_timed_steps={len(done)}")
    print(f"{name}_sentences_per_batch={pairs / len(done):.1f}")
    print(f"{name}_target_tokens_per_batch={tokens / len(done):.0f}")
    print(f"{name}_pairs_per_s={pairs / wall:.1f}")
    print(f"{name}_target_tokens_per_s={tokens / wall:.0f}")
    if peak and model.matmul_macs() is not None:  # a model that declares no count: no FLOP rate
        flops = sum(train_flops_per_batch(model, b[0][0].size, b[1].size) for b in done)
        print(f"{name}_fraction_of_peak={flops / wall / 1e9 / peak:.4f}")
    if events is not None:
        print(f"{name}_timed_compiles={events.counts[JaxEvents.COMPILE] - compiles_before}")


if __name__ == "__main__":
    main()
