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

How a failure ends (:func:`join` sets it up: :mod:`.failures`): every process stops within about
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
  process (:mod:`.watcher`) prints the line and removes the lock;
- a process that is alive (it answers the runtime's heartbeats) but stuck outside a
  collective step (a hung file system, a deadlock) leaves the others waiting in their next
  training step: a thread of each process (:class:`.stepwatch.StepWatch`) ends a step that has
  not finished within ``MEMNMT_HOSTS_STEP_TIMEOUT`` seconds, naming the processes that
  had not begun it (each tells the store the step it began), exit code 3. A stall
  inside a validation's or the test's translations (every process waits there, outside
  a training step) is not bounded by it.

The modules: :mod:`.environment` (the variables and limits), :mod:`.cluster` (this
process's :class:`~.cluster.Cluster` and what it tells the others), :mod:`.joining`,
:mod:`.failures` (how a process leaves), :mod:`.watcher`, :mod:`.stepwatch` and
:mod:`.agreement` (what the processes exchange before training). This package gathers the
names that the rest of the library uses.
"""

from keras_memnmt.training.hosts.agreement import agree, agree_on_run, barrier, fingerprint, on_writer
from keras_memnmt.training.hosts.cluster import ClusterError
from keras_memnmt.training.hosts.environment import (
    DEFAULT_STEP_TIMEOUT,
    DEFAULT_TIMEOUT,
    ENVIRONMENT,
    STEP_TIMEOUT_VARIABLE,
    TIMEOUT_VARIABLE,
    requested,
    step_timeout,
    timeout,
)
from keras_memnmt.training.hosts.failures import failing_together, release_on_abort, training_started
from keras_memnmt.training.hosts.joining import join, join_requested, native_output_to_stderr
from keras_memnmt.training.hosts.stepwatch import step_began, step_ended

__all__ = [
    "DEFAULT_STEP_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "ENVIRONMENT",
    "STEP_TIMEOUT_VARIABLE",
    "TIMEOUT_VARIABLE",
    "ClusterError",
    "agree",
    "agree_on_run",
    "barrier",
    "failing_together",
    "fingerprint",
    "join",
    "join_requested",
    "native_output_to_stderr",
    "on_writer",
    "release_on_abort",
    "requested",
    "step_began",
    "step_ended",
    "step_timeout",
    "timeout",
    "training_started",
]
