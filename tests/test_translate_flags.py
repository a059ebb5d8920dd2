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
        normalized = [float(f[3]) for f in fields[3 * n : 3 * n + 3]]
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
    lines = translate(
        capsys, shared_run, "--input", sources, "--beam", "3", "--n-best", "2", "--n-best-format", "jsonl"
    )
    rows = [json.loads(line) for line in lines]
    assert [(r["line"], r["rank"]) for r in rows] == [(n, r) for n in range(len(SOURCES)) for r in range(2)]
    assert all(set(r) == {"line", "rank", "translation", "log_prob", "score", "finished"} for r in rows)
    assert rows[4]["translation"] == "" and rows[4]["log_prob"] == 0.0  # the empty line


@CLI
def test_a_run_translates_with_its_recipes_length_penalty_unless_a_flag_is_given(shared_run, sources, capsys, tmp_path):
    """A run whose config says ``length_penalty="average"`` is searched with it (the
    n-best scores of the flag ``--length-penalty average`` on the shared run); ``--alpha`` or
    ``--length-penalty`` on the command line set the search instead."""
    import shutil

    run = tmp_path / "average"
    shutil.copytree(shared_run, run)
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    assert config["length_penalty"] == "gnmt"
    (run / "config.json").write_text(json.dumps({**config, "length_penalty": "average"}), encoding="utf-8")
    flags = ("--input", sources, "--beam", "3", "--n-best", "3")
    gnmt = translate(capsys, shared_run, *flags)
    average = translate(capsys, shared_run, *flags, "--length-penalty", "average")
    assert average != gnmt  # the scores differ, at least
    assert translate(capsys, str(run), *flags) == average
    assert translate(capsys, str(run), *flags, "--length-penalty", "gnmt") == gnmt
    assert translate(capsys, str(run), *flags, "--alpha", "0.6") == gnmt


@CLI
def test_batch_size_and_the_length_bound(shared_run, sources, capsys):
    default = translate(capsys, shared_run, "--input", sources, "--beam", "2")
    assert translate(capsys, shared_run, "--input", sources, "--beam", "2", "--batch-size", "1") == default
    short = translate(capsys, shared_run, "--input", sources, "--beam", "1", "--max-length", "3")
    assert all(len(line.split()) <= 3 for line in short)  # 3 subwords at most, eos included
    assert sum(map(len, short)) < sum(map(len, translate(capsys, shared_run, "--input", sources, "--beam", "1")))
    relative = translate(
        capsys, shared_run, "--input", sources, "--beam", "1", "--max-length-a", "0", "--max-length-b", "3"
    )
    assert relative == short


@CLI
@pytest.mark.parametrize(
    "flags, message",
    [
        (("--beam", "2", "--n-best", "3"), "--n-best 3 is more than --beam 2"),
        (("--n-best-format", "jsonl"), "--n-best-format"),
        (("--beam", "2", "--n-best", "2", "--alignments"), "not with --alignments"),
        (("--max-length", "5", "--max-length-b", "4"), "--max-length N"),
        (("--max-length-a", "-1"), "--max-length-a must be >= 0, got -1.0"),
        (("--mbr", "4", "--n-best", "2"), "--mbr outputs one translation per sentence; not with --n-best"),
        (("--mbr", "4", "--alignments"), "--alignments shows the search's best translation: not with the mbr mode"),
        (("--mbr-utility", "bleu"), "--mbr-utility sets how --mbr compares candidates; give --mbr N"),
        (("--mode", "greedy", "--beam", "4"), "the greedy mode keeps one hypothesis: not with --beam 4"),
    ],
)
def test_bad_flags_are_one_line_errors_naming_the_flag(shared_run, sources, capsys, flags, message):
    capsys.readouterr()
    code = main(["translate", "--model", shared_run, "--input", sources, "--quiet", *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) <= 2 and message in err[-1]


@CLI
@pytest.mark.parametrize(
    "flags, message",
    [
        (("--min-length", "-2"), "argument --min-length: must be an integer >= 0, got -2"),
        (("--no-repeat-ngram-size", "x"), "argument --no-repeat-ngram-size: expected an integer, got 'x'"),
        (("--max-tokens", "0"), "argument --max-tokens: must be an integer >= 1, got 0"),
        (("--mbr-utility", "ter"), "argument --mbr-utility: must be one of chrf, bleu, got 'ter'"),
    ],
)
def test_bad_numbers_and_choices_are_usage_errors_naming_the_flag(shared_run, sources, capsys, flags, message):
    capsys.readouterr()
    with pytest.raises(SystemExit) as caught:
        main(["translate", "--model", shared_run, "--input", sources, "--quiet", *flags])
    assert caught.value.code == 2 and message in capsys.readouterr().err


@CLI
@pytest.mark.parametrize("utility", ["chrf", "bleu"])
def test_mbr_picks_the_candidate_of_highest_expected_utility(shared_run, sources, capsys, utility):
    """``--mbr N`` outputs ``mbr_select``'s choice among the beam's N-best list, and with
    ``--sampling`` among the N samples ``--samples N`` draws with the same seed."""
    from keras_memnmt.decoding.mbr import mbr_select

    lists = [
        json.loads(line)
        for line in translate(
            capsys, shared_run, "--input", sources, "--beam", "4", "--n-best", "4", "--n-best-format", "jsonl"
        )
    ]
    candidates = [[r["translation"] for r in lists if r["line"] == n] for n in range(len(SOURCES))]
    expected = [c[mbr_select(c, utility)[0]] if SOURCES[n] else "" for n, c in enumerate(candidates)]
    assert translate(capsys, shared_run, "--input", sources, "--mbr", "4", "--mbr-utility", utility) == expected
    drawn = translate(capsys, shared_run, "--input", sources, "--sampling", "full", "--samples", "5", "--seed", "7")
    samples = [drawn[5 * n : 5 * n + 5] for n in range(len(SOURCES))]
    expected = [c[mbr_select(c, utility)[0]] if SOURCES[n] else "" for n, c in enumerate(samples)]
    assert (
        translate(
            capsys,
            shared_run,
            "--input",
            sources,
            "--mbr",
            "5",
            "--sampling",
            "full",
            "--seed",
            "7",
            "--mbr-utility",
            utility,
        )
        == expected
    )


@CLI
def test_the_search_limits_reach_the_search_and_max_tokens_cuts_batches(shared_run, sources, capsys, monkeypatch):
    from keras_memnmt.models.generation import Generator

    calls = []
    real = Generator.generate

    def spy(self, source_ids, **kwargs):
        calls.append((np.asarray(source_ids).shape, kwargs))
        return real(self, source_ids, **kwargs)

    monkeypatch.setattr(Generator, "generate", spy)
    translate(capsys, shared_run, "--input", sources, "--beam", "2", "--min-length", "4", "--no-repeat-ngram-size", "2")
    assert {(k["min_length"], k["no_repeat_ngram_size"], k["beam_size"]) for _, k in calls} == {(4, 2, 2)}
    default = translate(capsys, shared_run, "--input", sources, "--beam", "2")
    calls.clear()
    assert translate(capsys, shared_run, "--input", sources, "--beam", "2", "--max-tokens", "8") == default
    # No two sentences fit in 8 padded subwords: each is a batch of its own (a longer one too).
    assert [shape[0] for shape, _ in calls] == [1, 1, 1] and calls[0][0][1] == 8
    calls.clear()
    assert translate(capsys, shared_run, "--input", sources, "--beam", "2", "--max-tokens", "10000") == default
    assert [shape[0] for shape, _ in calls] == [4]  # three sentences, filled to a power of 2
