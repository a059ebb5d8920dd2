"""No command writes over a run: every path a `memnmt` command writes is checked before any
work, against the files of run directories (and their archives) and the command's own
input, whatever the spelling (``..``, symbolic links); and the command line's own output
(train's stdout, JSON, recipe errors) is clean.

A refusal loads no model: these tests run on a copy of the shared tiny run and check that
its files are byte-identical afterwards.
"""

import glob
import io
import json
import os
import re
import shutil
import sys

import pytest

import keras_memnmt.cli as cli
from keras_memnmt.cli import main
from keras_memnmt.testing.tiny_runs import run_fingerprint

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def refusal(argv: list[str], capsys, flag: str) -> str:
    """``main(argv)``'s one stderr line, after checking exit code 2, nothing on stdout, no
    traceback, and that the line names ``flag``."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("memnmt: error: "), captured.err
    assert flag in lines[0]
    return lines[0]


@pytest.fixture()
def source_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("the cat sees a dog\na small bird\n")
    return str(path)


# Each command and flag that writes, with the run's file or folder it is pointed at.
COMMANDS = {
    "translate --output": (["translate", "--model", "RUN", "--input", "IN", "--output", "OUT"], "best.keras"),
    "score --output": (
        ["score", "--model", "RUN", "--source", "IN", "--target", "IN", "--output", "OUT"],
        "best.keras",
    ),
    "compare --json": (["compare", "RUN", "--system", "again=RUN", "--json", "OUT", "--quiet"], "config.json"),
    "average --out": (["average", "--model", "RUN", "--last", "2", "--out", "OUT"], "model.keras"),
    "plot --out": (["plot", "--model", "RUN", "--source", "a cat", "--out", "OUT"], "checkpoints/plot.png"),
    "export --out": (["export", "--model", "RUN", "--out", "OUT", "--overwrite"], "checkpoints"),
    "archive --out": (["archive", "RUN", "--out", "OUT", "--overwrite"], "vocab"),
    "vocab build --out": (
        ["vocab", "build", "--src-file", "IN", "--tgt-file", "IN", "--size", "20", "--out", "OUT"],
        "vocab",
    ),
    "results --update": (["results", "--update", "OUT"], "record.json"),
}


def spelled(run: str, link: str, name: str, spelling: str) -> str:
    """``run/name`` spelled directly, through ``..``, or through a symbolic link to the run."""
    if spelling == "direct":
        return os.path.join(run, name)
    if spelling == "dotdot":
        return os.path.join(run, "hyps", "..", name)
    return os.path.join(link, name)


@pytest.mark.parametrize("spelling", ["direct", "dotdot", "symlink"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_command_writes_into_a_run(trained_run, source_file, tmp_path, capsys, command, spelling):
    link = tmp_path / "link"
    link.symlink_to(trained_run, target_is_directory=True)
    argv, name = COMMANDS[command]
    out = spelled(trained_run, str(link), name, spelling)
    argv = [{"RUN": trained_run, "IN": source_file, "OUT": out}.get(arg, arg) for arg in argv]
    argv = [arg.replace("=RUN", f"={trained_run}") for arg in argv]
    before = run_fingerprint(trained_run)
    line = refusal(argv, capsys, command.split()[-1])
    assert f"{command.split()[-1]} {out}: " in line and "of the run" in line and "choose another path" in line
    assert run_fingerprint(trained_run) == before


def test_the_refusal_names_the_run_as_it_was_spelled(trained_run, source_file, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = refusal(
        ["translate", "--model", "run", "--input", source_file, "--output", "run/best.keras"], capsys, "--output"
    )
    assert line == "memnmt: error: --output run/best.keras: a file of the run run; choose another path"


@pytest.mark.parametrize("spelling", ["symlink", "dotdot"])
def test_an_output_is_never_the_command_input(trained_run, source_file, tmp_path, capsys, spelling):
    if spelling == "symlink":
        out = tmp_path / "link.txt"
        out.symlink_to(source_file)
    else:
        (tmp_path / "sub").mkdir()
        out = tmp_path / "sub" / ".." / "in.txt"
    before = open(source_file, "rb").read()
    line = refusal(
        ["translate", "--model", trained_run, "--input", source_file, "--output", str(out)], capsys, "--output"
    )
    assert f"--output {out} is the --input file" in line
    assert open(source_file, "rb").read() == before


def test_a_new_file_beside_a_run_is_an_output_like_any_other(trained_run):
    from keras_memnmt.rundir.outputs import check_output

    check_output("--out", os.path.join(trained_run, "avg.keras"))
    check_output("--json", os.path.join(trained_run, "compare.json"))
    with pytest.raises(ValueError, match="inside checkpoints/ of the run"):
        check_output("--out", os.path.join(trained_run, "checkpoints", "deeper", "avg.keras"), make_parents=True)


def test_compare_json_over_config_then_evaluate_refuses_the_config(trained_run, capsys):
    """A config.json another command wrote over is refused, not read as the default config
    (which would pick another test set)."""
    config = os.path.join(trained_run, "config.json")
    with open(config, "w") as f:
        json.dump({"split": "test", "seed": 12345, "systems": []}, f)
    line = refusal(["evaluate", "--model", trained_run, "--split", "test"], capsys, config)
    assert "is not a run's config (no field model)" in line


def test_every_stored_run_record_config_loads():
    from keras_memnmt.rundir.runs import read_config

    configs = glob.glob(os.path.join(ROOT, "docs", "records", "**", "config.json"), recursive=True)
    assert configs
    for path in configs:
        assert read_config(os.path.dirname(path)).model


@pytest.mark.parametrize("content", [b"[1, 2]", b"not json", b'{"model": "rnnsearch"}'])
def test_read_config_refuses_what_is_no_run_config(tmp_path, content):
    from keras_memnmt.config import ConfigError
    from keras_memnmt.rundir.runs import read_config

    (tmp_path / "config.json").write_bytes(content)
    with pytest.raises(ConfigError, match=re.escape(f"{tmp_path / 'config.json'} is not a run's config")):
        read_config(str(tmp_path))


def test_translate_resume_on_a_file_that_is_no_translation(trained_run, source_file, tmp_path, capsys):
    other = tmp_path / "f.keras"
    shutil.copyfile(os.path.join(trained_run, "best.keras"), other)
    before = other.read_bytes()
    line = refusal(
        ["translate", "--model", trained_run, "--input", source_file, "--output", str(other), "--resume"],
        capsys,
        "--resume",
    )
    assert f"{other} is not UTF-8 text" in line and "nothing was changed" in line
    assert other.read_bytes() == before


def test_translate_resume_on_more_lines_than_the_input(trained_run, source_file, tmp_path, capsys):
    out = tmp_path / "out.txt"
    out.write_bytes(b"one\ntwo\nthree\nhalf a li")
    line = refusal(
        ["translate", "--model", trained_run, "--input", source_file, "--output", str(out), "--resume"],
        capsys,
        "--resume",
    )
    assert f"{out} has 3 lines, more than the input's 2" in line
    assert out.read_bytes() == b"one\ntwo\nthree\nhalf a li"  # the unfinished line is kept too


def test_export_overwrite_refuses_another_run(shared_run, trained_run, tmp_path, capsys):
    victim = shutil.copytree(shared_run, str(tmp_path / "victim"))
    before = run_fingerprint(victim)
    line = refusal(["export", "--model", trained_run, "--out", victim, "--overwrite"], capsys, "--out")
    assert f"--out {victim}: a run directory (it holds best.keras)" in line
    assert run_fingerprint(victim) == before


def test_export_overwrite_replaces_only_an_export(shared_run, tmp_path, capsys):
    from keras_memnmt.export import export_runs

    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    for flags in (["--overwrite"], []):  # without --overwrite the error does not suggest it
        line = refusal(["export", "--model", shared_run, "--out", str(folder), *flags], capsys, "--out")
        assert "holds no export" in line and "pass --overwrite" not in line
    with pytest.raises(FileExistsError, match="holds no export"):
        export_runs([shared_run], str(folder), overwrite=True)
    assert os.listdir(folder) == ["keep.txt"]


@pytest.mark.parametrize("command", ["translate", "compare", "plot"])
def test_an_output_with_other_names_is_refused(shared_run, trained_run, source_file, tmp_path, capsys, command):
    """A hard link to a run's file (or to the input) is another name of the same file: a
    write in place would change the run."""
    link = str(tmp_path / "out.png")
    os.link(os.path.join(trained_run, "config.json"), link)
    before = run_fingerprint(trained_run)
    argv = {
        "translate": ["translate", "--model", trained_run, "--input", source_file, "--output", link],
        "compare": ["compare", shared_run, trained_run, "--json", link],
        "plot": ["plot", "--model", trained_run, "--source", "a dog", "--out", link],
    }[command]
    flag = {"translate": "--output", "compare": "--json", "plot": "--out"}[command]
    assert "has other names (hard links)" in refusal(argv, capsys, flag)
    assert run_fingerprint(trained_run) == before


def test_files_written_whole_take_the_umask(tmp_path):
    from keras_memnmt.files import write_text

    old = os.umask(0o022)
    try:
        write_text(str(tmp_path / "a.txt"), "x")
        assert os.stat(tmp_path / "a.txt").st_mode & 0o777 == 0o644
        os.chmod(tmp_path / "a.txt", 0o600)
        write_text(str(tmp_path / "a.txt"), "y")  # a replaced file keeps its permissions
        assert os.stat(tmp_path / "a.txt").st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_archive_refuses_a_run_and_replaces_an_archive(shared_run, trained_run, tmp_path, capsys):
    # A run stopped before its first validation: its config, vocabulary and record only.
    half = tmp_path / "half"
    half.mkdir()
    for name in ("config.json", "record.json", "vocab"):
        source = os.path.join(shared_run, name)
        (shutil.copytree if os.path.isdir(source) else shutil.copyfile)(source, half / name)
    before = run_fingerprint(str(half))
    line = refusal(["archive", trained_run, "--out", str(half), "--overwrite"], capsys, "--out")
    assert "a run directory (it holds vocab)" in line
    assert run_fingerprint(str(half)) == before
    archive = str(tmp_path / "archive")
    assert main(["archive", trained_run, "--out", archive]) == 0
    assert main(["archive", trained_run, "--out", archive, "--overwrite"]) == 0
    capsys.readouterr()
    line = refusal(["vocab", "build", "--src-file", "x", "--tgt-file", "y", "--out", archive], capsys, "--out")
    assert "a run's archive (it holds record.json)" in line
    before = run_fingerprint(archive)
    for flag in ("--overwrite", "--resume"):  # a training writes into a run, never into an archive
        line = refusal(["train", "quickstart", "--out", archive, flag], capsys, "--out")
        assert "a run's archive (it holds record.json)" in line
    assert run_fingerprint(archive) == before


@pytest.mark.parametrize("name", ["hyps/x.txt", "results.json", "hyps/inside.txt", "hyps"])
def test_archive_refuses_a_symbolic_link_in_the_run(trained_run, tmp_path, capsys, name):
    """A file that a symbolic link stands for (a file elsewhere, or another file of the run),
    or one whose real path lies outside the run (``hyps/`` a link to another folder), is
    named, before anything is written."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.txt").write_text("not the run's\n")
    path = os.path.join(trained_run, name)
    if name == "hyps":
        shutil.rmtree(path)
        os.symlink(elsewhere, path)
        named = os.path.join(path, "x.txt")
    else:
        if os.path.exists(path):
            os.remove(path)
        os.symlink(os.path.join(trained_run, "config.json") if name == "hyps/inside.txt" else elsewhere / "x.txt", path)
        named = path
    before = run_fingerprint(trained_run)
    out = tmp_path / "archive"
    line = refusal(["archive", trained_run, "--out", str(out)], capsys, named)
    assert ("is a symbolic link" if name != "hyps" else "lies outside") in line
    assert not out.exists() and run_fingerprint(trained_run) == before


def test_archive_overwrite_takes_no_folder_without_the_archive_mark(trained_run, tmp_path, capsys):
    """A user's files whose content reads as an archive's (a config.json with model and
    seed, a run record) are no archive: only what `memnmt archive` marked is replaced."""
    from keras_memnmt.rundir.archive import has_archive_mark

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model": "rnnsearch", "seed": 0, "mine": True}))
    (folder / "record.json").write_text(json.dumps({"format": 1, "notes": "mine"}))
    before = run_fingerprint(str(folder))
    line = refusal(["archive", trained_run, "--out", str(folder), "--overwrite"], capsys, str(folder))
    assert "is not an archive of a run (it holds no memnmt_archive.json that `memnmt archive` wrote)" in line
    assert run_fingerprint(str(folder)) == before
    archive = tmp_path / "archive"
    assert main(["archive", trained_run, "--out", str(archive)]) == 0
    assert has_archive_mark(str(archive))
    assert main(["archive", trained_run, "--out", str(archive), "--overwrite"]) == 0


def test_every_committed_archive_is_one_that_archive_overwrite_replaces():
    from keras_memnmt.rundir.archive import not_an_archive

    folders = sorted(
        {
            os.path.dirname(p)
            for name in ("record.json", "config.json")
            for p in glob.glob(os.path.join(ROOT, "docs", "records", "**", name), recursive=True)
        }
    )
    assert len(folders) >= 30
    for folder in folders:
        assert not_an_archive(folder) is None, folder


# ----- what the command line prints ---------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("terminal", [False, True])
def test_train_prints_the_results_alone(monkeypatch, tmp_path, capsys, terminal):
    """Keras's fit prints its epochs and progress to sys.stdout: train sends them to stderr;
    its stdout is the results JSON, non-ASCII characters as they are."""
    import keras_memnmt.training as training

    def fake_train(config, out, log, **kwargs):
        print("Epoch 1/1")
        print("1/4 ━━━━━━━━━━━━━━━━━━━━ 0s", end="")
        log("step 1: loss 2.0")
        return {"corpus": "Multi30k en→de", "bleu": 1.5, "validations": []}

    monkeypatch.setattr(training, "train", fake_train)
    if terminal:
        monkeypatch.setattr(sys, "stderr", Terminal())
    out = str(tmp_path / "run")
    assert main(["train", "quickstart", "--out", out]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"run_dir": out, "corpus": "Multi30k en→de", "bleu": 1.5}
    assert "en→de" in captured.out
    err = sys.stderr.getvalue() if terminal else captured.err
    assert "Epoch 1/1" in err
    if terminal:  # the log line starts a line of its own after the progress bar
        assert "0s\n[memnmt] step 1: loss 2.0\n" in err
    else:
        assert "0s[memnmt] step 1: loss 2.0\n" in err


def test_console_output_is_utf8_under_any_locale(monkeypatch):
    import keras_memnmt.runtime as runtime

    monkeypatch.setattr(runtime, "tune_malloc", lambda: None)  # process-wide: not in a test process
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="backslashreplace"))
    cli._setup_process()
    assert sys.stdout.encoding == sys.stderr.encoding == "utf-8"
    assert sys.stderr.errors == "backslashreplace"
    sys.stdout.write("Straße")
    sys.stdout.flush()
    assert raw.getvalue() == "Straße".encode()


# ----- recipes that cannot be loaded --------------------------------------------------------------

HEAD = "from keras_memnmt.config import TrainConfig\n"


@pytest.mark.parametrize(
    "body, message",
    [
        (HEAD + "raise RuntimeError('no data here')\n", ", line 2: RuntimeError: no data here"),
        ("import no_such_module_for_a_recipe\n", ", line 1: ModuleNotFoundError: No module named"),
        ("CONFIG = {'model': 'rnnsearch'}\n", ": CONFIG is a dict, expected a keras_memnmt.config.TrainConfig"),
        (HEAD + "\nCONFIG = TrainConfig(bogus=3)\n", ", line 3: TypeError: "),
        (HEAD + "import sys\nsys.exit(0)\nCONFIG = TrainConfig()\n", ", line 3: calls sys.exit(0) when loaded"),
    ],
)
def test_a_recipe_that_cannot_be_loaded_is_one_line(tmp_path, capsys, body, message):
    recipe = tmp_path / "recipe.py"
    recipe.write_text(body)
    line = refusal(["train", str(recipe), "--out", str(tmp_path / "out")], capsys, f"recipe {recipe}")
    assert line.startswith(f"memnmt: error: recipe {recipe}{message}"), line
    assert not (tmp_path / "out").exists()


# ----- a user's folder holding every name a command writes -------------------------------------


def _user_folder(path, names) -> dict[str, str]:
    """``path`` made to hold a user's files (text of the user's) under each of ``names``
    ("a/b": the file b in a folder a), and ``notes.txt``; returns its fingerprint."""
    for name in [*names, "notes.txt"]:
        file = path / name
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(f"the user's {name}\n")
    return run_fingerprint(str(path))


# Every name `memnmt train` writes (WRITTEN_BY_TRAIN; folders as a file inside them).
TRAIN_NAMES = [
    "model.keras",
    "best.keras",
    "checkpoints/epoch10.pt",
    "validations.json",
    "log.csv",
    "results.json",
    "config.json",
    "tensorboard/events",
    "vocab/vocab.json",
    "vocab/source.model",
    "vocab/target.model",
    "record.json",
    "hyps/test.txt",
    "train.log",
]


@pytest.mark.parametrize("flag", ["--overwrite", "--resume", None])
def test_train_takes_no_folder_that_is_not_a_run(tmp_path, capsys, flag):
    """A folder whose files have the names of a run's but are not a run's is neither
    cleared (--overwrite), continued (--resume) nor called "the start of a run"."""
    from keras_memnmt.rundir.runs import WRITTEN_BY_TRAIN

    assert {n.split("/")[0] for n in TRAIN_NAMES} == set(WRITTEN_BY_TRAIN)
    folder = tmp_path / "userproj"
    before = _user_folder(folder, TRAIN_NAMES)
    line = refusal(["train", "quickstart", "--out", str(folder), *([flag] if flag else [])], capsys, str(folder))
    assert "is not a run (its config.json is no run's config" in line
    assert run_fingerprint(str(folder)) == before
    # The same with only a config.json of the user's beside the names.
    folder = tmp_path / "userproj2"
    before = _user_folder(folder, ["config.json", "log.csv", "checkpoints/epoch10.pt", "vocab/vocab.txt"])
    refusal(["train", "quickstart", "--out", str(folder), "--overwrite"], capsys, str(folder))
    assert run_fingerprint(str(folder)) == before


def test_train_overwrite_still_removes_an_earlier_run_and_only_it(shared_run, tmp_path, capsys):
    from keras_memnmt.rundir.runs import prepare_run_dir

    run = shutil.copytree(shared_run, str(tmp_path / "run"))
    (tmp_path / "run" / "notes.txt").write_text("mine")
    logged = []
    prepare_run_dir(run, resume=False, overwrite=True, log=logged.append)
    assert os.listdir(run) == ["notes.txt"] and logged == [f"overwrite: removed the earlier run in {run}"]
    # A run killed while its vocabulary was written (vocab/ alone, whole or cut short) is a run too.
    half = shutil.copytree(os.path.join(shared_run, "vocab"), str(tmp_path / "half" / "vocab"))
    prepare_run_dir(os.path.dirname(half), resume=False, overwrite=True, log=logged.append)
    assert os.listdir(tmp_path / "half") == []
    os.makedirs(half)
    shutil.copyfile(os.path.join(shared_run, "vocab", "source.model"), os.path.join(half, "source.model"))
    prepare_run_dir(os.path.dirname(half), resume=False, overwrite=True, log=logged.append)
    assert os.listdir(tmp_path / "half") == []
    # ... but not a vocab/ of the user's files of those names.
    before = _user_folder(tmp_path / "mine", ["vocab/source.model"])
    with pytest.raises(FileExistsError, match="vocab/ holds no vocabulary that a run saved"):
        prepare_run_dir(str(tmp_path / "mine"), resume=False, overwrite=True)
    assert run_fingerprint(str(tmp_path / "mine")) == before


def test_train_overwrite_keeps_a_vocabulary_that_vocab_build_made(source_file, tmp_path, capsys):
    """``vocab build --out RUN/vocab`` before the run: the vocabulary is the user's, and
    ``train --overwrite`` refuses to remove it (``vocab.json`` says which command made it)."""
    from keras_memnmt.testing.tiny_runs import TINY_TRAIN_ARGS

    run = tmp_path / "run"
    vocab = run / "vocab"
    assert (
        main(
            [
                "vocab",
                "build",
                "--src-file",
                source_file,
                "--tgt-file",
                source_file,
                "--size",
                "20",
                "--out",
                str(vocab),
            ]
        )
        == 0
    )
    capsys.readouterr()
    before = run_fingerprint(str(run))
    line = refusal(
        ["train", "quickstart", "--out", str(run), *TINY_TRAIN_ARGS, "--set", "max_steps=1", "--overwrite"],
        capsys,
        str(vocab),
    )
    assert "is a vocabulary that `memnmt vocab build` made" in line
    assert run_fingerprint(str(run)) == before


def test_a_vocabulary_says_which_command_made_it(shared_run, source_file, tmp_path):
    from keras_memnmt.data.vocab import vocabulary_maker

    assert vocabulary_maker(os.path.join(shared_run, "vocab")) == "memnmt train"
    assert (
        main(
            [
                "vocab",
                "build",
                "--src-file",
                source_file,
                "--tgt-file",
                source_file,
                "--size",
                "20",
                "--out",
                str(tmp_path / "v"),
            ]
        )
        == 0
    )
    assert vocabulary_maker(str(tmp_path / "v")) == "memnmt vocab build"
    assert vocabulary_maker(str(tmp_path / "none")) is None


ARCHIVE_NAMES = ["config.json", "record.json", "results.json", "validations.json", "hyps/test.txt"]


@pytest.mark.parametrize(
    "names",
    [ARCHIVE_NAMES, ["config.json"], ["record.json", "results.json"]],
    ids=["every name", "config.json", "record and results"],
)
def test_archive_overwrite_takes_no_folder_that_is_not_an_archive(trained_run, tmp_path, capsys, names):
    folder = tmp_path / "dir"
    before = _user_folder(folder, names)
    line = refusal(["archive", trained_run, "--out", str(folder), "--overwrite"], capsys, str(folder))
    assert "is not an archive of a run" in line
    assert run_fingerprint(str(folder)) == before


EXPORT_NAMES = [
    "saved_model.pb",
    "fingerprint.pb",
    "variables/variables.index",
    "assets/source.model",
    "assets.extra/memnmt_export.json",
]


def test_export_overwrite_takes_no_folder_that_is_not_only_an_export(shared_run, tmp_path, capsys):
    folder = tmp_path / "exp"
    before = _user_folder(folder, EXPORT_NAMES)
    line = refusal(["export", "--model", shared_run, "--out", str(folder), "--overwrite"], capsys, "--out")
    assert "holds no export" in line
    assert run_fingerprint(str(folder)) == before
    # An export of this library with a file beside it that no export writes (TensorFlow
    # Serving's warm-up requests): replacing the export would lose it.
    (folder / "assets.extra" / "memnmt_export.json").write_text(json.dumps({"library": "keras_memnmt"}))
    (folder / "assets.extra" / "tf_serving_warmup_requests").write_text("requests")
    (folder / "notes.txt").unlink()
    before = run_fingerprint(str(folder))
    line = refusal(["export", "--model", shared_run, "--out", str(folder), "--overwrite"], capsys, "--out")
    assert "assets.extra/tf_serving_warmup_requests, which no export writes" in line
    assert run_fingerprint(str(folder)) == before


def test_vocab_build_takes_no_folder_of_a_users_files_of_its_names(tmp_path, capsys):
    folder = tmp_path / "v"
    before = _user_folder(folder, ["source.model", "target.model", "vocab.json"])
    line = refusal(["vocab", "build", "--src-file", "x", "--tgt-file", "y", "--out", str(folder)], capsys, "--out")
    assert "not part of a vocabulary" in line
    assert run_fingerprint(str(folder)) == before
