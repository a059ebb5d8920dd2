"""What the environment says about the cluster: its variables, the process count they ask
for, and the two time limits (see :mod:`keras_memnmt.training.hosts`)."""

from __future__ import annotations

import os

from keras_memnmt.config import ConfigError

ENVIRONMENT = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES", "KERAS_DISTRIBUTION_PROCESS_ID")
TIMEOUT_VARIABLE = "MEMNMT_HOSTS_TIMEOUT"
DEFAULT_TIMEOUT = 60  # seconds; JAX's own defaults are 300 (joining) and 100 (heartbeats)
STEP_TIMEOUT_VARIABLE = "MEMNMT_HOSTS_STEP_TIMEOUT"
# Seconds; a step's compilation counts (a few seconds per batch shape on JAX's CPU backend,
# 40-80 s for RNNsearch on a GPU: docs/benchmarks.md).
DEFAULT_STEP_TIMEOUT = 300


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
