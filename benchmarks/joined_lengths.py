"""Translation beyond the training lengths: a test split's sentences joined K at a time.

    KERAS_BACKEND=tensorflow python benchmarks/joined_lengths.py --data-dir $MEMNMT_DATA \
        --run runs/cho --run runs/rnnsearch --joins 1,2,3,4 --out joined

Bahdanau et al. (2014, §5.2.1) find the encoder–decoder's BLEU falling with the source's
length, where RNNsearch's holds. Multi30k's sentences are short (about 12 words), so this
makes longer ones from them: consecutive lines of ``--split`` joined ``K`` at a time with a
space (lines 1..K, K+1..2K, ...; a remainder shorter than K is left out), the references
joined alike, so each joined reference is a true translation of its joined source. Each
``--run`` translates every joined set with the search of ``memnmt evaluate``'s flags
(``--beam``, ``--length-penalty``, ``--alpha``; default beam 5, GNMT's penalty, α 0.6,
the recipes' test search), and the translations are kept in
``--out`` (``{run name}.join{K}.{tgt}``, one line per joined source, beside
``join{K}.{src}`` and ``join{K}.{tgt}.ref``); an output folder that exists is refused.

Prints one ``name=value`` line per figure: ``join{K}_sentences``, ``join{K}_source_words``
(mean whitespace words of a joined source), then per run ``{run}_join{K}_bleu_lc``
(sacreBLEU, lowercased 13a), ``_chrf`` and ``_length_ratio`` (hypothesis words over
reference words). Nothing is asserted. A run's name is its folder's name.
"""

from __future__ import annotations

import argparse
import os
import sys


def joined(lines: list[str], k: int) -> list[str]:
    """``lines`` joined ``k`` at a time with a space; a last group shorter than ``k`` left out."""
    return [" ".join(lines[i : i + k]) for i in range(0, len(lines) - k + 1, k)]


def write_lines(path: str, lines: list[str]) -> None:
    """``lines`` to ``path``, one per line, written whole (``keras_memnmt.files.write_text``)."""
    from keras_memnmt.files import write_text

    write_text(path, "".join(line + "\n" for line in lines))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", action="append", required=True, help="a run directory (repeat for several)")
    p.add_argument("--data-dir", default=os.environ.get("MEMNMT_DATA"), help="Multi30k (default: $MEMNMT_DATA)")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--source", help="a source file instead of --split (with --reference)")
    p.add_argument("--reference", help="its reference translations")
    p.add_argument("--joins", default="1,2,3,4", help="how many lines each joined sentence holds (comma-separated)")
    p.add_argument("--out", required=True, help="a new folder for the joined sets and the translations")
    from keras_memnmt.decoding.settings import EVALUATE, add_flags, from_flags

    add_flags(p, EVALUATE)
    args = p.parse_args(argv)
    try:
        joins = [int(k) for k in args.joins.split(",")]
    except ValueError:
        p.error(f"--joins: {args.joins!r} is not a comma-separated list of whole numbers")
    if not joins or min(joins) < 1:
        p.error("--joins: each count must be 1 or more")
    try:
        settings = from_flags(args, EVALUATE)
    except ValueError as error:
        p.error(str(error))
    if (args.source is None) != (args.reference is None):
        p.error("--source and --reference go together")
    if os.path.exists(args.out):
        p.error(f"--out: {args.out} exists; give a new folder")
    names = [os.path.basename(os.path.normpath(run)) for run in args.run]
    if len(set(names)) != len(names):
        p.error(f"--run: two runs share a folder name ({', '.join(names)}); the translations are named by it")

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_memnmt.runtime import import_tensorflow_without_jax, tune_malloc

    tune_malloc()  # as the `memnmt` command does
    import_tensorflow_without_jax()

    from keras_memnmt.data import CorpusError, DownloadError, load_multi30k, read_lines
    from keras_memnmt.evaluation.translation import score, translate
    from keras_memnmt.rundir.runs import load_run

    try:
        loaded = [load_run(run) for run in args.run]
        pairs = {(config.src, config.tgt) for _, _, config in loaded}
        if len(pairs) != 1:
            p.error(f"--run: the runs translate different pairs ({sorted(pairs)})")
        src, tgt = pairs.pop()
        if args.source:
            sources, references = read_lines(args.source), read_lines(args.reference)
            if len(sources) != len(references):
                p.error(f"--source has {len(sources)} lines but --reference {len(references)}")
        else:
            test = load_multi30k(src, tgt, args.split, data_dir=args.data_dir)
            sources, references = list(test.source), list(test.target)
    except (FileNotFoundError, ValueError, CorpusError, DownloadError) as error:
        p.error(str(error))
    os.makedirs(args.out)
    sets = {}
    for k in joins:
        sets[k] = (joined(sources, k), joined(references, k))
        write_lines(os.path.join(args.out, f"join{k}.{src}"), sets[k][0])
        write_lines(os.path.join(args.out, f"join{k}.{tgt}.ref"), sets[k][1])
        print(f"join{k}_sentences={len(sets[k][0])}")
        print(f"join{k}_source_words={sum(len(s.split()) for s in sets[k][0]) / len(sets[k][0]):.1f}", flush=True)
    for name, (model, vocab, _) in zip(names, loaded):
        for k in joins:
            joined_sources, joined_references = sets[k]
            hyps = translate(model, vocab, joined_sources, settings=settings, progress=None)
            write_lines(os.path.join(args.out, f"{name}.join{k}.{tgt}"), hyps)
            scores = score(hyps, joined_references)
            ratio = sum(len(h.split()) for h in hyps) / sum(len(r.split()) for r in joined_references)
            print(f"{name}_join{k}_bleu_lc={scores['bleu_lowercase']:.2f}")
            print(f"{name}_join{k}_chrf={scores['chrf']:.2f}")
            print(f"{name}_join{k}_length_ratio={ratio:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
