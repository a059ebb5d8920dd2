"""The Transformer's source attention on the command line: ``translate --alignments`` and
``--show-attention``, and ``memnmt plot``'s attention panel (a tiny untrained run)."""

import json

import pytest

from keras_memnmt.cli import main
from keras_memnmt.evaluation.alignment import parse_pharaoh
from keras_memnmt.testing.tiny_runs import synthetic_vocab, write_tiny_run

# Flags, files and what they hold: the same on every backend (the attention itself is
# checked per backend in keras_memnmt/models/transformer_test.py).
pytestmark = pytest.mark.backend_independent

LINES = ["the dog runs", "", "a big green fish sees the cars"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return write_tiny_run(str(tmp_path_factory.mktemp("tiny") / "transformer"), synthetic_vocab(), "transformer")


@pytest.fixture()
def input_file(tmp_path):
    path = tmp_path / "in.en"
    path.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    return str(path)


def translate(capsys, *argv) -> tuple[list[str], str]:
    assert main(["translate", *argv]) == 0
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err


def test_alignments_are_pharaoh_links_after_each_translation(run, input_file, capsys):
    hard, _ = translate(capsys, "--model", run, "--input", input_file, "--alignments", "--quiet")
    soft, _ = translate(capsys, "--model", run, "--input", input_file, "--alignments", "soft", "--quiet")
    plain, _ = translate(capsys, "--model", run, "--input", input_file, "--quiet")
    assert [line.split(" ||| ")[0] for line in hard] == plain == [line.split(" ||| ")[0] for line in soft]
    assert plain[1] == "" and plain[0]
    for line, source, out in zip(hard, LINES, plain):
        if not source:
            continue
        links = parse_pharaoh(line.split(" ||| ")[1])
        # One link per target word, to a word of the source.
        assert sorted(j for _, j in links) == list(range(len(out.split())))
        assert all(0 <= i < len(source.split()) for i, _ in links)
    rows = soft[0].split(" ||| ")[1].split()
    assert len(rows) == len(plain[0].split()) and all(len(r.split(",")) == len(LINES[0].split()) for r in rows)
    assert all(abs(sum(float(w) for w in r.split(",")) - 1.0) < 0.01 for r in rows)


def test_show_attention_keeps_the_translations(run, input_file, capsys):
    shown, err = translate(capsys, "--model", run, "--input", input_file, "--show-attention", "--quiet")
    plain, _ = translate(capsys, "--model", run, "--input", input_file, "--quiet")
    assert shown == plain and "no source attention" not in err and err.strip()


def test_plot_draws_the_source_attention(run, tmp_path, capsys):
    from keras_memnmt.pictures.inspection import inspect_pair
    from keras_memnmt.pictures.plots import figure
    from keras_memnmt.rundir.runs import load_run

    out = str(tmp_path / "transformer.png")
    assert main(["plot", "--model", run, "--source", LINES[2], "--out", out]) == 0
    assert "attention" in json.loads(capsys.readouterr().out)["panels"]
    model, vocab, _ = load_run(run)
    inspection = inspect_pair(model, vocab, LINES[2])
    weights = inspection.details["attention"]  # (T, Tx)
    assert weights.shape == (len(inspection.target_tokens), len(inspection.source_tokens))
    assert abs(weights.sum(-1) - 1.0).max() < 1e-5
    assert "not drawn" not in figure(inspection).get_suptitle()
