"""``memnmt translate``'s n-best lists, batch size and length bounds, on the shared tiny run:
the line formats, both scores (the model's log-probability agrees with ``memnmt score``;
the normalized score is the beam's own), and one-line errors naming the flag."""

from __future__ import annotations

import json

import numpy as np
import pytest

from keras_memnmt.cli import main

# The command line's handling is the same on every backend (one runs it, conftest.py);
# the scores' agreement with teacher forcing runs on all three.
CLI = pytest.mark.backend_independent

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


@CLI
def test_n_best_lists_in_moses_format_with_both_scores(shared_run, sources, capsys):
    lines = translate(capsys, shared_run, "--input", sources, "--beam", "4", "--n-best", "3")
    assert len(lines) == 3 * len(SOURCES)
    fields = [line.split(" ||| ") for line in lines]
    assert [int(f[0]) for f in fields] == [n for n in range(len(SOURCES)) for _ in range(3)]
    assert all(len(f) == 4 and f[2].startswith("log_prob= ") for f in fields)
    best = translate(capsys, shared_run, "--input", sources, "--beam", "4")
    assert [f[1] for f in fields[::3]] == best  # the first of each list is the translation
    for n in range(len(SOURCES)):
        normalized = [float(f[3]) for f in fields[3 * n: 3 * n + 3]]
        assert normalized == sorted(normalized, reverse=True)


@pytest.mark.backend
@pytest.mark.parametrize("beam", [1, 3])
def test_both_scores_are_teacher_forcings_of_the_searched_subwords(shared_run, beam):
    """``log_prob`` is the teacher-forced log-probability of the very subwords the search
    wrote (eos included where there is one; a hypothesis the bound cut has none), and
    ``score`` it over the GNMT penalty of ``|Y|``, at beam 1 as above it."""
    from keras_memnmt.data.vocab import EOS_ID, encode_sources
    from keras_memnmt.evaluation.translation import padded_rows
    from keras_memnmt.rundir.runs import load_run

    model, vocab, _ = load_run(shared_run)
    sources = encode_sources(vocab, [s for s in SOURCES if s])
    # Bounds of 2 subwords and of the default: hypotheses the bound cuts and (in a model
    # that writes eos early) hypotheses that end.
    for bound in ({"max_length_a": 0.0, "max_length_b": 2}, {}):
        out = model.generate(padded_rows(sources, None, 8, EOS_ID), beam_size=beam, n_best=beam, **bound)
        check_against_teacher_forcing(model, sources, np.asarray(out["tokens"]), np.asarray(out["scores"]), beam)


def check_against_teacher_forcing(model, sources, tokens, scores, beam):
    from keras_memnmt.data.vocab import EOS_ID
    from keras_memnmt.evaluation.scoring import score_ids
    from keras_memnmt.evaluation.translation import score_kinds

    normalized, log_prob = score_kinds(tokens, scores, beam)
    for b, source in enumerate(sources):
        for j in range(beam):
            row = tokens[b, j].tolist()
            ended = EOS_ID in row
            ids = row[: row.index(EOS_ID) + 1] if ended else [t for t in row if t]
            forced = score_ids(model, [source], [ids if ended else ids + [EOS_ID]])[0]
            expected = float(forced.sum() - (0 if ended else forced[-1]))
            assert log_prob[b, j] == pytest.approx(expected, abs=1e-3)
            penalty = ((5 + len(ids)) / 6) ** 0.6
            assert normalized[b, j] == pytest.approx(expected / penalty, abs=1e-3)


@CLI
def test_n_best_as_json_lines(shared_run, sources, capsys):
    lines = translate(capsys, shared_run, "--input", sources, "--beam", "3", "--n-best", "2",
                      "--n-best-format", "jsonl")
    rows = [json.loads(line) for line in lines]
    assert [(r["line"], r["rank"]) for r in rows] == [(n, r) for n in range(len(SOURCES)) for r in range(2)]
    assert all(set(r) == {"line", "rank", "translation", "log_prob", "score", "finished"} for r in rows)
    assert rows[4]["translation"] == "" and rows[4]["log_prob"] == 0.0  # the empty line


@CLI
def test_batch_size_and_the_length_bound(shared_run, sources, capsys):
    default = translate(capsys, shared_run, "--input", sources, "--beam", "2")
    assert translate(capsys, shared_run, "--input", sources, "--beam", "2", "--batch-size", "1") == default
    short = translate(capsys, shared_run, "--input", sources, "--beam", "1", "--max-length", "3")
    assert all(len(line.split()) <= 3 for line in short)  # 3 subwords at most, eos included
    assert sum(map(len, short)) < sum(map(len, translate(capsys, shared_run, "--input", sources, "--beam", "1")))
    relative = translate(capsys, shared_run, "--input", sources, "--beam", "1", "--max-length-a", "0",
                         "--max-length-b", "3")
    assert relative == short


@CLI
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
