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
    tempered = translate(capsys, "--model", shared_run, "--input", input_file, "--sampling", "topp:0.9",
                         "--temperature", "0.5", "--quiet")
    assert len(tempered) == len(LINES)


def test_each_translation_starts_with_its_prefix(shared_run, input_file, tmp_path, capsys):
    prefixes = tmp_path / "prefix.de"
    prefixes.write_text("le hundo\nle\n\n", encoding="utf-8")
    for beam in ("1", "3"):
        out = translate(capsys, "--model", shared_run, "--input", input_file, "--prefix", str(prefixes),
                        "--beam", beam, "--quiet")
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
    out = translate(capsys, "--model", shared_run, "--input", input_file, "--constraints", str(constraints),
                    "--beam", "3", "--quiet")
    assert len(out) == 3 and "hundo" in out[0] and "le" in out[0] and out[1] == "" and "grande" in out[2]


@pytest.mark.parametrize("argv, message", [
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
])
def test_bad_flags_are_one_line_errors(shared_run, input_file, tmp_path, capsys, argv, message):
    files = {"SHORT": "le\n", "UNSPELLABLE": "漢字\n\n\n", "MANY": "le\thundo\tgrande\n\n\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    argv = [str(tmp_path / arg) if arg in files else arg for arg in argv]
    assert main(["translate", "--model", shared_run, "--input", input_file, *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and message in lines[0], captured.err
