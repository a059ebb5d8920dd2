"""BLEU against source length: the picture of a comparison's ``by_length`` scores
(``memnmt compare --by-length-plot FILE.png``), as Bahdanau et al. (2014, Fig. 2) draw it.

One panel per split, the buckets of source words on the x-axis (each labelled with its
number of sentences), one line per system:

- a system of one run (or an ensemble): its BLEU in each bucket, with error bars of the
  95% confidence interval from a bootstrap of the bucket's sentences (``bleu_ci``,
  :func:`keras_memnmt.evaluation.significance.by_length`);
- a system of several runs (seeds): the mean of its runs' BLEU, a band of ± their standard
  deviation, and each run as a thin line.

Drawn with matplotlib's Agg canvas (no display, no pyplot state), as
:mod:`keras_memnmt.pictures.plots` draws; the file is written whole or not at all
(:func:`keras_memnmt.files.write_bytes`).
"""

from __future__ import annotations

import io

import numpy as np

DPI = 100
BUCKET_INCHES = 0.9  # the width of one bucket on the x-axis
PANEL_HEIGHT = 4.5  # inches
OFFSET = 0.06  # how far apart (in buckets) the systems' points are drawn, so that error bars do not overlap


def _splits(result: dict) -> list[dict]:
    """The splits of a comparison (one, or each of ``--split all``) that have ``by_length``."""
    return [one for one in result.get("splits", [result]) if one.get("by_length")]


def _draw(ax, result: dict) -> None:
    table = result["by_length"]
    x = np.arange(len(table), dtype=float)
    systems = result["systems"]
    handles = []  # the legend's, in the systems' order
    for i, system in enumerate(systems):
        color = f"C{i % 10}"
        at = x + (i - (len(systems) - 1) / 2) * OFFSET
        runs = [r["run"] for r in system["runs"]]
        if len(runs) == 1:
            bleu = [b["runs"][runs[0]]["bleu"] for b in table]
            ci = [b["runs"][runs[0]]["bleu_ci"] for b in table]
            handles.append(
                ax.errorbar(at, bleu, yerr=ci, color=color, marker="o", markersize=4, capsize=3, label=system["name"])
            )
            continue
        for run in runs:
            ax.plot(at, [b["runs"][run]["bleu"] for b in table], color=color, linewidth=0.7, alpha=0.4)
        mean = np.array([b["systems"][system["name"]]["mean"]["bleu"] for b in table])
        std = np.array([b["systems"][system["name"]]["std"]["bleu"] for b in table])
        ax.fill_between(at, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
        label = f"{system['name']} (mean ± std, {len(runs)} runs)"
        handles += ax.plot(at, mean, color=color, marker="o", markersize=4, label=label)
    ax.set_xticks(x, labels=[f"{b['words']}\n({b['sentences']})" for b in table], fontsize=8)
    ax.set_xlim(-0.5, len(table) - 0.5)
    ax.set_xlabel("source words (sentences)", fontsize=9)
    ax.set_ylabel("BLEU", fontsize=9)
    ax.set_title(
        f"{result['split']}: error bars 95% CI ({result['bootstrap_resamples']} bootstrap resamples, "
        f"seed {result['seed']})",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, fontsize=8, loc="best")


def figure(result: dict):
    """The matplotlib ``Figure`` (an Agg canvas attached) of a comparison with ``by_length``
    (:func:`keras_memnmt.evaluation.significance.compare` with ``length_width``): one panel
    per split that has it, side by side."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    splits = _splits(result)
    if not splits:
        raise ValueError("the comparison has no by_length scores to draw (compare with --by-length)")
    widths = [max(6.0, 1.5 + BUCKET_INCHES * len(one["by_length"])) for one in splits]
    fig = Figure(figsize=(sum(widths), PANEL_HEIGHT), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(splits), squeeze=False, width_ratios=widths)[0]
    for ax, one in zip(axes, splits):
        _draw(ax, one)
    fig.suptitle("BLEU by source length", fontsize=10)
    return fig


def png_bytes(result: dict) -> bytes:
    """The picture of :func:`figure` as PNG bytes."""
    buffer = io.BytesIO()
    figure(result).savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def save_length_plot(result: dict, path: str) -> str:
    """Writes the picture of :func:`figure` to ``path`` (a PNG) whole or not at all; returns ``path``."""
    from keras_memnmt.files import write_bytes

    write_bytes(path, png_bytes(result))
    return path
