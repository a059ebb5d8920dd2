"""Translation beyond the training lengths: a test split's sentences joined K at a time.

    KERAS_BACKEND=tensorflow python benchmarks/joined_lengths.py --data-dir $MEMNMT_DATA \
        --run runs/cho --run runs/rnnsearch --joins 1,2,3,4 --out joined

Bahdanau et al. (2014, §5.2.1) find the encoder–decoder's BLEU falling with the source's
length, where RNNsearch's holds. Multi30k's sentences are short (about 12 words), so this
makes longer ones from them: consecutive lines of ``--split`` joined ``K`` at a time with a
space (lines 1..K, K+1..2K, ...; a remainder shorter than K is left out; ``--separator ", "
--strip-final .`` joins them as clauses of one sentence instead), the references joined alike, so each joined reference is a true translation of its joined source. Each
``--run`` translates every joined set with the search of ``memnmt evaluate``'s flags
(``--beam``, ``--length-penalty``, ``--alpha``; default beam 5, GNMT's penalty, α 0.6,
the recipes' test search), and the translations are kept in
``--out`` (``{run name}.join{K}.{tgt}``, one line per joined source, beside
``join{K}.{src}`` and ``join{K}.{tgt}.ref``); an output folder that exists is refused,
unless ``--reuse``: then the translations already in it (of the same joined sources) are
read and scored instead of made again, and what is missing is translated. ``--plot
FILE.png`` draws lc BLEU against the joined sources' mean length in words, one line per
run, with 95% bootstrap intervals (1,000 resamples of the joined sentences, sacreBLEU's
seed 12345: ``keras_memnmt.evaluation.significance.bootstrap_interval``).

Prints one ``name=value`` line per figure: ``join{K}_sentences``, ``join{K}_source_words``
(mean whitespace words of a joined source), then per run ``{run}_join{K}_bleu_lc``
(sacreBLEU, lowercased 13a) with ``_bleu_lc_ci`` (half the 95% interval, with ``--plot``),
``_chrf`` and ``_length_ratio`` (hypothesis words over reference words). Nothing is asserted. A run's name is its folder's name.
"""

from __future__ import annotations

import argparse
import os
import sys


def joined(lines: list[str], k: int, separator: str = " ", strip: str = "") -> list[str]:
    """``lines`` joined ``k`` at a time with ``separator``, each line but a group's last
    first losing the characters of ``strip`` at its end (``strip="."``, ``separator=", "``:
    one sentence of clauses); a last group shorter than ``k`` left out."""
    groups = [lines[i : i + k] for i in range(0, len(lines) - k + 1, k)]
    return [separator.join([line.rstrip(strip) if strip else line for line in g[:-1]] + g[-1:]) for g in groups]


def write_lines(path: str, lines: list[str]) -> None:
    """``lines`` to ``path``, one per line, written whole (``keras_memnmt.files.write_text``)."""
    from keras_memnmt.files import write_text

    write_text(path, "".join(line + "\n" for line in lines))


def read_or_none(path: str) -> list[str] | None:
    """The lines of ``path``, or None when there is no such file."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def plot(path: str, words: dict[int, float], bleu: dict[str, dict[int, tuple[float, float]]]) -> None:
    """lc BLEU ± its interval (``bleu[run][k] = (score, half-width)``) against the joined
    sources' mean words (``words[k]``), one line per run, written to ``path`` whole."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from keras_memnmt.files import write_bytes

    fig = Figure(figsize=(6.5, 4.2), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ks = sorted(words)
    for name, scores in bleu.items():
        ax.errorbar(
            [words[k] for k in ks], [scores[k][0] for k in ks], yerr=[scores[k][1] for k in ks],
            marker="o", markersize=4, capsize=3, label=name,
        )  # fmt: skip
    ax.set_xticks([words[k] for k in ks], labels=[f"{words[k]:.0f}\n(K={k})" for k in ks], fontsize=8)
    ax.set_xlabel("mean source words (sentences joined K at a time)", fontsize=9)
    ax.set_ylabel("BLEU (lowercased)", fontsize=9)
    ax.set_title("Beyond the training lengths: error bars 95% CI (1000 bootstrap resamples)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    write_bytes(path, buffer.getvalue())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", action="append", required=True, help="a run directory (repeat for several)")
    p.add_argument("--data-dir", default=os.environ.get("MEMNMT_DATA"), help="Multi30k (default: $MEMNMT_DATA)")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--source", help="a source file instead of --split (with --reference)")
    p.add_argument("--reference", help="its reference translations")
    p.add_argument("--joins", default="1,2,3,4", help="how many lines each joined sentence holds (comma-separated)")
    p.add_argument("--out", required=True, help="a new folder for the joined sets and the translations")
    p.add_argument("--separator", default=" ", help="what joins the lines (default: a space)")
    p.add_argument("--strip-final", default="", metavar="CHARS", help="stripped from the end of each line but the last")
    p.add_argument("--reuse", action="store_true", help="--out may exist: its translations are read, not made again")
    p.add_argument("--plot", metavar="FILE.png", help="draw lc BLEU against the joined length, with 95%% intervals")
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
    if os.path.exists(args.out) and not (args.reuse and os.path.isdir(args.out)):
        p.error(f"--out: {args.out} exists; give a new folder (or --reuse its translations)")
    if args.plot is not None and (not args.plot.endswith(".png") or os.path.isdir(args.plot)):
        p.error(f"--plot: {args.plot!r} is not a .png file name")
    names = [os.path.basename(os.path.normpath(run)) for run in args.run]
    if len(set(names)) != len(names):
        p.error(f"--run: two runs share a folder name ({', '.join(names)}); the translations are named by it")

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_memnmt.runtime import import_tensorflow_without_jax, tune_malloc

    tune_malloc()  # as the `memnmt` command does
    import_tensorflow_without_jax()

    from keras_memnmt.data import CorpusError, DownloadError, load_multi30k, read_lines
    from keras_memnmt.evaluation.significance import bootstrap_interval
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
    os.makedirs(args.out, exist_ok=True)
    sets = {}
    for k in joins:
        sets[k] = tuple(joined(lines, k, args.separator, args.strip_final) for lines in (sources, references))
        for path, lines in ((f"join{k}.{src}", sets[k][0]), (f"join{k}.{tgt}.ref", sets[k][1])):
            kept = read_or_none(os.path.join(args.out, path))
            if kept is not None and kept != lines:
                p.error(f"--reuse: {os.path.join(args.out, path)} is not the joined set of these sources")
            if kept is None:
                write_lines(os.path.join(args.out, path), lines)
        print(f"join{k}_sentences={len(sets[k][0])}")
        print(f"join{k}_source_words={sum(len(s.split()) for s in sets[k][0]) / len(sets[k][0]):.1f}", flush=True)
    bleu: dict[str, dict[int, tuple[float, float]]] = {}
    for name, (model, vocab, _) in zip(names, loaded):
        for k in joins:
            joined_sources, joined_references = sets[k]
            path = os.path.join(args.out, f"{name}.join{k}.{tgt}")
            hyps = read_or_none(path)
            if hyps is None or len(hyps) != len(joined_sources):
                hyps = translate(model, vocab, joined_sources, settings=settings, progress=None)
                write_lines(path, hyps)
            scores = score(hyps, joined_references)
            ratio = sum(len(h.split()) for h in hyps) / sum(len(r.split()) for r in joined_references)
            print(f"{name}_join{k}_bleu_lc={scores['bleu_lowercase']:.2f}")
            if args.plot:
                ci = bootstrap_interval(hyps, joined_references, "bleu_lowercase")["ci"]
                bleu.setdefault(name, {})[k] = (scores["bleu_lowercase"], ci)
                print(f"{name}_join{k}_bleu_lc_ci={ci:.2f}")
            print(f"{name}_join{k}_chrf={scores['chrf']:.2f}")
            print(f"{name}_join{k}_length_ratio={ratio:.3f}", flush=True)
    if args.plot:
        words = {k: sum(len(s.split()) for s in sets[k][0]) / len(sets[k][0]) for k in joins}
        plot(args.plot, words, bleu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
