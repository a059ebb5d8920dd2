"""What `memnmt serve` translates with: a run (or an ensemble of runs) or a SavedModel export.

Both answer TensorFlow Serving's signatures of the export (:mod:`keras_memnmt.export`):
``translate`` (``sentences`` → ``translation``, ``score``, ``log_prob``) and
``translate_n_best`` (``sentences`` → ``translations``, ``scores``, ``log_probs``). A run also takes search options per
request (:func:`keras_memnmt.decoding.settings.from_options`); an export's search is fixed when it is exported.
What the server calls on either is :class:`ServingTranslator`.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Hashable
from typing import Protocol, runtime_checkable

SIGNATURES = {
    "translate": ("translation", "score"),
    "translate_n_best": ("translations", "scores"),
}
DEFAULT_SIGNATURE = "serving_default"  # TensorFlow Serving's name; the export maps it to translate
INPUT = "sentences"
CONSTRAINED_ROWS = 8  # sentences per model batch of a constrained search (RunTranslator.translate)


class Cancelled(Exception):
    """A translation stopped between batches because every request of it was answered."""


class RequestError(ValueError):
    """A request the server answers with an HTTP error: ``status`` and a one-line message."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@runtime_checkable
class ServingTranslator(Protocol):
    """What `memnmt serve` calls on the translator it serves
    (:func:`~keras_memnmt.serving.app.create_app`, :func:`keras_memnmt.cli.serve.cmd_serve`):
    :class:`RunTranslator` and :class:`ExportTranslator` are the two. An item is ``(sentence,
    target prefix, constraints)``, the constraints tab-separated (``""``: none).

    Not :class:`keras_memnmt.serving.translator.Translator`, the library's Python translator,
    whose interface is another."""

    kind: str  # "run" or "export": what the server says it serves

    def search(self, given: dict, signature: str) -> Hashable:
        """A request's ``options`` for ``signature`` (``translate``, ``translate_n_best``) as
        the key of its search: requests with the same key are batched together. Options
        the translator does not take are a :class:`RequestError`."""
        ...

    def check_items(self, items: list[tuple[str, str, str]], search) -> None:
        """A :class:`RequestError` naming the first item that cannot be translated with the
        search ``search`` (its key); checked before the request is queued, so that a bad
        item fails its own request only."""
        ...

    def translate(
        self, items: list[tuple[str, str, str]], search, cancelled: Callable[[], bool] = lambda: False
    ) -> list[list[tuple]]:
        """Each item's n-best list of ``(translation, score)`` or ``(translation, score,
        log_prob, ...)`` entries, best first, on the model's thread; ``cancelled()`` may be
        asked between model batches (:class:`Cancelled` once it is true)."""
        ...

    def source_lengths(self, sentences: list[str]) -> list[int] | None:
        """Each sentence's count of source subwords (the answer warns of those over the
        translator's bound), or None when the translator does not tokenize here."""
        ...

    def pictures(self, source: str, translation: str) -> list[dict]:
        """The page's pictures of ``source`` forced on ``translation`` (``[]``: none)."""
        ...

    def describe(self) -> dict:
        """What ``GET /v1/models`` says of the model, besides its name and batching."""
        ...


class RunTranslator:
    """A run directory, or several as an ensemble (``members`` as ``memnmt translate``
    pairs ``--model`` and ``--checkpoint``)."""

    kind = "run"

    def __init__(self, members: list[tuple[str, str | None]]):
        from keras_memnmt.rundir.loading import load_ensemble

        self.model, self.vocab, self.config = load_ensemble(members)
        self.members = members
        self.has_pictures = all(hasattr(m, "step_details") for m in self.models())

    def models(self) -> list:
        """The models whose pictures the page shows: an ensemble's members, or the model."""
        from keras_memnmt.models import Ensemble

        return list(self.model.members) if isinstance(self.model, Ensemble) else [self.model]

    def search(self, given: dict, signature: str):
        """The request's options as :class:`~keras_memnmt.decoding.settings.SearchSettings`
        (checked, each within the server's range; ``n_best`` completed: 1 for ``translate``,
        the beam for ``translate_n_best``), a hashable key: requests with the same key are
        batched together."""
        from keras_memnmt.decoding.settings import from_options

        if not isinstance(given, dict):
            raise RequestError(f"options: expected an object, got {json.dumps(given)[:80]}")
        try:
            settings = from_options(given)
            if settings.n_best is None:
                whole = signature == "translate_n_best" and not settings.mode_object().picks
                settings = settings.replace(n_best=settings.beam_size if whole else 1)
        except ValueError as e:
            raise RequestError(str(e)) from None
        return settings

    def check_items(self, items: list[tuple[str, str, str]], search: tuple) -> None:
        """A prefix or constraint the target vocabulary cannot spell, one over its bound
        (``MAX_PREFIX_TOKENS``, ``MAX_CONSTRAINT_TOKENS``, ``MAX_CONSTRAINT_CANDIDATES``
        of :mod:`keras_memnmt.evaluation.translation`), more phrases than the beam, or
        constraints without a beam: a ``RequestError`` naming the instance. Whatever the
        tokenizer raises on an item is that item's error, never the batch's."""
        from keras_memnmt.decoding.settings import SettingError, option_of
        from keras_memnmt.evaluation.translation import constraint_ids, prefix_ids

        beam = search.beam_size
        for i, (text, prefix, constraints) in enumerate(items):
            try:
                self.vocab.source.encode([text])
                if prefix.strip():
                    prefix_ids(self.vocab, [prefix], [0], 0)
                if constraints:
                    if beam < 2:
                        raise ValueError("constraints need beam search: options.beam 2 or more")
                    try:  # a mode other than beam search (mbr) takes none either: the settings' rule
                        search.for_inputs(constraints=True)
                    except SettingError as e:
                        raise ValueError(e.render(lambda n: n if n == "constraints" else option_of(n))) from None
                    constraint_ids(self.vocab, [constraints], [0], 0, beam)
            except Exception as e:  # SentencePiece raises TypeError, RuntimeError, ... on odd text
                raise RequestError(f"instances[{i}]: {str(e).replace(' line 1', '')}") from None

    def translate(
        self, items: list[tuple[str, str, str]], search, cancelled: Callable[[], bool] = lambda: False
    ) -> list[list[tuple[str, float, float, bool]]]:
        """Each item's (sentence, prefix, constraints) n-best ``(translation, score,
        log_prob, finished)`` list: the length-normalized score the search ranks by, and the model's
        log-probability (:func:`~keras_memnmt.evaluation.translation.score_kinds`).

        The items are translated a model batch at a time, and ``cancelled()`` is asked
        between batches: once it is true (every request of them answered already) the
        rest is dropped (:class:`Cancelled`), so a request that timed out holds the
        model's thread for one batch more at most."""
        from keras_memnmt.evaluation.translation import default_batch_size, translate_chunks

        sentences = [text for text, _, _ in items]
        kwargs = {}
        if any(prefix for _, prefix, _ in items):
            kwargs["prefixes"] = [prefix for _, prefix, _ in items]
        if any(constraints for _, _, constraints in items):
            kwargs["constraints"] = [constraints for _, _, constraints in items]
        # Batches of 1, 2, 4, ... rows up to the library's batch size: the compiled search is
        # traced once per batch size (TensorFlow, JAX), so requests of any count reuse a few.
        # A constrained batch has CONSTRAINED_ROWS at most: its search weighs up to
        # MAX_CONSTRAINT_CANDIDATES candidates per sentence (8 sentences of 16 x 56 took
        # 3.3 s on a tiny model, 40 of them 15 s).
        largest = min(default_batch_size(search.beam_size), CONSTRAINED_ROWS if "constraints" in kwargs else 1 << 30)
        rows = min(largest, 1 << max(0, len(sentences) - 1).bit_length())
        out = []
        for chunk in translate_chunks(
            self.model,
            self.vocab,
            sentences,
            chunk_size=rows,
            settings=search.replace(batch_size=rows),
            progress=False,
            fill_batches=True,
            log_probs=True,
            **kwargs,
        ):
            out += chunk
            if len(out) < len(sentences) and cancelled():
                raise Cancelled(f"dropped after {len(out)} of {len(sentences)} sentences: no one waits for them")
        return out

    def source_lengths(self, sentences: list[str]) -> list[int]:
        return [len(ids) for ids in self.vocab.source.encode([s.strip() for s in sentences])]

    def pictures(self, source: str, translation: str) -> list[dict]:
        """The pictures `memnmt plot` draws for ``source`` forced on ``translation`` (the
        best of the n-best list the server answered; their titles say so), one per member
        model, as PNG data URLs."""
        from keras_memnmt.pictures.inspection import inspect_pair
        from keras_memnmt.pictures.plots import png_bytes

        if not self.has_pictures or not source.strip():
            return []
        forced_on = "the ensemble's best translation" if len(self.models()) > 1 else "its best translation"
        out = []
        for index, model in enumerate(self.models()):
            inspection = inspect_pair(model, self.vocab, source, reference=translation)
            png = base64.b64encode(png_bytes(inspection, forced_on=forced_on)).decode("ascii")
            out.append(
                {
                    "model": f"{type(model).__name__} (member {index + 1})"
                    if len(self.models()) > 1
                    else type(model).__name__,
                    "panels": [p.detail for p in model.panels],
                    "png": f"data:image/png;base64,{png}",
                }
            )
        return out

    def describe(self) -> dict:
        from keras_memnmt.decoding.settings import SERVE, names

        return {
            "kind": self.kind,
            "runs": [run for run, _ in self.members],
            "options": list(names(SERVE)),
            "pictures": self.has_pictures,
        }


class ExportTranslator:
    """A SavedModel written by ``memnmt export``, called through its signatures."""

    kind = "export"
    has_pictures = False

    def __init__(self, path: str):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the export calls)

        from keras_memnmt.export.saved_model import METADATA_FILE

        self.path = path
        self.loaded = tf.saved_model.load(path)
        with open(os.path.join(path, METADATA_FILE), encoding="utf-8") as f:
            self.info = json.load(f)

    def search(self, given: dict, signature: str) -> tuple:
        if given:
            raise RequestError(
                f"options: an export's search is fixed when it is exported ({self._search()}); "
                "serve the run to choose it"
            )
        return (("signature", signature),)

    def check_items(self, items: list[tuple[str, str, str]], search: tuple) -> None:
        for i, (_, prefix, constraints) in enumerate(items):
            if prefix or constraints:
                raise RequestError(f"instances[{i}]: an export takes no prefix or constraints; serve the run")

    def translate(
        self, items: list[tuple[str, str, str]], search: tuple, cancelled: Callable[[], bool] = lambda: False
    ) -> list[list[tuple[str, float]]]:
        import tensorflow as tf

        sentences = [text for text, _, _ in items]
        signature = dict(search)["signature"]
        out = self.loaded.signatures[signature](sentences=tf.constant(sentences, tf.string))
        names = SIGNATURES[signature] + ({"translate": "log_prob", "translate_n_best": "log_probs"}[signature],)
        columns = [out[name].numpy() for name in names if name in out]  # an older export: no log-probabilities
        if signature == "translate":
            columns = [c[:, None] for c in columns]
        return [
            [(t.decode("utf-8"), *(float(c[i, k]) for c in columns[1:])) for k, t in enumerate(row)]
            for i, row in enumerate(columns[0])
        ]

    def _search(self) -> str:
        keys = ("beam_size", "n_best", "length_penalty", "alpha", "max_length")
        return ", ".join(f"{k} {self.info[k]}" for k in keys if k in self.info)

    def source_lengths(self, sentences: list[str]) -> list[int] | None:
        return None  # the export truncates in its graph; its tokenizer is not read here

    def pictures(self, source: str, translation: str) -> list[dict]:
        return []

    def describe(self) -> dict:
        return {"kind": self.kind, "path": self.path, "options": [], "pictures": False, "search": self._search()}


def load_translator(members: list[tuple[str, str | None]]) -> ServingTranslator:
    """A :class:`RunTranslator`, or an :class:`ExportTranslator` for one export folder."""
    from keras_memnmt.export.saved_model import not_an_export

    first, checkpoint = members[0]
    if os.path.isdir(first) and os.path.isfile(os.path.join(first, "saved_model.pb")):
        if len(members) > 1 or checkpoint is not None:
            raise ValueError(f"{first} is a SavedModel export: serve it alone, without --checkpoint")
        reason = not_an_export(first)
        if reason:
            raise ValueError(f"{first}: {reason}")
        return ExportTranslator(first)
    return RunTranslator(members)
