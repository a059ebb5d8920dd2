"""What a model's pictures draw: one :class:`Panel` per step detail (``memnmt plot``,
TensorBoard's validation pictures; :mod:`keras_memnmt.inspection` keeps the details,
:mod:`keras_memnmt.plots` draws them).

A model lists its panels in ``EncoderDecoder.panels``; the base lists the source attention
alone (:data:`SOURCE_ATTENTION`), which a cell without attention simply never computes.
"""

from __future__ import annotations

import dataclasses

# What a detail's last axis indexes ("writes": the memory cells, drawn as what they hold).
AXES = ("source", "memory", "writes", "window", "scalar")


@dataclasses.dataclass(frozen=True)
class Panel:
    """One step detail that a model's pictures draw.

    Attributes:
        detail: its name among the details of the cell's ``step_details`` (see
            :meth:`~keras_memnmt.layers.DecoderCell.step_details`), or "attention" for
            the attention a model without a cell returns from its ``decode_step``. A
            picture draws it when the step computes it.
        axis: what its last axis indexes: "source" positions (a heatmap against the
            source subwords), "memory" cells (a heatmap against the cells, numbered from
            1), the memory cells drawn as "writes" (what the memory holds: a heatmap of
            the cells, numbered from 1 as a "memory" panel's columns, against the steps,
            each labelled by the step's input word ``<s>, y_1 ..``, the newest word the
            state that writes has read; see ``Inspection.by_cell``), a "window" of the most
            recent decoder positions, slot 0 the newest (a heatmap against the decoder's
            input words, see ``lag``), or "scalar" (one value per step, a curve beside
            the target probabilities).
        title: the heatmap's title, or the curve's label; ``{size}`` stands for the size
            of the detail's last axis (cells, window slots).
        xlabel: the heatmap's x-axis label (not used by a "scalar").
        lag: a "window"'s: how many steps back its slot 0 is (0: the step's own input
            word ``y_{t-1}``; 1: the step before).
        caption: what the heatmap's axes mean beyond its labels, drawn under its x-axis
            label ("" for none).
    """

    detail: str
    axis: str
    title: str
    xlabel: str = ""
    lag: int = 0
    caption: str = ""

    def __post_init__(self):
        if self.axis not in AXES:
            raise ValueError(f"axis must be one of {AXES}, got {self.axis!r}")
        if self.lag < 0:
            raise ValueError(f"lag must be >= 0, got {self.lag!r}")


# The source attention, "attention" (B, Tx): what most models' pictures show first.
SOURCE_ATTENTION = Panel("attention", "source", "source attention", "source")
