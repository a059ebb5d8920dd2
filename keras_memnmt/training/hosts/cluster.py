"""This process's place in its cluster (:class:`Cluster`): what it knows of the others,
what it has told them through the coordination service's key-value store, and the notes
it gives its watcher (:mod:`keras_memnmt.training.hosts.watcher`).

The cluster that this process joined is the one handle kept for the whole process
(:func:`current`): JAX's distributed runtime is joined once per process, and the
functions that the trainer calls between steps (:func:`~keras_memnmt.training.hosts.agree`,
:func:`~keras_memnmt.training.hosts.step_began`, ...) take no cluster, so they find it
there. Everything else that a cluster holds (its exchange counter, its step watch, its
abort handlers) lives on its :class:`Cluster`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time

from keras_memnmt.config import ConfigError
from keras_memnmt.training.hosts.environment import TIMEOUT_VARIABLE

PREFIX = "memnmt"  # of this library's keys in the coordination service's store


class ClusterError(ConfigError):
    """The processes of a run cannot go on together (one is missing, gone, or differs)."""


class Cluster:
    """This process's place in its cluster, and how it leaves it."""

    def __init__(self, process: int, count: int, address: str, seconds: int):
        self.process, self.count, self.address, self.timeout = process, count, address, seconds
        self.client = None
        self.exchanges = 0  # values exchanged so far (each process exchanges in the same order)
        self.training = False  # a training step has run: a failure exits 3
        self.ok = False  # the last training of this process returned
        self.exit_code = 2
        self.told = False  # this process's failure is in the store
        self.watcher = None  # the process that speaks for this one if the runtime aborts it
        self.set_abort = lambda joined: None  # the SIGABRT handler while joining, or after
        self.abort_handlers = None  # what set_abort installs, kept alive here (libc holds their addresses alone)
        self.native_log = None  # the file descriptor of the runtime's log
        self.joining = time.monotonic()  # since when this process joins; None once it has
        self.lock = None  # the run directory's lock this process holds
        self.step_watch = None  # the StepWatch, from the first training step on

    def who(self) -> str:
        return f"process {self.process} of {self.count}"

    def note(self, **notes) -> None:
        """Tells the watcher ``notes`` (one JSON line: :mod:`keras_memnmt.training.hosts.watcher`)."""
        if self.watcher is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.watcher.stdin.write(json.dumps(notes) + "\n")
            self.watcher.stdin.flush()

    def native_log_text(self, size: int = 65536) -> str:
        """The last ``size`` bytes of the runtime's native log."""
        if self.native_log is None:
            return ""
        with contextlib.suppress(OSError):
            end = os.lseek(self.native_log, 0, os.SEEK_END)
            return os.pread(self.native_log, size, max(0, end - size)).decode("utf-8", "replace")
        return ""

    def not_joined(self, error: Exception | None) -> ClusterError:
        """Why the cluster did not form (``error``: the runtime's, if any), in words."""
        text, waited = str(error), time.monotonic() - (self.joining or time.monotonic())
        if self.process == 0 and ("RPC server" in text or "add port" in self.native_log_text()):
            return ClusterError(
                f"{self.who()}: cannot start the cluster's coordinator on {self.address} "
                "(its port is in use, or the address is not this host's): choose a free port in "
                "$KERAS_DISTRIBUTION_JOB_ADDRESSES"
            )
        return ClusterError(
            f"{self.who()}: the cluster did not form within {self.timeout} s (waited "
            f"{waited:.0f} s for the coordinator at {self.address} and {self.count - 1} other "
            "processes): a process that was not started or stopped early, or another "
            "$KERAS_DISTRIBUTION_NUM_PROCESSES or $KERAS_DISTRIBUTION_JOB_ADDRESSES in one of them "
            f"(${TIMEOUT_VARIABLE} sets the wait)"
        )

    def tell(self, message: str) -> None:
        """Tells the others, once, that this process fails (``message``: why)."""
        if self.told or self.client is None:
            return
        self.told = True
        with contextlib.suppress(Exception):
            self.client.key_value_set(f"{PREFIX}/failed/{self.process}", message[:2000])

    def told_failures(self) -> dict[int, str]:
        """The other processes' failures, as they told the store."""
        if self.client is None:
            return {}
        try:
            entries = self.client.key_value_dir_get(f"{PREFIX}/failed/")
        except Exception:  # noqa: BLE001 - the store is gone
            return {}
        told = {}
        for key, message in entries:
            number = int(key.rsplit("/", 1)[1])
            if number != self.process:
                told[number] = message
        return told

    def gone_by_pid(self) -> list[int]:
        """The processes on this host whose pid (as they told the store) no longer runs."""
        gone = []
        for i in range(self.count):
            if i == self.process:
                continue
            try:
                peer = json.loads(self.client.key_value_try_get(f"{PREFIX}/pid/{i}"))
            except Exception:  # noqa: BLE001 - not told, or the store is gone
                continue
            if peer.get("host") == socket.gethostname():
                try:
                    os.kill(int(peer["pid"]), 0)
                except ProcessLookupError:
                    gone.append(i)
                except (OSError, ValueError):
                    pass
                else:
                    if _ended_unreaped(int(peer["pid"])):
                        gone.append(i)
        return gone

    def ending(self) -> str:
        """What a failure's line adds once training has started: how the run goes on."""
        return (
            "; the run directory resumes from its last model.keras with --resume, every process started again"
            if self.training
            else ""
        )


def _ended_unreaped(pid: int) -> bool:
    """Whether ``pid`` has ended but its parent has not collected it yet (a zombie, which
    ``kill(pid, 0)`` still finds): a launcher that waits for its processes in order leaves
    a killed one so until the others end. Linux's ``/proc``; elsewhere ``False``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()  # after the command's name, which may hold spaces
    return bool(state) and state[0] in ("Z", "X")


# The one process-wide handle (see the module's docstring): the cluster this process joined.
_joined: Cluster | None = None


def current() -> Cluster | None:
    """The cluster this process has joined or is joining (``None``: none)."""
    return _joined


def set_current(cluster: Cluster | None) -> None:
    """Makes ``cluster`` the one :func:`current` returns (``None``: this process has none)."""
    global _joined
    _joined = cluster
