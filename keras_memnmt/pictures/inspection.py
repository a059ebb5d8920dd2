"""What a model's decoder computes for one sentence pair, step by step.

:func:`inspect_pair` runs a model (an :class:`~keras_memnmt.models.EncoderDecoder`) over
a source sentence and a target, teacher-forced on a given reference or on the model's own
greedy translation, and keeps the named details of every step
(:meth:`~keras_memnmt.models.EncoderDecoder.step_details`: a recurrent model's are its
cell's, :meth:`~keras_memnmt.layers.DecoderCell.step_details`; another model's, the
attention its ``decode_step`` returns) that the model's pictures draw, the details its
class lists in ``EncoderDecoder.panels`` (the source attention, a memory's read and write
weights, an attention over the recent words, ...), with the subword tokens of both sides
for axis labels. :mod:`keras_memnmt.pictures.plots` draws them.

A step's details are rows over what it reads or writes; two views put them against the
words: :meth:`Inspection.by_position` lays a window over the decoder positions, and
:meth:`Inspection.by_cell` turns a memory's write weights into what the memory holds,
cells against the steps that wrote them (each step labelled by its input word).
"""

from __future__ import annotations

import contextlib
import dataclasses

import keras
import numpy as np
from keras import ops

from keras_memnmt.data import encode_sources
from keras_memnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID, SubwordVocab
from keras_memnmt.models.panels import Panel


@dataclasses.dataclass
class Inspection:
    """A model's step details over one sentence pair.

    Attributes:
        source: the source sentence.
        target: the reference it was forced on, or the model's own greedy translation.
        teacher_forced: True when ``target`` is a given reference.
        source_tokens: the source subwords, eos (``</s>``) last, ``Tx`` of them.
        target_tokens: the subwords the steps predict (or are forced to), ``y_1 .. y_T``,
            eos last when the sentence ends.
        input_tokens: each step's input, ``<s>, y_1 .. y_{T-1}``.
        details: name → ``(T, k)`` weights or ``(T,)`` values, one row per step (the
            details of ``panels`` that the model's step computes).
        target_probability: ``(T,)`` the probability the model gives each target subword
            at its step (with every cell, attention or not).
        model_name: the model's class name.
        panels: the model's :class:`~keras_memnmt.models.Panel` list (``EncoderDecoder.panels``):
            each detail's axis and labels, in the order the pictures draw them.
        curves_title: the title of the pictures' per-step curves (``EncoderDecoder.curves_title``).
        note: what the pictures' title adds about what they cannot show
            (``EncoderDecoder.picture_note``).
    """

    source: str
    target: str
    teacher_forced: bool
    source_tokens: list[str]
    target_tokens: list[str]
    input_tokens: list[str]
    details: dict[str, np.ndarray]
    target_probability: np.ndarray
    model_name: str
    panels: tuple[Panel, ...] = ()
    curves_title: str = "per target step"
    note: str = ""

    def panel(self, name: str) -> Panel:
        """The panel of detail ``name``."""
        for panel in self.panels:
            if panel.detail == name:
                return panel
        raise KeyError(f"{self.model_name} has no panel {name!r}")

    def by_cell(self, name: str) -> np.ndarray:
        """A memory detail (``write_weights``, ``add_weights``) as ``(n, T)``, cells against
        the steps: entry ``[i, t]`` is the weight with which step ``t`` wrote cell ``i``,
        from the state that read ``input_tokens[t]`` (``y_{t-1}``) and predicts
        ``target_tokens[t]`` (``y_t``)."""
        return np.ascontiguousarray(self.details[name].T)

    def by_position(self, name: str) -> np.ndarray:
        """A window detail (``memory_attention``, ``past_attention``) as ``(T, T)`` weights
        over the decoder positions: entry ``[t, j]`` is the weight step ``t`` gives to what
        position ``j`` (input word ``input_tokens[j]``) left in the window; 0 outside it."""
        weights = self.details[name]  # (T, K), slot 0 the newest
        steps, slots = weights.shape
        lag = self.panel(name).lag
        out = np.zeros((steps, steps), np.float32)
        for t in range(steps):
            for k in range(slots):
                j = t - lag - k
                if j >= 0:
                    out[t, j] = weights[t, k]
        return out


def _pieces(vocab_side, ids: list[int]) -> list[str]:
    return [vocab_side.id_to_piece(int(i)) for i in ids]


def greedy_target(model, source_ids: list[int]) -> list[int]:
    """The model's greedy translation of one sentence's ids, eos included when it ends."""
    out = model.generate(np.asarray([source_ids], np.int32), beam_size=1)
    tokens = []
    for token in np.asarray(out["tokens"])[0, 0].tolist():
        if token == PAD_ID:
            break
        tokens.append(int(token))
        if token == EOS_ID:
            break
    return tokens


def inspect_pair(model, vocab: SubwordVocab, source: str, reference: str | None = None) -> Inspection:
    """Runs ``model``'s decoder over ``source`` and a target, one step at a time, and keeps
    the details of every step.

    The target is ``reference`` (teacher forcing: each step is fed the previous reference
    subword) or, without one, the model's own greedy translation (the same steps greedy
    search took). Every step is the model's ``step_details``, the step that the searches
    run.

    Args:
        model: an :class:`~keras_memnmt.models.EncoderDecoder` (not an ensemble).
        vocab: the run's vocabulary.
        source: one source sentence (truncated to the translator's 200 subwords).
        reference: its target, or None.
    """
    if not hasattr(model, "step_details"):
        raise ValueError(f"inspecting needs one model, got a {type(model).__name__}")
    if not source.strip():
        raise ValueError("the source sentence is empty")
    source_ids = encode_sources(vocab, [source])[0]
    if reference is not None:
        target_ids = vocab.target.encode([reference.strip()])[0] + [EOS_ID]
    else:
        target_ids = greedy_target(model, source_ids)
    inputs = [BOS_ID] + target_ids[:-1]
    with _no_gradients():
        rows, probabilities = _step_through(
            model, source_ids, inputs, target_ids, [panel.detail for panel in model.panels]
        )
    target = reference.strip() if reference is not None else vocab.target.decode([target_ids])[0]
    return Inspection(
        source=source.strip(),
        target=target,
        teacher_forced=reference is not None,
        source_tokens=_pieces(vocab.source, source_ids),
        target_tokens=_pieces(vocab.target, target_ids),
        input_tokens=_pieces(vocab.target, inputs),
        details={name: np.stack(values) for name, values in rows.items()},
        target_probability=np.asarray(probabilities, np.float32),
        model_name=type(model).__name__,
        panels=tuple(model.panels),
        curves_title=model.curves_title,
        note=model.picture_note,
    )


def _step_through(model, source_ids: list[int], inputs: list[int], target_ids: list[int], names: list[str]) -> tuple:
    """``(details by name, target probabilities)``: the details ``names`` of the model's
    ``step_details`` on each input."""
    source = ops.convert_to_tensor(np.asarray([source_ids], np.int32))
    states = model.search_states(source, len(inputs))
    rows: dict[str, list[np.ndarray]] = {}
    probabilities = []
    for token, following in zip(inputs, target_ids):
        tokens = ops.convert_to_tensor(np.asarray([token], np.int32))
        details = model.step_details(tokens, states)
        states = details["states"]
        logits = ops.convert_to_numpy(ops.cast(details["logits"], "float32"))[0]
        probabilities.append(_softmax(logits)[following])
        for name in names:
            if details.get(name) is not None:
                value = ops.convert_to_numpy(ops.cast(details[name], "float32"))[0]
                rows.setdefault(name, []).append(value)
    return rows, probabilities


def _no_gradients():
    """PyTorch: no autograd graph for these eager steps; a no-op context elsewhere."""
    if keras.backend.backend() == "torch":
        import torch

        return torch.no_grad()
    return contextlib.nullcontext()


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max())
    return z / z.sum()
