"""SavedModel export: a string-in, string-out translator that loads without this library.

Tiny untrained run directories (``keras_memnmt.testing.tiny_runs``) are exported with
the Python API (greedy) and with ``memnmt export`` (a beam-search ensemble), then
loaded in a fresh process that imports only ``tensorflow`` and ``tensorflow_text``;
its translations are compared with ``memnmt translate`` on the same inputs. Under JAX
and PyTorch the export itself runs in a ``KERAS_BACKEND=tensorflow`` subprocess.
"""

import json
import os
import re
import subprocess
import sys

import keras
import pytest

from keras_memnmt.cli import main
from keras_memnmt.export import ExportError, atomic_directory, export_translator

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

LONG = " ".join(["the big red cat sees a small dog that sleeps"] * 30)  # over 200 subword tokens
TEXTS = [
    "the big red cat sees a small dog",
    "",
    "   \t  ",
    "\u3000",  # whitespace only (ideographic space): empty, as str.strip leaves it
    "a dog that sleeps likes the fish",
    "the cat 中文 😀 ñø",  # characters never seen in training
    LONG,
    LONG + " the old man holds a ball",  # the same first 200 tokens as LONG
    "\u200b",  # not whitespace, but no subword token either: the source is eos alone
]
BAD_BYTES = [b"\xff\xfe the cat \xc3", b"the dog \xed\xa0\x80 sleeps", b"\x80"]  # invalid UTF-8
INPUTS = [t.encode("utf-8") for t in TEXTS] + BAD_BYTES
EMPTY = (1, 2, 3)  # the indices of TEXTS that are empty after stripping

# The consumer: nothing from this library, nor keras-hub.
CONSUMER = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

request = json.loads(sys.argv[1])
inputs = tf.constant([bytes.fromhex(h) for h in request["inputs"]], tf.string)
results = {}
for name, path in request["exports"].items():
    model = tf.saved_model.load(path)
    best = model.signatures["translate"](sentences=inputs)
    n_best = model.signatures["translate_n_best"](sentences=inputs)
    alone = [model.signatures["translate"](sentences=inputs[i:i + 1])["translation"][0]
             for i in range(len(request["inputs"]))]
    nothing = model.signatures["translate"](sentences=tf.constant([], tf.string))
    results[name] = {
        "translation": [t.decode("utf-8") for t in best["translation"].numpy()],
        "score": best["score"].numpy().tolist(),
        "translations": [[t.decode("utf-8") for t in row] for row in n_best["translations"].numpy()],
        "scores": n_best["scores"].numpy().tolist(),
        "alone": [t.numpy().decode("utf-8") for t in alone],
        "empty_batch": [list(nothing["translation"].shape), list(nothing["score"].shape)],
    }
results["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in ("keras_memnmt", "keras_hub"))
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def runs(shared_folder):
    from keras_memnmt.testing.tiny_runs import synthetic_vocab, write_tiny_run

    def build(root):
        vocab = synthetic_vocab()
        write_tiny_run(str(root / "a"), vocab, "rnnsearch", seed=1)
        write_tiny_run(str(root / "b"), vocab, "memdec", seed=2)
        write_tiny_run(str(root / "c"), vocab, "transformer", seed=3)

    root = shared_folder("export_runs", build)
    return {name: str(root / name) for name in "abc"}


@pytest.fixture(scope="module")
def exported(runs, shared_folder):
    """Two exports: run a, greedy, through the Python API; runs a + b + c (RNNsearch, MemDec and
    a Transformer), beam 3, through the CLI."""
    from keras_memnmt.rundir.runs import load_run

    def build(root):
        model, vocab, _ = load_run(runs["a"])
        export_translator(model, vocab, str(root / "greedy"), beam_size=1)
        assert (
            main(
                [
                    "export",
                    "--model",
                    runs["a"],
                    "--model",
                    runs["b"],
                    "--model",
                    runs["c"],
                    "--out",
                    str(root / "beam"),
                    "--beam",
                    "3",
                ]
            )
            == 0
        )

    root = shared_folder("exports", build)
    return {"greedy": str(root / "greedy"), "beam": str(root / "beam")}


@pytest.fixture(scope="module")
def consumed(exported, shared_folder):
    """What a fresh process that imports only tensorflow and tensorflow_text gets."""

    def build(root):
        request = {"inputs": [x.hex() for x in INPUTS], "exports": exported}
        env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
        proc = subprocess.run(
            [sys.executable, "-c", CONSUMER, json.dumps(request)], env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        (root / "consumed.json").write_text(proc.stdout.strip().splitlines()[-1])

    return json.loads((shared_folder("consumed", build) / "consumed.json").read_text())


def _memnmt_translate(tmp_path, members: list[str], beam: int, texts: list[str]) -> list[str]:
    source, target = tmp_path / f"in{beam}.txt", tmp_path / f"out{beam}.txt"
    source.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    models = [arg for run in members for arg in ("--model", run)]
    assert (
        main(["translate", *models, "--beam", str(beam), "--input", str(source), "--output", str(target), "--quiet"])
        == 0
    )
    return target.read_text(encoding="utf-8").split("\n")[:-1]


@pytest.mark.slow
def test_loads_without_the_library_and_matches_memnmt_translate(runs, consumed, tmp_path):
    assert consumed["modules"] == []
    # Invalid UTF-8 reads as Python's errors="replace" decoding of the same bytes.
    texts = TEXTS + [x.decode("utf-8", errors="replace") for x in BAD_BYTES]
    greedy = _memnmt_translate(tmp_path, [runs["a"]], 1, texts)
    assert consumed["greedy"]["translation"] == greedy
    beam = _memnmt_translate(tmp_path, [runs["a"], runs["b"], runs["c"]], 3, texts)
    assert consumed["beam"]["translation"] == beam
    for name, k in (("greedy", 1), ("beam", 3)):
        out = consumed[name]
        assert [len(row) for row in out["translations"]] == [k] * len(INPUTS)
        assert [row[0] for row in out["translations"]] == out["translation"]  # n-best starts with the best
        assert [row[0] for row in out["scores"]] == pytest.approx(out["score"])
        assert all(row == sorted(row, reverse=True) for row in out["scores"])


@pytest.mark.slow
def test_bad_inputs_have_defined_results(runs, consumed):
    from keras_memnmt.data import SubwordVocab

    assert len(SubwordVocab.load(os.path.join(runs["a"], "vocab")).source.encode([LONG])[0]) > 200
    for name in ("greedy", "beam"):
        out = consumed[name]
        for i in EMPTY:  # "", whitespace only
            assert out["translation"][i] == "" and out["score"][i] == 0.0
            assert set(out["translations"][i]) == {""} and set(out["scores"][i]) == {0.0}
        assert out["translation"][0] != ""
        # Truncated at 200 subword tokens: what follows them changes nothing.
        assert out["translation"][TEXTS.index(LONG)] == out["translation"][TEXTS.index(LONG) + 1]
        # A mixed batch translates each sentence as it would alone.
        assert out["alone"] == out["translation"]
        assert out["empty_batch"] == [[0], [0]]


@pytest.mark.slow
def test_saved_model_cli_shows_both_signatures(exported):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    command = [cli] if os.path.isfile(cli) else [sys.executable, "-m", "tensorflow.python.tools.saved_model_cli"]
    proc = subprocess.run([*command, "show", "--dir", exported["beam"], "--all"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    blocks = dict(re.findall(r"signature_def\['(\w+)'\]:(.*?)(?=signature_def\[|\Z)", proc.stdout, flags=re.S))
    expected = {
        "translate": {"translation": ("DT_STRING", "(-1)"), "score": ("DT_FLOAT", "(-1)")},
        "translate_n_best": {"translations": ("DT_STRING", "(-1, 3)"), "scores": ("DT_FLOAT", "(-1, 3)")},
    }
    for name, outputs in expected.items():
        block = blocks[name]
        assert re.search(r"inputs\['sentences'\] tensor_info:\s+dtype: DT_STRING\s+shape: \(-1\)", block), block
        for output, (dtype, shape) in outputs.items():
            pattern = rf"outputs\['{output}'\] tensor_info:\s+dtype: {dtype}\s+shape: {re.escape(shape)}"
            assert re.search(pattern, block), block
    assert "serving_default" in blocks


@pytest.mark.backend_independent
def test_cli_refuses_an_existing_out_before_loading(tmp_path, capsys):
    out = tmp_path / "exported"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["export", "--model", str(tmp_path / "no_such_run"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds no export" in err and "pass --overwrite" not in err  # --overwrite would refuse it too
    assert (out / "keep.txt").read_text() == "mine"
    assert main(["export", "--model", str(tmp_path), "--out", str(tmp_path / "x"), "--beam", "2", "--n-best", "3"]) == 2
    assert "--n-best 3 is more than --beam 2" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_overwrite_replaces_an_earlier_export(runs, tmp_path):
    out = tmp_path / "exported"
    (out / "variables").mkdir(parents=True)  # an earlier export (told by its metadata file)
    (out / "saved_model.pb").write_text("old")
    (out / "variables" / "old.index").write_text("old")
    (out / "assets.extra").mkdir()
    (out / "assets.extra" / "memnmt_export.json").write_text(json.dumps({"library": "keras_memnmt"}))
    assert (
        main(
            [
                "export",
                "--model",
                runs["a"],
                "--out",
                str(out),
                "--beam",
                "1",
                "--n-best",
                "1",
                "--max-length",
                "20",
                "--overwrite",
            ]
        )
        == 0
    )
    assert sorted(os.listdir(tmp_path)) == ["exported"]  # no partial or moved-aside folder left
    assert (out / "saved_model.pb").read_bytes() != b"old" and not (out / "variables" / "old.index").exists()
    with open(out / "assets.extra" / "memnmt_export.json") as f:
        info = json.load(f)
    assert (info["model"], info["beam_size"], info["n_best"], info["max_length"]) == ("RNNsearch", 1, 1, 20)


def test_a_model_without_a_search_is_refused(tmp_path):
    from keras_memnmt.testing.tiny_runs import synthetic_vocab

    model = keras.Sequential([keras.layers.Dense(2)])
    with pytest.raises(ExportError, match="no Generator search"):
        export_translator(model, synthetic_vocab(), str(tmp_path / "out"))
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_an_untraceable_model_fails_without_a_partial_export(tmp_path):
    """A search that needs a static batch size cannot be exported; nothing is left behind.

    (Under JAX and PyTorch the TensorFlow subprocess cannot even load this test-only
    class; either way the export fails with an ExportError and writes nothing.)
    """
    from keras_memnmt.models import RNNsearch
    from keras_memnmt.testing.tiny_runs import TINY_OPTIONS, synthetic_vocab

    class StaticBatchRNNsearch(RNNsearch):
        def encode(self, source_ids, training=False):
            int(source_ids.shape[0])  # None in a trace for any batch size
            return super().encode(source_ids, training=training)

    vocab = synthetic_vocab()
    model = StaticBatchRNNsearch(vocab.source.vocab_size, vocab.target.vocab_size, **TINY_OPTIONS["rnnsearch"])
    model.build_weights()
    (tmp_path / "exports").mkdir()
    out = tmp_path / "exports" / "static"
    with pytest.raises(ExportError) as info:
        export_translator(model, vocab, str(out), beam_size=2)
    if keras.backend.backend() == "tensorflow":
        assert "does not trace" in str(info.value) and "StaticBatchRNNsearch" in str(info.value)
    assert os.listdir(tmp_path / "exports") == []


@pytest.mark.backend_independent
def test_atomic_directory(tmp_path):
    out = tmp_path / "out"
    with atomic_directory(str(out)) as partial:
        assert os.path.basename(partial).startswith(".out.partial-")
        assert not out.exists()
        (tmp_path / partial / "a.txt").write_text("1")
    assert (out / "a.txt").read_text() == "1"
    with pytest.raises(FileExistsError, match="already exists"):
        with atomic_directory(str(out)):
            pass
    for interruption in (KeyboardInterrupt, SystemExit, RuntimeError):
        with pytest.raises(interruption):
            with atomic_directory(str(out), overwrite=True) as partial:
                (tmp_path / partial / "saved_model.pb").write_text("half")
                raise interruption()
        assert sorted(os.listdir(tmp_path)) == ["out"] and (out / "a.txt").read_text() == "1"
    with atomic_directory(str(out), overwrite=True) as partial:
        (tmp_path / partial / "b.txt").write_text("2")
    assert sorted(os.listdir(out)) == ["b.txt"] and sorted(os.listdir(tmp_path)) == ["out"]
