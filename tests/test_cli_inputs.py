"""Bad input to the `memnmt` command line: every error is one line naming the argument, file
or line at fault, with a non-zero exit code and no traceback; nothing the user had is lost.

A tiny untrained run directory stands in for a trained one; most checks fail before any
model is loaded.
"""

import io
import os
import re
import subprocess
import sys

import pytest

import keras_memnmt.cli as cli
import keras_memnmt.cli.results as results_command
from keras_memnmt.cli import main

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

SENTENCES = ["the big red cat sees a small dog", "a dog that sleeps likes the fish"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from keras_memnmt.testing.tiny_runs import synthetic_vocab, write_tiny_run

    root = tmp_path_factory.mktemp("inputs")
    return write_tiny_run(str(root / "a"), synthetic_vocab(), "rnnsearch", seed=1, checkpoints=1)


@pytest.fixture()
def source_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("".join(line + "\n" for line in SENTENCES))
    return path


def error_line(err: str) -> str:
    """The one `memnmt...: error:` line of ``err``, after checking there is exactly one and
    no traceback."""
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("memnmt") and "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


def fails(argv: list[str], capsys) -> str:
    """``main(argv)``'s error line, checking the exit code (2) and that nothing went to stdout."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return error_line(captured.err)


def run_cli(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "keras_memnmt.cli", *args], input=stdin, capture_output=True, timeout=300
    )


# ----- standard input ---------------------------------------------------------------------------


def test_translate_stdin_with_invalid_utf8_names_stdin_and_the_line(run):
    done = run_cli(["translate", "--model", run, "--quiet"], stdin=b"the cat\nthe \xff dog\n")
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert error_line(err) == r"memnmt: error: <stdin>, line 2: invalid UTF-8 (byte 4: b'\xff')"
    assert done.stdout == b""


def test_translate_stdin_in_process_names_the_line(run, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a\r\nb\n\xc3(\n")))
    line = fails(["translate", "--model", run, "--quiet"], capsys)
    assert line.startswith("memnmt: error: <stdin>, line 3: invalid UTF-8 (byte 0:")


def test_translate_stdin_reads_as_input_file(run, source_file, tmp_path, monkeypatch):
    # CRLF line ends and no final newline: the same lines as --input reads.
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\r\n".join(SENTENCES).encode())))
    from_stdin, from_file = tmp_path / "stdin.txt", tmp_path / "file.txt"
    assert main(["translate", "--model", run, "--beam", "1", "--output", str(from_stdin), "--quiet"]) == 0
    assert (
        main(
            [
                "translate",
                "--model",
                run,
                "--beam",
                "1",
                "--input",
                str(source_file),
                "--output",
                str(from_file),
                "--quiet",
            ]
        )
        == 0
    )
    assert from_stdin.read_text() == from_file.read_text()
    assert len(from_file.read_text().splitlines()) == len(SENTENCES)


def test_translate_closed_stdin(run, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", None)
    assert "standard input is closed" in fails(["translate", "--model", run, "--quiet"], capsys)


def test_translate_into_a_closed_pipe_exits_quietly(run, tmp_path):
    source = tmp_path / "many.txt"
    source.write_text("".join(f"the big red cat sees a small dog {i}\n" for i in range(3000)))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "keras_memnmt.cli",
            "translate",
            "--model",
            run,
            "--beam",
            "1",
            "--chunk-size",
            "100",
            "--input",
            str(source),
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.readline()
    process.stdout.close()  # as `| head -1` does
    err = process.communicate(timeout=300)[1].decode()
    assert process.returncode == 141, err
    assert "Traceback" not in err and not [line for line in err.splitlines() if line.startswith("memnmt")]


# ----- numeric flags: argparse's own one-line error, exit 2 -------------------------------------


@pytest.mark.parametrize(
    "command, flag, value",
    [
        (["translate", "--model", "RUN"], "--beam", "0"),
        (["translate", "--model", "RUN"], "--beam", "-1"),
        (["translate", "--model", "RUN"], "--beam", "10000000000000000000000"),  # above 2**31 - 1
        (["translate", "--model", "RUN"], "--chunk-size", "0"),
        (["translate", "--model", "RUN"], "--alpha", "nan"),
        (["translate", "--model", "RUN"], "--alpha", "inf"),
        (["evaluate", "--model", "RUN"], "--beam", "0"),
        (["evaluate", "--model", "RUN"], "--limit", "0"),
        (["evaluate", "--model", "RUN"], "--alpha", "nan"),
        (["compare", "A", "B"], "--limit", "-3"),
        (["compare", "A", "B"], "--bootstrap", "0"),
        (["compare", "A", "B"], "--trials", "-1"),
        (["results", "RUN"], "--beam", "0"),
        (["export", "--model", "RUN", "--out", "X"], "--beam", "0"),
        (["export", "--model", "RUN", "--out", "X"], "--n-best", "0"),
        (["export", "--model", "RUN", "--out", "X"], "--max-length", "0"),
        (["export", "--model", "RUN", "--out", "X"], "--alpha", "-inf"),
        (["data", "check", "--src-file", "S", "--tgt-file", "T"], "--max-length", "0"),
        (["data", "check", "--src-file", "S", "--tgt-file", "T"], "--vocab-size", "0"),
        (["vocab", "build", "--src-file", "S", "--tgt-file", "T", "--out", "V"], "--size", "-5"),
        (["serve", "--model", "RUN"], "--port", "70000"),
        (["serve", "--model", "RUN"], "--port", "-1"),
        (["serve", "--model", "RUN"], "--max-wait-ms", "inf"),
        (["serve", "--model", "RUN"], "--max-wait-ms", "-1"),
        (["serve", "--model", "RUN"], "--timeout", "0"),
        (["serve", "--model", "RUN"], "--timeout", "nan"),
        (["serve", "--model", "RUN"], "--allow-origin", "evil.example/path"),
    ],
)
def test_bad_numbers_are_usage_errors(capsys, command, flag, value):
    with pytest.raises(SystemExit) as exited:
        main([*command, f"{flag}={value}"])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    prog = "memnmt " + " ".join(command[:2] if command[0] in ("data", "vocab") else command[:1])
    line = error_line(captured.err)
    assert line.startswith(f"{prog}: error: argument {flag}: ") and value in line
    assert line == captured.err.splitlines()[-1] and captured.out == ""


def test_the_flags_bound_is_the_config_fields_bound():
    from keras_memnmt.config import MAX_INT

    assert cli.MAX_INT == MAX_INT


def test_n_best_above_the_beam(run, tmp_path, capsys):
    line = fails(["export", "--model", run, "--out", str(tmp_path / "x"), "--beam", "2", "--n-best", "3"], capsys)
    assert "--n-best 3 is more than --beam 2" in line
    assert not (tmp_path / "x").exists()


# ----- corpus arguments ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["--src-file", "only.txt"], "--src-file and --tgt-file must be given together"),
        ([], "give --src and --tgt"),
    ],
)
def test_data_check_corpus_arguments(capsys, args, message):
    assert message in fails(["data", "check", *args], capsys)


# ----- where the output goes ----------------------------------------------------------------------


def test_translate_output_is_a_directory(run, source_file, tmp_path, capsys):
    line = fails(["translate", "--model", run, "--input", str(source_file), "--output", str(tmp_path)], capsys)
    assert f"--output {tmp_path}: is a directory" in line


def test_translate_output_below_a_file(run, source_file, capsys):
    out = os.path.join(str(source_file), "out.txt")
    line = fails(["translate", "--model", run, "--input", str(source_file), "--output", out], capsys)
    assert f"--output {out}: {source_file} is not a directory" in line


def test_translate_output_in_a_missing_folder(run, source_file, tmp_path, capsys):
    out = tmp_path / "no" / "out.txt"
    line = fails(["translate", "--model", run, "--input", str(source_file), "--output", str(out)], capsys)
    assert f"--output {out}: the folder {tmp_path / 'no'} does not exist" in line


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_translate_output_on_a_full_disk(run, source_file, capsys):
    line = fails(["translate", "--model", run, "--input", str(source_file), "--output", "/dev/full", "--quiet"], capsys)
    assert line == "memnmt: error: cannot write --output /dev/full: No space left on device"


def test_translate_output_onto_its_input_is_refused(run, source_file, capsys):
    before = source_file.read_bytes()
    line = fails(["translate", "--model", run, "--input", str(source_file), "--output", str(source_file)], capsys)
    assert "is the --input file" in line and str(source_file) in line
    assert source_file.read_bytes() == before


def test_vocab_build_out_is_a_file(source_file, capsys):
    line = fails(
        [
            "vocab",
            "build",
            "--src-file",
            str(source_file),
            "--tgt-file",
            str(source_file),
            "--out",
            str(source_file),
            "--size",
            "20",
        ],
        capsys,
    )
    assert f"--out {source_file}: exists and is not a directory" in line


@pytest.mark.parametrize(
    "command, flag", [(["vocab", "build", "--out", "VOCAB"], "--size"), (["data", "check"], "--vocab-size")]
)
def test_vocab_size_below_the_corpus_characters(source_file, tmp_path, capsys, command, flag):
    command = [str(tmp_path / "vocab") if arg == "VOCAB" else arg for arg in command]
    line = fails([*command, "--src-file", str(source_file), "--tgt-file", str(source_file), flag, "10"], capsys)
    assert line.startswith(f"memnmt: error: {flag}: vocabulary size 10 is too small for this text")
    assert not (tmp_path / "vocab").exists()


def test_train_out_is_a_file(source_file, capsys):
    line = fails(["train", "quickstart", "--out", str(source_file)], capsys)
    assert f"--out {source_file}: exists and is not a directory" in line


def test_plot_out_below_a_file(run, source_file, capsys):
    out = os.path.join(str(source_file), "x.png")
    line = fails(["plot", "--model", run, "--source", "the cat", "--out", out], capsys)
    assert f"--out {out}: {source_file} is not a directory" in line


def test_compare_json_is_a_directory(tmp_path, capsys):
    line = fails(["compare", "A", "B", "--json", str(tmp_path), "--quiet"], capsys)
    assert f"--json {tmp_path}: is a directory" in line


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_compare_json_that_cannot_be_written_goes_to_stdout(monkeypatch, capsys):
    import keras_memnmt.evaluation.significance as compare

    monkeypatch.setattr(compare, "compare", lambda systems, **kwargs: {"systems": [s.name for s in systems]})
    monkeypatch.setattr(compare, "print_table", lambda result, file=None: None)
    assert main(["compare", "A", "B", "--json", "/dev/full", "--quiet"]) == 2
    captured = capsys.readouterr()
    assert '"systems"' in captured.out and '"A"' in captured.out  # the comparison is not lost
    assert "cannot write --json /dev/full" in error_line(captured.err)


def test_average_out_is_a_directory(run, tmp_path, capsys):
    out = tmp_path / "avg.keras"
    out.mkdir()
    line = fails(["average", "--model", run, "--last", "1", "--out", str(out)], capsys)
    assert f"--out {out}: is a directory" in line


def test_average_out_onto_an_averaged_checkpoint_is_refused(run, capsys):
    checkpoint = os.path.join(run, "checkpoints", "step10.keras")
    before = open(checkpoint, "rb").read()
    line = fails(["average", "--model", run, "--checkpoint", "step10", "--out", checkpoint], capsys)
    assert "is one of the checkpoints to average" in line and checkpoint in line
    assert open(checkpoint, "rb").read() == before


@pytest.mark.parametrize("where", ["run", "parent"])
def test_export_over_the_run_it_reads_is_refused(run, capsys, where):
    out = run if where == "run" else os.path.dirname(run)
    line = fails(["export", "--model", run, "--out", out, "--overwrite"], capsys)
    assert f"--out {out} is or holds {run}" in line
    assert os.path.isfile(os.path.join(run, "best.keras"))


# ----- what is read -------------------------------------------------------------------------------


def test_results_of_a_folder_that_is_no_run(tmp_path, capsys):
    line = fails(["results", str(tmp_path)], capsys)
    assert f"{tmp_path} is not a run directory" in line


def test_train_recipe_that_is_not_python(source_file, capsys):
    line = fails(["train", str(source_file)], capsys)
    assert f"recipe {source_file} is not a Python file" in line


def test_train_recipe_with_a_syntax_error(tmp_path, capsys):
    recipe = tmp_path / "broken.py"
    recipe.write_text("from keras_memnmt.config import TrainConfig\n\nCONFIG = TrainConfig(epochs=\n")
    line = fails(["train", str(recipe), "--out", str(tmp_path / "out")], capsys)
    assert line.startswith(f"memnmt: error: recipe {recipe}, line 3")
    assert not (tmp_path / "out").exists()


# ----- main's last resort -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error, message",
    [
        (PermissionError(13, "Permission denied", "/some/file"), "[Errno 13] Permission denied: '/some/file'"),
        (ValueError("first line\n  second line"), "first line second line"),
    ],
)
def test_errors_are_one_line(monkeypatch, capsys, error, message):
    def fail(args):
        raise error

    monkeypatch.setattr(results_command, "cmd_results", fail)
    assert fails(["results", "RUN"], capsys) == f"memnmt: error: {message}"


def test_interrupt(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(results_command, "cmd_results", interrupted)
    assert main(["results", "RUN"]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.splitlines()[-1] == "memnmt: interrupted"


# ----- the top level --------------------------------------------------------------------------------


def test_version_prints_the_library_version(capsys):
    from keras_memnmt import __version__

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out.strip() == f"memnmt (keras_memnmt) {__version__}"


def test_help_texts_carry_no_markup():
    """What `--help` prints, for every command and flag: plain text, no reST roles or
    double backquotes."""
    import argparse

    from keras_memnmt.cli.main import build_parser

    texts, parsers = [], [build_parser()]
    while parsers:
        parser = parsers.pop()
        texts += [parser.description or "", parser.epilog or ""] + [a.help or "" for a in parser._actions]
        parsers += [p for a in parser._actions if isinstance(a, argparse._SubParsersAction) for p in a.choices.values()]
    marked = [t for t in texts if re.search(r"``|:(func|class|mod|meth|data):`", t)]
    assert len(texts) > 100 and not marked, marked


@pytest.mark.parametrize(
    "argv, prog",
    [
        (["translate", "--model", "RUN", "--bogus"], "memnmt translate"),
        (["vocab", "build", "--out", "V", "--bogus", "1"], "memnmt vocab build"),
    ],
)
def test_an_unknown_flag_is_the_commands_own_usage_error(capsys, argv, prog):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.startswith(f"usage: {prog} ")
    assert err.splitlines()[-1].startswith(f"{prog}: error: unrecognized arguments: --bogus")
