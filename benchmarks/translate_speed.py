"""Translation time of a trained run on test_2016_flickr, pass after pass in one process.

    KERAS_BACKEND=tensorflow python benchmarks/translate_speed.py --run runs/rnnsearch_w1 \
        --data-dir $MEMNMT_DATA

Prints one ``name=value`` line per figure: ``beam{K}_pass{N}_seconds`` for each beam
size and pass (the first pass includes tracing / compiling the search), and the test
BLEU and lowercased BLEU of the last pass of each beam size; ``--quantize int8`` quantizes
the model first (Keras's ``model.quantize``). `throughput.py --translate` times an untrained
model, whose translations run to the length limit; this script needs a trained run
(``memnmt train ... --out DIR``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", required=True, help="a run directory from `memnmt train`")
    p.add_argument(
        "--data-dir",
        default=os.environ.get("MEMNMT_DATA"),
        help="local Multi30k folder (default: $MEMNMT_DATA, else the cache, else a download)",
    )
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--beams", default="1,5", help="comma-separated beam sizes (1: greedy)")
    p.add_argument("--passes", type=int, default=3)
    p.add_argument(
        "--batch-size", type=int, default=None, help="sentences per batch (default: the library's for each beam size)"
    )
    p.add_argument(
        "--quantize",
        choices=("int8",),
        default=None,
        help="Keras's own weight quantization (`model.quantize`) of the loaded model "
        "before translating: its Dense, EinsumDense and Embedding layers",
    )
    args = p.parse_args()
    try:
        beams = [int(b) for b in args.beams.split(",")]
    except ValueError:
        p.error(f"--beams: expected comma-separated ints, got {args.beams!r}")
    if args.passes < 1 or any(b < 1 for b in beams):
        p.error("--passes and every beam size must be >= 1")

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_memnmt.runtime import import_tensorflow_without_jax, tune_malloc

    tune_malloc()  # as the `memnmt` command does
    import_tensorflow_without_jax()

    import keras

    from keras_memnmt.data import CorpusError, DownloadError, load_multi30k
    from keras_memnmt.evaluation.translation import score, translate
    from keras_memnmt.rundir.runs import load_run

    try:  # a missing or incomplete run, an unknown or missing split: the message, not a traceback
        model, vocab, config = load_run(args.run)
        test = load_multi30k(config.src, config.tgt, args.split, data_dir=args.data_dir)
    except (FileNotFoundError, ValueError, CorpusError, DownloadError) as error:
        p.error(str(error))
    print(f"backend={keras.backend.backend()}")
    if args.quantize:
        start = time.perf_counter()
        model.quantize(args.quantize)
        print(f"quantize_{args.quantize}_seconds={time.perf_counter() - start:.2f}")
    print(f"sentences={len(test.source)}")
    for beam in beams:
        for n in range(1, args.passes + 1):
            start = time.perf_counter()
            hyps = translate(model, vocab, test.source, beam_size=beam, batch_size=args.batch_size, progress=False)
            print(f"beam{beam}_pass{n}_seconds={time.perf_counter() - start:.2f}", flush=True)
        scores = score(hyps, test.target)
        print(f"beam{beam}_bleu={scores['bleu']:.2f}")
        print(f"beam{beam}_bleu_lowercase={scores['bleu_lowercase']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
