"""The decoding modes, found by name (as keras-hub's ``keras_hub.samplers.get``), over one
search loop: :meth:`keras_memnmt.models.generation.Generator.generate` (greedy, beam and
constrained search, with sampling inside greedy).

A mode says three things (:class:`Mode`):

* :meth:`Mode.search`: the arguments of ``generate`` for a batch of sentences under a
  :class:`~keras_memnmt.decoding.settings.SearchSettings` (beam size, n-best, sampling, ...);
* :meth:`Mode.rows`: how many search rows each sentence gets (``samples`` draws; a
  sampled MBR's candidates);
* :meth:`Mode.choose`: from a sentence's candidates (every row's n-best,
  ``Hypothesis`` tuples), the list the front end reads, best first.

Every front end asks the registry, so a registered mode is offered at once by ``memnmt
translate --mode NAME``, the server's ``options.mode``, and ``Translator.translate(mode=...)``.
Adding one is a new file holding a :class:`Mode` subclass and one line in
:data:`BUILT_IN` below (or a call of :func:`register_mode` in one's own program); see
docs/decoding.md.

This module imports neither Keras nor a backend (the command line lists the modes).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import NamedTuple


class SettingError(ValueError):
    """A bad search setting (:mod:`keras_memnmt.decoding.settings`, where a mode's check
    raises it too): ``template`` names settings as ``{name}`` fields, filled in by
    :meth:`render` with each front end's spelling (``str()`` gives the Python names)."""

    def __init__(self, template: str, *names: str):
        self.template, self.names = template, names
        super().__init__(self.render())

    def render(self, spell: Callable[[str], str] = lambda name: name) -> str:
        return self.template.format(**{name: spell(name) for name in self.names})


class Hypothesis(NamedTuple):
    """One candidate translation of a sentence: its text, the length-normalized search
    score and the model's log-probability (``evaluation.translation.score_kinds``)."""

    text: str
    score: float
    log_prob: float
    finished: bool = True  # it ends with eos


class Mode:
    """A decoding mode: the base class is beam search (``beam``)."""

    name = "beam"
    help = "beam search with a length penalty, the best hypothesis (or n-best list) out"
    exportable = True  # the SavedModel export can trace it
    picks = False  # True where choose() may reorder candidates (no alignments then)

    def check(self, settings) -> None:
        """A :class:`~keras_memnmt.decoding.settings.SettingError` where ``settings`` do not fit."""
        if settings.sampling is not None:
            raise SettingError(f"the {self.name} mode does not draw: not with {{sampling}}", "sampling")

    def default_beam(self, settings) -> int:
        return 5

    def rows(self, settings) -> int:
        return 1

    def search(self, settings) -> dict:
        """``generate``'s search arguments (the caller adds ``prefix``, ``keys``, ``constraints``)."""
        a, b = settings.length_bound
        return {
            "beam_size": settings.beam_size,
            "n_best": settings.n_best or 1,
            "max_length_a": a,
            "max_length_b": b,
            "length_penalty": settings.length_penalty,
            "alpha": settings.alpha,
            "min_length": settings.min_length,
            "no_repeat_ngram_size": settings.no_repeat_ngram_size,
        }

    def choose(self, candidates: list[Hypothesis], settings) -> list[Hypothesis]:
        return candidates


class Greedy(Mode):
    name = "greedy"
    help = "the most probable token at every step (a beam of 1)"

    def check(self, settings) -> None:
        super().check(settings)
        if settings.beam not in (None, 1):
            raise SettingError(f"the greedy mode keeps one hypothesis: not with {{beam}} {settings.beam}", "beam")

    def default_beam(self, settings) -> int:
        return 1


class Sampling(Mode):
    name = "sampling"
    help = "each token drawn from the model's distribution (--sampling full, topk:K or topp:P)"
    exportable = False

    def check(self, settings) -> None:
        if settings.sampling is None:
            raise SettingError(
                "the sampling mode draws as {sampling} says: give it (full, topk:K or topp:P)", "sampling"
            )

    def default_beam(self, settings) -> int:
        return 1

    def rows(self, settings) -> int:
        return settings.samples

    def search(self, settings) -> dict:
        return {**super().search(settings), "sampling": settings.sampling, "temperature": settings.temperature}


class Constrained(Mode):
    name = "constrained"
    help = "beam search whose outputs contain given target phrases (--constraints)"
    exportable = False

    def check(self, settings) -> None:
        super().check(settings)
        if settings.beam_size < 2:
            raise SettingError(
                f"{{constraints}} needs beam search: {{beam}} 2 or more (got {{beam}} {settings.beam_size})",
                "constraints",
                "beam",
            )


class MinimumBayesRisk(Mode):
    """Eikema & Aziz (2020), Freitag et al. (2022): :mod:`keras_memnmt.decoding.mbr`."""

    name = "mbr"
    help = "minimum Bayes risk among --mbr N candidates (samples, or a beam's n-best list)"
    exportable = False
    picks = True

    def check(self, settings) -> None:
        if settings.mbr is None:
            raise SettingError("the mbr mode needs {mbr} N, the candidates' count", "mbr")

    def default_beam(self, settings) -> int:
        return 1 if settings.sampling is not None else settings.mbr

    def rows(self, settings) -> int:
        return settings.mbr if settings.sampling is not None else 1

    def search(self, settings) -> dict:
        out = {**super().search(settings), "n_best": 1 if settings.sampling is not None else settings.mbr}
        if settings.sampling is not None:
            out.update(sampling=settings.sampling, temperature=settings.temperature)
        return out

    def choose(self, candidates: list[Hypothesis], settings) -> list[Hypothesis]:
        from keras_memnmt.decoding.mbr import mbr_select

        best, _ = mbr_select([c.text for c in candidates], settings.mbr_utility)
        return [candidates[best]] + candidates[:best] + candidates[best + 1 :]


_MODES: dict[str, Mode] = {}
_LOADED: list[bool] = []  # non-empty once BUILT_IN is registered

# The library's modes: "module:Class", one line each, loaded on first use.
BUILT_IN = (
    "keras_memnmt.decoding.modes:Greedy",
    "keras_memnmt.decoding.modes:Mode",
    "keras_memnmt.decoding.modes:Sampling",
    "keras_memnmt.decoding.modes:Constrained",
    "keras_memnmt.decoding.modes:MinimumBayesRisk",
)


def register_mode(mode: type[Mode]) -> type[Mode]:
    """Adds ``mode`` (a :class:`Mode` subclass) under its ``name``; usable as a decorator.
    A name taken by another class is a ``ValueError``."""
    if not (isinstance(mode, type) and issubclass(mode, Mode)) or not mode.name:
        raise ValueError(f"register_mode: expected a Mode subclass with a name, got {mode!r}")
    _load_built_in()  # the library's first, so that a clash is seen whatever the order
    known = _MODES.get(mode.name)
    if known is not None and type(known) is not mode:
        raise ValueError(f"register_mode: the mode {mode.name!r} is {type(known).__qualname__} already")
    _MODES[mode.name] = mode()
    return mode


def _load_built_in() -> None:
    if _LOADED:
        return
    _LOADED.append(True)
    for entry in BUILT_IN:
        module, _, name = entry.partition(":")
        register_mode(getattr(importlib.import_module(module), name))


def mode_names() -> tuple[str, ...]:
    _load_built_in()
    return tuple(_MODES)


def get_mode(name: str) -> Mode:
    """The registered mode ``name``; an unknown name is a ``ValueError`` listing them."""
    _load_built_in()
    if name not in _MODES:
        raise ValueError(f"unknown decoding mode {name!r}; known: {', '.join(_MODES)}")
    return _MODES[name]
