"""The lock of a run directory (``RUN/.lock``): one process trains into it at a time."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys

LOCK_FILE = ".lock"


class RunLockedError(FileExistsError):
    """A run directory that another process is training into."""


def _process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, Linux's /proc), or None
    where that cannot be read: a pid and its start time name one process even after the
    pid is reused."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _running(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        pass
    now = _process_start(pid)
    return started is None or now is None or now == started


@contextlib.contextmanager
def lock_run_dir(out_dir: str, log=print):
    """Holds ``out_dir/.lock`` while the block runs: one writer per run directory.

    The lock file names the process (host, pid, its start time, the command). A second
    process is refused with a :class:`RunLockedError` naming the first while that one
    runs; a lock left by a process that is gone (killed) is taken over, with a notice.
    A lock from another host (a shared file system) cannot be checked, and is refused
    with the file to remove once that process is known to be gone. Nested blocks of one
    process (a recipe that locks its directory and trains into it) share the lock.
    """
    created = not os.path.isdir(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, LOCK_FILE)
    me = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": _process_start(os.getpid()),
        "command": " ".join(sys.argv),
    }
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                with open(path) as f:
                    other = json.load(f)
                host, pid = other["host"], int(other["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                other = None  # unreadable: a writer killed between open and write
            if other is not None and (host, pid, other.get("started")) == (me["host"], me["pid"], me["started"]):
                yield  # this process holds it already (a recipe's stages): the outer block releases it
                return
            if other is not None and host != me["host"]:
                raise RunLockedError(
                    f"{out_dir} is in use by process {pid} on host {host} "
                    f"({other.get('command', '?')}); if that process is gone, "
                    f"remove {path}"
                ) from None
            if other is not None and _running(pid, other.get("started")):
                raise RunLockedError(
                    f"{out_dir} is in use by process {pid} "
                    f"({other.get('command', '?')}); wait for it to end or "
                    "stop it, or train into another --out"
                ) from None
            log(f"removing a stale lock of process {other['pid'] if other else '?'}, which is not running ({path})")
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            continue
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        break
    else:
        raise RunLockedError(f"{out_dir}: another process took {path} at the same time")
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        if created:  # a run that failed before writing anything leaves no empty folder
            with contextlib.suppress(OSError):
                os.rmdir(out_dir)
