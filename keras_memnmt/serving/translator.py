"""One object that translates and scores in Python: a run, an ensemble of runs, or an export.

Example:

```python
from keras_memnmt import Translator

translator = Translator("runs/rnnsearch")  # or ["runs/a", "runs/b"], or a `memnmt export` folder
translator.translate(["A man rides a bike."], beam=5)  # -> list[str]
translator.translate(["A man rides a bike."], beam=5, n_best=3)  # -> list[list[(translation, normalized score)]]
translator.score(["A man rides a bike."], ["Ein Mann fährt Fahrrad."])  # -> [log P(target | source)]
```

A run translates as ``memnmt translate`` does
(:func:`~keras_memnmt.evaluation.translation.translate_chunks`, with its search options,
defaults and checks) and scores as ``memnmt score`` does
(:func:`~keras_memnmt.evaluation.scoring.score_pairs`). An export translates through its
SavedModel signatures (:class:`~keras_memnmt.serving.translators.ExportTranslator`) with the
search it was exported with, and has no signature that scores.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

# Sentences per signature call of an export (docs/export.md's consumer calls it so).
EXPORT_BATCH_SENTENCES = 64


def _is_export(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "saved_model.pb"))


def _sentences(value, name: str) -> list[str]:
    """``value`` as a list of strings, or a ``ValueError`` naming ``name``."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{name}: expected a list of strings, got {type(value).__name__}")
    for i, text in enumerate(value):
        if not isinstance(text, str):
            raise ValueError(f"{name}[{i}]: expected a string, got {type(text).__name__}")
    return list(value)


def _integer(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


class Translator:
    """A run directory, an ensemble of runs, or a SavedModel export, behind one object.

    Args:
        model: a run directory written by ``memnmt train``; a list of them (an ensemble,
            as several ``memnmt translate --model``), each a path or a ``(run, checkpoint)``
            pair; or a folder written by ``memnmt export``.
        checkpoint: with one run, another model file of it instead of ``best.keras`` (a
            name in ``RUN/checkpoints`` such as ``step3199``, or a ``.keras`` path), as
            ``--checkpoint``.

    Attributes:
        kind: ``"run"`` (one run or an ensemble) or ``"export"``.
        members: the ``(run, checkpoint)`` pairs loaded (an export: ``[(path, None)]``).
        model, vocab, config: what :func:`~keras_memnmt.rundir.loading.load_ensemble` gives
            (``None`` for an export).
        exported: an export's search options (``beam_size``, ``n_best``,
            ``length_penalty``, ``alpha``, ``max_length``); ``None`` for a run.

    Example:

    ```python
    translator = Translator(["runs/a", ("runs/b", "step3199")])
    translator.translate(["A man rides a bike."])  # beam 5, as memnmt translate
    translator.translate(["A man rides a bike."], sampling="topk:10", seed=1)
    ```
    """

    def __init__(
        self,
        model: str | os.PathLike | Sequence[str | os.PathLike | tuple[str, str | None]],
        checkpoint: str | None = None,
    ):
        from keras_memnmt.rundir.loading import load_ensemble

        given = [model] if isinstance(model, (str, os.PathLike)) else model
        if not isinstance(given, Sequence) or not given:
            raise ValueError(f"model: expected a run directory, a list of them, or an export folder; got {model!r}")
        members = [_member(m, i) for i, m in enumerate(given)]
        if checkpoint is not None:
            if len(members) > 1 or members[0][1] is not None:
                raise ValueError(
                    "checkpoint: only with one run; pair each run of an ensemble with its "
                    "checkpoint instead, as (run, checkpoint)"
                )
            members = [(members[0][0], checkpoint)]
        self.model = self.vocab = self.config = self.exported = None
        self._export = None
        exports = [path for path, _ in members if _is_export(path)]
        if exports:
            if len(members) > 1 or members[0][1] is not None:
                raise ValueError(
                    f"{exports[0]} is a SavedModel export: translate with it alone, without a "
                    "checkpoint (an ensemble is exported as one: memnmt export --model A --model B)"
                )
            self._export = _load_export(exports[0])
            self.kind, self.members = "export", members
            self.exported = {
                k: self._export.info[k]
                for k in ("beam_size", "n_best", "length_penalty", "alpha", "max_length")
                if k in self._export.info
            }
            return
        self.model, self.vocab, self.config = load_ensemble(members)
        self.kind, self.members = "run", members

    def __repr__(self) -> str:
        shown = [path if checkpoint is None else f"{path}:{checkpoint}" for path, checkpoint in self.members]
        return f"Translator({self.kind}: {', '.join(shown)})"

    def translate(
        self,
        sentences: Sequence[str],
        *,
        prefixes: Sequence[str] | None = None,
        constraints: Sequence[str] | None = None,
        **search,
    ) -> list:
        """Each sentence's translation, in input order (an empty sentence: ``""``).

        Args:
            sentences: the source sentences, a list of strings.
            prefixes: one target prefix per sentence (``""``: none); each translation
                starts with it.
            constraints: one line per sentence of target phrases separated by tabs (``""``:
                none) that its translation must contain (beam 2 or more, at most ``beam``
                phrases a line).
            **search: the search settings by name, each a field of
                :class:`~keras_memnmt.decoding.settings.SearchSettings` (``memnmt translate``'s
                flags): ``mode``, ``beam`` (default 5; 1 with ``sampling``), ``n_best`` (each
                output a list of ``n_best`` ``(translation, score)`` pairs, best first, the
                length-normalized score), ``length_penalty``, ``alpha``, ``sampling``,
                ``temperature``, ``seed``, ``samples`` (above 1: each output a list of that
                many strings), ``max_length``, ``min_length``, ``no_repeat_ngram_size``,
                ``mbr``, ``mbr_utility``, ``batch_size`` (a run's default: 256 greedy, 640 //
                beam otherwise; an export's: 64 sentences per signature call), ``max_tokens``.

        A bad value is a ``ValueError`` naming the argument, raised before anything is
        translated. An export's search is fixed when it is exported (:attr:`exported`):
        ``beam``, ``length_penalty`` and ``alpha`` may only repeat its own, ``n_best`` be 1
        or its ``n_best``, and any other setting, prefixes and constraints are a ``ValueError``.
        """
        from keras_memnmt.decoding.settings import SearchSettings

        sentences = _sentences(sentences, "sentences")
        for name, given in (("prefixes", prefixes), ("constraints", constraints)):
            if given is not None and len(_sentences(given, name)) != len(sentences):
                raise ValueError(
                    f'{name}: {len(given)} for {len(sentences)} sentences; give one per sentence ("" for none)'
                )
        try:
            settings = SearchSettings(**search)
        except TypeError as e:  # an unknown name
            raise ValueError(f"translate: {e}; the settings: see keras_memnmt.decoding.settings") from None
        if self._export is not None:
            return self._translate_export(sentences, settings, prefixes, constraints)
        settings.for_inputs(constraints=constraints is not None and any(c.strip() for c in constraints))
        return self._translate_run(sentences, settings, prefixes, constraints)

    def _translate_run(self, sentences: list[str], settings, prefixes, constraints) -> list:
        from keras_memnmt.evaluation.translation import check_search_inputs, translate_chunks

        check_search_inputs(self.vocab, settings.beam_size, prefixes, constraints)
        out: list = []
        for chunk in translate_chunks(
            self.model,
            self.vocab,
            sentences,
            settings=settings,
            progress=False,
            prefixes=prefixes,
            constraints=constraints,
        ):
            out += chunk
        return out

    def _translate_export(self, sentences: list[str], settings, prefixes, constraints) -> list:
        exported = self.exported
        fixed = ", ".join(f"{k} {v}" for k, v in exported.items())
        refuse = f"an export's search is fixed when it is exported ({fixed}); translate with the run to choose it"
        for name, value in (("prefixes", prefixes), ("constraints", constraints)):
            if value is not None:
                raise ValueError(f"{name}: {refuse}")
        own = {
            "beam": exported.get("beam_size"),
            "length_penalty": exported.get("length_penalty"),
            "alpha": exported.get("alpha"),
        }
        for name, value in settings.changed().items():
            if name == "n_best":
                if value not in (1, exported.get("n_best")):
                    raise ValueError(
                        f"n_best {value!r}: the export answers 1 (translate) or "
                        f"{exported.get('n_best')} (translate_n_best); {refuse}"
                    )
            elif name != "batch_size" and value != own.get(name, object()):
                raise ValueError(f"{name} {value!r}: {refuse}")
        n_best = settings.n_best
        signature = "translate_n_best" if n_best not in (None, 1) else "translate"
        size = settings.batch_size or EXPORT_BATCH_SENTENCES
        rows: list[list[tuple[str, float]]] = []
        for start in range(0, len(sentences), size):
            items = [(text, "", "") for text in sentences[start : start + size]]
            rows += self._export.translate(items, (("signature", signature),))
        if n_best is None:
            return [row[0][0] for row in rows]
        return [[(text, score) for text, score, *_ in row] for row in rows]

    def score(
        self, sources: Sequence[str], targets: Sequence[str], batch_size: int | None = None
    ) -> list[float | None]:
        """Each pair's ``log P(target | source)`` under the model, in input order, as ``memnmt
        score`` computes it (:func:`~keras_memnmt.evaluation.scoring.score_pairs`): the sum
        of the target's subword log-probabilities, eos included; ``None`` for an empty source.

        ``batch_size``: sentence pairs per teacher-forced batch (default 64, as ``memnmt
        score --batch-size``). An export has no signature that scores: a ``ValueError``.
        """
        from keras_memnmt.evaluation.scoring import SCORE_BATCH_SENTENCES, score_pairs

        sources, targets = _sentences(sources, "sources"), _sentences(targets, "targets")
        if self._export is not None:
            raise ValueError(
                f"{self.members[0][0]} is an export: its signatures translate but do not score; score with the run"
            )
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets: one target per source")
        batch_size = SCORE_BATCH_SENTENCES if batch_size is None else _integer(batch_size, "batch_size", 1)
        entries = score_pairs(self.model, self.vocab, sources, targets, batch_size=batch_size, progress=False)
        return [entry["score"] for entry in entries]


def _member(given, index: int) -> tuple[str, str | None]:
    """One ``model`` entry as a ``(run, checkpoint)`` pair."""
    if isinstance(given, (str, os.PathLike)):
        return os.fspath(given), None
    if (
        isinstance(given, (tuple, list))
        and len(given) == 2
        and isinstance(given[0], (str, os.PathLike))
        and (given[1] is None or isinstance(given[1], str))
    ):
        return os.fspath(given[0]), given[1]
    raise ValueError(f"model[{index}]: expected a run directory or a (run, checkpoint) pair, got {given!r}")


def _load_export(path: str):
    """The :class:`~keras_memnmt.serving.translators.ExportTranslator` of ``path``, or a
    ``ValueError`` saying why it is not a complete export."""
    from keras_memnmt.export.saved_model import not_an_export
    from keras_memnmt.serving.translators import ExportTranslator

    reason = not_an_export(path)
    if reason:
        raise ValueError(f"{path}: {reason}")
    return ExportTranslator(path)
