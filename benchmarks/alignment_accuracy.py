"""Word alignment accuracy of trained runs on the synthetic corpus, whose alignment is known.

    memnmt train quickstart --set corpus=synthetic --out runs/align_rnnsearch
    memnmt train quickstart --set corpus=synthetic --set model=memdec --out runs/align_memdec
    KERAS_BACKEND=tensorflow python benchmarks/alignment_accuracy.py \
        --run runs/align_rnnsearch --run runs/align_memdec

Each run's model writes the reference translation of the synthetic test pairs (forced as
a target prefix) and its attention gives each target word a source word (``translate
--alignments hard``); the synthetic corpus links every target word to the one source word
it translates (``keras_memnmt.data.synthetic_alignments``). Prints one ``name=value``
line per figure: ``{run}_accuracy`` (the share of target words linked to their source
word) and ``chance`` (the same share for a source word drawn uniformly per target word).
"""

from __future__ import annotations

import argparse
import os


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", action="append", required=True, help="a run directory (repeatable)")
    p.add_argument("--pairs", type=int, default=500, help="synthetic test pairs measured (default 500)")
    args = p.parse_args()
    if args.pairs < 1:
        p.error("--pairs must be >= 1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_memnmt.runtime import import_tensorflow_without_jax

    import_tensorflow_without_jax()
    from keras_memnmt.data.synthetic import synthetic_alignments, synthetic_splits
    from keras_memnmt.evaluation.alignment import alignment_accuracy, parse_pharaoh
    from keras_memnmt.evaluation.translation import reference_alignments
    from keras_memnmt.rundir.runs import load_run

    for run in args.run:
        try:
            model, vocab, config = load_run(run)
        except (FileNotFoundError, ValueError) as error:
            p.error(str(error))
        # The test split of synthetic_splits: seed + 2, as the runs test on.
        test = synthetic_splits(config.synthetic_size, seed=config.seed)[2]
        gold = synthetic_alignments(len(test.source), seed=config.seed + 2)[: args.pairs]
        found = reference_alignments(model, vocab, test.source[: args.pairs], test.target[: args.pairs])
        name = os.path.basename(os.path.normpath(run))
        print(f"{name}_accuracy={alignment_accuracy([parse_pharaoh(x) for x in found], gold):.4f}")
    test = synthetic_splits(10, seed=0)[2]
    words = [len(s.split()) for s in test.source[: args.pairs]]
    targets = [len(t.split()) for t in test.target[: args.pairs]]
    print(f"chance={sum(t / w for t, w in zip(targets, words)) / sum(targets):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
