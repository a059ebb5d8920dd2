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

import math
import os
from collections.abc import Sequence

# Sentences per signature call of an export (docs/export.md's consumer calls it so).
EXPORT_BATCH_SENTENCES = 64
MAX_SEED = 2**31 - 1  # as `memnmt translate --seed`
LENGTH_PENALTIES = ("gnmt", "average", "none")


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


def _integer(value, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"from {low} to {high}"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")
    return value


def _number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


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
        model, vocab, config: what :func:`~keras_memnmt.rundir.runs.load_ensemble` gives
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

    def __init__(self, model: str | os.PathLike | Sequence[str | os.PathLike | tuple[str, str | None]],
                 checkpoint: str | None = None):
        from keras_memnmt.rundir.runs import load_ensemble

        given = [model] if isinstance(model, (str, os.PathLike)) else model
        if not isinstance(given, Sequence) or not given:
            raise ValueError(f"model: expected a run directory, a list of them, or an export folder; got {model!r}")
        members = [_member(m, i) for i, m in enumerate(given)]
        if checkpoint is not None:
            if len(members) > 1 or members[0][1] is not None:
                raise ValueError("checkpoint: only with one run; pair each run of an ensemble with its "
                                 "checkpoint instead, as (run, checkpoint)")
            members = [(members[0][0], checkpoint)]
        self.model = self.vocab = self.config = self.exported = None
        self._export = None
        exports = [path for path, _ in members if _is_export(path)]
        if exports:
            if len(members) > 1 or members[0][1] is not None:
                raise ValueError(f"{exports[0]} is a SavedModel export: translate with it alone, without a "
                                 "checkpoint (an ensemble is exported as one: memnmt export --model A --model B)")
            self._export = _load_export(exports[0])
            self.kind, self.members = "export", members
            self.exported = {k: self._export.info[k] for k in ("beam_size", "n_best", "length_penalty", "alpha",
                                                               "max_length") if k in self._export.info}
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
        beam: int | None = None,
        n_best: int | None = None,
        length_penalty: str | None = None,
        alpha: float | None = None,
        sampling: str | None = None,
        temperature: float = 1.0,
        seed: int = 0,
        samples: int = 1,
        prefixes: Sequence[str] | None = None,
        constraints: Sequence[str] | None = None,
        batch_size: int | None = None,
    ) -> list:
        """Each sentence's translation, in input order (an empty sentence: ``""``).

        Args:
            sentences: the source sentences, a list of strings.
            beam: beam size, 1 = greedy (default 5; 1 with ``sampling``; an export's own).
            n_best: each output a list of ``n_best`` ``(translation, score)`` pairs, best
                first, instead of a string (the length-normalized log-probability, at every
                beam: ``evaluation.translation.score_kinds``).
            length_penalty: ``"gnmt"`` (default), ``"average"`` or ``"none"``: how beam
                hypotheses are ranked.
            alpha: the GNMT length-penalty exponent, >= 0 (default 0.6).
            sampling: ``"full"``, ``"topk:K"`` or ``"topp:P"``: draw each token instead of
                searching (not with a beam above 1).
            temperature, seed, samples: with ``sampling``: what the log-probabilities are
                divided by (> 0), the draws' seed (the same seed, the same samples on every
                backend and batch size) and draws per sentence (above 1: each output a list
                of ``samples`` strings).
            prefixes: one target prefix per sentence (``""``: none); each translation
                starts with it.
            constraints: one line per sentence of target phrases separated by tabs (``""``:
                none) that its translation must contain (beam 2 or more, at most ``beam``
                phrases a line).
            batch_size: sentences per search (a run's default: 256 greedy, 640 // beam
                otherwise) or per signature call (an export's default: 64).

        A bad value is a ``ValueError`` naming the argument, raised before anything is
        translated. An export's search is fixed when it is exported (:attr:`exported`):
        ``beam``, ``length_penalty`` and ``alpha`` may only repeat its own, ``n_best`` be 1
        or its ``n_best``, and sampling, prefixes and constraints are a ``ValueError``.
        """
        from keras_memnmt.decoding.common import parse_sampling

        sentences = _sentences(sentences, "sentences")
        if beam is not None:
            _integer(beam, "beam", 1)
        if n_best is not None:
            _integer(n_best, "n_best", 1)
        if length_penalty is not None and length_penalty not in LENGTH_PENALTIES:
            raise ValueError(f"length_penalty must be one of {', '.join(LENGTH_PENALTIES)}, got {length_penalty!r}")
        if alpha is not None and _number(alpha, "alpha") < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        if sampling is None:
            for name, value, default in (("temperature", temperature, 1.0), ("seed", seed, 0), ("samples", samples, 1)):
                if value != default:
                    raise ValueError(f"{name} sets how sampling draws; give sampling (full, topk:K or topp:P)")
        else:
            if not isinstance(sampling, str):
                raise ValueError(f"sampling must be full, topk:K or topp:P, got {sampling!r}")
            parse_sampling(sampling)
            if beam not in (None, 1):
                raise ValueError(f"sampling draws one token at a time; it does not combine with beam {beam}")
            if not _number(temperature, "temperature") > 0:
                raise ValueError(f"temperature must be > 0, got {temperature}")
            _integer(seed, "seed", 0, MAX_SEED)
            _integer(samples, "samples", 1)
        if batch_size is not None:
            _integer(batch_size, "batch_size", 1)
        for name, given in (("prefixes", prefixes), ("constraints", constraints)):
            if given is not None and len(_sentences(given, name)) != len(sentences):
                raise ValueError(f"{name}: {len(given)} for {len(sentences)} sentences; give one per sentence "
                                 "(\"\" for none)")
        if self._export is not None:
            return self._translate_export(sentences, beam, n_best, length_penalty, alpha, sampling, prefixes,
                                          constraints, batch_size)
        beam = (1 if sampling else 5) if beam is None else beam
        if n_best is not None:
            _integer(n_best, "n_best", 1, beam)
        if constraints is not None and (sampling or beam < 2):
            raise ValueError("constraints need beam search: beam 2 or more"
                             + (", not sampling" if sampling else f" (got beam {beam})"))
        search = {"length_penalty": length_penalty or "gnmt", "alpha": 0.6 if alpha is None else float(alpha)}
        if sampling:
            search.update(sampling=sampling, temperature=float(temperature), seed=seed, samples=samples)
        return self._translate_run(sentences, beam, n_best, prefixes, constraints, batch_size, search)

    def _translate_run(self, sentences: list[str], beam: int, n_best: int | None, prefixes, constraints,
                       batch_size: int | None, search: dict) -> list:
        from keras_memnmt.evaluation.translation import check_search_inputs, translate_chunks

        check_search_inputs(self.vocab, beam, prefixes, constraints)
        out: list = []
        for chunk in translate_chunks(self.model, self.vocab, sentences, beam_size=beam, batch_size=batch_size,
                                      progress=False, prefixes=prefixes, constraints=constraints, n_best=n_best,
                                      **search):
            out += chunk
        return out

    def _translate_export(self, sentences: list[str], beam, n_best, length_penalty, alpha, sampling, prefixes,
                          constraints, batch_size) -> list:
        exported = self.exported
        fixed = ", ".join(f"{k} {v}" for k, v in exported.items())
        refuse = f"an export's search is fixed when it is exported ({fixed}); translate with the run to choose it"
        for name, value in (("sampling", sampling), ("prefixes", prefixes), ("constraints", constraints)):
            if value is not None:
                raise ValueError(f"{name}: {refuse}")
        for name, value, own in (("beam", beam, exported.get("beam_size")),
                                 ("length_penalty", length_penalty, exported.get("length_penalty")),
                                 ("alpha", alpha, exported.get("alpha"))):
            if value is not None and value != own:
                raise ValueError(f"{name} {value!r}: {refuse}")
        if n_best is not None and n_best not in (1, exported.get("n_best")):
            raise ValueError(f"n_best {n_best!r}: the export answers 1 (translate) or {exported.get('n_best')} "
                             f"(translate_n_best); {refuse}")
        signature = "translate_n_best" if n_best not in (None, 1) else "translate"
        size = batch_size or EXPORT_BATCH_SENTENCES
        rows: list[list[tuple[str, float]]] = []
        for start in range(0, len(sentences), size):
            items = [(text, "", "") for text in sentences[start:start + size]]
            rows += self._export.translate(items, (("signature", signature),))
        return [row[0][0] for row in rows] if n_best is None else rows

    def score(self, sources: Sequence[str], targets: Sequence[str], batch_size: int | None = None
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
            raise ValueError(f"{self.members[0][0]} is an export: its signatures translate but do not score; "
                             "score with the run")
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets: one target per source")
        batch_size = SCORE_BATCH_SENTENCES if batch_size is None else _integer(batch_size, "batch_size", 1)
        entries = score_pairs(self.model, self.vocab, sources, targets, batch_size=batch_size, progress=False)
        return [entry["score"] for entry in entries]


def _member(given, index: int) -> tuple[str, str | None]:
    """One ``model`` entry as a ``(run, checkpoint)`` pair."""
    if isinstance(given, (str, os.PathLike)):
        return os.fspath(given), None
    if (isinstance(given, (tuple, list)) and len(given) == 2 and isinstance(given[0], (str, os.PathLike))
            and (given[1] is None or isinstance(given[1], str))):
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
