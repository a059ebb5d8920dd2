"""The watcher: a process beside each process of a cluster that speaks for it if the
runtime aborts it.

The runtime aborts a process (its coordination service reports another gone) from its own
thread, and the abort's handler is libc's ``_exit`` (:mod:`keras_memnmt.training.hosts.failures`),
so the aborted process can say nothing itself. Its watcher reads notes (JSON objects, one a
line, each adding to or replacing what the earlier ones said) on its standard input until the
process ends; unless the last notes said ``"ended"``, the runtime aborted it: the watcher
writes one ``memnmt: error:`` line naming the cause from the runtime's log, removes the
process's lock, and removes the log. It ignores Ctrl-C (its process answers that).

The notes: ``joining`` (the line for a cluster that did not form), ``joined``, ``who``,
``process``, ``address``, ``timeout``, ``lock``, ``peers`` (process number -> ``host``
and ``pid``), ``ending``, ``ended``. The arguments: the runtime's log, the watched
process's pid (whose lock it removes) and its host name.

It imports the standard library alone, and runs as a file (``python -I .../watcher.py``):
``python -m keras_memnmt.training.hosts.watcher`` would import ``keras_memnmt.training``
first, and with it Keras and its backend, seconds before it could answer.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys

# What the runtime writes to its log when it aborts the process.
ABORTED = r"Terminating process|Check failure|terminate called"


def arguments(log: str, pid: int, host: str) -> list[str]:
    """The command line that starts the watcher of process ``pid`` on ``host``."""
    return [sys.executable, "-I", os.path.abspath(__file__), "--log", log, "--pid", str(pid), "--host", host]


def silent_processes(log: str) -> list[int]:
    """The processes that the runtime's ``log`` says stopped sending heartbeats."""
    found = re.findall(r"Task (\d+) heartbeat timeout", log)
    found += re.findall(r"stopped sending heartbeats\):\s*\n?\s*(\d+)", log)
    return sorted({int(n) for n in found})


def _alive(pid: int) -> bool | None:
    """Whether ``pid`` runs on this host (``None``: cannot tell)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return None
    return True


def message(notes: dict, log: str, host: str, alive=_alive) -> str | None:
    """The line for a process whose notes are ``notes`` and whose runtime wrote ``log``
    (``host``: its host name; ``alive(pid)``: whether a process of this host runs), without
    ``memnmt: error:``; ``None`` when there is nothing to say (the process ended as it
    meant to, or was killed: its log holds no abort)."""
    if notes.get("ended") or not re.search(ABORTED, log):
        return None
    if not notes.get("joined"):
        return notes["joining"]
    gone = [i for i, peer in sorted(notes.get("peers", {}).items()) if peer.get("host") == host]
    gone = [i for i in gone if alive(int(notes["peers"][i]["pid"])) is False]
    what = gone_processes(gone) if gone else cause_in_log(log, notes["process"], notes["timeout"], notes["address"])
    return notes["who"] + ": " + what + notes.get("ending", "")


def gone_processes(numbers) -> str:
    """The words for processes ``numbers`` whose process ended."""
    return " and ".join(f"process {i}" for i in numbers) + " is gone (its process ended)"


def cause_in_log(log: str, process: int, timeout, address: str) -> str:
    """What the runtime's ``log`` says stopped the cluster, in words, as seen by process
    ``process`` (``timeout``: the heartbeat timeout; ``address``: the coordinator's)."""
    silent = silent_processes(log)
    if silent:
        return " and ".join(f"process {i}" for i in silent) + f" stopped answering (no heartbeat for {timeout} s)"
    if process != 0 and re.search(r"Socket closed|UNAVAILABLE|Connection refused", log):
        return f"process 0, the coordinator ({address}), is gone"
    return "another process of this run stopped or cannot be reached"


def remove_lock(path: str | None, pid: int) -> None:
    """Removes the lock at ``path`` if process ``pid`` holds it (the file names its pid)."""
    if not path:
        return
    try:
        with open(path) as f:
            if int(json.load(f)["pid"]) == pid:
                os.remove(path)
    except (OSError, ValueError, KeyError):
        pass


def read_notes(lines) -> dict:
    """The notes that ``lines`` (JSON objects, one a line) add up to."""
    notes = {}
    for line in lines:
        notes.update(json.loads(line))
    return notes


def main(argv: list[str] | None = None, stdin=None) -> int:
    parser = argparse.ArgumentParser(prog="watcher", description="Speaks for a process that the runtime aborts.")
    parser.add_argument("--log", required=True, help="the runtime's native log (removed at the end)")
    parser.add_argument("--pid", type=int, required=True, help="the watched process")
    parser.add_argument("--host", required=True, help="the watched process's host name")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    notes = read_notes(sys.stdin if stdin is None else stdin)
    try:
        try:
            with open(args.log, errors="replace") as f:
                log = f.read()[-65536:]
        except OSError:
            log = ""
        why = message(notes, log, args.host)
        if why is not None:
            sys.stderr.write("memnmt: error: " + why + "\n")
            sys.stderr.flush()
            remove_lock(notes.get("lock"), args.pid)
    finally:
        try:
            os.remove(args.log)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
