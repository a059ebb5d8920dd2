"""``memnmt score``: one line per given pair, in input order, as JSON lines or TSV."""

import json

import pytest

from keras_memnmt.cli import main
from keras_memnmt.evaluation.scoring import score_pairs
from keras_memnmt.rundir.runs import load_run

# Parsing, files and formats: the same on every backend (conftest.py).
pytestmark = pytest.mark.backend_independent

SOURCES = ["the dog runs", "", "a big green fish sees the cars", "the cat"]
TARGETS = ["le hundo kuri-a", "le hundo", "", "le kato"]


@pytest.fixture()
def pair_files(tmp_path):
    src, tgt = tmp_path / "in.en", tmp_path / "in.de"
    src.write_text("".join(s + "\n" for s in SOURCES), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for t in TARGETS), encoding="utf-8")
    return str(src), str(tgt)


def test_json_lines_in_input_order_equal_the_library(shared_run, pair_files, capsys):
    src, tgt = pair_files
    assert main(["score", "--model", shared_run, "--source", src, "--target", tgt, "--per-token"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    model, vocab, _ = load_run(shared_run)
    expected = score_pairs(model, vocab, SOURCES, TARGETS, per_token=True)
    assert [line["line"] for line in lines] == [1, 2, 3, 4]
    for got, want in zip(lines, expected):
        assert got["tokens"] == want["tokens"] and got["pieces"] == want["pieces"]
        if want["score"] is None:
            assert got["score"] is None  # the empty source line
        else:
            assert got["score"] == pytest.approx(want["score"], abs=1e-4) and got["score"] < 0


def test_tsv_to_a_file(shared_run, pair_files, tmp_path, capsys):
    src, tgt = pair_files
    out = tmp_path / "scores.tsv"
    assert (
        main(
            [
                "score",
                "--model",
                shared_run,
                "--model",
                shared_run,
                "--source",
                src,
                "--target",
                tgt,
                "--format",
                "tsv",
                "--output",
                str(out),
                "--batch-size",
                "1",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == ""
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row[0] for row in rows] == ["1", "2", "3", "4"] and all(len(row) == 3 for row in rows)
    assert rows[1][1:] == ["nan", "0"] and float(rows[0][1]) < 0 and rows[2][2] == "1"  # eos alone


@pytest.mark.parametrize(
    "case, message",
    [
        ("short target", "--target {tgt} has 3"),
        ("missing source", "file not found: {missing}"),
    ],
)
def test_bad_files_are_one_line_errors_before_the_model_loads(shared_run, pair_files, tmp_path, capsys, case, message):
    src, tgt = pair_files
    missing = str(tmp_path / "nope.en")
    if case == "short target":
        with open(tgt, "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in TARGETS[:3]))
    argv = [
        "score",
        "--model",
        str(tmp_path / "no-run"),
        "--source",
        missing if case == "missing source" else src,
        "--target",
        tgt,
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message.format(tgt=tgt, missing=missing) in err[0]
