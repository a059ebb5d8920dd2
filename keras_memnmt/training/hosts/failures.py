"""How a process leaves its cluster when the run fails: the runtime's native log kept out
of sight, the abort handler and the watcher (:func:`guard`), the others told and the exit
code chosen (:func:`failing_together`), and the exit without JAX's shutdown (:func:`leave`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
import tempfile
import time

from keras_memnmt.training.hosts import watcher
from keras_memnmt.training.hosts.cluster import PREFIX, Cluster, ClusterError, current


def guard(cluster: Cluster) -> None:
    """Sends the runtime's native log to a file that is not shown, starts the watcher that
    speaks for this process if the runtime aborts it, and makes a failed process leave
    without JAX's shutdown (see :mod:`keras_memnmt.training.hosts`)."""
    import atexit
    import subprocess

    fd, path = tempfile.mkstemp(prefix="memnmt-native-", suffix=".log")
    cluster.native_log = fd
    # The runtime aborts from its own thread, often while this process's main thread holds
    # the GIL in a native call: a Python handler would wait for it (a hang). So the abort
    # handler is libc's _exit (exit code 6, the signal's number), and a watcher process,
    # told what it needs on a pipe, prints the line and removes the lock.
    cluster.watcher = subprocess.Popen(
        watcher.arguments(path, os.getpid(), socket.gethostname()),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    cluster.note(
        joining=cluster.not_joined(None).args[0].replace(" (waited 0 s", f" (waited {cluster.timeout} s"),
    )
    with contextlib.suppress(AttributeError, OSError, ValueError):  # not glibc: the lines stay on stderr
        libc = ctypes.CDLL(None)
        libc.fdopen.restype = ctypes.c_void_p
        libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
        libc.setvbuf.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t]
        stream = libc.fdopen(os.dup(fd), b"a")
        if stream:
            libc.setvbuf(stream, None, 2, 0)  # _IONBF: each line reaches the file before an abort
            ctypes.c_void_p.in_dll(libc, "stderr").value = stream
        libc.signal.restype = ctypes.c_void_p
        libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
        # While joining, the main thread waits in the runtime without the GIL: a Python
        # handler runs (exit code 2); from then on, libc's _exit (see above).
        joining = ctypes.CFUNCTYPE(None, ctypes.c_int)(lambda signum: _aborted_joining(cluster))
        cluster.abort_handlers = (joining, ctypes.cast(libc._exit, ctypes.c_void_p))
        cluster.set_abort = lambda joined: libc.signal(
            signal.SIGABRT,
            cluster.abort_handlers[1] if joined else ctypes.cast(cluster.abort_handlers[0], ctypes.c_void_p),
        )
        cluster.set_abort(False)
    atexit.register(leave, cluster)  # after JAX's own exit handler is registered: runs before it


def _aborted_joining(cluster: Cluster) -> None:
    """SIGABRT while joining: the runtime gave up (the cluster did not form)."""
    cluster.note(ended=True)
    with contextlib.suppress(OSError):
        os.write(2, f"memnmt: error: {cluster.not_joined(None)}\n".encode("utf-8", "replace"))
    os._exit(2)


def lost(cluster: Cluster, native: str = "", wait: float = 0.0) -> str:
    """Which process is gone, and why, in words (``native``: the runtime's log)."""
    deadline = time.monotonic() + wait
    while True:
        told = cluster.told_failures()
        if told:
            number, message = sorted(told.items())[0]
            return f"process {number} stopped ({message})"
        gone = cluster.gone_by_pid() if cluster.client is not None else []
        if gone:
            return watcher.gone_processes(gone)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    return watcher.cause_in_log(native, cluster.process, cluster.timeout, cluster.address)


def leave(cluster: Cluster) -> None:
    """At exit: a process whose run failed leaves at once (JAX's exit handler would wait
    for the others at its shutdown barrier), telling the others first. Nothing for a
    cluster that this process no longer holds (it ran JAX before joining)."""
    if cluster is not current():
        return
    cluster.note(ended=True)
    if cluster.ok:
        if _all_ended(cluster):  # JAX's shutdown barrier then passes at once
            return
        code = 0  # this process's run is complete; a process that is gone stops the barrier
    else:
        cluster.tell("its log says why")
        code = cluster.exit_code
        left(cluster)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def left(cluster: Cluster) -> None:
    """Says in the store that this process leaves; process 0, whose leaving ends the
    coordination service (the runtime aborts a process that loses it), first waits up to
    the timeout for the others to leave or be gone."""
    if cluster.client is None:
        return
    prefix = f"{PREFIX}/left/"
    with contextlib.suppress(Exception):
        cluster.client.key_value_set(prefix + str(cluster.process), "")
        deadline = time.monotonic() + cluster.timeout
        while cluster.process == 0 and time.monotonic() < deadline:
            done = {int(k.rsplit("/", 1)[1]) for k, _ in cluster.client.key_value_dir_get(prefix)}
            if len(done | set(cluster.gone_by_pid())) >= cluster.count:
                break
            time.sleep(0.05)


def _all_ended(cluster: Cluster) -> bool:
    """Whether every process reaches its end within the timeout (through the store: a
    process that is gone would make JAX's shutdown barrier end in an abort)."""
    if cluster.client is None:
        return False
    prefix = f"{PREFIX}/ended/"
    deadline = time.monotonic() + cluster.timeout
    with contextlib.suppress(Exception):
        cluster.client.key_value_set(prefix + str(cluster.process), "")
        while time.monotonic() < deadline:
            if len(cluster.client.key_value_dir_get(prefix)) == cluster.count:
                return True
            if cluster.told_failures():
                return False
            time.sleep(0.05)
    return False


def remove_own_lock(path: str | None) -> None:
    """Removes the lock at ``path`` if this process holds it (the file names its pid)."""
    if not path:
        return
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        with open(path) as f:
            if int(json.load(f)["pid"]) == os.getpid():
                os.remove(path)


def release_on_abort(lock_path: str) -> None:
    """Has ``lock_path`` removed if the runtime aborts this process (a lock that this
    process holds: the file names its pid)."""
    cluster = current()
    if cluster is not None:
        cluster.lock = lock_path
        cluster.note(lock=lock_path)


def training_started() -> None:
    """From here on, a failure of the cluster ends this process with exit code 3."""
    cluster = current()
    if cluster is not None:
        cluster.training = True
        peers = {}
        for i in range(cluster.count):
            with contextlib.suppress(Exception):  # every process told it before the agreements
                peers[str(i)] = json.loads(cluster.client.key_value_try_get(f"{PREFIX}/pid/{i}"))
        peers.pop(str(cluster.process), None)
        cluster.note(training=True, peers=peers, ending=cluster.ending())


@contextlib.contextmanager
def failing_together(active: bool):
    """Around one training on several processes (``active``): an error in this process is
    told to the others (their message names it) and ends this process without JAX's
    shutdown, exit code 2, or 3 once training had started; an error of the runtime (a
    process gone) becomes a :class:`ClusterError` naming the process."""
    cluster = current() if active else None
    if cluster is None:
        yield
        return
    cluster.ok = False
    try:
        yield
    except KeyboardInterrupt:
        cluster.exit_code = 130
        cluster.tell("interrupted")
        raise
    except ClusterError as e:
        cluster.exit_code = 3 if cluster.training else 2
        cluster.tell(str(e))
        raise
    except Exception as e:
        cluster.exit_code = 3 if cluster.training or isinstance(e, FloatingPointError) else 2
        if _from_runtime(e):  # a collective step failed: a process is gone
            cluster.tell(f"a collective step failed in {cluster.who()}")
            raise ClusterError(f"{cluster.who()}: {lost(cluster, wait=3.0)}{cluster.ending()}") from None
        cluster.tell(" ".join(str(e).split()) or type(e).__name__)
        raise
    cluster.ok = True


def _from_runtime(error: Exception) -> bool:
    text = str(error)
    return type(error).__name__ in ("JaxRuntimeError", "XlaRuntimeError") or "Gloo" in text or "gloo" in text
