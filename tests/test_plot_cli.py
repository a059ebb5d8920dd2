"""`memnmt plot` for every architecture, `translate --show-attention`, and the progress bars
staying out of logs (tiny untrained runs)."""

import json

import numpy as np
import pytest

from keras_memnmt.cli import main
from keras_memnmt.testing.tiny_runs import (
    library_model_params,
    library_models,
    synthetic_vocab,
    write_tiny_run,
)

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

SOURCE = "the big cat that sleeps sees a small dog"
REFERENCE = "le granda kato ke dormi vidi-a un hundo malgranda"
ARCHITECTURES = library_models()


def panels(architecture: str) -> list[str]:
    """The panels the architecture's pictures draw, as its class declares them
    (``EncoderDecoder.panels``): a heatmap per detail that is not a "scalar", and the
    per-step curves (the target probabilities and the scalars) that every picture has."""
    from keras_memnmt.models import get_model

    return sorted([panel.detail for panel in get_model(architecture).panels if panel.axis != "scalar"] + ["curves"])


@pytest.fixture(scope="module")
def vocab():
    return synthetic_vocab()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, vocab):
    root = tmp_path_factory.mktemp("tiny")
    return {name: write_tiny_run(str(root / name), vocab, model=name) for name in ARCHITECTURES}


@pytest.mark.parametrize("architecture", library_model_params())
def test_plot_draws_every_panel(architecture, runs, tmp_path, capsys):
    from matplotlib.image import imread

    from keras_memnmt.pictures.inspection import inspect_pair
    from keras_memnmt.pictures.plots import DPI, figure_size
    from keras_memnmt.rundir.runs import load_run

    run = runs[architecture]
    for reference in (REFERENCE, None):
        out = str(tmp_path / f"{architecture}_{reference is None}.png")
        extra = ["--reference", reference] if reference else []
        assert main(["plot", "--model", run, "--source", SOURCE, *extra, "--out", out]) == 0
        report = json.loads(capsys.readouterr().out)
        # Every panel the model declares is drawn: its step computes each detail.
        assert sorted(report["panels"]) == panels(architecture) and report["teacher_forced"] == bool(reference)
        model, vocab, _ = load_run(run)
        inspection = inspect_pair(model, vocab, SOURCE, reference)
        assert report["target"] == inspection.target
        width, height = figure_size(inspection)
        pixels = imread(out)
        assert pixels.shape[:2] == (round(height * DPI), round(width * DPI))
        assert pixels[..., :3].std() > 0.05, "blank picture"


def test_a_picture_without_attention_says_what_is_missing_in_its_title(runs):
    from keras_memnmt.models import get_model
    from keras_memnmt.pictures.inspection import inspect_pair
    from keras_memnmt.pictures.plots import figure
    from keras_memnmt.rundir.runs import load_run

    noted = [name for name in ARCHITECTURES if get_model(name).picture_note]
    assert "cho" in noted and "transformer" not in noted
    for name in ARCHITECTURES:
        model, vocab, _ = load_run(runs[name])
        title = figure(inspect_pair(model, vocab, SOURCE, REFERENCE)).get_suptitle()
        note = get_model(name).picture_note
        assert (note in title) if note else ("no attention" not in title and "not drawn" not in title), title


@pytest.mark.backend
def test_inspection_matches_the_models_steps(runs):
    """Teacher forcing through step_details gives the attention generate() records for the
    model's own greedy translation, and distributions that sum to 1."""
    from keras_memnmt.data import encode_sources
    from keras_memnmt.pictures.inspection import inspect_pair
    from keras_memnmt.rundir.runs import load_run

    model, vocab, _ = load_run(runs["memdec"])
    inspection = inspect_pair(model, vocab, SOURCE)
    assert not inspection.teacher_forced
    steps = len(inspection.target_tokens)
    source_ids = np.asarray([encode_sources(vocab, [SOURCE])[0]], np.int32)
    searched = np.asarray(model.generate(source_ids, beam_size=1, return_attention=True)["attention"])[0, 0]
    np.testing.assert_allclose(inspection.details["attention"], searched[:steps], atol=1e-5)
    for name in ("attention", "read_weights", "write_weights"):
        np.testing.assert_allclose(inspection.details[name].sum(-1), 1.0, atol=1e-5)
    assert inspection.details["erase_mean"].shape == (steps,)
    assert np.all((inspection.target_probability > 0) & (inspection.target_probability <= 1))
    assert inspection.input_tokens[0] == "<s>" and inspection.input_tokens[1:] == inspection.target_tokens[:-1]


@pytest.mark.backend
def test_windows_by_position(runs):
    """Every "window" panel of every library model, laid out by decoder position with the
    panel's lag: weights only on the positions the window has seen, summing to 1."""
    from keras_memnmt.models import get_model
    from keras_memnmt.pictures.inspection import inspect_pair
    from keras_memnmt.rundir.runs import load_run

    windows = [(name, panel) for name in ARCHITECTURES for panel in get_model(name).panels if panel.axis == "window"]
    assert {panel.lag for _, panel in windows} == {0, 1}  # both kinds of window are covered
    for name, panel in windows:
        model, vocab, _ = load_run(runs[name])
        inspection = inspect_pair(model, vocab, SOURCE, REFERENCE)
        square = inspection.by_position(panel.detail)
        steps, lag = len(inspection.target_tokens), panel.lag
        assert square.shape == (steps, steps)
        assert np.all(np.triu(square, 1 - lag) == 0.0)  # only positions the window has seen
        np.testing.assert_allclose(square.sum(-1)[lag:], 1.0, atol=1e-5)


@pytest.mark.backend
def test_what_the_memory_holds(runs):
    """MemDec's pictures show what its memory holds next to what it reads: the write and add
    weights as cells × steps, each step labelled by its input word; each step's write
    weights sum to 1 over the cells, its add weights to its mean add, and with shared
    weights each step reads with the previous step's write weights (the first with 1/n)."""
    from keras_memnmt.pictures.inspection import inspect_pair
    from keras_memnmt.pictures.plots import figure, layout, png_bytes
    from keras_memnmt.rundir.runs import load_run

    model, vocab, _ = load_run(runs["memdec"])
    assert model.cell.addressing == "shared_weights"
    inspection = inspect_pair(model, vocab, SOURCE, REFERENCE)
    cells, steps = model.cell.memory_size, len(inspection.target_tokens)
    written, added = inspection.by_cell("write_weights"), inspection.by_cell("add_weights")
    assert written.shape == added.shape == (cells, steps) == (cells, len(inspection.input_tokens))
    np.testing.assert_allclose(written, inspection.details["write_weights"].T)
    np.testing.assert_allclose(written.sum(0), 1.0, atol=1e-5)
    np.testing.assert_allclose(added.sum(0), inspection.details["add_mean"], rtol=1e-5)
    np.testing.assert_allclose(added, written * inspection.details["add_mean"], rtol=1e-5)
    read = inspection.details["read_weights"]
    np.testing.assert_allclose(read[0], 1.0 / cells)
    np.testing.assert_allclose(read[1:], inspection.details["write_weights"][:-1], atol=1e-6)

    assert layout(inspection)[1] == ["read_weights", "write_weights", "add_weights"]  # beside the read
    fig = figure(inspection)
    holds = [ax for ax in fig.axes if ax.get_title().startswith("what the memory holds")]
    assert [ax.get_title() for ax in holds] == [
        f"what the memory holds: {kind} weights ({cells} cells)" for kind in ("write", "add")
    ]
    for ax, name in zip(holds, ("write_weights", "add_weights")):
        assert [t.get_text() for t in ax.get_xticklabels()] == inspection.input_tokens
        assert [t.get_text() for t in ax.get_yticklabels()] == [str(i + 1) for i in range(cells)]
        panel = inspection.panel(name)  # the caption (one offset, the other Eq. 13) under the x label
        assert ax.get_xlabel().split() == f"{panel.xlabel} {panel.caption}".split()
    assert "shared weights" in inspection.panel("write_weights").caption
    assert png_bytes(inspection).startswith(b"\x89PNG")


@pytest.mark.backend
def test_the_rmn_memory_holds_the_most_recent_words(runs):
    """The RMN decoder writes no weights: its memory holds the step's input and the words
    before it, ``memory_size`` of them, so its one memory panel is already against the words
    (the read over the positions the window holds) and it has no "writes" panel."""
    from keras_memnmt.pictures.inspection import inspect_pair
    from keras_memnmt.pictures.plots import layout
    from keras_memnmt.rundir.runs import load_run

    model, vocab, _ = load_run(runs["rmn"])
    inspection = inspect_pair(model, vocab, SOURCE, REFERENCE)
    assert layout(inspection) == [["attention"], ["memory_attention"], ["curves"]]
    assert not [panel for panel in inspection.panels if panel.axis == "writes"]
    square = inspection.by_position("memory_attention")
    held = np.tril(np.ones_like(square)) - np.tril(np.ones_like(square), -model.cell.memory_size)
    assert np.all(square[held == 0] == 0.0)
    np.testing.assert_allclose(square.sum(-1), 1.0, atol=1e-5)


def test_plot_errors(runs, tmp_path, capsys):
    assert main(["plot", "--model", runs["rnnsearch"], "--source", SOURCE, "--out", str(tmp_path / "x.jpg")]) == 2
    assert "--out must name a .png file" in capsys.readouterr().err
    assert main(["plot", "--model", runs["rnnsearch"], "--source", "  ", "--out", str(tmp_path / "x.png")]) == 2
    assert "empty" in capsys.readouterr().err


def test_show_attention_keeps_the_translations(runs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text(f"{SOURCE}\n\nthe cat sees a dog\n")
    plain, shown = tmp_path / "plain.txt", tmp_path / "shown.txt"
    common = ["translate", "--model", runs["rnnsearch"], "--beam", "2", "--input", str(src)]
    assert main([*common, "--output", str(plain)]) == 0
    assert capsys.readouterr().err == ""  # no progress bar outside a terminal
    assert main([*common, "--output", str(shown), "--show-attention"]) == 0
    err = capsys.readouterr().err
    assert shown.read_text() == plain.read_text()
    assert "alignment 1:" in err and "alignment 3:" in err and "alignment 2:" not in err  # line 2 is empty
    rows = [line for line in err.splitlines() if "<-" in line]
    assert rows and all(0.0 <= float(line.split()[-1]) <= 1.0 for line in rows)

    assert main(["translate", "--model", runs["cho"], "--input", str(src), "--show-attention"]) == 2
    assert "no source attention" in capsys.readouterr().err


def test_progress_bars_stay_out_of_logs(runs, tmp_path, capsys):
    """Outside a terminal (captured stderr, a log) evaluate and vocab build draw no bar."""
    assert main(["evaluate", "--model", runs["rnnsearch"], "--split", "test", "--beam", "1", "--limit", "3"]) == 0
    assert "translating" not in capsys.readouterr().err
    (tmp_path / "a.txt").write_text("the cat sees a dog\n" * 20)
    (tmp_path / "b.txt").write_text("le kato vidi-a un hundo\n" * 20)
    for quiet in ([], ["--quiet"]):
        assert (
            main(
                [
                    "vocab",
                    "build",
                    "--src-file",
                    str(tmp_path / "a.txt"),
                    "--tgt-file",
                    str(tmp_path / "b.txt"),
                    "--out",
                    str(tmp_path / "v"),
                    "--size",
                    "20",
                    *quiet,
                ]
            )
            == 0
        )
        assert "vocabulary" not in capsys.readouterr().err


def test_progress_bars_on_a_terminal(runs, monkeypatch, capsys):
    import sys

    from keras_memnmt.evaluation.translation import translate
    from keras_memnmt.rundir.runs import load_run

    model, vocab, _ = load_run(runs["rnnsearch"])
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    translate(model, vocab, [SOURCE], beam_size=1)
    assert "translating" in capsys.readouterr().err
    translate(model, vocab, [SOURCE], beam_size=1, progress=False)  # --quiet
    assert "translating" not in capsys.readouterr().err
