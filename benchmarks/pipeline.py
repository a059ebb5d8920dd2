"""Input-pipeline throughput on Multi30k train, and the vocabulary build time.

Prints one ``name=value`` line per figure. Goal: >= 100,000 target tokens/s, so
input never starves training.

    python benchmarks/pipeline.py [--data-dir DIR] [--epochs 3]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir",
        default=os.environ.get("MEMNMT_DATA"),
        help="local Multi30k folder (default: $MEMNMT_DATA, else the cache, else a download)",
    )
    p.add_argument("--src", default="en")
    p.add_argument("--tgt", default="de")
    p.add_argument("--size", type=int, default=8000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args()

    from keras_memnmt.data import SubwordVocab, load_multi30k, make_dataset

    corpus = load_multi30k(args.src, args.tgt, "train", data_dir=args.data_dir)
    t0 = time.perf_counter()
    vocab = SubwordVocab.train(corpus.source, corpus.target, size=args.size)
    print(f"vocab_build_seconds={time.perf_counter() - t0:.2f}")

    t0 = time.perf_counter()
    ds, stats = make_dataset(corpus, vocab, batch_size=args.batch_size)
    print(f"pipeline_setup_seconds={time.perf_counter() - t0:.2f}")
    print(f"pipeline_dropped_too_long={stats.dropped_too_long}")
    for epoch in range(args.epochs):
        t0 = time.perf_counter()
        tokens = 0
        for _, target_out in ds.as_numpy_iterator():
            tokens += int((target_out != 0).sum())
        dt = time.perf_counter() - t0
        # epoch 0 includes tokenization (then cached); later epochs shuffle/bucket/pad only
        print(f"pipeline_target_tokens_per_second_epoch{epoch}={tokens / dt:.0f}")


if __name__ == "__main__":
    main()
