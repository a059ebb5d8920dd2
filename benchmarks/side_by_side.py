"""This library against OpenNMT-py on the same machine, one after the other, plus the matmul peak.

    KERAS_BACKEND=tensorflow python benchmarks/side_by_side.py --data-dir $MEMNMT_DATA \
        [--peer-bench FILE | --skip-peer] [--run runs/rnnsearch]

First prints the CPU (``cpu_model=``, from /proc/cpuinfo) and its matmul-relevant
instruction set extensions (``cpu_isa=``: AVX2, FMA, AVX-512 and its VNNI/BF16/FP16
parts, AMX), since the ratio depends on them: each toolkit's matmul library has its own
speed on each CPU. Then runs, in this order and never at the same time:

1. the machine's fp32 matmul rate with this backend (``keras.ops.matmul``, best of
   ``--repeats`` timed calls): ``matmul_gflops_2048`` for 2048×2048×2048 (the peak
   figure) and ``matmul_gflops_64x1024x1536`` for the shape of a decoder step;
2. ``benchmarks/throughput.py`` for RNNsearch at the ``multi30k_rnnsearch`` recipe's
   settings (batch 64 sentences), whose lines are printed as they are;
3. the OpenNMT-py baseline: a script (``--peer-bench FILE``, else
   ``$MEMNMT_OPENNMT_BENCH``) run as ``bash FILE STEPS`` with ``$WORK`` and ``$WARMUP`` set,
   which trains OpenNMT-py 3.5.1 at the same model shape (batch 64 sentences) under
   ``/usr/bin/time -v``, prints that output and leaves OpenNMT-py's training log in
   ``$WORK/stdout.txt``; its target words/s are converted to sentence pairs/s with the
   words per sentence its own log reports (``bsz: src/tgt/sents``) over the same steps;
4. with ``--run``, ``benchmarks/translate_speed.py`` on that trained run (greedy and beam 5
   over test_2016_flickr, two passes; the second pass is the figure).

Then the summary: ``ratio_vs_opennmt`` (our pairs/s over OpenNMT-py's),
``fraction_of_peak`` (RNNsearch's analytic matmul GFLOP/s over ``matmul_gflops_2048``),
``peak_rss_mb_ours`` / ``peak_rss_mb_opennmt`` and ``translate_greedy_seconds`` /
``translate_beam5_seconds``. ``--replicas N`` trains ours as N data-parallel replicas
(``distribution=data_parallel`` over N logical CPU devices, each with ``cores / N``
threads: ``TF_NUM_INTRAOP_THREADS``, ``OMP_NUM_THREADS``) on the same global batches;
the peak stays the whole machine's. One ``name=value`` line per figure; nothing is asserted.
A stage that fails prints ``{stage}_error=...`` and the summary leaves its figures out.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from throughput import matmul_rate  # noqa: E402

STEP_LINE = re.compile(r"Step\s+(\d+)/\s*\d+;.*?bsz:\s*(\d+)/\s*(\d+)/\s*(\d+);\s*(\d+)/\s*(\d+) tok/s")


def parse_lines(text: str) -> dict[str, str]:
    """The ``name=value`` lines of a benchmark's output."""
    figures = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name and " " not in name:
            figures[name.strip()] = value.strip()
    return figures


def opennmt_pairs_per_second(log_text: str, warmup: int) -> tuple[float, float]:
    """(pairs/s, target words per sentence) from OpenNMT-py's training log.

    Every ``report_every`` window logs its batch shape ``bsz: src/tgt/sents`` (mean tokens
    per batch) and its rate ``src/tgt tok/s``; the windows after ``warmup`` steps give
    pairs/s = tgt tok/s ÷ (tgt tokens per batch ÷ sentences per batch), combined by the
    harmonic mean of the rates, as ``bench.sh`` combines its tokens/s.
    """
    rows = [
        (int(m.group(1)), int(m.group(3)), int(m.group(4)), float(m.group(6)))
        for m in map(STEP_LINE.search, log_text.splitlines())
        if m
    ]
    steady = [r for r in rows if r[0] > warmup]
    if not steady:
        raise ValueError(f"no 'Step ... bsz: ... tok/s' lines after step {warmup} in the log")
    pairs = [rate * sents / tgt for _, tgt, sents, rate in steady]
    words = sum(tgt for _, tgt, _, _ in steady) / sum(sents for _, _, sents, _ in steady)
    return statistics.harmonic_mean(pairs), words


def matmul_rates(repeats: int) -> dict[str, float]:
    """Best-of-``repeats`` fp32 GFLOP/s of ``keras.ops.matmul`` for two shapes (this backend)."""
    return {
        "2048": matmul_rate(2048, 2048, 2048, repeats=repeats),
        "64x1024x1536": matmul_rate(64, 1024, 1536, calls=50, repeats=repeats),
    }


def run_stage(name: str, command: list[str], env: dict | None = None) -> str | None:
    """Runs one stage, echoes its output, returns it (None and ``{name}_error=`` on failure)."""
    print(f"# {name}: {' '.join(command)}", flush=True)
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    sys.stdout.write(proc.stdout)
    sys.stdout.flush()
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        print(f"{name}_error=exit {proc.returncode}: {tail[0]}")
        return None
    return proc.stdout


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir",
        default=os.environ.get("MEMNMT_DATA"),
        help="local Multi30k folder (default: $MEMNMT_DATA, else the cache, else a download)",
    )
    p.add_argument("--steps", type=int, default=300, help="our timed training steps")
    p.add_argument("--warmup-steps", type=int, default=30, help="our untimed first steps")
    p.add_argument(
        "--peer-steps", type=int, default=400, help="OpenNMT-py's training steps (its first 100 are not counted)"
    )
    p.add_argument("--peer-warmup", type=int, default=100)
    p.add_argument(
        "--peer-bench",
        default=os.environ.get("MEMNMT_OPENNMT_BENCH"),
        help="the OpenNMT-py baseline script (default: $MEMNMT_OPENNMT_BENCH)",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed repeats of each matmul")
    p.add_argument("--run", help="a trained run directory: also time its translation")
    p.add_argument("--skip-peer", action="store_true", help="leave OpenNMT-py out")
    p.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="our training as this many data-parallel replicas (logical CPU devices, "
        "distribution=data_parallel), each with its share of the cores' threads "
        "(default 1: one model on every core)",
    )
    args = p.parse_args()
    for flag in ("steps", "warmup_steps", "peer_steps", "repeats", "replicas"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be >= 1")
    if not args.skip_peer and not args.peer_bench:
        p.error("give the OpenNMT-py baseline script (--peer-bench FILE or $MEMNMT_OPENNMT_BENCH), or pass --skip-peer")
    if not args.skip_peer and not os.path.isfile(args.peer_bench):
        p.error(f"--peer-bench: {args.peer_bench} not found (or pass --skip-peer)")
    data = ["--data-dir", args.data_dir] if args.data_dir else []
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    python = sys.executable

    from keras_memnmt.runtime import import_tensorflow_without_jax

    import_tensorflow_without_jax()
    import keras

    from keras_memnmt.rundir.provenance import cpu_extensions, cpu_model

    print(f"backend={keras.backend.backend()}")
    # The ratio depends on the CPU: each toolkit's matmul library has its own speed on each.
    print(f"cpu_model={cpu_model()}")
    print(f"cpu_isa={','.join(cpu_extensions()) or 'unknown'}")
    peak = matmul_rates(args.repeats)
    for shape, rate in peak.items():
        print(f"matmul_gflops_{shape}={rate:.1f}")
    sys.stdout.flush()

    replicas, env = [], None
    if args.replicas > 1:  # the same global batch over N devices, each replica on its own threads
        threads = str(max(1, (os.cpu_count() or 1) // args.replicas))
        env = dict(
            os.environ,
            XLA_FLAGS=f"--xla_force_host_platform_device_count={args.replicas}",
            TF_NUM_INTRAOP_THREADS=threads,
            OMP_NUM_THREADS=threads,
        )
        replicas = ["--set", "distribution=data_parallel"]
        print(f"replicas={args.replicas}")
        print(f"threads_per_replica={threads}")
    ours = run_stage(
        "throughput",
        [
            python,
            os.path.join(HERE, "throughput.py"),
            *data,
            "--model",
            "rnnsearch",
            "--steps",
            str(args.steps),
            "--warmup-steps",
            str(args.warmup_steps),
            "--translate",
            "0",
            *replicas,
        ],
        env,
    )
    ours = parse_lines(ours or "")

    peer = {}
    if not args.skip_peer:
        work = os.environ.get("WORK", "/tmp/peers/opennmt-py/bench")
        env = dict(os.environ, WORK=work, WARMUP=str(args.peer_warmup))
        out = run_stage("opennmt", ["bash", args.peer_bench, str(args.peer_steps)], env)
        if out is not None:
            try:
                with open(os.path.join(work, "stdout.txt")) as f:
                    pairs, words = opennmt_pairs_per_second(f.read(), args.peer_warmup)
                peer["pairs"] = pairs
                print(f"opennmt_target_words_per_sentence={words:.2f}")
                print(f"opennmt_train_pairs_per_second={pairs:.1f}")
                m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", out)
                if m:
                    peer["rss"] = int(m.group(1)) / 1024
                    print(f"opennmt_peak_rss_mb={peer['rss']:.0f}")
            except (OSError, ValueError) as error:
                print(f"opennmt_error={error}")

    translation = {}
    if args.run:
        out = run_stage(
            "translate",
            [
                python,
                os.path.join(HERE, "translate_speed.py"),
                "--run",
                args.run,
                *data,
                "--beams",
                "1,5",
                "--passes",
                "2",
            ],
        )
        translation = parse_lines(out or "")

    print("# summary")
    pairs = ours.get("rnnsearch_train_pairs_per_second")
    if pairs is not None:
        print(f"train_pairs_per_second_ours={float(pairs):.1f}")
        if "pairs" in peer:
            print(f"train_pairs_per_second_opennmt={peer['pairs']:.1f}")
            print(f"ratio_vs_opennmt={float(pairs) / peer['pairs']:.2f}")
    gflops = ours.get("rnnsearch_train_gflops_per_second")
    if gflops is not None:
        print(f"train_gflops_per_second={float(gflops):.1f}")
        print(f"matmul_peak_gflops={peak['2048']:.1f}")
        print(f"fraction_of_peak={float(gflops) / peak['2048']:.2f}")
    if "rnnsearch_peak_rss_mb_training" in ours:
        print(f"peak_rss_mb_ours={ours['rnnsearch_peak_rss_mb_training']}")
    if "rss" in peer:
        print(f"peak_rss_mb_opennmt={peer['rss']:.0f}")
    for beam, label in ((1, "greedy"), (5, "beam5")):
        value = translation.get(f"beam{beam}_pass2_seconds")
        if value is not None:
            print(f"translate_{label}_seconds={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
