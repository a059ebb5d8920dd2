"""Training and translation throughput of a model on Multi30k en→de (this backend).

Prints one ``name=value`` line per figure; never asserts. Run once per backend:

    KERAS_BACKEND=jax python benchmarks/throughput.py --data-dir ../shared/data/multi30k

Default sizes are the toolkit-comparison size of the RNNsearch issue: embeddings
256, bidirectional GRU 256+256 encoder, GRU 512 decoder, additive attention,
batch 64 sentences, SentencePiece vocabularies of 8k.

Figures: training sentence pairs/s and target tokens/s (steady state, after the
warm-up steps that compile each bucket shape), peak resident memory of the
process, the fraction of 100 GFLOP/s reached (analytic matmul FLOPs: forward ×3
for forward+backward), and translation time of test_2016_flickr (greedy, beam 5),
first pass (with compilation) and second pass.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def train_flops_per_batch(c, src_tokens: int, tgt_tokens: int, model: str) -> float:
    """Matmul FLOPs (forward ×3) for one batch with the given padded token counts."""
    e, h, d, v = c.embedding_dim, c.encoder_units, c.decoder_units, c.target_vocab_size
    enc = 2 * 3 * h * (e + h)  # two GRU directions, 3 gates, per source token (MACs)
    if model == "rnnsearch":
        a = c.attention_units
        dec = 3 * d * (e + 2 * h + d)  # GRU on [e, c] with state d
        dec += d * d + e * d  # feedback-attention query s~
        dec += a * d  # W_a s~
        keys = 2 * h * a  # U_a h_j, per source token
        att = 0  # per (target, source) pair: tanh + v^T (small), counted below
    else:
        dec = 3 * d * (e + 2 * h + d)
        keys = att = 0
    readout = c.readout_units * (d + 2 * h + e) + c.readout_units * v
    macs = src_tokens * (enc + keys) + tgt_tokens * (dec + readout + att)
    return 3 * 2 * macs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=os.environ.get("MEMNMT_DATA", "../shared/data/multi30k"))
    p.add_argument("--model", default="rnnsearch", choices=("rnnsearch", "cho"))
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--warmup-steps", type=int, default=60)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--translate", type=int, default=1000, help="test sentences to translate (0: skip)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a TrainConfig field (model sizes, batch_by, ...)")
    args = p.parse_args()

    import keras
    import numpy as np

    from keras_memnmt.data import SubwordVocab, load_multi30k, make_dataset
    from keras_memnmt.inference import translate
    from keras_memnmt.training.config import TrainConfig, apply_overrides
    from keras_memnmt.training.trainer import build_model, compile_model

    backend = keras.backend.backend()
    config = apply_overrides(TrainConfig(model=args.model, vocab_size=args.vocab_size,
                                         batch_size=args.batch_size), args.set)
    train = load_multi30k("en", "de", "train", data_dir=args.data_dir)
    vocab = SubwordVocab.train(train.source, train.target, size=config.vocab_size)
    ds, _ = make_dataset(train, vocab, batch_size=config.batch_size, batch_by=config.batch_by,
                         max_length=config.max_length, bucket_width=config.bucket_width)
    model = build_model(config, vocab)
    compile_model(model, config)

    class Timer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.times = []

        def on_train_batch_begin(self, batch, logs=None):
            self.t0 = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.times.append(time.perf_counter() - self.t0)

    batches = list(ds.repeat().take(args.warmup_steps + args.steps).as_numpy_iterator())
    import tensorflow as tf

    def as_dataset(items):
        return tf.data.Dataset.from_generator(
            lambda: iter(items),
            output_signature=((tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.int32)),
                              tf.TensorSpec([None, None], tf.int32)))

    timed = batches[args.warmup_steps:]
    # Warm-up: the first steps plus one batch of every shape timed later, so that no
    # compilation (one per bucket shape under jit) falls inside the timed steps.
    by_shape = {(b[0][0].shape, b[1].shape): b for b in timed}
    model.fit(as_dataset(batches[: args.warmup_steps] + list(by_shape.values())), verbose=0)
    timer = Timer()
    t0 = time.perf_counter()
    model.fit(as_dataset(timed), verbose=0, callbacks=[timer])
    wall = time.perf_counter() - t0
    pairs = sum(len(b[1]) for b in timed)
    tokens = sum(int((b[1] != 0).sum()) for b in timed)
    flops = sum(train_flops_per_batch(model, b[0][0].size, b[1].size, args.model) for b in timed)
    print(f"backend={backend}")
    print(f"model={args.model}")
    print(f"train_pairs_per_second={pairs / wall:.1f}")
    print(f"train_target_tokens_per_second={tokens / wall:.0f}")
    print(f"train_gflops_per_second={flops / wall / 1e9:.1f}")
    print(f"train_fraction_of_100_gflops={flops / wall / 1e11:.2f}")
    print(f"train_median_step_ms={1000 * float(np.median(timer.times)):.1f}")
    print(f"peak_rss_mb_after_training={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")

    if args.translate:
        test = load_multi30k("en", "de", "test_2016_flickr", data_dir=args.data_dir).take(args.translate)
        for beam in (1, 5):
            name = "greedy" if beam == 1 else f"beam{beam}"
            for attempt in ("first", "second"):
                t0 = time.perf_counter()
                translate(model, vocab, test.source, beam_size=beam, progress=False)
                print(f"translate_{len(test)}_{name}_{attempt}_pass_seconds={time.perf_counter() - t0:.2f}")
    print(f"peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")


if __name__ == "__main__":
    main()
