import json
import os
import subprocess

import pytest

from keras_memnmt.training.hosts import watcher

pytestmark = pytest.mark.backend_independent

ABORT = "F0101 coordination_service.cc] Terminating process because the coordination service has stopped\n"
JOINED = {"joined": True, "who": "process 0 of 3", "process": 0, "address": "10.0.0.1:1234", "timeout": 60}


def test_nothing_to_say_for_a_process_that_ended_or_was_killed():
    assert watcher.message({**JOINED, "ended": True}, ABORT, "here") is None
    assert watcher.message(JOINED, "I0101 an ordinary line\n", "here") is None  # no abort: killed


def test_a_cluster_that_did_not_form_gets_its_joining_line():
    assert watcher.message({"joining": "process 1 of 2: the cluster did not form"}, ABORT, "here") == (
        "process 1 of 2: the cluster did not form"
    )


def test_a_peer_whose_process_ended_on_this_host_is_named_first():
    notes = {
        **JOINED,
        "peers": {"1": {"host": "here", "pid": 11}, "2": {"host": "there", "pid": 22}},
        "ending": "; resume it",
    }
    log = ABORT + "Task 2 heartbeat timeout\n"
    dead = {11, 22}  # 22 runs on another host: its pid says nothing here
    line = watcher.message(notes, log, "here", alive=lambda pid: pid not in dead)
    assert line == "process 0 of 3: process 1 is gone (its process ended); resume it"
    line = watcher.message(notes, log, "here", alive=lambda pid: True)
    assert line == "process 0 of 3: process 2 stopped answering (no heartbeat for 60 s); resume it"


def test_the_coordinator_gone_and_an_unknown_cause():
    other = {**JOINED, "who": "process 1 of 3", "process": 1}
    assert watcher.message(other, ABORT + "UNAVAILABLE: Socket closed\n", "here") == (
        "process 1 of 3: process 0, the coordinator (10.0.0.1:1234), is gone"
    )
    assert watcher.message(JOINED, ABORT + "UNAVAILABLE: Socket closed\n", "here") == (
        "process 0 of 3: another process of this run stopped or cannot be reached"
    )


def test_silent_processes_reads_both_forms_of_the_runtime_log():
    log = "Task 3 heartbeat timeout\nstopped sending heartbeats):\n  1\nTask 3 heartbeat timeout\n"
    assert watcher.silent_processes(log) == [1, 3]


def test_the_watcher_program_speaks_for_an_aborted_process_and_removes_its_lock(tmp_path):
    # As a process of its own, started as failures.guard starts it: the standard library alone.
    log, lock = tmp_path / "native.log", tmp_path / ".lock"
    log.write_text(ABORT + "Task 1 heartbeat timeout\n")
    lock.write_text(json.dumps({"pid": 4242}))
    notes = [{"joining": "unused"}, JOINED, {"lock": str(lock)}, {"training": True, "ending": "; resume it"}]
    done = subprocess.run(
        watcher.arguments(str(log), 4242, "here"),
        input="".join(json.dumps(n) + "\n" for n in notes),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (
        done.stderr == "memnmt: error: process 0 of 3: process 1 stopped answering (no heartbeat for 60 s); resume it\n"
    )
    assert not lock.exists() and not log.exists()


def test_the_watcher_program_says_nothing_for_a_process_that_ended_and_keeps_other_locks(tmp_path):
    log, lock = tmp_path / "native.log", tmp_path / ".lock"
    log.write_text(ABORT)
    lock.write_text(json.dumps({"pid": 1}))
    ended = json.dumps({**JOINED, "lock": str(lock), "ended": True}) + "\n"
    done = subprocess.run(watcher.arguments(str(log), 4242, "here"), input=ended, capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")
    assert lock.exists() and not log.exists()
    watcher.remove_lock(str(lock), 4242)  # not its pid: kept
    assert lock.exists()
    watcher.remove_lock(str(lock), 1)
    assert not os.path.exists(lock)
