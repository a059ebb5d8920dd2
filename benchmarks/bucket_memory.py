"""Peak training memory by bucket width: one training step per padded length, shortest first.

Prints one ``name=value`` line per figure; never asserts. Run once per backend:

    KERAS_BACKEND=tensorflow python benchmarks/bucket_memory.py --data-dir $MEMNMT_DATA

``throughput.py``'s peak depends on which buckets its random sample of batches hits;
real training sees every bucket each epoch, so its peak is set by the widest full
batch. This script builds the model (at ``throughput.py``'s comparison size, or with
``--set`` overrides such as ``label_smoothing=0.1`` or ``model=memdec``), then runs
one ``model.fit`` step on the first full batch (``--batch-size`` sentences) of each
bucket width in ``--widths``, and prints the process's resident size and peak after
each: ``rss_mb_before_build``, then ``peak_rss_mb_width{W}`` for every width present.
Widths whose bucket has no full batch are skipped (``skipped_widths``).
"""

from __future__ import annotations

import argparse
import gc
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    from throughput import _proc_status_mb, _reset_peak_rss

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir",
        default=os.environ.get("MEMNMT_DATA"),
        help="local Multi30k folder (default: $MEMNMT_DATA, else the cache, else a download)",
    )
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--widths", default="16,24,32,40,48", help="padded bucket widths (the longer side), comma-separated")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a TrainConfig field (model, label_smoothing, sizes, ...)",
    )
    args = p.parse_args()
    widths = sorted(int(w) for w in args.widths.split(","))

    from keras_memnmt.runtime import import_tensorflow_without_jax, tune_malloc

    malloc_tuned = tune_malloc()  # as the `memnmt` command does (MEMNMT_MALLOC_TUNING=0: off)
    tf_without_jax = import_tensorflow_without_jax()  # as the `memnmt` command does

    import keras
    import tensorflow as tf

    from keras_memnmt.config import TrainConfig, apply_overrides, build_model
    from keras_memnmt.data import SubwordVocab, load_multi30k, make_dataset
    from keras_memnmt.training import compile_model

    config = apply_overrides(TrainConfig(vocab_size=args.vocab_size, batch_size=args.batch_size), args.set)
    print(f"backend={keras.backend.backend()}")
    print(f"malloc_tuned={int(malloc_tuned)}")
    print(f"tensorflow_imported_without_jax={int(tf_without_jax)}")
    print(f"model={config.model}")
    print(f"label_smoothing={config.label_smoothing}")
    train = load_multi30k("en", "de", "train", data_dir=args.data_dir)
    vocab = SubwordVocab.train(train.source, train.target, size=config.vocab_size)
    ds, _ = make_dataset(
        train,
        vocab,
        batch_size=config.batch_size,
        batch_by="sentences",
        max_length=config.max_length,
        bucket_width=config.bucket_width,
    )
    first_full = {}
    for batch in ds.as_numpy_iterator():
        (src, _), tgt = batch
        width = max(src.shape[1], tgt.shape[1])
        if len(tgt) == config.batch_size and width in widths:
            first_full.setdefault(width, batch)
        if len(first_full) == len(widths):
            break
    skipped = [w for w in widths if w not in first_full]
    print(f"skipped_widths={','.join(map(str, skipped)) or 'none'}")

    gc.collect()
    exact = _reset_peak_rss()
    print(f"rss_mb_before_build={_proc_status_mb('VmRSS'):.0f}")
    model = build_model(config, vocab.source.vocab_size, vocab.target.vocab_size)
    compile_model(model, config)
    spec = (
        (tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.int32)),
        tf.TensorSpec([None, None], tf.int32),
    )
    for width in sorted(first_full):
        batch = first_full[width]
        model.fit(
            tf.data.Dataset.from_generator(lambda b=batch: iter([b]), output_signature=spec), verbose=0, shuffle=False
        )
        peak = _proc_status_mb("VmHWM") if exact else 0.0
        print(f"peak_rss_mb_width{width}={peak:.0f}")


if __name__ == "__main__":
    main()
