"""How much a model reads its source after a short training: the "source gain".

    KERAS_BACKEND=tensorflow python benchmarks/source_gain.py --data-dir $MEMNMT_DATA \\
        --recipe multi30k_ylstm --steps 300 [--set KEY=VALUE ...]

Trains the recipe's model (any registered model; ``--set`` over the recipe's fields and
model options, as ``memnmt train --set``) for ``--steps`` batches of the recipe's
Multi30k pipeline (its optimizer, rate, clipping and label smoothing; no validation, no
rate schedule, nothing written), then measures the teacher-forced cross-entropy per
target token (nats, no label smoothing) on the first ``--sentences`` validation pairs
twice: with each pair's own source (``val_ce_matched``) and with the source of the next
pair (``val_ce_shuffled``, every reference forced against a wrong source).

``source_gain = val_ce_shuffled - val_ce_matched``: what the source is worth to the
decoder, in nats per token. A decoder that has learned only a target language model
scores about 0 however low its cross-entropy; a working translator at a few hundred
steps scores a few tenths. The figure is cheap (minutes at width 128) and is the way to
choose between variants of a model before spending a full training run on one.

``--run DIR`` measures a trained run instead (its vocabulary and ``--model-file``,
default ``best.keras``, with no training): how much a model reads its source at the end.

Prints one ``name=value`` line per figure; never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from step_time import recipe_config  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir",
        default=os.environ.get("MEMNMT_DATA"),
        help="local Multi30k folder (default: $MEMNMT_DATA, else the cache, else a download)",
    )
    p.add_argument("--recipe", default="multi30k_rnnsearch", help="the recipe whose model and data settings are used")
    p.add_argument("--steps", type=int, default=300, help="training batches before the measure")
    p.add_argument("--sentences", type=int, default=512, help="validation pairs measured")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config field or model option over the recipe's (as `memnmt train --set`)",
    )
    p.add_argument("--run", help="a `memnmt train` run directory to measure instead of training")
    p.add_argument("--model-file", default="best.keras", help="the model file of --run to measure")
    args = p.parse_args()
    for name in ("steps", "sentences"):
        if getattr(args, name) < (1 if name == "steps" else 2):
            p.error(f"--{name}: {getattr(args, name)} is too small")

    config = recipe_config(p, args.recipe, args.set)
    import keras

    from keras_memnmt.config import TrainConfig, build_model
    from keras_memnmt.data import SubwordVocab, load_multi30k, make_dataset
    from keras_memnmt.training.monitor import cross_entropy, teacher_forced_batches
    from keras_memnmt.training.trainer import compile_model

    train_loss, seconds = None, 0.0
    if args.run:  # a trained run: its own config, vocabulary and weights
        model_path = os.path.join(args.run, args.model_file)
        try:
            with open(os.path.join(args.run, "config.json"), encoding="utf-8") as f:
                config = TrainConfig.from_dict(json.load(f))
            vocab = SubwordVocab.load(os.path.join(args.run, "vocab"))
            if not os.path.isfile(model_path):
                raise OSError(f"no model file {model_path}")
        except (OSError, ValueError) as error:
            p.error(f"--run {args.run}: {error}")
        model = keras.saving.load_model(model_path, compile=False)
        val = load_multi30k(config.src, config.tgt, "val", data_dir=args.data_dir)
    else:
        keras.utils.set_random_seed(config.seed)
        train = load_multi30k(config.src, config.tgt, "train", data_dir=args.data_dir)
        val = load_multi30k(config.src, config.tgt, "val", data_dir=args.data_dir)
        vocab = SubwordVocab.train(
            train.source, train.target, size=config.vocab_size, model_type=config.vocab_type, joint=config.joint_vocab
        )
        dataset, _ = make_dataset(
            train,
            vocab,
            batch_size=config.batch_size,
            batch_by=config.batch_by,
            max_length=config.max_length,
            bucket_width=config.bucket_width,
            seed=config.seed,
            start_step=0,
        )
        model = build_model(config, vocab.source.vocab_size, vocab.target.vocab_size)
        compile_model(model, config)
        started = time.perf_counter()
        train_loss = model.fit(dataset, steps_per_epoch=args.steps, epochs=1, verbose=0).history["loss"][-1]
        seconds = time.perf_counter() - started

    sources = list(val.source[: args.sentences])
    references = list(val.target[: args.sentences])
    shifted = sources[1:] + sources[:1]  # every reference against the next pair's source
    matched = cross_entropy(model, teacher_forced_batches(vocab, sources, references))
    shuffled = cross_entropy(model, teacher_forced_batches(vocab, shifted, references))
    print(f"backend={keras.backend.backend()}")
    print(f"model={config.model}")
    if args.run:
        print(f"run={args.run}")
        print(f"model_file={args.model_file}")
    else:
        print(f"recipe={args.recipe}")
        for override in args.set:
            print(f"set_{override.split('=', 1)[0]}={override.split('=', 1)[1] if '=' in override else ''}")
        print(f"steps={args.steps}")
        print(f"train_seconds={seconds:.1f}")
        print(f"train_loss={train_loss:.4f}")
    print(f"val_ce_matched={matched:.4f}")
    print(f"val_ce_shuffled={shuffled:.4f}")
    print(f"source_gain={shuffled - matched:.4f}")


if __name__ == "__main__":
    main()
