"""Pictures of what a decoder reads and writes: one panel per step detail of an
:class:`~keras_memnmt.pictures.inspection.Inspection` (``memnmt plot``, TensorBoard images).

Drawn with matplotlib's Agg canvas (no display, no pyplot state). The panels are the
model's own (``EncoderDecoder.panels``, :class:`~keras_memnmt.models.Panel`: each detail's axis,
title and label), each present when the model's step computes it, drawn by their axis:

- "source": target subwords (rows) against source subwords (columns), the source
  attention of most models;
- "memory": against the memory cells, numbered from 1 (a memory's read weights);
- "writes": what a memory holds, the cells (rows, numbered from 1 as a "memory" panel's
  columns) against the steps that wrote them, each labelled by its input word
  (``<s>, y_1, ...``; :meth:`~keras_memnmt.pictures.inspection.Inspection.by_cell`), beside the
  read weights so that a word can be followed from its write to its read;
- "window": an attention over the most recent decoder positions, against the decoder's
  input words (``<s>, y_1, ...``): a band below the diagonal, as wide as the window;
- "scalar": one value per step, a curve beside the probability the model gives each
  target subword (every model; a model without panels draws those alone).

A panel's ``caption`` is drawn under its x-axis label, wrapped to :data:`CAPTION_CHARS`
characters a line. The size of the picture follows from the numbers of subwords (and the
panels' captions) alone (:func:`figure_size`), so the same sentence pair gives the same
size at every validation.
"""

from __future__ import annotations

import io
import textwrap

import numpy as np

from keras_memnmt.pictures.inspection import Inspection

DPI = 100
CELL_INCHES = 0.22  # one heatmap row or column
CHAR_INCHES = 0.075  # one character of a tick label
MAX_TITLE = 90  # characters of the source and target in the title
PROBABILITY_LABEL = "p(target subword)"  # the curve every picture has
CAPTION_CHARS = 44  # characters of a caption line
CAPTION_LINE_INCHES = 0.14  # one caption line, at font size 8


def _drawn(inspection: Inspection, axes: tuple[str, ...]) -> list[str]:
    """The details of the model's panels on one of ``axes`` that the step computed, in order."""
    return [p.detail for p in inspection.panels if p.axis in axes and p.detail in inspection.details]


def layout(inspection: Inspection) -> list[list[str]]:
    """The rows of panels: the source heatmaps (the source attention); the other heatmaps
    side by side (memory cells, what a memory holds, windows); the per-step curves."""
    rows = [row for row in (_drawn(inspection, ("source",)), _drawn(inspection, ("memory", "writes", "window"))) if row]
    return rows + [["curves"]]


def _caption(inspection: Inspection, name: str) -> tuple[str, ...]:
    """The lines of the panel's caption (none for the curves)."""
    return () if name == "curves" else tuple(textwrap.wrap(inspection.panel(name).caption, CAPTION_CHARS))


def _columns(inspection: Inspection, name: str) -> int:
    """The heatmap columns the panel is sized for (as many as its caption's width needs)."""
    if name == "curves":
        return len(inspection.target_tokens)
    axis = inspection.panel(name).axis
    columns = len(inspection.input_tokens) if axis in ("window", "writes") else inspection.details[name].shape[-1]
    if _caption(inspection, name):
        columns = max(columns, int(np.ceil(CAPTION_CHARS * CHAR_INCHES / CELL_INCHES)))
    return columns


def _longest(tokens: list[str]) -> float:
    return CHAR_INCHES * max((len(t) for t in tokens), default=1)


def _row_height(inspection: Inspection, row: list[str]) -> float:
    below = _longest(
        inspection.target_tokens if row == ["curves"] else inspection.source_tokens + inspection.input_tokens
    )  # the x labels
    if row == ["curves"]:
        return 2.4 + below
    captions = CAPTION_LINE_INCHES * max(len(_caption(inspection, name)) for name in row)
    return 1.1 + CELL_INCHES * len(inspection.target_tokens) + below + captions


def figure_size(inspection: Inspection) -> tuple[float, float]:
    """``(width, height)`` in inches, from the numbers and lengths of the subwords (and the
    panels' captions) alone."""
    label = _longest(inspection.target_tokens)  # each panel's row labels
    width = max(
        len(row) * (1.6 + label) + CELL_INCHES * sum(_columns(inspection, n) for n in row) for row in layout(inspection)
    )
    height = 1.0 + sum(_row_height(inspection, row) for row in layout(inspection))
    return round(max(6.0, width), 2), round(height, 2)


def _short(text: str) -> str:
    return text if len(text) <= MAX_TITLE else text[: MAX_TITLE - 1] + "…"


def _heatmap(
    fig,
    ax,
    weights: np.ndarray,
    rows: list[str],
    columns: list[str],
    title: str,
    xlabel: str,
    ylabel: str = "target",
    caption: tuple[str, ...] = (),
) -> None:
    vmax = max(float(weights.max()), 1e-6)
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(columns)), labels=columns, rotation=90, fontsize=8)
    ax.set_yticks(range(len(rows)), labels=rows, fontsize=8)
    if caption:
        ax.set_xlabel("\n".join([xlabel, *caption]), fontsize=8)
    else:
        ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02)


def _draw(fig, ax, inspection: Inspection, name: str) -> None:
    d, rows = inspection.details, inspection.target_tokens
    if name == "curves":  # one value per step
        steps = np.arange(len(rows))
        ax.plot(steps, inspection.target_probability, marker="o", markersize=3, label=PROBABILITY_LABEL)
        for detail in _drawn(inspection, ("scalar",)):
            ax.plot(steps, d[detail], marker="o", markersize=3, label=inspection.panel(detail).title)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xticks(steps, labels=rows, rotation=90, fontsize=8)
        ax.set_xlim(-0.5, len(rows) - 0.5)
        ax.set_title(inspection.curves_title, fontsize=10)
        ax.legend(fontsize=8, loc="upper right")
        ax.grid(alpha=0.3)
        return
    panel = inspection.panel(name)
    labels = dict(
        title=panel.title.format(size=d[name].shape[-1]), xlabel=panel.xlabel, caption=_caption(inspection, name)
    )
    cells = [str(i + 1) for i in range(d[name].shape[-1])]
    if panel.axis == "source":
        _heatmap(fig, ax, d[name], rows, inspection.source_tokens, **labels)
    elif panel.axis == "memory":
        _heatmap(fig, ax, d[name], rows, cells, **labels)
    elif panel.axis == "writes":  # the cells (rows, as the "memory" panels' columns) against the steps
        _heatmap(fig, ax, inspection.by_cell(name), cells, inspection.input_tokens, ylabel="memory cell", **labels)
    else:  # "window"
        _heatmap(fig, ax, inspection.by_position(name), rows, inspection.input_tokens, **labels)


def figure(inspection: Inspection, forced_on: str = "the reference"):
    """The matplotlib ``Figure`` of every panel (an Agg canvas attached).

    Its title names the model and its target: "forced on ``forced_on``" for a
    teacher-forced inspection (the reference of ``memnmt plot --reference`` and of the
    validation pictures; the server names the translation it answered), else "its own
    greedy translation"."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = layout(inspection)
    fig = Figure(figsize=figure_size(inspection), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    subfigures = fig.subfigures(
        len(rows), 1, squeeze=False, height_ratios=[_row_height(inspection, row) for row in rows]
    )[:, 0]
    for subfigure, row in zip(subfigures, rows):
        widths = [_columns(inspection, name) + 8 for name in row]  # + the labels and colour bar
        axes = subfigure.subplots(1, len(row), squeeze=False, width_ratios=widths)[0]
        for ax, name in zip(axes, row):
            _draw(subfigure, ax, inspection, name)
    how = f"forced on {forced_on}" if inspection.teacher_forced else "its own greedy translation"
    if inspection.note:
        how += f"; {inspection.note}"
    fig.suptitle(
        f"{inspection.model_name} ({how})\n{_short(inspection.source)}\n→ {_short(inspection.target)}", fontsize=10
    )
    return fig


def png_bytes(inspection: Inspection, forced_on: str = "the reference") -> bytes:
    """The picture as PNG bytes, ``figure_size * DPI`` pixels (``forced_on`` as :func:`figure`)."""
    buffer = io.BytesIO()
    figure(inspection, forced_on=forced_on).savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def image_array(inspection: Inspection) -> np.ndarray:
    """The picture as an ``(H, W, 3)`` uint8 array (what ``tf.summary.image`` takes)."""
    fig = figure(inspection)
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()


def save_plot(inspection: Inspection, path: str) -> str:
    """Writes the picture to ``path`` (a PNG); returns ``path``."""
    with open(path, "wb") as f:
        f.write(png_bytes(inspection))
    return path
