"""The picture of BLEU by source length (``keras_memnmt.evaluation.length_plot``), drawn from
a comparison's ``by_length`` scores."""

import os

import pytest

from keras_memnmt.evaluation.length_plot import figure, png_bytes, save_length_plot

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent


def _split(name: str, buckets: int) -> dict:
    """A comparison of one split: a system of one run, one of two runs (seeds)."""
    table = []
    for i in range(buckets):
        runs = {"a": {"bleu": 30.0 - i, "chrf": 50.0, "bleu_ci": 2.0 + i, "chrf_ci": 1.0}}
        runs.update({f"s{k}": {"bleu": 32.0 - i + k, "chrf": 51.0, "bleu_ci": 1.5, "chrf_ci": 1.0} for k in (0, 1)})
        systems = {
            "a": {"mean": {"bleu": 30.0 - i, "chrf": 50.0}, "std": {"bleu": None, "chrf": None}},
            "seeds": {"mean": {"bleu": 32.5 - i, "chrf": 51.0}, "std": {"bleu": 0.71, "chrf": 0.0}},
        }
        table.append({"words": f"{5 * i + 1}-{5 * i + 5}", "sentences": 10 + i, "runs": runs, "systems": systems})
    return {
        "split": name,
        "seed": 12345,
        "bootstrap_resamples": 1000,
        "systems": [{"name": "a", "runs": [{"run": "a"}]}, {"name": "seeds", "runs": [{"run": "s0"}, {"run": "s1"}]}],
        "by_length": table,
    }


def test_a_line_per_system_with_the_intervals_as_error_bars():
    (ax,) = figure(_split("test", 4)).axes
    bars, band = ax.containers, ax.collections
    assert len(bars) == 1  # the single run's error bars, its intervals as drawn
    _, _, (lines,) = bars[0]
    heights = [segment[1][1] - segment[0][1] for segment in lines.get_segments()]
    assert heights == pytest.approx([2 * (2.0 + i) for i in range(4)])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "seeds (mean ± std, 2 runs)"]
    assert len(band) == 2  # the seeds' band, and the error bars' collection
    assert [t.get_text() for t in ax.get_xticklabels()][0] == "1-5\n(10)"


def test_one_panel_per_split_that_has_scores_by_length():
    result = {"splits": [_split("one", 3), {**_split("none", 1), "by_length": []}, _split("two", 5)]}
    assert [ax.get_title().split(":")[0] for ax in figure(result).axes] == ["one", "two"]
    with pytest.raises(ValueError, match="--by-length"):
        figure({"splits": [{**_split("none", 1), "by_length": []}]})


def test_the_file_is_a_png_written_whole(tmp_path):
    path = tmp_path / "by_length.png"
    path.write_bytes(b"earlier")
    assert save_length_plot(_split("test", 2), str(path)) == str(path)
    assert path.read_bytes() == png_bytes(_split("test", 2)) and path.read_bytes().startswith(b"\x89PNG")
    assert os.listdir(tmp_path) == ["by_length.png"]  # no temporary left beside it
