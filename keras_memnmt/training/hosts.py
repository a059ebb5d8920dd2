"""One run across several processes (hosts) on JAX's distributed runtime.

Every process runs the same ``memnmt train`` command with the same ``--out`` and
``--set distribution=data_parallel``; the environment tells each one the cluster, as
Keras documents for ``keras.distribution.initialize``:

- ``KERAS_DISTRIBUTION_JOB_ADDRESSES``: the coordinator's ``host:port`` (process 0's;
  a comma-separated list of every process's address is accepted too),
- ``KERAS_DISTRIBUTION_NUM_PROCESSES``: the number of processes,
- ``KERAS_DISTRIBUTION_PROCESS_ID``: this process's number, 0 to N - 1.

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
- what the processes must agree on (the vocabulary, the step a resume starts from) is
  compared across them (:func:`agree`), and a difference stops every process with the
  same message.

An error in one process before training ends the others at their next collective step
(JAX's coordination service stops a cluster whose member is gone).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys

from keras_memnmt.config import ConfigError

ENVIRONMENT = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
               "KERAS_DISTRIBUTION_PROCESS_ID")


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


def join(count: int) -> tuple[int, int]:
    """Joins the cluster of ``count`` processes that the environment names (before any
    JAX computation of this process); returns ``(this process's number, count)``."""
    import jax
    import keras

    for name in ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_PROCESS_ID"):
        if not os.environ.get(name, "").strip():
            raise ConfigError(f"${name} is not set: a run on {count} processes needs "
                              f"{', '.join('$' + n for n in ENVIRONMENT)} in every process "
                              "(docs/scaling.md, \"Several hosts\")")
    index = os.environ["KERAS_DISTRIBUTION_PROCESS_ID"].strip()
    if not index.isdigit() or int(index) >= count:
        raise ConfigError(f"$KERAS_DISTRIBUTION_PROCESS_ID={index!r}: expected 0 to {count - 1}")
    if jax.distributed.is_initialized():  # joined already (a second run in this process)
        return jax.process_index(), jax.process_count()
    # Collectives between CPU devices of several processes go through gloo (JAX's CPU
    # default has none); GPUs use NCCL whatever this says.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        keras.distribution.initialize()
    except RuntimeError as e:
        if "must be called before" not in str(e):
            raise
        raise ConfigError("this process ran JAX before joining its cluster: call "
                          "keras_memnmt.training.hosts.join_requested() first (memnmt train does)") from None
    return jax.process_index(), jax.process_count()


def _gather(value: int):
    import numpy as np
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(np.asarray(value, np.int64)))


def fingerprint(text: str) -> int:
    """A 63-bit number standing for ``text`` (compared across processes by :func:`agree`)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") >> 1


def agree(what: str, value: int, explain: str = "") -> None:
    """Raises :class:`ConfigError` in every process unless all pass the same ``value``
    (``what`` names it in the message, ``explain`` says what to do)."""
    values = [int(v) for v in _gather(value)]
    if len(set(values)) > 1:
        shown = ", ".join(f"process {i}: {v}" for i, v in enumerate(values))
        raise ConfigError(f"the processes of this run differ in {what} ({shown}){explain}")


def barrier(name: str) -> None:
    """Returns once every process has reached the barrier ``name``."""
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)


def on_writer(writer: bool, step):
    """Runs ``step()`` in process 0 (``writer``) and tells every process whether it
    failed: process 0 raises its own error, the others a :class:`ConfigError` saying so.
    Returns ``step()``'s result in process 0, ``None`` in the others."""
    error = result = None
    if writer:
        try:
            result = step()
        except Exception as e:  # noqa: BLE001 - raised again below, after the others know
            error = e
    failed = int(max(_gather(int(error is not None))))
    if error is not None:
        raise error
    if failed:
        raise ConfigError("process 0 stopped before training (its log says why)")
    return result
