"""One run across several processes (hosts) on JAX's distributed runtime.

Every process runs the same ``memnmt train`` command with the same ``--out`` and
``--set distribution=data_parallel``; the environment tells each one the cluster, as
Keras documents for ``keras.distribution.initialize``:

- ``KERAS_DISTRIBUTION_JOB_ADDRESSES``: the coordinator's ``host:port`` (process 0's;
  a comma-separated list of every process's address is accepted too),
- ``KERAS_DISTRIBUTION_NUM_PROCESSES``: the number of processes,
- ``KERAS_DISTRIBUTION_PROCESS_ID``: this process's number, 0 to N - 1,
- ``MEMNMT_HOSTS_TIMEOUT`` (optional): the seconds the cluster has to form, and after
  which a process that stops answering counts as gone (default 60).
- ``MEMNMT_HOSTS_STEP_TIMEOUT`` (optional): the seconds one training step may take,
  its compilation included, before the run counts as stuck (default 300).

What each process does (SPMD: the model's variables are global arrays over every
process's devices, so each computation on them needs every process):

- all run every training step, each on its own rows of the global batch
  (:meth:`keras_memnmt.training.distribution.Placement.local_rows`), and every
  validation and the test translation, in lockstep;
- process 0 alone writes: it holds the run directory's lock and writes every file, as
  one process does (:func:`keras_memnmt.files.set_writer` makes the others' writes go
  nowhere); the others read the run directory (their vocabulary check, ``best.keras``
  for the test, ``model.keras`` at a resume), so it must be one folder that every host
  sees at the same path (a shared file system);
- what the processes must agree on (the command: config, process count, ``--out``,
  ``--resume``; then the vocabulary and the step a resume starts from) is compared
  across them (:func:`agree_on_run`, :func:`agree`), and a difference stops every process
  with the same message.

How a failure ends (:func:`join` sets it up): every process stops within about
``MEMNMT_HOSTS_TIMEOUT`` seconds with one ``memnmt: error:`` line naming the process and
the cause, exit code 2 (3 once training has started; 6 where the runtime aborts it), and without
its lock:

- the values the processes exchange before training (agreements, process 0's outcome,
  barriers) go through the coordination service's key-value store, never through a
  collective step, and a process that fails there says so to the others in the store;
- a process that fails leaves with ``os._exit`` (after Python's own cleanup): JAX's exit
  handler would wait for the others at a shutdown barrier;
- the runtime's native log lines go to a file that is not shown (libc's ``stderr``); the
  runtime aborts a process when its coordination service reports another gone (or the
  coordinator goes), from its own thread, often while the main thread holds the GIL in a
  native call: the abort's handler is libc's ``_exit`` (exit code 6), and a watcher
  process prints the line and removes the lock;
- a process that is alive (it answers the runtime's heartbeats) but stuck outside a
  collective step (a hung file system, a deadlock) leaves the others waiting in their next
  training step: a thread of each process (:class:`_StepWatch`) ends a step that has
  not finished within ``MEMNMT_HOSTS_STEP_TIMEOUT`` seconds, naming the processes that
  had not begun it (each tells the store the step it began), exit code 3. A stall
  inside a validation's or the test's translations (every process waits there, outside
  a training step) is not bounded by it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time

from keras_memnmt.config import ConfigError

ENVIRONMENT = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES", "KERAS_DISTRIBUTION_PROCESS_ID")
TIMEOUT_VARIABLE = "MEMNMT_HOSTS_TIMEOUT"
DEFAULT_TIMEOUT = 60  # seconds; JAX's own defaults are 300 (joining) and 100 (heartbeats)
STEP_TIMEOUT_VARIABLE = "MEMNMT_HOSTS_STEP_TIMEOUT"
# Seconds; a step's compilation counts (a few seconds per batch shape on JAX's CPU backend,
# 40-80 s for RNNsearch on a GPU: docs/benchmarks.md).
DEFAULT_STEP_TIMEOUT = 300
_PREFIX = "memnmt"  # of this library's keys in the coordination service's store


class ClusterError(ConfigError):
    """The processes of a run cannot go on together (one is missing, gone, or differs)."""


def requested() -> int:
    """The number of processes ``$KERAS_DISTRIBUTION_NUM_PROCESSES`` asks for (1 when unset)."""
    value = os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES", "").strip()
    if not value:
        return 1
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ConfigError(f"$KERAS_DISTRIBUTION_NUM_PROCESSES={value!r}: expected a whole number >= 1")
    return count


def timeout() -> int:
    """``$MEMNMT_HOSTS_TIMEOUT`` in seconds (default 60): how long the cluster has to form,
    and after how long without a heartbeat a process counts as gone."""
    return _seconds(TIMEOUT_VARIABLE, DEFAULT_TIMEOUT)


def step_timeout() -> int:
    """``$MEMNMT_HOSTS_STEP_TIMEOUT`` in seconds (default 300): how long one training step
    may take before the run counts as stuck."""
    return _seconds(STEP_TIMEOUT_VARIABLE, DEFAULT_STEP_TIMEOUT)


def _seconds(variable: str, default: int) -> int:
    value = os.environ.get(variable, "").strip()
    if not value:
        return default
    try:
        seconds = int(value)
    except ValueError:
        seconds = 0
    if not 1 <= seconds <= 86400:
        raise ConfigError(f"${variable}={value!r}: expected a whole number of seconds, 1 to 86400")
    return seconds


@contextlib.contextmanager
def native_output_to_stderr():
    """While the block runs, what native code writes to the standard output (file
    descriptor 1) goes to the standard error: gloo announces its connections there,
    where ``memnmt train`` writes its results alone."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def join_requested() -> None:
    """Joins the cluster the environment names when it asks for several processes on JAX
    (``memnmt train`` calls it first: any JAX computation before it makes joining fail)."""
    import keras

    count = requested()
    if count > 1 and keras.backend.backend() == "jax":
        join(count)


class _Cluster:
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
        self.native_log = None  # the file descriptor of the runtime's log
        self.joining = time.monotonic()  # since when this process joins; None once it has
        self.lock = None  # the run directory's lock this process holds
        self.step_watch = None  # the _StepWatch, from the first training step on

    def who(self) -> str:
        return f"process {self.process} of {self.count}"


_cluster: _Cluster | None = None
_handler = None  # the SIGABRT handler (libc's _exit)


def _coordinator(count: int) -> str:
    addresses = [a.strip() for a in os.environ["KERAS_DISTRIBUTION_JOB_ADDRESSES"].split(",")]
    if len(addresses) > 1 and len(addresses) != count:
        raise ConfigError(
            f"$KERAS_DISTRIBUTION_JOB_ADDRESSES lists {len(addresses)} addresses for "
            f"$KERAS_DISTRIBUTION_NUM_PROCESSES={count} processes: give the coordinator's "
            "address alone, or one per process"
        )
    return addresses[0]


def join(count: int) -> tuple[int, int]:
    """Joins the cluster of ``count`` processes that the environment names (before any
    JAX computation of this process); returns ``(this process's number, count)``.

    A cluster that does not form within ``$MEMNMT_HOSTS_TIMEOUT`` seconds (a process not
    started, another count or address in one of them) or whose coordinator cannot start
    (its port in use) is a :class:`ClusterError`; the process then leaves without JAX's
    shutdown (see the module's docstring)."""
    global _cluster
    import jax

    for name in ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_PROCESS_ID"):
        if not os.environ.get(name, "").strip():
            raise ConfigError(
                f"${name} is not set: a run on {count} processes needs "
                f"{', '.join('$' + n for n in ENVIRONMENT)} in every process "
                '(docs/scaling.md, "Several hosts")'
            )
    index = os.environ["KERAS_DISTRIBUTION_PROCESS_ID"].strip()
    if not index.isdigit() or int(index) >= count:
        raise ConfigError(f"$KERAS_DISTRIBUTION_PROCESS_ID={index!r}: expected 0 to {count - 1}")
    if jax.distributed.is_initialized():  # joined already (a second run in this process)
        return jax.process_index(), jax.process_count()
    seconds, address = timeout(), _coordinator(count)
    # Collectives between CPU devices of several processes go through gloo (JAX's CPU
    # default has none); GPUs use NCCL whatever this says.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    cluster = _cluster = _Cluster(int(index), count, address, seconds)
    if cluster.process == 0 and not _port_free(address):  # JAX 0.10 crashes (SIGSEGV) on a port in use, at times
        raise _not_joined(cluster, RuntimeError("Failed to start RPC server"))
    _guard(cluster)
    try:
        # Keras's initialize passes JAX's defaults (300 s to join, 100 s of heartbeats).
        jax.distributed.initialize(
            coordinator_address=address,
            num_processes=count,
            process_id=int(index),
            initialization_timeout=seconds,
            heartbeat_timeout_seconds=seconds,
            shutdown_timeout_seconds=seconds,
        )
    except RuntimeError as e:
        if "must be called before" in str(e):
            _cluster = None
            raise ConfigError(
                "this process ran JAX before joining its cluster: call "
                "keras_memnmt.training.hosts.join_requested() first (memnmt train does)"
            ) from None
        raise _not_joined(cluster, e) from None
    except Exception as e:  # noqa: BLE001 - the runtime's errors have no common type
        raise _not_joined(cluster, e) from None
    from jax._src import distributed

    cluster.client, cluster.joining = distributed.global_state.client, None
    cluster.set_abort(True)
    _note(cluster, joined=True, who=cluster.who(), process=cluster.process, address=address, timeout=seconds)
    with contextlib.suppress(Exception):  # for the messages about a process that is gone
        cluster.client.key_value_set(
            f"{_PREFIX}/pid/{cluster.process}", json.dumps({"host": socket.gethostname(), "pid": os.getpid()})
        )
    return jax.process_index(), jax.process_count()


def _port_free(address: str) -> bool:
    """Whether the coordinator can listen on ``address``'s port (on every address of this
    host, as JAX's coordinator does, unless ``$JAX_COORDINATOR_BIND_ADDRESS`` says otherwise)."""
    if os.environ.get("JAX_COORDINATOR_BIND_ADDRESS"):
        return True
    try:
        port = int(address.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return True  # JAX names what it cannot read
    for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC does
                s.bind((host, port))
            return True
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return False
    return True  # no socket of either family here: JAX says what is wrong


def _not_joined(cluster: _Cluster, error: Exception | None) -> ClusterError:
    text, waited = str(error), time.monotonic() - (cluster.joining or time.monotonic())
    if cluster.process == 0 and ("RPC server" in text or "add port" in _native_log(cluster)):
        return ClusterError(
            f"{cluster.who()}: cannot start the cluster's coordinator on {cluster.address} "
            "(its port is in use, or the address is not this host's): choose a free port in "
            "$KERAS_DISTRIBUTION_JOB_ADDRESSES"
        )
    return ClusterError(
        f"{cluster.who()}: the cluster did not form within {cluster.timeout} s (waited "
        f"{waited:.0f} s for the coordinator at {cluster.address} and {cluster.count - 1} other "
        "processes): a process that was not started or stopped early, or another "
        "$KERAS_DISTRIBUTION_NUM_PROCESSES or $KERAS_DISTRIBUTION_JOB_ADDRESSES in one of them "
        f"(${TIMEOUT_VARIABLE} sets the wait)"
    )


# ----- how a process leaves a cluster ----------------------------------------------------------------


def _guard(cluster: _Cluster) -> None:
    """Sends the runtime's native log to a file that is not shown, starts the watcher that
    speaks for this process if the runtime aborts it, and makes a failed process leave
    without JAX's shutdown (see the module's docstring)."""
    global _handler
    import atexit
    import subprocess

    fd, path = tempfile.mkstemp(prefix="memnmt-native-", suffix=".log")
    cluster.native_log = fd
    # The runtime aborts from its own thread, often while this process's main thread holds
    # the GIL in a native call: a Python handler would wait for it (a hang). So the abort
    # handler is libc's _exit (exit code 6, the signal's number), and a watcher process,
    # told what it needs on a pipe, prints the line and removes the lock.
    cluster.watcher = subprocess.Popen(
        [sys.executable, "-c", _WATCHER],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    _note(
        cluster,
        log=path,
        pid=os.getpid(),
        host=socket.gethostname(),
        joining=_not_joined(cluster, None).args[0].replace(" (waited 0 s", f" (waited {cluster.timeout} s"),
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
        joining = ctypes.CFUNCTYPE(None, ctypes.c_int)(_aborted_joining)
        _handler = [joining, ctypes.cast(libc._exit, ctypes.c_void_p)]
        cluster.set_abort = lambda joined: libc.signal(
            signal.SIGABRT, _handler[1] if joined else ctypes.cast(_handler[0], ctypes.c_void_p)
        )
        cluster.set_abort(False)
    atexit.register(_leave)  # after JAX's own exit handler is registered: runs before it


def _aborted_joining(signum: int) -> None:
    """SIGABRT while joining: the runtime gave up (the cluster did not form)."""
    cluster = _cluster
    _note(cluster, ended=True)
    with contextlib.suppress(OSError):
        os.write(2, f"memnmt: error: {_not_joined(cluster, None)}\n".encode("utf-8", "replace"))
    os._exit(2)


def _note(cluster: _Cluster, **notes) -> None:
    """Tells the watcher ``notes`` (see :data:`_WATCHER`)."""
    watcher = getattr(cluster, "watcher", None)
    if watcher is None:
        return
    with contextlib.suppress(OSError, ValueError):
        watcher.stdin.write(json.dumps(notes) + "\n")
        watcher.stdin.flush()


# The watcher: reads notes (JSON lines) until its process ends; unless the last said
# "ended", the runtime aborted it: one line naming the cause from the runtime's log, and
# the process's lock removed. It ignores Ctrl-C (its process answers that).
_WATCHER = r"""
import json, os, re, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
n = {}
for line in sys.stdin:
    n.update(json.loads(line))
try:
    if n.get("ended"):
        sys.exit(0)
    try:
        with open(n["log"], errors="replace") as f:
            log = f.read()[-65536:]
    except OSError:
        log = ""
    if not re.search(r"Terminating process|Check failure|terminate called", log):
        sys.exit(0)  # ended otherwise (killed): nothing to say for it
    if not n.get("joined"):
        why = n["joining"]
    else:
        gone = []
        for i, peer in sorted(n.get("peers", {}).items()):
            if peer.get("host") == n["host"]:
                try:
                    os.kill(int(peer["pid"]), 0)
                except ProcessLookupError:
                    gone.append(i)
                except OSError:
                    pass
        silent = sorted({int(x) for x in re.findall(r"Task (\d+) heartbeat timeout", log)
                         + re.findall(r"stopped sending heartbeats\):\s*\n?\s*(\d+)", log)})
        if gone:
            what = " and ".join("process " + i for i in gone) + " is gone (its process ended)"
        elif silent:
            what = (" and ".join("process %d" % i for i in silent)
                    + " stopped answering (no heartbeat for %s s)" % n["timeout"])
        elif n["process"] != 0 and re.search(r"Socket closed|UNAVAILABLE|Connection refused", log):
            what = "process 0, the coordinator (%s), is gone" % n["address"]
        else:
            what = "another process of this run stopped or cannot be reached"
        why = n["who"] + ": " + what + n.get("ending", "")
    sys.stderr.write("memnmt: error: " + why + "\n")
    sys.stderr.flush()
    lock = n.get("lock")
    if lock:
        try:
            with open(lock) as f:
                if int(json.load(f)["pid"]) == n["pid"]:
                    os.remove(lock)
        except (OSError, ValueError, KeyError):
            pass
finally:
    try:
        os.remove(n["log"])
    except (OSError, KeyError):
        pass
"""


def _native_log(cluster: _Cluster, size: int = 65536) -> str:
    if cluster.native_log is None:
        return ""
    with contextlib.suppress(OSError):
        end = os.lseek(cluster.native_log, 0, os.SEEK_END)
        return os.pread(cluster.native_log, size, max(0, end - size)).decode("utf-8", "replace")
    return ""


def _gone_by_pid(cluster: _Cluster) -> list[int]:
    """The processes on this host whose pid (as they told the store) no longer runs."""
    gone = []
    for i in range(cluster.count):
        if i == cluster.process:
            continue
        try:
            peer = json.loads(cluster.client.key_value_try_get(f"{_PREFIX}/pid/{i}"))
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


def _told_failures(cluster: _Cluster) -> dict[int, str]:
    """The other processes' failures, as they told the store."""
    if cluster.client is None:
        return {}
    try:
        entries = cluster.client.key_value_dir_get(f"{_PREFIX}/failed/")
    except Exception:  # noqa: BLE001 - the store is gone
        return {}
    told = {}
    for key, message in entries:
        number = int(key.rsplit("/", 1)[1])
        if number != cluster.process:
            told[number] = message
    return told


def _lost(cluster: _Cluster, native: str = "", wait: float = 0.0) -> str:
    """Which process is gone, and why, in words (``native``: the runtime's log)."""
    deadline = time.monotonic() + wait
    while True:
        told = _told_failures(cluster)
        if told:
            number, message = sorted(told.items())[0]
            return f"process {number} stopped ({message})"
        gone = _gone_by_pid(cluster) if cluster.client is not None else []
        if gone:
            return " and ".join(f"process {i}" for i in gone) + " is gone (its process ended)"
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    silent = re.findall(r"Task (\d+) heartbeat timeout", native)
    silent += re.findall(r"stopped sending heartbeats\):\s*\n?\s*(\d+)", native)
    if silent:
        numbers = sorted({int(n) for n in silent})
        return (
            " and ".join(f"process {i}" for i in numbers) + f" stopped answering (no heartbeat for {cluster.timeout} s)"
        )
    if cluster.process != 0 and re.search(r"Socket closed|UNAVAILABLE|Connection refused", native):
        return f"process 0, the coordinator ({cluster.address}), is gone"
    return "another process of this run stopped or cannot be reached"


def _ending(cluster: _Cluster) -> str:
    return (
        "; the run directory resumes from its last model.keras with --resume, every process started again"
        if cluster.training
        else ""
    )


def _leave() -> None:
    """At exit: a process whose run failed leaves at once (JAX's exit handler would wait
    for the others at its shutdown barrier), telling the others first."""
    cluster = _cluster
    if cluster is None:
        return
    _note(cluster, ended=True)
    if cluster.ok:
        if _all_ended(cluster):  # JAX's shutdown barrier then passes at once
            return
        code = 0  # this process's run is complete; a process that is gone stops the barrier
    else:
        _tell(cluster, "its log says why")
        code = cluster.exit_code
        _left(cluster)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _left(cluster: _Cluster) -> None:
    """Says in the store that this process leaves; process 0, whose leaving ends the
    coordination service (the runtime aborts a process that loses it), first waits up to
    the timeout for the others to leave or be gone."""
    if cluster.client is None:
        return
    prefix = f"{_PREFIX}/left/"
    with contextlib.suppress(Exception):
        cluster.client.key_value_set(prefix + str(cluster.process), "")
        deadline = time.monotonic() + cluster.timeout
        while cluster.process == 0 and time.monotonic() < deadline:
            left = {int(k.rsplit("/", 1)[1]) for k, _ in cluster.client.key_value_dir_get(prefix)}
            if len(left | set(_gone_by_pid(cluster))) >= cluster.count:
                break
            time.sleep(0.05)


def _all_ended(cluster: _Cluster) -> bool:
    """Whether every process reaches its end within the timeout (through the store: a
    process that is gone would make JAX's shutdown barrier end in an abort)."""
    if cluster.client is None:
        return False
    prefix = f"{_PREFIX}/ended/"
    deadline = time.monotonic() + cluster.timeout
    with contextlib.suppress(Exception):
        cluster.client.key_value_set(prefix + str(cluster.process), "")
        while time.monotonic() < deadline:
            if len(cluster.client.key_value_dir_get(prefix)) == cluster.count:
                return True
            if _told_failures(cluster):
                return False
            time.sleep(0.05)
    return False


def _tell(cluster: _Cluster, message: str) -> None:
    if cluster.told or cluster.client is None:
        return
    cluster.told = True
    with contextlib.suppress(Exception):
        cluster.client.key_value_set(f"{_PREFIX}/failed/{cluster.process}", message[:2000])


def release_on_abort(lock_path: str) -> None:
    """Has ``lock_path`` removed if the runtime aborts this process (a lock that this
    process holds: the file names its pid)."""
    if _cluster is not None:
        _cluster.lock = lock_path
        _note(_cluster, lock=lock_path)


def training_started() -> None:
    """From here on, a failure of the cluster ends this process with exit code 3."""
    cluster = _cluster
    if cluster is not None:
        cluster.training = True
        peers = {}
        for i in range(cluster.count):
            with contextlib.suppress(Exception):  # every process told it before the agreements
                peers[str(i)] = json.loads(cluster.client.key_value_try_get(f"{_PREFIX}/pid/{i}"))
        peers.pop(str(cluster.process), None)
        _note(cluster, training=True, peers=peers, ending=_ending(cluster))


def step_began(step: int) -> None:
    """Training step ``step`` (counted from 1 over the whole run) begins in this process: the
    step watch (started at the first step) times it and tells the others."""
    cluster = _cluster
    if cluster is None or cluster.client is None:
        return
    if cluster.step_watch is None:
        cluster.step_watch = _StepWatch(cluster, step_timeout())
        cluster.step_watch.start()
    cluster.step_watch.began(step)


def step_ended() -> None:
    """The step that :func:`step_began` announced has ended in this process."""
    cluster = _cluster
    if cluster is not None and cluster.step_watch is not None:
        cluster.step_watch.ended()


class _StepWatch(threading.Thread):
    """Ends this process when one training step takes more than ``seconds`` (a process of
    the run is stuck): one line naming the processes that had not begun the step, the
    others told, the lock removed, exit code 3. Every second it tells the store the step
    this process has begun (``memnmt/step/N``), so that the others can name it."""

    def __init__(self, cluster: _Cluster, seconds: int):
        super().__init__(name="memnmt-step-watch", daemon=True)
        self.cluster, self.seconds = cluster, seconds
        self.step, self.since = 0, None  # the step begun; when it began (None: between steps)
        self.told_step = None

    def began(self, step: int) -> None:
        self.step, self.since = step, time.monotonic()

    def ended(self) -> None:
        self.since = None

    def run(self) -> None:
        while True:
            time.sleep(min(1.0, self.seconds / 4))
            step, since = self.step, self.since
            if step != self.told_step:
                with contextlib.suppress(Exception):  # the store is gone: the runtime says so
                    self.cluster.client.key_value_set(
                        f"{_PREFIX}/step/{self.cluster.process}", str(step), allow_overwrite=True
                    )
                    self.told_step = step
            if since is not None and time.monotonic() - since > self.seconds:
                self.stuck(step)

    def stuck(self, step: int) -> None:
        cluster = self.cluster
        begun = {}
        with contextlib.suppress(Exception):
            for key, value in cluster.client.key_value_dir_get(f"{_PREFIX}/step/"):
                begun[int(key.rsplit("/", 1)[1])] = int(value)
        behind = [i for i in range(cluster.count) if i != cluster.process and begun.get(i, 0) < step]
        if behind:
            what = " and ".join(f"process {i} (at step {begun.get(i, 0)})" for i in behind)
            what += f" had not begun training step {step} within {self.seconds} s: stuck"
        else:
            what = f"training step {step} did not finish within {self.seconds} s on any process: the run is stuck"
        message = f"{cluster.who()}: {what} (${STEP_TIMEOUT_VARIABLE} sets the bound){_ending(cluster)}"
        _tell(cluster, message)
        cluster.ok, cluster.exit_code = False, 3
        _note(cluster, ended=True)  # the watcher has nothing to add
        with contextlib.suppress(OSError):
            sys.stdout.flush()
            os.write(2, f"memnmt: error: {message}\n".encode("utf-8", "replace"))
        _remove_own_lock(cluster.lock)
        _left(cluster)
        os._exit(3)


def _remove_own_lock(path: str | None) -> None:
    """Removes the lock at ``path`` if this process holds it (the file names its pid)."""
    if not path:
        return
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        with open(path) as f:
            if int(json.load(f)["pid"]) == os.getpid():
                os.remove(path)


@contextlib.contextmanager
def failing_together(active: bool):
    """Around one training on several processes (``active``): an error in this process is
    told to the others (their message names it) and ends this process without JAX's
    shutdown, exit code 2, or 3 once training had started; an error of the runtime (a
    process gone) becomes a :class:`ClusterError` naming the process."""
    cluster = _cluster if active else None
    if cluster is None:
        yield
        return
    cluster.ok = False
    try:
        yield
    except KeyboardInterrupt:
        cluster.exit_code = 130
        _tell(cluster, "interrupted")
        raise
    except ClusterError as e:
        cluster.exit_code = 3 if cluster.training else 2
        _tell(cluster, str(e))
        raise
    except Exception as e:
        cluster.exit_code = 3 if cluster.training or isinstance(e, FloatingPointError) else 2
        if _from_runtime(e):  # a collective step failed: a process is gone
            _tell(cluster, f"a collective step failed in {cluster.who()}")
            raise ClusterError(f"{cluster.who()}: {_lost(cluster, wait=3.0)}{_ending(cluster)}") from None
        _tell(cluster, " ".join(str(e).split()) or type(e).__name__)
        raise
    cluster.ok = True


def _from_runtime(error: Exception) -> bool:
    text = str(error)
    return type(error).__name__ in ("JaxRuntimeError", "XlaRuntimeError") or "Gloo" in text or "gloo" in text


# ----- what the processes exchange before training ------------------------------------------------


def _exchange(name: str, value: str) -> list[str]:
    """Every process's ``value`` at its exchange ``name`` (a list in process order), through
    the coordination service's store. Waits while the others are on their way; stops
    with a :class:`ClusterError` when one says it failed, or is at another exchange."""
    cluster = _cluster
    if cluster is None or cluster.client is None:
        raise ConfigError("this process has not joined a cluster (keras_memnmt.training.hosts.join)")
    cluster.exchanges += 1
    prefix = f"{_PREFIX}/exchange/{cluster.exchanges}/"
    cluster.client.key_value_set(prefix + str(cluster.process), json.dumps([name, value]))
    while True:
        entries = dict(cluster.client.key_value_dir_get(prefix))
        if len(entries) == cluster.count:
            break
        told = _told_failures(cluster)
        if told:
            number, message = sorted(told.items())[0]
            raise ClusterError(f"{cluster.who()}: process {number} stopped before training ({message})")
        time.sleep(0.05)
    pairs = [json.loads(entries[prefix + str(i)]) for i in range(cluster.count)]
    names = [n for n, _ in pairs]
    if len(set(names)) > 1:
        shown = ", ".join(f"process {i} at {n!r}" for i, n in enumerate(names))
        raise ClusterError(f"{cluster.who()}: the processes of this run are out of step ({shown})")
    return [v for _, v in pairs]


def fingerprint(text: str) -> int:
    """A 63-bit number standing for ``text`` (compared across processes by :func:`agree`)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") >> 1


def agree(what: str, value, explain: str = "") -> None:
    """Raises :class:`ClusterError` in every process unless all pass the same ``value``
    (``what`` names it in the message, ``explain`` says what to do)."""
    values = _exchange(what, json.dumps(value))
    if len(set(values)) > 1:
        shown = ", ".join(f"process {i}: {v}" for i, v in enumerate(values))
        raise ClusterError(f"{_cluster.who()}: the processes of this run differ in {what} ({shown}){explain}")


def agree_on_run(settings: dict) -> None:
    """Raises :class:`ClusterError` in every process unless all run the same command:
    ``settings`` (the config's fields, ``--out``, ``--resume``, ...), and the process
    count that each was given."""
    mine = dict(settings, **{"$KERAS_DISTRIBUTION_NUM_PROCESSES": requested()})
    theirs = [json.loads(v) for v in _exchange("the run", json.dumps(mine, sort_keys=True, default=str))]
    names = sorted({k for s in theirs for k in s})
    differ = [k for k in names if len({json.dumps(s.get(k), sort_keys=True) for s in theirs}) > 1]
    if not differ:
        return

    def shown(value) -> str:
        text = json.dumps(value, sort_keys=True)
        return text if len(text) <= 60 else text[:57] + "..."

    parts = [
        f"{k} (" + ", ".join(f"process {i}: {shown(s.get(k))}" for i, s in enumerate(theirs)) + ")" for k in differ[:4]
    ]
    more = f" and {len(differ) - 4} more" if len(differ) > 4 else ""
    raise ClusterError(
        f"{_cluster.who()}: the processes of this run differ in {'; '.join(parts)}{more}: every "
        "process runs the same recipe with the same --set values, --out and "
        "$KERAS_DISTRIBUTION_NUM_PROCESSES"
    )


def barrier(name: str) -> None:
    """Returns once every process has reached the barrier ``name``."""
    _exchange(name, "")


def on_writer(writer: bool, step):
    """Runs ``step()`` in process 0 (``writer``) and tells every process whether it
    failed: process 0 raises its own error, the others a :class:`ClusterError` with its
    message. Returns ``step()``'s result in process 0, ``None`` in the others."""
    error = result = None
    if writer:
        try:
            result = step()
        except Exception as e:  # noqa: BLE001 - raised again below, after the others know
            error = e
    outcome = "" if error is None else " ".join(str(error).split()) or type(error).__name__
    outcomes = _exchange("process 0's step", outcome if writer else "")
    if error is not None:
        raise error
    if outcomes[0]:
        raise ClusterError(f"{_cluster.who()}: process 0 stopped before training ({outcomes[0]})")
    return result
