"""``memnmt translate``'s n-best lists, batch size and length bounds, on the shared tiny run:
the line formats, both scores (the model's log-probability agrees with ``memnmt score``;
the normalized score is the beam's own), and one-line errors naming the flag."""

from __future__ import annotations

import json

import numpy as np
import pytest

from keras_memnmt.cli import main

# What is checked here is the command line's handling; the searches' results on every
# backend are the decoding tests'.
pytestmark = pytest.mark.backend_independent

SOURCES = ["a man rides a bike .", "two dogs play in the snow .", "", "a woman sings ."]


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("inputs") / "src.txt"
    path.write_text("".join(line + "\n" for line in SOURCES), encoding="utf-8")
    return str(path)


def translate(capsys, run: str, *flags: str) -> list[str]:
    capsys.readouterr()
    assert main(["translate", "--model", run, "--quiet", *flags]) == 0
    return capsys.readouterr().out.splitlines()


def test_n_best_lists_in_moses_format_with_both_scores(shared_run, sources, capsys, tmp_path):
    from keras_memnmt.decoding.common import length_penalty

    lines = translate(capsys, shared_run, "--input", sources, "--beam", "4", "--n-best", "3")
    assert len(lines) == 3 * len(SOURCES)
    fields = [line.split(" ||| ") for line in lines]
    assert [int(f[0]) for f in fields] == [n for n in range(len(SOURCES)) for _ in range(3)]
    assert all(len(f) == 4 and f[2].startswith("log_prob= ") for f in fields)
    assert any("unfinished= 1" in f[2] for f in fields)  # the tiny run's outputs reach the bound
    best = translate(capsys, shared_run, "--input", sources, "--beam", "4")
    assert [f[1] for f in fields[::3]] == best  # the first of each list is the translation
    for n in range(len(SOURCES)):
        normalized = [float(f[3]) for f in fields[3 * n: 3 * n + 3]]
        assert normalized == sorted(normalized, reverse=True)
    # The log-probability is memnmt score's for the same text, less eos's term for a
    # hypothesis the bound cut; the normalized score is it over the GNMT penalty of |Y|.
    hyps = tmp_path / "hyps.txt"
    srcs = tmp_path / "srcs.txt"
    kept = [f for f in fields if f[1]]
    hyps.write_text("".join(f[1] + "\n" for f in kept), encoding="utf-8")
    srcs.write_text("".join(SOURCES[int(f[0])] + "\n" for f in kept), encoding="utf-8")
    capsys.readouterr()
    assert main(["score", "--model", shared_run, "--source", str(srcs), "--target", str(hyps), "--quiet",
                 "--per-token"]) == 0
    scored = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    agree = 0
    for f, entry in zip(kept, scored, strict=True):
        log_prob, normalized = float(f[2].split()[1]), float(f[3])
        finished = "unfinished" not in f[2]
        expected = entry["score"] - (0 if finished else entry["token_scores"][-1])
        pieces = entry["tokens"] - (0 if finished else 1)  # |Y|: eos counted where there is one
        penalty = float(np.asarray(length_penalty(np.array([pieces]), "gnmt", 0.6))[0])
        if abs(log_prob - expected) < 2e-3:
            agree += 1
            assert normalized == pytest.approx(log_prob / penalty, abs=2e-3)
    # A hypothesis the search spelled in subwords SentencePiece does not re-encode to is
    # scored on other subwords by memnmt score (3 of the 9 here: a barely trained model
    # spells long words in odd pieces).
    assert agree >= len(kept) // 2


def test_n_best_as_json_lines(shared_run, sources, capsys):
    lines = translate(capsys, shared_run, "--input", sources, "--beam", "3", "--n-best", "2",
                      "--n-best-format", "jsonl")
    rows = [json.loads(line) for line in lines]
    assert [(r["line"], r["rank"]) for r in rows] == [(n, r) for n in range(len(SOURCES)) for r in range(2)]
    assert all(set(r) == {"line", "rank", "translation", "log_prob", "score", "finished"} for r in rows)
    assert rows[4]["translation"] == "" and rows[4]["log_prob"] == 0.0  # the empty line


def test_batch_size_and_the_length_bound(shared_run, sources, capsys):
    default = translate(capsys, shared_run, "--input", sources, "--beam", "2")
    assert translate(capsys, shared_run, "--input", sources, "--beam", "2", "--batch-size", "1") == default
    short = translate(capsys, shared_run, "--input", sources, "--beam", "1", "--max-length", "3")
    assert all(len(line.split()) <= 3 for line in short)  # 3 subwords at most, eos included
    assert sum(map(len, short)) < sum(map(len, translate(capsys, shared_run, "--input", sources, "--beam", "1")))
    relative = translate(capsys, shared_run, "--input", sources, "--beam", "1", "--max-length-a", "0",
                         "--max-length-b", "3")
    assert relative == short


@pytest.mark.parametrize("flags, message", [
    (("--beam", "2", "--n-best", "3"), "--n-best 3 is more than --beam 2"),
    (("--n-best-format", "jsonl"), "--n-best-format"),
    (("--beam", "2", "--n-best", "2", "--alignments"), "not with --alignments"),
    (("--max-length", "5", "--max-length-b", "4"), "--max-length N"),
    (("--max-length-a", "-1"), "--max-length-a must be >= 0"),
])
def test_bad_flags_are_one_line_errors_naming_the_flag(shared_run, sources, capsys, flags, message):
    capsys.readouterr()
    code = main(["translate", "--model", shared_run, "--input", sources, "--quiet", *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) <= 2 and message in err[-1]
