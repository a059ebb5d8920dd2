"""``memnmt serve``: TensorFlow Serving's REST protocol over a run and over an export, bad
input, dynamic batching, a clean stop, and the page in a real browser."""

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from keras_memnmt.cli import main

# The protocol and the server: the same on every backend (CI runs it on one, conftest.py).
pytestmark = pytest.mark.backend_independent

SENTENCES = ["the dog runs", "a big green fish sees the cars", "", "the cat"]


def client_of(members, name="m", **limits):
    from starlette.testclient import TestClient

    from keras_memnmt.serving.app import create_app
    from keras_memnmt.serving.translators import load_translator

    return TestClient(create_app(load_translator([(m, None) for m in members]), name, **limits))


@pytest.fixture(scope="module")
def run_client(shared_run):
    with client_of([shared_run], max_body=4096) as client:
        yield client


class FakeTranslator:
    """A translator without a model, for what the app does around it: each item's n-best
    list is ``"sentence|prefix|constraints"`` (its fields as the app read them) with
    ``scores``, one entry for ``translate``; it records the pairs it drew pictures of."""

    kind = "fake"

    def __init__(self, scores=(-0.5,)):
        self.scores, self.drawn = list(scores), []

    def search(self, given, signature):
        return (("signature", signature),)

    def check_items(self, items, search):
        pass

    def translate(self, items, search, cancelled=lambda: False):
        n = len(self.scores) if dict(search)["signature"] == "translate_n_best" else 1
        return [[("|".join(item), score) for score in self.scores[:n]] for item in items]

    def source_lengths(self, sentences):
        return None

    def pictures(self, source, translation):
        self.drawn.append((source, translation))
        return [{"model": "Fake", "panels": ["attention"], "png": "data:image/png;base64,"}]

    def describe(self):
        return {"kind": self.kind, "options": [], "pictures": True}


def fake_client(translator):
    from starlette.testclient import TestClient

    from keras_memnmt.serving.app import create_app

    return TestClient(create_app(translator, "m"))


def b64(text: str) -> dict:
    import base64

    return {"b64": base64.b64encode(text.encode("utf-8")).decode("ascii")}


def memnmt_translate(run, sentences, beam):
    from keras_memnmt.evaluation.translation import translate
    from keras_memnmt.rundir.runs import load_run

    model, vocab, _ = load_run(run)
    return translate(model, vocab, sentences, beam_size=beam, progress=False)


def test_predict_answers_as_memnmt_translate_in_both_formats(run_client, shared_run):
    expected = memnmt_translate(shared_run, SENTENCES, beam=5)
    rows = run_client.post("/v1/models/m:predict", json={"instances": SENTENCES})
    assert rows.status_code == 200
    assert [p["translation"] for p in rows.json()["predictions"]] == expected
    assert rows.json()["predictions"][2] == {"translation": "", "score": 0.0, "log_prob": 0.0}
    named = run_client.post(
        "/v1/models/m/versions/1:predict", json={"instances": [{"sentences": s} for s in SENTENCES]}
    )
    assert named.json() == rows.json()
    columns = run_client.post("/v1/models/m:predict", json={"inputs": {"sentences": SENTENCES}})
    assert columns.json()["outputs"]["translation"] == expected
    greedy = run_client.post("/v1/models/m:predict", json={"inputs": SENTENCES, "options": {"beam": 1}})
    assert greedy.json()["outputs"]["translation"] == memnmt_translate(shared_run, SENTENCES, beam=1)
    # Both kinds of score under their own names at every beam: the normalized one is the
    # log-probability over the GNMT penalty of the hypothesis' length, at beam 1 as at 5.
    for outputs in (greedy.json()["outputs"], columns.json()["outputs"]):
        for score, log_prob in zip(outputs["score"], outputs["log_prob"]):
            assert log_prob <= score <= 0 and (score == log_prob == 0 or score > log_prob)
    n_best = run_client.post(
        "/v1/models/m:predict",
        json={"signature_name": "translate_n_best", "instances": SENTENCES[:2], "options": {"beam": 3, "n_best": 2}},
    )
    first = n_best.json()["predictions"][0]
    assert len(first["translations"]) == 2 and first["scores"][0] >= first["scores"][1]
    assert run_client.post("/v1/models/m:predict", json={"instances": []}).json() == {"predictions": []}


def test_instances_take_a_prefix_and_constraints(run_client):
    instances = [
        {"sentences": "the dog runs", "prefix": "le hundo"},
        {"sentences": "a big green fish sees the cars", "constraints": ["grande", "le"]},
        "the cat",
    ]
    reply = run_client.post("/v1/models/m:predict", json={"instances": instances, "options": {"beam": 3}})
    first, second, third = (p["translation"] for p in reply.json()["predictions"])
    assert first.startswith("le hundo") and "grande" in second and "le" in second and third
    chosen = run_client.post("/v1/models/m:predict", json={"instances": ["the cat", "a dog"], "options": {"mbr": 3}})
    assert chosen.status_code == 200 and len(chosen.json()["predictions"]) == 2, chosen.text
    for instance, options, message in [
        ({"sentences": "a", "prefix": "漢字"}, {}, "instances[0]: prefix ('漢字') has"),
        ({"sentences": "a", "constraints": ["漢字"]}, {}, "instances[0]: constraints: '漢字'"),
        ({"sentences": "a", "constraints": ["le"]}, {"beam": 1}, "need beam search"),
        (
            {"sentences": "a", "constraints": ["le"]},
            {"mbr": 4},
            "instances[0]: constraints needs beam search: options.beam 2 or more, not the mbr",
        ),
        ({"sentences": "a", "constraints": "le"}, {}, "expected a list of phrases"),
    ]:
        reply = run_client.post("/v1/models/m:predict", json={"instances": ["b", instance], "options": options})
        assert reply.status_code == 400 and message in reply.json()["error"].replace("instances[1]", "instances[0]")


def test_strings_may_be_given_as_b64_in_both_formats(run_client):
    """TensorFlow Serving's ``{"b64": "..."}`` for a string: a sentence, a prefix, a
    constraint, in the row format (bare or named) and the columnar one."""
    with fake_client(FakeTranslator()) as client:
        rows = client.post(
            "/v1/models/m:predict",
            json={
                "instances": [
                    b64("der Hund läuft"),
                    {"sentences": b64("a cat"), "prefix": b64("le"), "constraints": [b64("ö"), "x"]},
                    "plain",
                ]
            },
        ).json()["predictions"]
        assert [p["translation"] for p in rows] == ["der Hund läuft||", "a cat|le|ö\tx", "plain||"]
        for inputs in ([b64("a cat"), "plain"], {"sentences": [b64("a cat"), "plain"]}):
            columns = client.post("/v1/models/m:predict", json={"inputs": inputs}).json()["outputs"]
            assert columns["translation"] == ["a cat||", "plain||"]
    plain = run_client.post("/v1/models/m:predict", json={"instances": ["the dog runs"]}).json()
    encoded = run_client.post("/v1/models/m:predict", json={"instances": [b64("the dog runs")]}).json()
    assert encoded == plain


def test_status_metadata_and_the_models_served(run_client):
    assert run_client.get("/v1/models/m").json()["model_version_status"][0]["state"] == "AVAILABLE"
    signatures = run_client.get("/v1/models/m/metadata").json()["metadata"]["signature_def"]["signature_def"]
    assert set(signatures) == {"translate", "translate_n_best", "serving_default"}
    assert set(signatures["translate"]["outputs"]) == {"translation", "score"}
    (model,) = run_client.get("/v1/models").json()["models"]
    assert model["name"] == "m" and model["kind"] == "run" and "beam" in model["options"]


@pytest.mark.parametrize(
    "request_kwargs, status, message",
    [
        ({"content": b"{not json"}, 400, "the body is not JSON"),
        ({"content": b'{"instances": ["\xff\xfe"]}'}, 400, "the body is not UTF-8 (byte 16)"),
        ({"json": ["a"]}, 400, 'a JSON object with "instances" or "inputs"'),
        ({"json": {"instances": "a dog"}}, 400, "instances: expected a list of sentences"),
        ({"json": {"instances": ["a", 3]}}, 400, "instances[1]: expected a string, got 3"),
        ({"json": {"instances": [{"text": "a"}]}}, 400, "instances[0]: expected a string or"),
        ({"json": {"instances": [{"sentences": "a", "prefix": 3}]}}, 400, "instances[0].prefix: expected a string"),
        ({"json": {"instances": ["a", {"b64": "bm90 IGI2NA=="}]}}, 400, "instances[1].b64: not base64"),
        ({"json": {"instances": [{"b64": "YQ"}]}}, 400, "instances[0].b64: not base64"),  # no padding
        ({"json": {"instances": [{"b64": "w6k="}, {"b64": "/w=="}]}}, 400, "instances[1].b64: its bytes are not UTF-8"),
        ({"json": {"instances": [{"b64": "7aCA"}]}}, 400, "instances[0].b64: its bytes are not UTF-8"),  # a surrogate
        ({"json": {"instances": [{"b64": 3}]}}, 400, "instances[0].b64: expected a base64 string"),
        (
            {"json": {"instances": [{"sentences": "a", "prefix": {"b64": "/w=="}}]}},
            400,
            "instances[0].prefix.b64: its bytes are not UTF-8",
        ),
        (
            {"json": {"instances": [{"sentences": "a", "constraints": ["b", {"b64": "é"}]}]}},
            400,
            "instances[0].constraints[1].b64: not base64",
        ),
        ({"json": {"inputs": {"sentences": ["a", {"b64": "/w=="}]}}}, 400, "inputs[1].b64: its bytes are not UTF-8"),
        ({"json": {"instances": [{"b64": "YQ==", "x": 1}]}}, 400, "instances[0]: expected a string or"),
        ({"json": {"instances": ["a"], "inputs": ["a"]}}, 400, "give exactly one of"),
        ({"json": {"inputs": {"x": ["a"]}}}, 400, "inputs: expected"),
        ({"json": {"instances": ["a"], "extra": 1}}, 400, "unknown field(s) extra"),
        ({"json": {"instances": ["a"], "signature_name": "nope"}}, 400, 'signature_name "nope"'),
        (
            {"json": {"instances": ["a"], "options": {"beam": 0}}},
            400,
            "options.beam must be an integer from 1 to 64, got 0",
        ),
        ({"json": {"instances": ["a"], "options": {"beam": 2, "n_best": 3}}}, 400, "options.n_best 3 is more than"),
        ({"json": {"instances": ["a"], "options": {"speed": 1}}}, 400, "options: unknown speed"),
        (
            {"json": {"instances": ["a"], "options": {"sampling": "top:3"}}},
            400,
            "options.sampling 'top:3': expected full",
        ),
        ({"json": {"instances": ["a " * 3000]}}, 413, "more than this server takes (4096"),
    ],
)
def test_bad_requests_get_a_json_error_and_a_status(run_client, request_kwargs, status, message):
    reply = run_client.post("/v1/models/m:predict", **request_kwargs)
    assert reply.status_code == status and message in reply.json()["error"], reply.text
    assert set(reply.json()) == {"error"}
    assert run_client.get("/v1/models/m").status_code == 200  # the server goes on


def test_unknown_models_paths_and_methods(run_client):
    for path, method, status, message in [
        ("/v1/models/other:predict", "post", 404, 'no model named "other"'),
        ("/v1/models/other", "get", 404, 'no model named "other"'),
        ("/v1/models/m/versions/2:predict", "post", 404, "version 1 only"),
        ("/etc/passwd", "get", 404, "no such path: /etc/passwd"),
        ("/v1/models/m:predict", "get", 405, "GET is not allowed"),
    ]:
        reply = getattr(run_client, method)(path, **({"json": {"instances": ["a"]}} if method == "post" else {}))
        assert reply.status_code == status and message in reply.json()["error"], (path, reply.text)


def test_a_long_sentence_is_truncated_with_a_warning(shared_run):
    from keras_memnmt.data import MAX_INPUT_TOKENS

    with client_of([shared_run]) as client:
        long = " ".join(["hundo"] * 5000)
        reply = client.post("/v1/models/m:predict", json={"instances": ["the dog", long]})
    assert reply.status_code == 200
    (warning,) = reply.json()["warnings"]
    assert warning.startswith("instances[1] has ") and f"its first {MAX_INPUT_TOKENS} were translated" in warning
    assert len(reply.json()["predictions"]) == 2


def test_the_served_export_answers_as_its_signature_in_python(export_dir):
    """The same request body, to `memnmt serve` of the export and to the SavedModel's
    signatures called in Python (what TensorFlow Serving runs)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    loaded = tf.saved_model.load(export_dir)
    with client_of([export_dir]) as client:
        for signature, outputs in (
            ("translate", ("translation", "score")),
            ("translate_n_best", ("translations", "scores")),
        ):
            body = {"signature_name": signature, "instances": SENTENCES}
            served = client.post("/v1/models/m:predict", json=body).json()["predictions"]
            direct = loaded.signatures[signature](sentences=tf.constant(SENTENCES))
            texts, scores = direct[outputs[0]].numpy(), direct[outputs[1]].numpy()
            for row, prediction in enumerate(served):
                want = texts[row].decode() if texts.ndim == 1 else [t.decode() for t in texts[row]]
                assert prediction[outputs[0]] == want
                assert prediction[outputs[1]] == pytest.approx(scores[row].tolist(), abs=1e-5)
        refused = client.post("/v1/models/m:predict", json={"instances": ["a"], "options": {"beam": 2}})
        assert refused.status_code == 400 and "fixed when it is exported" in refused.json()["error"]
        refused = client.post("/v1/models/m:predict", json={"instances": [{"sentences": "a", "prefix": "le"}]})
        assert refused.status_code == 400 and "an export takes no prefix" in refused.json()["error"]


def test_the_page_is_served_and_inspect_gives_pictures(run_client):
    page = run_client.get("/")
    assert page.status_code == 200 and "<textarea" in page.text and "http" not in page.text.split("<script>")[1]
    reply = run_client.post("/v1/models/m:inspect", json={"sentences": ["the dog runs", ""], "options": {"n_best": 2}})
    first, empty = reply.json()["results"]
    assert len(first["translations"]) == 2 and first["pictures"][0]["png"].startswith("data:image/png;base64,")
    assert "attention" in " ".join(first["pictures"][0]["panels"])
    assert empty["pictures"] == [] and empty["translations"][0]["translation"] == ""


def test_inspect_without_pictures_draws_none():
    """The page sends its "pictures" box: unchecked, :inspect answers the n-best lists and
    draws nothing."""
    translator = FakeTranslator(scores=(-0.5, -0.7))
    with fake_client(translator) as client:
        page = client.get("/").text
        assert "JSON.stringify({sentences, options, pictures})" in page
        body = {"sentences": ["the dog runs", "a cat"], "options": {}, "pictures": False}
        reply = client.post("/v1/models/m:inspect", json=body)
        assert reply.status_code == 200, reply.text
        assert [r["pictures"] for r in reply.json()["results"]] == [[], []]
        assert [len(r["translations"]) for r in reply.json()["results"]] == [2, 2] and translator.drawn == []
        drawn = client.post("/v1/models/m:inspect", json={**body, "pictures": True}).json()["results"]
        assert [len(r["pictures"]) for r in drawn] == [1, 1] and len(translator.drawn) == 2
        refused = client.post("/v1/models/m:inspect", json={**body, "pictures": "no"})
        assert refused.status_code == 400 and "pictures: expected true or false" in refused.json()["error"]


def test_non_finite_scores_are_answered_as_null():
    """JSON has no infinity: an n-best entry a tiny vocabulary leaves empty (score -inf)
    is answered with the score null, by :predict and :inspect."""
    with fake_client(FakeTranslator(scores=(float("-inf"), -0.5, float("nan")))) as client:
        best = client.post("/v1/models/m:predict", json={"instances": ["a"]})
        assert best.status_code == 200 and best.json() == {"predictions": [{"translation": "a||", "score": None}]}
        rows = client.post("/v1/models/m:predict", json={"instances": ["a"], "signature_name": "translate_n_best"})
        assert rows.status_code == 200 and rows.json()["predictions"][0]["scores"] == [None, -0.5, None]
        columns = client.post("/v1/models/m:predict", json={"inputs": ["a"], "signature_name": "translate_n_best"})
        assert columns.json()["outputs"]["scores"] == [[None, -0.5, None]]
        inspected = client.post("/v1/models/m:inspect", json={"sentences": ["a"], "pictures": False})
        assert [t["score"] for t in inspected.json()["results"][0]["translations"]] == [None, -0.5, None]


def titles_of_pictures(monkeypatch) -> list[str]:
    """The titles of the pictures drawn from now on (``keras_memnmt.pictures.plots.figure`` watched)."""
    from keras_memnmt.pictures import plots

    titles, drawn = [], plots.figure

    def figure(*args, **kwargs):
        fig = drawn(*args, **kwargs)
        titles.append(fig.get_suptitle())
        return fig

    monkeypatch.setattr(plots, "figure", figure)
    return titles


def test_the_pictures_say_what_they_were_forced_on(run_client, shared_run, monkeypatch):
    """The server's pictures are forced on the best translation it answered; `memnmt
    plot`'s on a reference, or on the model's own greedy translation without one."""
    from keras_memnmt.pictures.inspection import inspect_pair
    from keras_memnmt.pictures.plots import figure
    from keras_memnmt.rundir.runs import load_run

    titles = titles_of_pictures(monkeypatch)
    (result,) = run_client.post("/v1/models/m:inspect", json={"sentences": ["the dog runs"]}).json()["results"]
    assert result["pictures"] and len(titles) == 1
    assert "(forced on its best translation)" in titles[0] and "reference" not in titles[0]
    model, vocab, _ = load_run(shared_run)
    assert "(forced on the reference)" in figure(inspect_pair(model, vocab, "the dog runs", "le hundo")).get_suptitle()
    assert "(its own greedy translation)" in figure(inspect_pair(model, vocab, "the dog runs")).get_suptitle()


def test_an_ensemble_is_served_with_a_picture_per_member(shared_run, monkeypatch):
    titles = titles_of_pictures(monkeypatch)
    with client_of([shared_run, shared_run], name="pair") as client:
        (model,) = client.get("/v1/models").json()["models"]
        assert model["runs"] == [shared_run, shared_run]
        reply = client.post("/v1/models/pair:inspect", json={"sentences": ["the dog runs"]})
        (result,) = reply.json()["results"]
    assert [p["model"] for p in result["pictures"]] == ["RNNsearch (member 1)", "RNNsearch (member 2)"]
    assert len(titles) == 2 and all("(forced on the ensemble's best translation)" in t for t in titles)


def test_concurrent_requests_share_batches_and_a_full_queue_refuses_at_once():
    from keras_memnmt.serving.batching import Batcher
    from keras_memnmt.serving.translators import RequestError

    seen = []

    def work(key, sentences, cancelled):
        time.sleep(0.05)
        seen.append((key, list(sentences)))
        return [f"{key[0]}:{s}" for s in sentences]

    async def scenario():
        batcher = Batcher(work, max_batch=8, max_wait=0.02, max_queue=12)
        batcher.start()
        requests = [batcher.submit(("a",) if i % 3 else ("b",), [f"s{i}", f"t{i}"]) for i in range(6)]
        results = await asyncio.gather(*requests)
        with pytest.raises(RequestError, match=r"has 13 sentences, more than the queue holds \(12") as never:
            await batcher.submit(("a",), ["x"] * 13)  # can never fit: 413, not "try again"
        assert never.value.status == 413
        running = asyncio.ensure_future(batcher.submit(("a",), ["r"] * 8))
        await asyncio.sleep(0.02)  # its batch is being translated (work sleeps 0.05 s)
        queued = asyncio.gather(*(batcher.submit(("a",), [f"q{i}"] * 4) for i in range(3)))
        await asyncio.sleep(0)
        with pytest.raises(RequestError, match="busy: 12 sentences are waiting.*the queue holds 12") as busy:
            await batcher.submit(("a",), ["x"])
        assert busy.value.status == 503
        await asyncio.gather(running, queued)
        late = asyncio.ensure_future(batcher.submit(("a",), ["last"]))
        await asyncio.sleep(0)
        await batcher.close()  # what is queued is still translated
        with pytest.raises(RequestError, match="shutting down"):
            await batcher.submit(("a",), ["x"])
        return results, await late

    results, late = asyncio.run(scenario())
    assert results == [[f"{'a' if i % 3 else 'b'}:s{i}", f"{'a' if i % 3 else 'b'}:t{i}"] for i in range(6)]
    assert late == ["a:last"]
    assert len(seen) < 7 and all(len(s) <= 8 for _, s in seen)  # batches, none over max_batch
    assert all(len({k for k, _ in seen if k == key}) for key, _ in seen)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(port: int, process, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"memnmt serve exited: {process.stderr.read()}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
            return
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.5)
    raise AssertionError("memnmt serve did not answer in time")


@contextlib.contextmanager
def serving(run: str, *flags: str):
    """``memnmt serve --model RUN --name m FLAGS`` on a free port, up; killed after."""
    port = free_port()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [sys.executable, "-m", "keras_memnmt.cli", "serve", "--model", run, "--port", str(port), "--name", "m"]
    process = subprocess.Popen([*command, *flags], stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_until_up(port, process)
        yield port, process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture()
def served(shared_run):
    with serving(shared_run) as server:
        yield server


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_the_command_serves_and_stops_cleanly_on_a_signal(served, stop):
    port, process = served
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/models/m:predict",
        data=json.dumps({"instances": ["the dog runs"]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert json.loads(urllib.request.urlopen(request, timeout=60).read())["predictions"][0]["translation"]
    process.send_signal(stop)
    assert process.wait(timeout=60) == 0
    err = process.stderr.read()
    assert "Traceback" not in err and f"serving m (run) at http://127.0.0.1:{port}/" in err


@pytest.mark.slow
def test_the_log_has_no_tensorflow_warnings(served):
    """Requests of 1 to 9 sentences of growing widths (each a new trace of the search,
    which TensorFlow's logger would warn of, about 700 characters a time) leave no
    TensorFlow warning in the server's log."""
    port, process = served
    for n in range(1, 10):
        body = {"instances": [" ".join(["the dog runs"] * n)] * n}
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/models/m:predict",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        assert len(json.loads(urllib.request.urlopen(request, timeout=60).read())["predictions"]) == n
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    err = process.stderr.read()
    assert "stopped serving m" in err
    assert "retracing" not in err and "WARNING:tensorflow" not in err, err


@pytest.mark.slow
def test_a_request_in_flight_at_sigterm_is_finished(shared_run):
    """A request being translated when SIGTERM arrives gets its whole answer; then the
    process exits 0. The request is long on every backend (PyTorch's eager tiny model
    translates 48 sentences in under a second, 960 in about 4), and the grace and timeout leave it time."""
    import threading

    sentences = 960
    body = json.dumps({"instances": [f"the dog runs {i}" for i in range(sentences)], "options": {"beam": 4}}).encode()
    with serving(shared_run, "--grace", "600", "--timeout", "600") as (port, process):
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/models/m:predict", data=body, headers={"Content-Type": "application/json"}
        )
        answers = []
        thread = threading.Thread(
            target=lambda: answers.append(json.loads(urllib.request.urlopen(request, timeout=600).read()))
        )
        thread.start()
        time.sleep(1.0)  # sent and being translated (the sentences of an untrained model run to their limit)
        assert thread.is_alive()
        process.send_signal(signal.SIGTERM)
        thread.join(timeout=600)
        assert process.wait(timeout=600) == 0
    assert len(answers) == 1 and len(answers[0]["predictions"]) == sentences


def test_a_port_in_use_is_a_one_line_error(shared_run, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--model", shared_run, "--port", str(port)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"--port {port}: cannot listen there" in lines[0]


def chromium() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.mark.slow
@pytest.mark.skipif(
    chromium() is None,
    reason="no chromium and chromedriver here (Debian: apt-get install "
    "chromium chromium-driver); the HTTP tests above still run",
)
def test_the_page_in_a_browser_translates_and_draws_the_pictures(served):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    port, _ = served
    browser, driver_path = chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.set_page_load_timeout(60)
        driver.get(f"http://127.0.0.1:{port}/")
        WebDriverWait(driver, 60).until(lambda d: "model m" in d.find_element(By.ID, "status").text)
        driver.find_element(By.ID, "source").send_keys("the dog runs")
        driver.find_element(By.ID, "translate").click()
        WebDriverWait(driver, 120).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".result .translation"))
        text = driver.find_element(By.CSS_SELECTOR, ".result .translation").text
        assert text.strip() and driver.find_element(By.ID, "error").text == ""
        pictures = driver.find_elements(By.CSS_SELECTOR, "img.picture")
        assert pictures
        WebDriverWait(driver, 30).until(
            lambda d: all(
                d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", img)
                for img in pictures
            )
        )
        driver.find_element(By.ID, "pictures").click()  # unchecked: the page asks for none
        driver.find_element(By.ID, "translate").click()
        WebDriverWait(driver, 120).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".result .translation"))
        assert (
            not driver.find_elements(By.CSS_SELECTOR, "img.picture") and driver.find_element(By.ID, "error").text == ""
        )
    finally:
        driver.quit()
