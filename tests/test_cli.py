import gzip
import json
import os
import subprocess
import sys

import pytest

from keras_memnmt.cli import main


def test_help_lists_only_existing_subcommands():
    out = subprocess.run([sys.executable, "-m", "keras_memnmt.cli", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "data" in out and "vocab" in out


def test_data_check_on_a_data_dir(data_dir, capsys):
    assert main(["data", "check", "--data-dir", data_dir, "--src", "en", "--tgt", "de",
                 "--split", "val", "--vocab-size", "500"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pairs"] == 1014 and report["dropped_empty"] == 0
    assert report["source_tokens"] > 1014 and report["length_percentiles"]["target"]["p50"] > 3


def test_data_check_on_files_reports_drops(tmp_path, capsys):
    src, tgt = tmp_path / "a.en", tmp_path / "a.de.gz"
    src.write_text("a dog runs\n\nthe cat sleeps now\n" + "a b c d e f g h i j k l m n " * 6 + "\n")
    with gzip.open(tgt, "wt") as f:
        f.write("ein Hund rennt\nleer\ndie Katze schläft jetzt\n" + "x y " * 40 + "\n")
    assert main(["data", "check", "--src-file", str(src), "--tgt-file", str(tgt),
                 "--vocab-size", "40", "--max-length", "40"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pairs"] == 3 and report["dropped_empty"] == 1 and report["dropped_too_long"] == 1


@pytest.mark.parametrize("content, message", [
    (("a\nb\n", "x\n"), "line counts differ"),
    ((b"ok\n\xff\n", "x\ny\n"), "line 2: invalid UTF-8"),
    (("", ""), "empty corpus"),
])
def test_data_check_bad_input_exits_non_zero(tmp_path, capsys, content, message):
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    for path, data in zip((src, tgt), content):
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    assert main(["data", "check", "--src-file", str(src), "--tgt-file", str(tgt)]) == 2
    err = capsys.readouterr().err
    assert message in err and "s.txt" in err


def test_data_check_missing_folder(tmp_path, capsys):
    assert main(["data", "check", "--data-dir", str(tmp_path / "no"), "--src", "en", "--tgt", "de"]) == 2
    assert "data directory not found" in capsys.readouterr().err


def test_vocab_build(data_dir, tmp_path, capsys):
    out = tmp_path / "vocab"
    assert main(["vocab", "build", "--data-dir", data_dir, "--src", "en", "--tgt", "de",
                 "--split", "val", "--out", str(out), "--size", "600"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sorted(os.listdir(out)) == ["source.model", "target.model", "vocab.json"]
    assert 300 < report["target_vocab_size"] <= 600
