"""``memnmt serve`` against hostile or careless clients: every request's work bounded before
it reaches the model, one request never failing another, a time limit per request, a
stop within ``--grace`` whatever the model is doing, and browsers of other origins kept
out. The server runs as a process on 127.0.0.1; every call has a timeout."""

import asyncio
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from keras_memnmt.cli import main

pytestmark = pytest.mark.backend_independent

ALLOWED = "http://allowed.example"
# 16 phrases of 3 subwords ("hundo" and "do" are one piece each in the shared run's
# vocabulary): beam 16 x (48 + 1) = 784 candidates, within the bound, and some seconds a batch.
HEAVY = {
    "instances": [{"sentences": f"the dog runs {i}", "constraints": ["hundo do hundo"] * 16} for i in range(64)],
    "options": {"beam": 16},
}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(run: str, *flags: str):
    port = free_port()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_memnmt.cli", "serve", "--model", run, "--name", "m", "--port", str(port), *flags],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"memnmt serve exited: {process.stderr.read()}")
        try:
            if call(port, "GET", "/v1/models", timeout=2)[0] == 200:
                return port, process
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise AssertionError("memnmt serve did not answer in time")


def call(port: int, method: str, path: str, body=None, headers=None, timeout: float = 60):
    """``(status, JSON or text, headers)`` of one request; ``body``: bytes, or JSON."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        reply = connection.getresponse()
        text = reply.read().decode()
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        return reply.status, value, dict(reply.getheaders())
    finally:
        connection.close()


def predict(port: int, body, **kwargs):
    return call(port, "POST", "/v1/models/m:predict", body, **kwargs)


@pytest.fixture(scope="module")
def server(shared_run):
    port, process = start(shared_run, "--allow-origin", ALLOWED)
    try:
        yield port
    finally:
        process.kill()
        process.wait()


@pytest.mark.slow
def test_a_prefix_or_constraint_over_its_bound_is_refused_before_the_model(server):
    for instance, options, message in [
        ({"sentences": "a", "prefix": " ".join(["hundo"] * 5000)}, {}, "more than the 200 a prefix may have"),
        ({"sentences": "a", "constraints": [" ".join(["hundo"] * 2000)]}, {}, "more than the 100 the phrases"),
        ({"sentences": "a", "constraints": ["hundo"] * 64}, {"beam": 64}, "= 4160 candidates per step"),
    ]:
        status, reply, _ = predict(server, {"instances": ["the dog", instance], "options": options}, timeout=30)
        assert status == 400 and reply["error"].startswith("instances[1]: ") and message in reply["error"], reply
    assert predict(server, {"instances": ["the dog"]})[0] == 200


@pytest.mark.slow
def test_a_request_over_the_time_limit_gets_504_and_the_server_goes_on(shared_run):
    port, process = start(shared_run, "--timeout", "4")
    try:
        status, reply, _ = predict(port, HEAVY, timeout=60)
        assert status == 504 and "not translated within 4 s (--timeout)" in reply["error"]
        # The rest of the abandoned request is dropped after the model batch that runs: a
        # request answered soon after (each try may meet that batch's end, 504 too).
        answered, deadline = None, time.monotonic() + 60
        while answered is None and time.monotonic() < deadline:
            status, reply, _ = predict(port, {"instances": ["the dog runs"]}, timeout=60)
            answered = reply if status == 200 else None
        assert answered and answered["predictions"][0]["translation"]
        (model,) = call(port, "GET", "/v1/models")[1]["models"]
        assert model["batching"]["sentences"] < len(HEAVY["instances"])  # not translated to its end
    finally:
        process.kill()
        process.wait()


@pytest.mark.slow
def test_a_bad_sentence_fails_its_own_request_only(server):
    surrogate = b'{"instances": ["the dog", "\\ud800"]}'  # JSON's escape of a lone surrogate
    status, reply, _ = predict(server, surrogate)
    assert status == 400 and reply["error"].startswith("instances[1]: not UTF-8 text (a lone surrogate, U+D800")
    status, reply, _ = predict(server, b'{"instances": [{"sentences": "a", "prefix": "le \\udfff"}]}')
    assert status == 400 and reply["error"].startswith("instances[0].prefix: not UTF-8 text")
    answers = {}

    def innocent(i):
        answers[i] = predict(server, {"instances": [f"the cat {i}"]})[0]

    threads = [threading.Thread(target=innocent, args=(i,)) for i in range(40)]
    for thread in threads:
        thread.start()
    assert predict(server, surrogate)[0] == 400
    for thread in threads:
        thread.join(timeout=120)
    assert answers == {i: 200 for i in range(40)}


@pytest.mark.slow
@pytest.mark.parametrize(
    "body, status, message",
    [
        (b"[" * 100_000 + b"]" * 100_000, 400, "the body's JSON is nested too deeply"),
        (b'{"instances": ["a"], "options": {"beam": ' + b"7" * 5000 + b"}}", 400, "the body's JSON has a value out of"),
        (
            json.dumps({"instances": ["a"], "signature_name": ["translate"]}).encode(),
            400,
            'signature_name ["translate"]',
        ),
        (json.dumps({"instances": ["a"] * 100_000}).encode(), 413, "has 100000 sentences, more than the queue holds"),
    ],
)
def test_malformed_values_of_any_kind_are_a_status_not_a_traceback(server, body, status, message):
    got, reply, _ = predict(server, body)
    assert got == status and message in reply["error"], reply


@pytest.mark.slow
def test_browsers_of_other_origins_and_other_host_names_are_refused(server):
    own = f"http://127.0.0.1:{server}"
    for headers, status in [
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": "null"}, 403),
        ({"Host": f"evil.example:{server}"}, 403),
        ({"Host": f"localhost:{server}"}, 200),
        ({"Origin": own}, 200),
        ({"Origin": ALLOWED}, 200),
        ({}, 200),
    ]:
        got, reply, answer_headers = predict(server, {"instances": ["the dog"]}, headers=headers)
        assert got == status, (headers, reply)
        if status == 403:
            assert "not allowed" in reply["error"] or "no name of this server" in reply["error"]
        if headers.get("Origin") == ALLOWED:
            assert answer_headers.get("access-control-allow-origin") == ALLOWED
    # A browser's preflight before its JSON POST: answered for --allow-origin, refused otherwise.
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    assert call(server, "OPTIONS", "/v1/models/m:predict", headers={"Origin": ALLOWED, **preflight})[0] == 200
    assert (
        call(server, "OPTIONS", "/v1/models/m:predict", headers={"Origin": "http://evil.example", **preflight})[0]
        == 403
    )


@pytest.mark.slow
def test_sigterm_ends_the_server_within_its_grace_whatever_the_model_is_doing(shared_run):
    port, process = start(shared_run, "--grace", "2", "--timeout", "600")
    try:
        answers = []
        thread = threading.Thread(target=lambda: answers.append(predict(port, HEAVY, timeout=120)[:2]))
        thread.start()
        time.sleep(4)  # its batches are being translated (about 20 s of work)
        assert thread.is_alive()
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert time.monotonic() - sent < 2 + 10
        thread.join(timeout=30)
        ((status, reply),) = answers
        assert status == 503 and "stopped before this request was translated" in reply["error"]
        # Whether a chunk was still running when the grace ran out depends on the
        # machine's load: either the model thread was abandoned or it had just stopped.
        last = process.stderr.read().strip().splitlines()[-1]
        assert last == "stopped serving m" or (last.startswith("stopped serving m;") and "was abandoned" in last)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_model_name_that_no_path_can_reach_is_refused(shared_run, capsys):
    assert main(["serve", "--model", shared_run, "--name", "a/b", "--port", str(free_port())]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "model name 'a/b'" in lines[0] and "--name" in lines[0]


def test_a_failed_batch_is_retried_request_by_request():
    """Requests batched together: the one whose sentence makes the model fail gets the
    error, the others their translations."""
    from keras_memnmt.serving.batching import Batcher

    calls = []

    def work(key, sentences, cancelled):
        calls.append(list(sentences))
        if "bad" in sentences:
            raise TypeError("the tokenizer cannot read it")
        return [s.upper() for s in sentences]

    async def scenario():
        batcher = Batcher(work, max_batch=16, max_wait=0.05)
        batcher.start()
        requests = [batcher.submit(("k",), [s]) for s in ("a", "b", "bad", "c")]
        results = await asyncio.gather(*requests, return_exceptions=True)
        await batcher.close()
        return results

    a, b, bad, c = asyncio.run(scenario())
    assert (a, b, c) == (["A"], ["B"], ["C"]) and isinstance(bad, TypeError)
    assert calls[0] == ["a", "b", "bad", "c"] and sorted(calls[1:]) == [["a"], ["b"], ["bad"], ["c"]]


def test_a_request_that_timed_out_leaves_the_queue_and_its_batch_stops_early():
    from keras_memnmt.serving.batching import Batcher
    from keras_memnmt.serving.translators import RequestError

    seen = []

    def work(key, sentences, cancelled):
        for s in sentences:  # a model batch per sentence; asks between them
            time.sleep(0.1)
            seen.append(s)
            if cancelled():
                raise RuntimeError("dropped")
        return sentences

    async def scenario():
        batcher = Batcher(work, max_batch=64, max_wait=0.0, timeout=0.25)
        batcher.start()
        with pytest.raises(RequestError, match="not translated within 0.25 s") as late:
            await batcher.submit(("k",), [f"s{i}" for i in range(20)])
        await asyncio.sleep(0.3)
        batcher.timeout = 5
        after = await batcher.submit(("k",), ["next"])
        await batcher.close()
        return late.value.status, after

    status, after = asyncio.run(scenario())
    assert status == 504 and after == ["next"]
    assert len(seen) < 6  # stopped a batch after the time limit, not at the end of its 20
