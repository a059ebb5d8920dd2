"""Minimum Bayes risk against beam search on a test set: BLEU, lowercased BLEU and chrF with
paired p-values, and sentences per second.

    KERAS_BACKEND=tensorflow python benchmarks/mbr.py --run runs/rnnsearch --data-dir $MEMNMT_DATA \
        --candidates 16 --out mbr_figures

Translates the split with beam 5 (the baseline), with ``--mbr N`` over a beam's N-best list,
and with ``--mbr N --sampling full`` over N samples (``--seed``), as ``memnmt translate``
does (``keras_memnmt.evaluation.translation.translate_chunks``), each once to warm up the
compiled search on a few sentences and then timed over the split. Prints one ``name=value``
line per figure (``{system}_{metric}``, ``{system}_{metric}_p`` the paired bootstrap p-value
against beam 5, ``{system}_sent_per_s``); with ``--out DIR`` each system's translations are
written there (``DIR/{system}.txt``).
"""

from __future__ import annotations

import argparse
import os
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
    p.add_argument("--candidates", type=int, default=16, help="N, the MBR candidates (default 16)")
    p.add_argument("--utility", choices=("chrf", "bleu"), default="chrf")
    p.add_argument("--seed", type=int, default=0, help="the samples' seed")
    p.add_argument("--limit", type=int, default=None, help="the first N sentences only")
    p.add_argument("--out", default=None, help="a folder for each system's translations")
    args = p.parse_args()
    if args.candidates < 2:
        p.error("--candidates must be >= 2")

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_memnmt.runtime import import_tensorflow_without_jax, tune_malloc

    tune_malloc()
    import_tensorflow_without_jax()

    from keras_memnmt.data import CorpusError, DownloadError, load_multi30k
    from keras_memnmt.decoding.settings import SearchSettings
    from keras_memnmt.evaluation.significance import paired_tests
    from keras_memnmt.evaluation.translation import translate_chunks
    from keras_memnmt.rundir.runs import load_run

    try:  # a missing run, an unknown or missing split: the message, not a traceback
        model, vocab, config = load_run(args.run)
        test = load_multi30k(config.src, config.tgt, args.split, data_dir=args.data_dir)
    except (FileNotFoundError, ValueError, CorpusError, DownloadError) as error:
        p.error(str(error))
    sources, references = list(test.source[: args.limit]), list(test.target[: args.limit])
    print(f"sentences={len(sources)}")
    n = args.candidates
    systems = {
        "beam5": SearchSettings(beam=5),
        f"mbr{n}_beam": SearchSettings(mbr=n, mbr_utility=args.utility),
        f"mbr{n}_sampled": SearchSettings(mbr=n, sampling="full", seed=args.seed, mbr_utility=args.utility),
    }
    outputs = {}
    for name, settings in systems.items():
        for _ in translate_chunks(model, vocab, sources[:16], settings=settings, progress=False):
            pass  # compile the search
        start = time.perf_counter()
        outputs[name] = [
            line
            for chunk in translate_chunks(model, vocab, sources, settings=settings, progress=False)
            for line in chunk
        ]
        print(f"{name}_sent_per_s={len(sources) / (time.perf_counter() - start):.1f}", flush=True)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, f"{name}.txt"), "w", encoding="utf-8") as f:
                f.writelines(line + "\n" for line in outputs[name])
    names = list(systems)
    for metric in ("bleu", "bleu_lowercase", "chrf"):
        tests = paired_tests(outputs[names[0]], [outputs[k] for k in names[1:]], references, metric)
        print(f"{names[0]}_{metric}={tests['baseline']['score']:.2f}")
        for name, entry in zip(names[1:], tests["systems"]):
            print(f"{name}_{metric}={entry['score']:.2f}")
            print(f"{name}_{metric}_p={entry['p_bootstrap']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
