"""The documentation's results tables are rendered from the committed run records.

Every table that README.md or a file of docs/ marks with ``<!-- memnmt results ARGS -->``
must equal what ``memnmt results ARGS`` renders from the records today, so no number in
it is typed by hand; ``memnmt results --update FILE`` renders them again.
"""

import glob
import json
import os

import pytest

from keras_memnmt.cli import main, marked_tables
from keras_memnmt.rundir.tables import TABLE_END, update_marked_tables

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = [os.path.join(ROOT, "README.md"), *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: os.path.relpath(p, ROOT))
def test_marked_tables_equal_the_records(path):
    old, new, _ = marked_tables(path)
    stale = [(a, b) for a, b in zip(old.splitlines(), new.splitlines()) if a != b]
    assert new == old, (
        f"{os.path.relpath(path, ROOT)}: a marked table differs from its records "
        f"(`memnmt results --update` renders it again); first difference: {stale[:1]}"
    )


def test_the_readme_marks_its_results_table():
    _, _, count = marked_tables(os.path.join(ROOT, "README.md"))
    assert count >= 1


def _run(path, seed: int, bleu: float):
    """A run directory as `memnmt archive` leaves it, made before records (results.json only)."""
    from keras_memnmt.rundir.archive import write_archive_mark

    os.makedirs(path)
    write_archive_mark(str(path))
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"model": "rnnsearch", "seed": seed, "validate_every": 0}, f)
    with open(os.path.join(path, "results.json"), "w") as f:
        json.dump(
            {
                "test_split": "test_2016_flickr",
                "beam_size": 5,
                "bleu": bleu,
                "bleu_lowercase": bleu + 0.5,
                "chrf": 60.0,
                "ter": 50.0,
                "train_seconds": 600.0,
                "best_val_bleu": 30.0,
            },
            f,
        )


def test_update_renders_each_marked_table_from_its_runs(tmp_path, capsys):
    _run(tmp_path / "records" / "a", 0, 36.0)
    _run(tmp_path / "records" / "b", 1, 37.25)
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Results\n\n<!-- memnmt results records/a records/b -->\n| stale |\n"
        f"{TABLE_END}\n\ntext after\n\n<!-- memnmt results records/b --format json -->\n"
        f"{TABLE_END}\n"
    )
    assert main(["results", "--update", str(doc)]) == 0
    assert capsys.readouterr().out == f"{doc}: 2 marked tables, updated\n"
    text = doc.read_text()
    assert "| stale |" not in text and text.startswith("# Results\n\n<!-- memnmt results records/a records/b -->\n")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    # run paths are relative to the file's folder, shown as the marker gives them
    assert [r.split(" | ")[0] for r in rows] == ["| `records/a`", "| `records/b`"]
    assert "| 36.00 | 36.50 |" in rows[0] and "| 37.25 | 37.75 |" in rows[1]
    assert "\n\ntext after\n\n" in text
    (row,) = json.loads(text.split("--format json -->\n")[1].split(TABLE_END)[0])
    assert row["bleu"] == 37.25 and row["run"] == "records/b"
    # a second update changes nothing
    assert main(["results", "--update", str(doc)]) == 0
    assert capsys.readouterr().out == f"{doc}: 2 marked tables, unchanged\n"
    assert doc.read_text() == text


def test_update_of_a_symbolic_link_writes_the_file_it_points_to(tmp_path, capsys):
    _run(tmp_path / "a", 0, 36.0)
    doc, link = tmp_path / "doc.md", tmp_path / "link.md"
    doc.write_text(f"<!-- memnmt results a -->\n| stale |\n{TABLE_END}\n")
    link.symlink_to(doc.name)
    assert main(["results", "--update", str(link)]) == 0
    assert capsys.readouterr().out == f"{link}: 1 marked table, updated\n"
    assert link.is_symlink() and os.readlink(link) == doc.name  # the link stays a link
    assert "| stale |" not in doc.read_text() and "| 36.00 | 36.50 |" in doc.read_text()
    assert sorted(os.listdir(tmp_path)) == ["a", "doc.md", "link.md"]  # no temporary left


def test_update_refuses_before_writing_anything(tmp_path, capsys):
    _run(tmp_path / "a", 0, 36.0)
    good, bad = tmp_path / "good.md", tmp_path / "bad.md"
    good.write_text(f"<!-- memnmt results a -->\n{TABLE_END}\n")
    bad.write_text("intro\n<!-- memnmt results a -->\n| no end |\n")
    assert main(["results", "--update", str(good), str(bad)]) == 2
    assert f"{bad} line 2: a `<!-- memnmt results ... -->` table without its closing" in capsys.readouterr().err
    assert good.read_text() == f"<!-- memnmt results a -->\n{TABLE_END}\n"
    missing_run = tmp_path / "missing.md"
    missing_run.write_text(f"<!-- memnmt results nowhere -->\n{TABLE_END}\n")
    assert main(["results", "--update", str(good), str(missing_run)]) == 2
    assert f"{missing_run} line 1: model directory not found" in capsys.readouterr().err
    bad_args = tmp_path / "bad_args.md"
    bad_args.write_text(f"text\n\n<!-- memnmt results a --beam 0 -->\n{TABLE_END}\n")
    assert main(["results", "--update", str(bad_args)]) == 2
    assert f"{bad_args} line 3: the marker's arguments are not those of `memnmt results`" in capsys.readouterr().err
    assert good.read_text() == f"<!-- memnmt results a -->\n{TABLE_END}\n"


def test_results_wants_runs_or_update_but_not_both(tmp_path, capsys):
    _run(tmp_path / "a", 0, 36.0)
    assert main(["results"]) == 2
    assert "give run directories, or --update FILE" in capsys.readouterr().err
    assert main(["results", str(tmp_path / "a"), "--update", str(tmp_path / "x.md")]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["results", "--update", str(tmp_path / "x.md")]) == 2
    assert f"--update: no such file: {tmp_path / 'x.md'}" in capsys.readouterr().err
    (tmp_path / "y.md").write_text("")
    assert main(["results", "--update", str(tmp_path / "y.md"), "--split", "val"]) == 2
    assert "--update takes each table's options from its marker; remove --split" in capsys.readouterr().err


def test_update_marked_tables_leaves_unmarked_text_alone():
    text = "a\n<!-- memnmt results x y -->\nold\n<!-- end memnmt results -->\nb"
    calls = []
    new, count = update_marked_tables(text, lambda argv: calls.append(argv) or "NEW")
    assert (new, count, calls) == (
        "a\n<!-- memnmt results x y -->\nNEW\n<!-- end memnmt results -->\nb",
        1,
        [["x", "y"]],
    )
    assert update_marked_tables("no tables\n", lambda argv: "X") == ("no tables\n", 0)


def test_the_extending_docs_pytest_line_runs_the_shared_tests():
    # docs/extending.md names the line that runs the tests which repeat for every model;
    # it is the line tests/test_extending.py runs for the doc's models (NAME for theirs).
    from test_extending import LOOP_KEYWORDS, SHARED_TESTS

    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "docs", "extending.md"), encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.startswith("KERAS_BACKEND=tensorflow python -m pytest")]
    assert len(lines) == 1, lines
    files = [word for word in lines[0].split() if word.endswith(".py")]
    assert files == [*SHARED_TESTS, "keras_memnmt/layers/NAME_test.py", "keras_memnmt/models/NAME_test.py"]
    assert lines[0].split(" -k ", 1)[1] == '"' + " or ".join(["NAME", *LOOP_KEYWORDS]) + '"'
