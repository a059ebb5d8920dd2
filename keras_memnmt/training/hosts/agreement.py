"""What the processes exchange before training, through the coordination service's store
(never a collective step): agreements on the command and the run, barriers, and process 0's
outcome of a step that it alone takes."""

from __future__ import annotations

import hashlib
import json
import time

from keras_memnmt.config import ConfigError
from keras_memnmt.training.hosts.cluster import PREFIX, Cluster, ClusterError, current
from keras_memnmt.training.hosts.environment import requested


def _joined() -> Cluster:
    cluster = current()
    if cluster is None or cluster.client is None:
        raise ConfigError("this process has not joined a cluster (keras_memnmt.training.hosts.join)")
    return cluster


def _exchange(cluster: Cluster, name: str, value: str) -> list[str]:
    """Every process's ``value`` at its exchange ``name`` (a list in process order), through
    the coordination service's store. Waits while the others are on their way; stops
    with a :class:`ClusterError` when one says it failed, or is at another exchange."""
    cluster.exchanges += 1
    prefix = f"{PREFIX}/exchange/{cluster.exchanges}/"
    cluster.client.key_value_set(prefix + str(cluster.process), json.dumps([name, value]))
    while True:
        entries = dict(cluster.client.key_value_dir_get(prefix))
        if len(entries) == cluster.count:
            break
        told = cluster.told_failures()
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
    cluster = _joined()
    values = _exchange(cluster, what, json.dumps(value))
    if len(set(values)) > 1:
        shown = ", ".join(f"process {i}: {v}" for i, v in enumerate(values))
        raise ClusterError(f"{cluster.who()}: the processes of this run differ in {what} ({shown}){explain}")


def agree_on_run(settings: dict) -> None:
    """Raises :class:`ClusterError` in every process unless all run the same command:
    ``settings`` (the config's fields, ``--out``, ``--resume``, ...), and the process
    count that each was given."""
    mine = dict(settings, **{"$KERAS_DISTRIBUTION_NUM_PROCESSES": requested()})
    cluster = _joined()
    theirs = [json.loads(v) for v in _exchange(cluster, "the run", json.dumps(mine, sort_keys=True, default=str))]
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
        f"{cluster.who()}: the processes of this run differ in {'; '.join(parts)}{more}: every "
        "process runs the same recipe with the same --set values, --out and "
        "$KERAS_DISTRIBUTION_NUM_PROCESSES"
    )


def barrier(name: str) -> None:
    """Returns once every process has reached the barrier ``name``."""
    _exchange(_joined(), name, "")


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
    cluster = _joined()
    outcomes = _exchange(cluster, "process 0's step", outcome if writer else "")
    if error is not None:
        raise error
    if outcomes[0]:
        raise ClusterError(f"{cluster.who()}: process 0 stopped before training ({outcomes[0]})")
    return result
