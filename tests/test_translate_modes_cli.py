"""``memnmt translate --prefix``, ``--sampling``, ``--temperature``, ``--seed``, ``--samples``."""

import pytest

from keras_memnmt.cli import main

# Flags, files and messages: the same on every backend (conftest.py).
pytestmark = pytest.mark.backend_independent

LINES = ["the dog runs", "", "a big green fish sees the cars"]


@pytest.fixture()
def input_file(tmp_path):
    path = tmp_path / "in.en"
    path.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    return str(path)


def translate(capsys, *argv) -> list[str]:
    assert main(["translate", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_samples_are_lines_of_their_own_and_the_seed_fixes_them(shared_run, input_file, capsys):
    argv = ["--model", shared_run, "--input", input_file, "--sampling", "topk:5", "--samples", "2", "--quiet"]
    first = translate(capsys, *argv, "--seed", "3")
    assert len(first) == 2 * len(LINES) and first[2:4] == ["", ""]  # an empty line's draws are empty
    assert translate(capsys, *argv, "--seed", "3") == first
    assert translate(capsys, *argv, "--seed", "4") != first
    tempered = translate(
        capsys,
        "--model",
        shared_run,
        "--input",
        input_file,
        "--sampling",
        "topp:0.9",
        "--temperature",
        "0.5",
        "--quiet",
    )
    assert len(tempered) == len(LINES)


def test_each_translation_starts_with_its_prefix(shared_run, input_file, tmp_path, capsys):
    prefixes = tmp_path / "prefix.de"
    prefixes.write_text("le hundo\nle\n\n", encoding="utf-8")
    for beam in ("1", "3"):
        out = translate(
            capsys, "--model", shared_run, "--input", input_file, "--prefix", str(prefixes), "--beam", beam, "--quiet"
        )
        assert len(out) == 3 and out[0].startswith("le hundo") and out[1] == ""


def test_alignments_follow_each_translation(shared_run, input_file, capsys):
    from keras_memnmt.evaluation.alignment import parse_pharaoh

    hard = translate(capsys, "--model", shared_run, "--input", input_file, "--alignments", "--quiet")
    soft = translate(capsys, "--model", shared_run, "--input", input_file, "--alignments", "soft", "--quiet")
    plain = translate(capsys, "--model", shared_run, "--input", input_file, "--quiet")
    assert [line.split(" ||| ")[0] for line in hard] == plain == [line.split(" ||| ")[0] for line in soft]
    for line, source, out in zip(hard, LINES, plain):
        links = parse_pharaoh(line.split(" ||| ")[1])
        # One link per target word, to a word of the source.
        assert sorted(j for _, j in links) == list(range(len(out.split())))
        assert all(0 <= i < len(source.split()) for i, _ in links)
    rows = soft[0].split(" ||| ")[1].split()
    assert len(rows) == len(plain[0].split()) and all(len(r.split(",")) == len(LINES[0].split()) for r in rows)


def test_each_translation_holds_its_constraints(shared_run, input_file, tmp_path, capsys):
    constraints = tmp_path / "constraints.de"
    constraints.write_text("hundo\tle\n\ngrande\n", encoding="utf-8")
    out = translate(
        capsys,
        "--model",
        shared_run,
        "--input",
        input_file,
        "--constraints",
        str(constraints),
        "--beam",
        "3",
        "--quiet",
    )
    assert len(out) == 3 and "hundo" in out[0] and "le" in out[0] and out[1] == "" and "grande" in out[2]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--seed", "4"], "--seed sets how --sampling draws"),
        (["--samples", "2"], "--samples sets how --sampling draws"),
        (["--sampling", "topk:5", "--beam", "3"], "does not combine with --beam 3"),
        (["--sampling", "top:3"], "--sampling 'top:3': expected full, topk:K"),
        (["--sampling", "full", "--temperature", "0"], "--temperature must be > 0"),
        (["--sampling", "full", "--samples", "2", "--show-attention"], "--show-attention needs one"),
        (["--alignments", "--show-attention"], "--alignments and --show-attention: choose one"),
        (["--prefix", "SHORT"], "has 1 lines but the input has 3"),
        (["--prefix", "UNSPELLABLE"], "prefix line 1 ('漢字') has a piece the target vocabulary cannot spell"),
        (["--constraints", "SHORT"], "SHORT has 1 lines but the input has 3"),
        (["--constraints", "UNSPELLABLE"], "constraints line 1: '漢字' has a piece the target vocabulary cannot spell"),
        (["--constraints", "MANY", "--beam", "2"], "constraints line 1 has 3 phrases, more than the beam (2)"),
        (["--constraints", "SHORT", "--beam", "1"], "--constraints needs beam search: --beam 2 or more (got --beam 1)"),
        (["--constraints", "SHORT", "--sampling", "full"], "--constraints needs beam search: --beam 2 or more, not"),
        (["--prefix", "LONG"], "prefix line 1 has 300 subwords, more than the 200 a prefix may have"),
        (["--constraints", "LONG"], "constraints line 1 has 300 subwords, more than the 100 the phrases"),
        (
            ["--constraints", "WIDE", "--beam", "64"],
            "constraints line 3: beam 64 x (64 subwords + 1) = 4160 candidates",
        ),
    ],
)
def test_bad_flags_are_one_line_errors(shared_run, input_file, tmp_path, capsys, argv, message):
    files = {
        "SHORT": "le\n",
        "UNSPELLABLE": "漢字\n\n\n",
        "MANY": "le\thundo\tgrande\n\n\n",
        "LONG": " ".join(["hundo"] * 300) + "\n\n\n",  # one subword each
        "WIDE": "\n\n" + "\t".join(["hundo"] * 64) + "\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    argv = [str(tmp_path / arg) if arg in files else arg for arg in argv]
    assert main(["translate", "--model", shared_run, "--input", input_file, *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and message in lines[0], captured.err


def test_a_line_over_the_bounds_is_refused_before_anything_is_translated(
    shared_run, input_file, tmp_path, capsys, monkeypatch
):
    """A constraint line over its bound on the last line, chunks of one line: refused
    before the first chunk is translated, and no output (nor its .partial) is made."""
    import keras_memnmt.evaluation.translation as inference

    wide = tmp_path / "wide.de"
    wide.write_text("\n\n" + "\t".join(["hundo"] * 64) + "\n", encoding="utf-8")
    searched = []
    monkeypatch.setattr(inference, "_translate_chunk", lambda *a, **k: searched.append(1) or [])
    out = tmp_path / "out.de"
    assert (
        main(
            [
                "translate",
                "--model",
                shared_run,
                "--input",
                input_file,
                "--constraints",
                str(wide),
                "--beam",
                "64",
                "--chunk-size",
                "1",
                "--output",
                str(out),
            ]
        )
        == 2
    )
    assert "candidates per step" in capsys.readouterr().err
    assert searched == [] and sorted(p.name for p in tmp_path.iterdir()) == ["in.en", "wide.de"]


def test_a_failed_translation_leaves_the_output_as_it_was_and_resume_finishes_it(
    shared_run, input_file, tmp_path, capsys, monkeypatch
):
    import keras_memnmt.evaluation.translation as inference

    whole = tmp_path / "whole.de"
    assert main(["translate", "--model", shared_run, "--input", input_file, "--output", str(whole), "--quiet"]) == 0
    out = tmp_path / "out.de"
    out.write_text("an earlier translation\n", encoding="utf-8")
    real = inference._translate_chunk
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("the disk went away")
        return real(*args, **kwargs)

    monkeypatch.setattr(inference, "_translate_chunk", failing)
    assert (
        main(
            [
                "translate",
                "--model",
                shared_run,
                "--input",
                input_file,
                "--output",
                str(out),
                "--chunk-size",
                "1",
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "the disk went away" in err and f"{out}.partial (--resume continues them)" in err
    assert out.read_text(encoding="utf-8") == "an earlier translation\n"  # not emptied
    partial = tmp_path / "out.de.partial"
    assert partial.read_text(encoding="utf-8") == whole.read_text(encoding="utf-8").splitlines(True)[0]
    monkeypatch.setattr(inference, "_translate_chunk", real)
    assert (
        main(["translate", "--model", shared_run, "--input", input_file, "--output", str(out), "--resume", "--quiet"])
        == 0
    )
    assert out.read_text(encoding="utf-8") == whole.read_text(encoding="utf-8") and not partial.exists()
