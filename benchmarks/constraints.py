"""Lexically constrained translation of a trained run: coverage, BLEU and speed.

    KERAS_BACKEND=tensorflow python benchmarks/constraints.py --run runs/rnnsearch \
        --data-dir $MEMNMT_DATA

Constraints are drawn from the references, as the constrained-decoding papers measure
(Hokamp & Liu 2017; Post & Vilar 2018): for each sentence, 1 and then 2 disjoint phrases
of 1 to 3 words at random places of its reference (seeded; a reference shorter than the
phrases gets fewer). The test set is translated with beam search without constraints,
then with each set. Prints one ``name=value`` line per figure, for ``none``, ``c1`` and
``c2``: ``*_bleu_lc`` (sacreBLEU, lowercased 13a), ``*_sentences_per_second`` (after a
warm-up pass over the first batch, so compiling is not counted), and for the
constrained runs ``*_coverage`` (phrases whose text appears in the output),
``*_coverage_words`` (appears as whole words) and ``*_phrases``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time


def draw_constraints(references: list[str], count: int, seed: int = 0, longest: int = 3) -> list[list[str]]:
    """Up to ``count`` disjoint phrases of 1..``longest`` words from each reference."""
    rng = random.Random(seed)
    out = []
    for reference in references:
        words = reference.split()
        phrases: list[str] = []
        free = [True] * len(words)
        for _ in range(count):
            size = rng.randint(1, longest)
            starts = [i for i in range(len(words) - size + 1) if all(free[i : i + size])]
            if not starts:
                break
            i = rng.choice(starts)
            free[i : i + size] = [False] * size
            phrases.append(" ".join(words[i : i + size]))
        out.append(phrases)
    return out


def coverage(hypotheses: list[str], constraints: list[list[str]]) -> tuple[float, float, int]:
    """(phrases found as text, phrases found as whole words, phrases) over the corpus."""
    total = sum(map(len, constraints))
    text = sum(p in h for h, ps in zip(hypotheses, constraints) for p in ps)
    words = sum(f" {p} " in f" {' '.join(h.split())} " for h, ps in zip(hypotheses, constraints) for p in ps)
    return text / max(total, 1), words / max(total, 1), total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", required=True, help="a run directory from `memnmt train`")
    p.add_argument(
        "--data-dir",
        default=os.environ.get("MEMNMT_DATA"),
        help="local Multi30k folder (default: $MEMNMT_DATA, else the cache, else a download)",
    )
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--source", help="a source file instead of --split (with --reference)")
    p.add_argument("--reference", help="its reference translations")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--seed", type=int, default=0, help="seed of the phrases drawn")
    args = p.parse_args(argv)
    if bool(args.source) != bool(args.reference):
        p.error("--source and --reference go together")
    if args.beam < 2:
        p.error("--beam: constraints need a beam of 2 or more")

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_memnmt.runtime import import_tensorflow_without_jax, tune_malloc

    tune_malloc()  # as the `memnmt` command does
    import_tensorflow_without_jax()

    import keras

    from keras_memnmt.data import CorpusError, DownloadError, load_multi30k, read_lines
    from keras_memnmt.evaluation.translation import default_batch_size, score, translate
    from keras_memnmt.rundir.runs import load_run

    try:  # a missing or incomplete run, an unknown or missing split: the message, not a traceback
        model, vocab, config = load_run(args.run)
        if args.source:
            sources, references = read_lines(args.source), read_lines(args.reference)
        else:
            test = load_multi30k(config.src, config.tgt, args.split, data_dir=args.data_dir)
            sources, references = list(test.source), list(test.target)
    except (FileNotFoundError, ValueError, CorpusError, DownloadError) as error:
        p.error(str(error))
    print(f"backend={keras.backend.backend()}")
    print(f"sentences={len(sources)}")
    warm = default_batch_size(args.beam)
    for name, count in (("none", 0), ("c1", 1), ("c2", 2)):
        drawn = draw_constraints(references, count, args.seed) if count else None
        lines = None if drawn is None else ["\t".join(phrases) for phrases in drawn]
        extra = {} if lines is None else {"constraints": lines[:warm]}
        translate(model, vocab, sources[:warm], beam_size=args.beam, progress=False, **extra)  # compiles
        start = time.perf_counter()
        hyps = translate(
            model,
            vocab,
            sources,
            beam_size=args.beam,
            progress=False,
            **({} if lines is None else {"constraints": lines}),
        )
        seconds = time.perf_counter() - start
        print(f"{name}_bleu_lc={score(hyps, references)['bleu_lowercase']:.2f}")
        print(f"{name}_sentences_per_second={len(sources) / seconds:.1f}", flush=True)
        if drawn is not None:
            text, words, total = coverage(hyps, drawn)
            print(f"{name}_coverage={text:.4f}")
            print(f"{name}_coverage_words={words:.4f}")
            print(f"{name}_phrases={total}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
