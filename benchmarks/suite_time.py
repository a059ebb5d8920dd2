"""Wall time and peak memory of a pytest command: by default the README's test command.

    python benchmarks/suite_time.py                      # the README's: -m "not slow" -n 4 on PyTorch
    python benchmarks/suite_time.py --backend tensorflow -- --backend-tier -m "not slow" -n 4

Runs ``python -m pytest -q -p no:cacheprovider ARGS`` (ARGS: those after ``--``; default
``-m "not slow" -n 4``)
with ``KERAS_BACKEND=--backend`` (default ``torch``, as the README's command) in a child
process of its own, writes pytest's report to stderr when it ends, and prints one
``name=value`` line per figure to stdout; nothing is asserted:

- ``suite_seconds``: the child's wall time, collection and worker start-up included;
- ``suite_peak_rss_mb``: the largest resident size any one process of the run reached
  (``getrusage``'s ``ru_maxrss`` of the child, which Linux carries up from every descendant
  when it is reaped: the pytest-xdist workers and the subprocesses the tests start);
- ``suite_passed``, ``_failed``, ``_skipped``, ``_errors``: from pytest's summary line;
- ``suite_returncode``.

Measure on a fresh clone with a new venv and nothing cached to compare with the bound in
docs/development.md; the figures of this machine are listed there.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_ARGS = ["-m", "not slow", "-n", "4"]


def summary_counts(output: str) -> dict[str, int]:
    """pytest's last summary line (``== 12 passed, 3 skipped in 9.1s ==``) as counts."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    lines = [line for line in output.splitlines() if re.search(r"\b(passed|failed|error|errors)\b", line)]
    if lines:
        for number, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)\b", lines[-1]):
            counts["errors" if word.startswith("error") else word] = int(number)
    return counts


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, pytest_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="torch", choices=("tensorflow", "jax", "torch"), help="KERAS_BACKEND")
    args = p.parse_args(ours)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(pytest_args or README_ARGS)]
    env = {**os.environ, "KERAS_BACKEND": args.backend}
    start = time.monotonic()
    done = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.monotonic() - start
    sys.stderr.write(done.stdout)  # pytest's own report, --durations included
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # kB on Linux
    print(f"suite_seconds={seconds:.1f}")
    print(f"suite_peak_rss_mb={peak_mb:.0f}")
    for name, count in summary_counts(done.stdout).items():
        print(f"suite_{name}={count}")
    print(f"suite_returncode={done.returncode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
