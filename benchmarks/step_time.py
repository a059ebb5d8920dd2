"""One training step's time on a fixed random batch: for paired before/after comparisons.

    KERAS_BACKEND=tensorflow python benchmarks/step_time.py [--recipe multi30k_rnnsearch]

Builds the recipe's model (its ``model_options``, with ``--set`` over them; 8k
vocabularies on both sides), compiles
it with Adam and a plain cross-entropy, and times ``train_on_batch`` on four fixed random
batches of ``--batch`` sentences, ``--source-length`` and ``--target-length`` tokens (no
padding, no data files), taken in turn, after two untimed steps. With one batch shape and
no input pipeline, the figure moves only with the model's step and the machine: run the
code before and after a change alternately and compare the pairs (the script imports the
library of the checkout it lies in). Prints ``median_step_ms=`` and ``min_step_ms=`` over ``--steps`` steps, with
the model and backend; never asserts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def recipe_config(parser: argparse.ArgumentParser, recipe: str, overrides: list):
    """Prepares the process as the `memnmt` command does (malloc tuning, TensorFlow imported
    without jax) and returns the recipe's config with ``overrides`` (``--set``) applied; an
    unknown recipe or a bad override ends the command with its message (``parser.error``)."""
    from keras_memnmt.runtime import import_tensorflow_without_jax, tune_malloc

    tune_malloc()
    import_tensorflow_without_jax()
    from keras_memnmt.config import ConfigError, apply_overrides
    from keras_memnmt.recipes import load_recipe

    try:
        return apply_overrides(load_recipe(recipe), overrides)
    except ConfigError as error:
        parser.error(str(error))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="multi30k_rnnsearch", help="the recipe whose model and sizes are timed")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--batch", type=int, default=64, help="sentences per batch")
    p.add_argument("--source-length", type=int, default=18)
    p.add_argument("--target-length", type=int, default=20)
    p.add_argument("--steps", type=int, default=25, help="timed steps")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config field or model option over the recipe's (as `memnmt train --set`)",
    )
    args = p.parse_args()
    for name in ("vocab_size", "batch", "source_length", "target_length", "steps"):
        if getattr(args, name) < (5 if name == "vocab_size" else 1):
            p.error(f"--{name.replace('_', '-')}: {getattr(args, name)} is too small")

    config = recipe_config(p, args.recipe, args.set)
    import keras
    import numpy as np

    from keras_memnmt.models import MODELS

    model = MODELS[config.model](args.vocab_size, args.vocab_size, **config.init_options())
    rng = np.random.default_rng(0)
    batches = [
        (
            rng.integers(4, args.vocab_size, (args.batch, args.source_length)).astype("int32"),
            rng.integers(4, args.vocab_size, (args.batch, args.target_length)).astype("int32"),
        )
        for _ in range(4)
    ]
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    for source, target in batches[:2]:
        model.train_on_batch((source, target), target)
    times = []
    for step in range(args.steps):
        source, target = batches[step % len(batches)]
        start = time.perf_counter()
        model.train_on_batch((source, target), target)
        times.append((time.perf_counter() - start) * 1000)
    print(f"backend={keras.backend.backend()}")
    print(f"model={config.model}")
    print(f"median_step_ms={float(np.median(times)):.1f}")
    print(f"min_step_ms={min(times):.1f}")


if __name__ == "__main__":
    main()
