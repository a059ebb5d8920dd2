"""`memnmt serve` under load: one-sentence requests from 1, 8 and 32 concurrent clients.

    KERAS_BACKEND=tensorflow python benchmarks/serve_load.py --run runs/rnnsearch \
        --data-dir $MEMNMT_DATA --seconds 30

Starts `memnmt serve` on a free port of 127.0.0.1 twice: with dynamic batching (the
default ``--max-batch 32 --max-wait-ms 5``) and one request at a time (``--max-batch
1``). Each client (a bounded asyncio loop over one HTTP connection) sends the sentences
of the test split one per request, round robin, for ``--seconds`` per client count, and
checks each answer against ``memnmt translate``'s translation of that sentence (beam 5,
computed here first), after a warm-up at the largest client count (the search compiles
once per batch size). Prints one ``name=value`` line per figure, ``{batched,single}_c{N}_``
``sentences_per_second``, ``p50_ms``, ``p99_ms``, ``errors`` (non-200 answers and
failed connections) and ``mismatches``, then ``speedup_c{N}`` (batched over single).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time

MODES = {"batched": [], "single": ["--max-batch", "1"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(run: str, port: int, extra: list[str]) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_memnmt.cli", "serve", "--model", run, "--name", "m", "--port", str(port), *extra],
        stderr=subprocess.DEVNULL,
    )
    import urllib.request

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"memnmt serve exited with status {process.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
            return process
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit("memnmt serve did not start within 300 s")


async def load(port: int, clients: int, seconds: float, sentences: list[str], expected: list[str]) -> dict:
    import httpx

    url = f"http://127.0.0.1:{port}/v1/models/m:predict"
    latencies: list[float] = []
    errors = mismatches = 0
    counter = 0
    stop = time.monotonic() + seconds

    async def client():
        nonlocal errors, mismatches, counter
        async with httpx.AsyncClient(timeout=120) as http:
            while time.monotonic() < stop:
                i = counter % len(sentences)
                counter += 1
                start = time.monotonic()
                try:
                    reply = await http.post(url, json={"instances": [sentences[i]]})
                except httpx.HTTPError:
                    errors += 1
                    continue
                latencies.append(time.monotonic() - start)
                if reply.status_code != 200:
                    errors += 1
                elif reply.json()["predictions"][0]["translation"] != expected[i]:
                    mismatches += 1

    began = time.monotonic()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.monotonic() - began
    latencies.sort()

    def quantile(q):
        return 1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan")

    return {
        "sentences_per_second": len(latencies) / elapsed,
        "p50_ms": quantile(0.5),
        "p99_ms": quantile(0.99),
        "errors": errors,
        "mismatches": mismatches,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", required=True, help="a run directory from `memnmt train`")
    p.add_argument("--data-dir", default=os.environ.get("MEMNMT_DATA"))
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--source", help="a file of sentences instead of --split")
    p.add_argument("--sentences", type=int, default=500, help="the first N sentences are sent (default 500)")
    p.add_argument("--seconds", type=float, default=30.0, help="per client count and mode (default 30)")
    p.add_argument("--clients", default="1,8,32")
    args = p.parse_args(argv)
    counts = [int(c) for c in args.clients.split(",")]

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_memnmt.data import load_multi30k, read_lines
    from keras_memnmt.evaluation.translation import translate
    from keras_memnmt.rundir.runs import load_run

    model, vocab, config = load_run(args.run)
    if args.source:
        sentences = read_lines(args.source)[: args.sentences]
    else:
        sentences = list(load_multi30k(config.src, config.tgt, args.split, data_dir=args.data_dir).source)
        sentences = sentences[: args.sentences]
    expected = translate(model, vocab, sentences, beam_size=5, progress=False)
    del model
    print(f"sentences={len(sentences)}")
    figures: dict[str, dict] = {}
    for mode, extra in MODES.items():
        port = free_port()
        server = start_server(args.run, port, extra)
        try:
            # Warm-up at the largest client count: the batch sizes it makes are compiled here,
            # so the figures are of the steady state.
            asyncio.run(load(port, max(counts), min(10.0, args.seconds), sentences, expected))
            for clients in counts:
                result = asyncio.run(load(port, clients, args.seconds, sentences, expected))
                figures[f"{mode}_c{clients}"] = result
                for name, value in result.items():
                    print(
                        f"{mode}_c{clients}_{name}={value:.1f}"
                        if isinstance(value, float)
                        else f"{mode}_c{clients}_{name}={value}",
                        flush=True,
                    )
        finally:
            server.terminate()
            server.wait(timeout=120)
    for clients in counts:
        batched, single = figures[f"batched_c{clients}"], figures[f"single_c{clients}"]
        print(f"speedup_c{clients}={batched['sentences_per_second'] / max(single['sentences_per_second'], 1e-9):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
