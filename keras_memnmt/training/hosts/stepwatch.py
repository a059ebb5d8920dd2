"""The step watch: a thread of each process that ends a training step which does not end in
time (a process of the run is alive but stuck), naming the processes that had not begun it."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from keras_memnmt.training.hosts.cluster import PREFIX, Cluster, current
from keras_memnmt.training.hosts.environment import STEP_TIMEOUT_VARIABLE, step_timeout
from keras_memnmt.training.hosts.failures import left, remove_own_lock


def step_began(step: int) -> None:
    """Training step ``step`` (counted from 1 over the whole run) begins in this process: the
    step watch (started at the first step) times it and tells the others."""
    cluster = current()
    if cluster is None or cluster.client is None:
        return
    if cluster.step_watch is None:
        cluster.step_watch = StepWatch(cluster, step_timeout())
        cluster.step_watch.start()
    cluster.step_watch.began(step)


def step_ended() -> None:
    """The step that :func:`step_began` announced has ended in this process."""
    cluster = current()
    if cluster is not None and cluster.step_watch is not None:
        cluster.step_watch.ended()


class StepWatch(threading.Thread):
    """Ends this process when one training step takes more than ``seconds`` (a process of
    the run is stuck): one line naming the processes that had not begun the step, the
    others told, the lock removed, exit code 3. Every second it tells the store the step
    this process has begun (``memnmt/step/N``), so that the others can name it."""

    def __init__(self, cluster: Cluster, seconds: int):
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
                        f"{PREFIX}/step/{self.cluster.process}", str(step), allow_overwrite=True
                    )
                    self.told_step = step
            if since is not None and time.monotonic() - since > self.seconds:
                self.stuck(step)

    def stuck(self, step: int) -> None:
        cluster = self.cluster
        begun = {}
        with contextlib.suppress(Exception):
            for key, value in cluster.client.key_value_dir_get(f"{PREFIX}/step/"):
                begun[int(key.rsplit("/", 1)[1])] = int(value)
        behind = [i for i in range(cluster.count) if i != cluster.process and begun.get(i, 0) < step]
        if behind:
            what = " and ".join(f"process {i} (at step {begun.get(i, 0)})" for i in behind)
            what += f" had not begun training step {step} within {self.seconds} s: stuck"
        else:
            what = f"training step {step} did not finish within {self.seconds} s on any process: the run is stuck"
        message = f"{cluster.who()}: {what} (${STEP_TIMEOUT_VARIABLE} sets the bound){cluster.ending()}"
        cluster.tell(message)
        cluster.ok, cluster.exit_code = False, 3
        cluster.note(ended=True)  # the watcher has nothing to add
        with contextlib.suppress(OSError):
            sys.stdout.flush()
            os.write(2, f"memnmt: error: {message}\n".encode("utf-8", "replace"))
        remove_own_lock(cluster.lock)
        left(cluster)
        os._exit(3)
