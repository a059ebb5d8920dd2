"""Joining the cluster that the environment names, on JAX's distributed runtime."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sys

from keras_memnmt.config import ConfigError
from keras_memnmt.training.hosts.cluster import PREFIX, Cluster, set_current
from keras_memnmt.training.hosts.environment import ENVIRONMENT, requested, timeout
from keras_memnmt.training.hosts.failures import guard


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
    (its port in use) is a :class:`~keras_memnmt.training.hosts.ClusterError`; the process
    then leaves without JAX's shutdown (see :mod:`keras_memnmt.training.hosts`)."""
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
    cluster = Cluster(int(index), count, address, seconds)
    set_current(cluster)
    if cluster.process == 0 and not _port_free(address):  # JAX 0.10 crashes (SIGSEGV) on a port in use, at times
        raise cluster.not_joined(RuntimeError("Failed to start RPC server"))
    guard(cluster)
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
            set_current(None)
            raise ConfigError(
                "this process ran JAX before joining its cluster: call "
                "keras_memnmt.training.hosts.join_requested() first (memnmt train does)"
            ) from None
        raise cluster.not_joined(e) from None
    except Exception as e:  # noqa: BLE001 - the runtime's errors have no common type
        raise cluster.not_joined(e) from None
    from jax._src import distributed

    cluster.client, cluster.joining = distributed.global_state.client, None
    cluster.set_abort(True)
    cluster.note(joined=True, who=cluster.who(), process=cluster.process, address=address, timeout=seconds)
    with contextlib.suppress(Exception):  # for the messages about a process that is gone
        cluster.client.key_value_set(
            f"{PREFIX}/pid/{cluster.process}", json.dumps({"host": socket.gethostname(), "pid": os.getpid()})
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
