"""Memory and start-up of `memnmt train` as the training corpus grows (a streamed ``train_prefix``).

Prints one ``name=value`` line per figure; never asserts. For each size in ``--pairs``, a
corpus of that many pairs is made by repeating Multi30k's training split (en→de) line by
line into ``WORKDIR/pairs{N}.en`` and ``.de`` (plain text; made once, kept for the next
run), and ``memnmt train multi30k_rnnsearch --set train_prefix=WORKDIR/pairs{N}`` runs in
a child process for ``--steps`` steps:

    python benchmarks/corpus_scale.py --data-dir $MEMNMT_DATA --pairs 29000,1000000,10000000

Figures, per size N:

- ``pairs{N}_peak_rss_mb``: the child's peak resident memory (``getrusage``'s
  ``ru_maxrss`` of its children, in a wrapper process of its own);
- ``pairs{N}_seconds_to_first_step``: from the child's start to its ``distribution:``
  log line, printed just before ``fit`` starts (reading the corpus, the vocabulary, the
  count pass over the files, the model's build);
- ``pairs{N}_seconds``: the child's whole wall time (``--steps`` steps, one validation
  at the last, the test translation).

``--set KEY=VALUE`` passes more overrides (``--set vocab_sample=200000``); the defaults
keep the validation and test small (``val_limit``, ``test_limit``) so that the figures
are the corpus's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def make_corpus(data_dir: str | None, workdir: str, pairs: int) -> str:
    """``WORKDIR/pairs{N}``: Multi30k's training pairs repeated to ``pairs`` lines per side."""
    from keras_memnmt.data import load_multi30k

    prefix = os.path.join(workdir, f"pairs{pairs}")
    if all(os.path.isfile(f"{prefix}.{lang}") for lang in ("en", "de")):
        return prefix
    train = load_multi30k("en", "de", "train", data_dir=data_dir)
    os.makedirs(workdir, exist_ok=True)
    for lang, lines in (("en", train.source), ("de", train.target)):
        block = "".join(line + "\n" for line in lines)
        with open(f"{prefix}.{lang}.tmp", "w", encoding="utf-8") as f:
            whole, rest = divmod(pairs, len(lines))
            for _ in range(whole):
                f.write(block)
            f.write("".join(line + "\n" for line in lines[:rest]))
        os.replace(f"{prefix}.{lang}.tmp", f"{prefix}.{lang}")
    return prefix


def run(prefix: str, data_dir: str | None, steps: int, overrides: list[str]) -> dict:
    """One `memnmt train` child on ``prefix``: its peak RSS, seconds to its first step, wall time."""
    out = prefix + ".run"
    sets = [
        f"train_prefix={prefix}",
        f"max_steps={steps}",
        f"validate_every={steps}",
        "val_limit=100",
        "test_limit=100",
        "beam_size=1",
        *overrides,
    ]
    command = [
        sys.executable,
        "-m",
        "keras_memnmt.cli",
        "train",
        "multi30k_rnnsearch",
        "--out",
        out,
        "--overwrite",
        *(["--data-dir", data_dir] if data_dir else []),
        *[arg for item in sets for arg in ("--set", item)],
    ]
    t0 = time.perf_counter()
    first = peak = None
    # Through a wrapper process of its own, whose children's peak is this training's alone.
    with subprocess.Popen(
        [sys.executable, "-c", WRAPPER, *command],
        cwd=REPO,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    ) as child:
        for line in child.stderr:
            if first is None and line.startswith("[memnmt] distribution:"):
                first = time.perf_counter() - t0
            if line.startswith("peak_rss_kb="):
                peak = int(line.split("=")[1]) / 1024
            elif line.startswith("[memnmt]") or "error" in line:
                print(line.rstrip(), file=sys.stderr, flush=True)
    seconds = time.perf_counter() - t0
    if child.returncode:
        raise SystemExit(f"memnmt train exited {child.returncode} on {prefix}")
    return {
        "peak_rss_mb": round(peak),
        "seconds_to_first_step": round(first or float("nan"), 1),
        "seconds": round(seconds, 1),
    }


WRAPPER = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
print(f"peak_rss_kb={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}", file=sys.stderr)
sys.exit(code)
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=os.environ.get("MEMNMT_DATA"), help="Multi30k folder (default $MEMNMT_DATA)")
    p.add_argument("--pairs", default="29000,1000000", help="corpus sizes, comma-separated (default 29000,1000000)")
    p.add_argument(
        "--workdir",
        default=os.path.join(REPO, "runs", "corpus_scale"),
        help="where the corpora and runs go (default runs/corpus_scale)",
    )
    p.add_argument("--steps", type=int, default=10, help="training steps per run (default 10)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more config overrides")
    args = p.parse_args()
    sizes = [int(n) for n in args.pairs.split(",")]
    for n in sizes:
        figures = run(make_corpus(args.data_dir, args.workdir, n), args.data_dir, args.steps, args.set)
        for name, value in figures.items():
            print(f"pairs{n}_{name}={value}", flush=True)


if __name__ == "__main__":
    main()
