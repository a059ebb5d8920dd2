"""docs/decoding.md's "Adding a mode" followed literally: its file is written out and imported
(its registration line runs), and the mode it adds is then offered by every front end:
``memnmt translate --mode``, the server's ``options.mode`` and ``Translator.translate(mode=)``,
each giving the shortest hypothesis of the beam's n-best list."""

from __future__ import annotations

import importlib.util
import json
import os
import re

import pytest

from keras_memnmt.cli import main

# Orchestration over the shared loop: the same on every backend (CI runs it on one).
pytestmark = pytest.mark.backend_independent

DOC = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "decoding.md")
SENTENCES = [
    "the big cat that sleeps sees a small dog",
    "a dog runs",
    "the fast young sad horse sees a fish",
    "the blue tree that runs watches the sad trees",
]
BEAM = 4


def doc_mode_file() -> tuple[str, str]:
    """The doc's mode file: (its name, its code)."""
    with open(DOC, encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)
    (code,) = [b for b in blocks if b.startswith("# my_modes.py")]
    return "my_modes.py", code


@pytest.fixture()
def added_mode(tmp_path, monkeypatch):
    from keras_memnmt.decoding import modes

    modes.mode_names()  # the library's modes first
    monkeypatch.setattr(modes, "_MODES", dict(modes._MODES))  # the doc's mode leaves with the test
    name, code = doc_mode_file()
    path = tmp_path / name
    path.write_text(code, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("my_modes", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert "shortest" in modes.mode_names()
    return "shortest"


def shortest_of_n_best(run, tmp_path, source) -> list[str]:
    """Each line's hypothesis with the fewest words in the beam's n-best list (the first of those)."""
    lists = tmp_path / "n_best.jsonl"
    assert (
        main(
            [
                "translate",
                "--model",
                run,
                "--beam",
                str(BEAM),
                "--n-best",
                str(BEAM),
                "--n-best-format",
                "jsonl",
                "--input",
                str(source),
                "--output",
                str(lists),
                "--quiet",
            ]
        )
        == 0
    )
    best: dict[int, str] = {}
    for line in lists.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        known = best.get(entry["line"])
        if known is None or len(entry["translation"].split()) < len(known.split()):
            best[entry["line"]] = entry["translation"]
    return [best[i] for i in range(len(SENTENCES))]


def test_a_mode_added_as_the_doc_says_is_offered_by_every_front_end(added_mode, shared_run, tmp_path):
    from starlette.testclient import TestClient

    from keras_memnmt import Translator
    from keras_memnmt.serving.app import create_app
    from keras_memnmt.serving.translators import load_translator

    source = tmp_path / "source.txt"
    source.write_text("".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    expected = shortest_of_n_best(shared_run, tmp_path, source)
    out = tmp_path / "out.txt"
    assert (
        main(
            [
                "translate",
                "--model",
                shared_run,
                "--mode",
                added_mode,
                "--beam",
                str(BEAM),
                "--input",
                str(source),
                "--output",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert out.read_text(encoding="utf-8").splitlines() == expected
    with TestClient(create_app(load_translator([(shared_run, None)]), "m")) as client:
        served = client.post(
            "/v1/models/m:predict", json={"instances": SENTENCES, "options": {"mode": added_mode, "beam": BEAM}}
        )
        bad = client.post("/v1/models/m:predict", json={"instances": SENTENCES, "options": {"mode": "longest"}})
    assert served.status_code == 200, served.text
    assert [p["translation"] for p in served.json()["predictions"]] == expected
    assert Translator(shared_run).translate(SENTENCES, mode=added_mode, beam=BEAM) == expected
    # An unknown mode is a one-line error naming the setting in each front end's spelling.
    with pytest.raises(SystemExit):  # argparse's usage error: "argument --mode: must be one of ..."
        main(["translate", "--model", shared_run, "--mode", "longest", "--input", str(source), "--quiet"])
    assert bad.status_code == 400 and bad.json()["error"].startswith("options.mode must be one of")
    assert "shortest" in bad.json()["error"]
