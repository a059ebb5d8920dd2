"""Every setting of a translation's search, written once: its default, its range, its help
text, the front ends that offer it, and the settings it does not combine with.

:class:`SearchSettings` is one frozen value. The front ends build theirs from it and check
it through it: ``memnmt translate``, ``evaluate``, ``compare``, ``results`` and ``export``
make their flags with :func:`add_flags` (help texts included) and read them with
:func:`from_flags`; ``memnmt serve`` reads a request's ``"options"`` with
:func:`from_options`; the Python :class:`~keras_memnmt.serving.translator.Translator`
passes its keyword arguments to the constructor. A bad value or a bad combination is a
:class:`SettingError`, one line that names the setting the way its front end spells it
(``--beam``, ``options.beam``, ``beam``).

Which search runs is a *mode*, found by name in :mod:`keras_memnmt.decoding.modes`
(``greedy``, ``beam``, ``sampling``, ``constrained``, ``mbr``, and whatever is registered
there); :attr:`SearchSettings.mode_name` resolves it from the settings when ``mode`` is not
given.

This module imports neither Keras nor a backend, so that parsing a command line stays fast.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from keras_memnmt.decoding.modes import SettingError, get_mode, mode_names
from keras_memnmt.tokens import MAX_INT

LENGTH_PENALTIES = ("gnmt", "average", "none")
UTILITIES = ("chrf", "bleu")  # keras_memnmt.decoding.mbr.UTILITIES
SERVE_MAX_BEAM = 64  # a request's beam (and n-best, MBR candidates) at most

# The front ends: which of them offer a setting.
TRANSLATE, EVALUATE, EXPORT, SERVE = "translate", "evaluate", "export", "serve"


def flag_of(name: str) -> str:
    """``"no_repeat_ngram_size"`` -> ``"--no-repeat-ngram-size"`` (the command line's spelling)."""
    return "--" + name.replace("_", "-")


def option_of(name: str) -> str:
    return f"options.{name}"


def parse_sampling(text: str) -> tuple[str, float]:
    """`"full"`, `"topk:K"` or `"topp:P"` -> `(kind, value)`; a one-line `ValueError` otherwise."""
    kind, _, value = str(text).partition(":")
    try:
        if kind == "full" and not value:
            return "full", 0.0
        if kind == "topk" and int(value) >= 1:
            return "topk", float(int(value))
        if kind == "topp" and 0.0 < float(value) <= 1.0:
            return "topp", float(value)
    except ValueError:
        pass
    raise ValueError(f"sampling {text!r}: expected full, topk:K (an int >= 1) or topp:P (0 < P <= 1)")


# --- checks of one value: each returns the value (normalized) or raises SettingError ---------


def _integer(low: int, high: int = MAX_INT):
    def check(value, name):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            bound = f">= {low}" if high == MAX_INT else f"from {low} to {high}"
            raise SettingError(f"{{{name}}} must be an integer {bound}, got {value!r}", name)
        return int(value)

    check.parse = int
    return check


def _number(low: float, high: float = math.inf, above: bool = False):
    def check(value, name):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SettingError(f"{{{name}}} must be a finite number, got {value!r}", name)
        if value < low or (above and value == low) or value > high:
            bound = f"> {low:g}" if above else f">= {low:g}"
            bound += "" if high == math.inf else f" and <= {high:g}"
            raise SettingError(f"{{{name}}} must be {bound}, got {value!r}", name)
        return float(value)

    check.parse = float
    return check


def _choice(choices: Callable[[], tuple[str, ...]] | tuple[str, ...]):
    def check(value, name):
        known = choices() if callable(choices) else choices
        if value not in known:
            raise SettingError(f"{{{name}}} must be one of {', '.join(known)}, got {value!r}", name)
        return value

    check.parse = str
    check.choices = choices
    return check


def _sampling(value, name):
    try:
        parse_sampling(value if isinstance(value, str) else repr(value))
    except ValueError:
        raise SettingError(
            f"{{{name}}} {value!r}: expected full, topk:K (an int >= 1) or topp:P (0 < P <= 1)", name
        ) from None
    return value


_sampling.parse = str


def setting(default, check, help: str, fronts: tuple[str, ...], *, metavar: str | None = None, serve_check=None):
    """A field of :class:`SearchSettings`: its default and check, its help text (the flag's
    and the doc's), and the front ends that offer it (``serve_check``: a narrower range for a
    request of the server)."""
    return dataclasses.field(
        default=default,
        metadata={
            "check": check,
            "help": help,
            "fronts": fronts,
            "metavar": metavar,
            "serve_check": serve_check or check,
        },
    )


ALL = (TRANSLATE, EVALUATE, EXPORT, SERVE)
DRAWN = (TRANSLATE, SERVE)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchSettings:
    """One search's settings (the fields' help texts are the flags' and the options').

    ``None`` marks a setting left to its mode: ``beam`` is 5, or 1 for ``greedy`` and
    ``sampling`` (and the candidate count for ``mbr`` without sampling); ``n_best`` is 1.
    Constructing one checks every value and every combination (a :class:`SettingError`).
    """

    mode: str | None = setting(
        None,
        _choice(mode_names),
        "the search, by name: greedy, beam, sampling, constrained, mbr "
        "(default: beam, or what --sampling, --mbr or --constraints ask for)",
        (TRANSLATE, SERVE),
        metavar="NAME",
    )
    beam: int | None = setting(
        None,
        _integer(1),
        "beam size (1 = greedy; default 5)",
        ALL,
        metavar="K",
        serve_check=_integer(1, SERVE_MAX_BEAM),
    )
    n_best: int | None = setting(
        None,
        _integer(1),
        "the N best translations of each sentence (N <= the beam)",
        (TRANSLATE, EXPORT, SERVE),
        metavar="N",
        serve_check=_integer(1, SERVE_MAX_BEAM),
    )
    length_penalty: str = setting(
        "gnmt",
        _choice(LENGTH_PENALTIES),
        "beam scores: log P / ((5+|Y|)/6)^alpha (gnmt, default), / |Y| (average), or plain log P "
        "(none); translate and evaluate on a run default to its recipe's (with --alpha)",
        ALL,
    )
    alpha: float = setting(
        0.6,
        _number(0.0),
        "GNMT length-penalty exponent (default 0.6)",
        ALL,
        metavar="A",
        serve_check=_number(0.0, 10.0),
    )
    sampling: str | None = setting(
        None,
        _sampling,
        "draw each output token instead of searching: from the whole distribution, the K "
        "most probable tokens, or the fewest whose probability reaches P (not with a beam above 1)",
        DRAWN,
        metavar="full|topk:K|topp:P",
    )
    temperature: float = setting(
        1.0,
        _number(0.0, above=True),
        "with sampling: divides the log-probabilities drawn from (default 1.0)",
        DRAWN,
        metavar="T",
        serve_check=_number(1e-3, 100.0),
    )
    seed: int = setting(
        0,
        _integer(0),
        "with sampling: the draws' seed; the same seed gives the same samples "
        "on every backend and batch size (default 0)",
        DRAWN,
        metavar="S",
    )
    samples: int = setting(
        1,
        _integer(1),
        "with sampling: draws per input line, written on consecutive lines (default 1)",
        (TRANSLATE,),
        metavar="N",
    )
    max_length: int | None = setting(
        None,
        _integer(1),
        "at most N subwords per translation, eos included (instead of --max-length-a/-b)",
        DRAWN,
        metavar="N",
        serve_check=_integer(1, 1024),
    )
    max_length_a: float | None = setting(
        None,
        _number(0.0),
        "the length bound is A x source subwords + B (default A 1.5)",
        DRAWN,
        metavar="A",
        serve_check=_number(0.0, 4.0),
    )
    max_length_b: int | None = setting(
        None, _integer(1), "see --max-length-a (default B 10)", DRAWN, metavar="B", serve_check=_integer(1, 256)
    )
    min_length: int = setting(
        0,
        _integer(0),
        "eos is barred until a translation has N subwords (its prefix included; the length "
        "bound still ends it); default 0",
        DRAWN,
        metavar="N",
        serve_check=_integer(0, 256),
    )
    no_repeat_ngram_size: int = setting(
        0,
        _integer(0),
        "no n-gram of N subwords occurs twice in a translation (its prefix included); 0 (default): off",
        DRAWN,
        metavar="N",
        serve_check=_integer(0, 16),
    )
    mbr: int | None = setting(
        None,
        _integer(2),
        "minimum Bayes risk: among N candidates (N samples with --sampling, else the "
        "N-best list of a beam of N) output the one with the highest expected utility against the others",
        DRAWN,
        metavar="N",
        serve_check=_integer(2, SERVE_MAX_BEAM),
    )
    mbr_utility: str = setting(
        "chrf", _choice(UTILITIES), "with --mbr: the utility, sacreBLEU's sentence chrF (default) or BLEU", DRAWN
    )
    batch_size: int | None = setting(
        None,
        _integer(1),
        "sentences per search (default: 256 greedy, 640 // the beam otherwise)",
        (TRANSLATE,),
        metavar="SENTENCES",
    )
    max_tokens: int | None = setting(
        None,
        _integer(1),
        "source subwords per search, padding included (a batch is cut at whichever of "
        "--batch-size and --max-tokens comes first)",
        (TRANSLATE,),
        metavar="TOKENS",
    )

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None and value != field.default:
                object.__setattr__(self, field.name, field.metadata["check"](value, field.name))
        self._check_combinations()
        self.mode_object().check(self)

    def _check_combinations(self) -> None:
        if self.sampling is None:
            for name in ("temperature", "seed", "samples"):
                if getattr(self, name) != _field(name).default:
                    raise SettingError(
                        f"{{{name}}} sets how {{sampling}} draws; give {{sampling}} (full, topk:K or topp:P)",
                        name,
                        "sampling",
                    )
        elif self.beam not in (None, 1):
            raise SettingError(
                f"{{sampling}} draws one token at a time; it does not combine with {{beam}} {self.beam}",
                "sampling",
                "beam",
            )
        if self.n_best is not None and self.n_best > self.beam_size:
            raise SettingError(
                f"{{n_best}} {self.n_best} is more than {{beam}} {self.beam_size}: a beam search "
                "keeps that many hypotheses" + (" (sampling draws one)" if self.sampling else ""),
                "n_best",
                "beam",
            )
        if self.max_length is not None and (self.max_length_a is not None or self.max_length_b is not None):
            raise SettingError(
                "{max_length} N bounds every output at N subwords; {max_length_a} and "
                "{max_length_b} bound it by the source's length: give one or the other",
                "max_length",
                "max_length_a",
                "max_length_b",
            )
        if self.mbr is None:
            if self.mbr_utility != "chrf":
                raise SettingError(
                    "{mbr_utility} sets how {mbr} compares candidates; give {mbr} N", "mbr_utility", "mbr"
                )
            return
        if self.n_best not in (None, 1) or self.samples > 1:  # n_best 1: the chosen one (the server's list)
            name = "n_best" if self.n_best not in (None, 1) else "samples"
            raise SettingError(f"{{mbr}} outputs one translation per sentence; not with {{{name}}}", "mbr", name)
        if self.sampling is None and self.beam is not None and self.beam < self.mbr:
            raise SettingError(
                f"{{mbr}} {self.mbr} takes the n-best list of a beam of {self.mbr}: {{beam}} {self.beam} keeps fewer",
                "mbr",
                "beam",
            )

    # --- what the settings resolve to -----------------------------------------------------------

    @property
    def mode_name(self) -> str:
        """The mode that runs: ``mode`` if given, else ``mbr``, ``sampling``, ``greedy`` (a
        beam of 1) or ``beam``, from the other settings (a sentence's constraints turn
        ``beam`` into ``constrained``: :meth:`for_inputs`)."""
        if self.mode is not None:
            return self.mode
        if self.mbr is not None:
            return "mbr"
        if self.sampling is not None:
            return "sampling"
        return "greedy" if self.beam == 1 else "beam"

    def mode_object(self):
        return get_mode(self.mode_name)

    @property
    def beam_size(self) -> int:
        """The beam the search keeps: ``beam``, or its mode's default."""
        if self.beam is not None:
            return self.beam
        return self.mode_object().default_beam(self)

    @property
    def length_bound(self) -> tuple[float, int]:
        """``(a, b)``: each output has at most ``a * source subwords + b`` (eos included)."""
        if self.max_length is not None:
            return 0.0, self.max_length
        return (
            1.5 if self.max_length_a is None else self.max_length_a,
            10 if self.max_length_b is None else self.max_length_b,
        )

    def for_inputs(self, constraints: bool = False) -> SearchSettings:
        """These settings for an input with target constraints: the ``beam`` mode becomes
        ``constrained`` (which checks the beam); another mode is a :class:`SettingError`."""
        if not constraints or self.mode_name == "constrained":
            return self
        if self.mode_name == "beam":
            return self.replace(mode="constrained")
        why = {"greedy": f" (got {{beam}} {self.beam_size})", "sampling": ", not {sampling}"}.get(
            self.mode_name, f", not the {self.mode_name} mode"
        )
        raise SettingError("{constraints} needs beam search: {beam} 2 or more" + why, "constraints", "beam", "sampling")

    def replace(self, **changes) -> SearchSettings:
        return dataclasses.replace(self, **changes)

    def changed(self) -> dict:
        """The settings given a value other than their default, by name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) != f.default}

    def key(self) -> str:
        """The name of a translation made with these settings, e.g. ``beam5.gnmt0.6`` (the key
        of a run's stored translations, ``rundir.records.hypotheses_key``): the beam and the
        length penalty, then each other search setting that is not its default. Settings that
        do not change the output (batch sizes) are left out."""
        tag = f"gnmt{self.alpha:g}" if self.length_penalty == "gnmt" else self.length_penalty
        parts = [f"beam{self.beam_size}", tag]
        for name, value in self.changed().items():
            if name not in ("beam", "length_penalty", "alpha", "batch_size", "max_tokens"):
                parts.append(f"{name}={value}")
        return ".".join(parts)


def _field(name: str) -> dataclasses.Field:
    return SETTING_FIELDS[name]


SETTING_FIELDS = {f.name: f for f in dataclasses.fields(SearchSettings)}


def names(front: str) -> tuple[str, ...]:
    """The settings ``front`` offers, in their order."""
    return tuple(name for name, f in SETTING_FIELDS.items() if front in f.metadata["fronts"])


def help_of(name: str) -> str:
    return SETTING_FIELDS[name].metadata["help"]


# --- the command line -----------------------------------------------------------------------


def add_flags(parser, front: str, skip: tuple[str, ...] = ()) -> None:
    """The flags of the settings ``front`` offers (``skip``: those a command spells its own way),
    each with its help text. Values are checked by :func:`from_flags`, so that every error is
    one line naming the flag."""
    for name in names(front):
        if name in skip:
            continue
        f = SETTING_FIELDS[name]
        check = f.metadata["check"]
        kwargs = {"default": None, "help": f.metadata["help"], "dest": f"search_{name}", "type": _flag_type(name)}
        if f.metadata["metavar"]:
            kwargs["metavar"] = f.metadata["metavar"]
        choices = getattr(check, "choices", None)
        if choices is not None:
            kwargs["metavar"] = kwargs.get("metavar") or "|".join(choices() if callable(choices) else choices)
        parser.add_argument("--beam" if name == "beam" else flag_of(name), **kwargs)


def _flag_type(name: str):
    """An argparse ``type`` for the setting ``name``: a number that does not parse, a
    non-finite one, an integer out of its range or an unknown choice is a usage error
    (``argument --beam: must be an integer >= 1, got 0``); the other checks run in
    :func:`from_flags`."""
    import argparse

    check = SETTING_FIELDS[name].metadata["check"]

    def parse(text: str):
        try:
            value = check.parse(text)
        except ValueError:
            kind = "an integer" if check.parse is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
        if check.parse is float:  # the range is checked with the other flags (one line naming the flag)
            if not math.isfinite(value):
                raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
            return value
        if check.parse is int or hasattr(check, "choices"):
            try:
                return check(value, name)
            except SettingError as e:
                raise argparse.ArgumentTypeError(e.render(lambda _: "").strip()) from None
        return value

    return parse


def from_flags(args, front: str, **fixed) -> SearchSettings:
    """The settings of the flags :func:`add_flags` made for ``front`` (``fixed``: values the
    command sets itself); a bad combination is a ``ValueError`` naming the flags."""
    given = dict(fixed)
    for name in names(front):
        value = getattr(args, f"search_{name}", None)
        if value is not None:
            given[name] = value
    return build(given, flag_of)


def build(given: dict, spell: Callable[[str], str] = lambda name: name, check_key: str = "check") -> SearchSettings:
    """``SearchSettings(**given)``; a :class:`SettingError` rendered with ``spell`` (a
    ``ValueError``), and each value first checked with the ``check_key`` range."""
    try:
        if check_key != "check":
            for name, value in given.items():
                if value is not None and name in SETTING_FIELDS:
                    SETTING_FIELDS[name].metadata[check_key](value, name)
        return SearchSettings(**given)
    except SettingError as e:
        raise ValueError(e.render(spell)) from None


def from_options(options: dict) -> SearchSettings:
    """A server request's ``"options"`` (``null`` is the default); unknown names are an error."""
    known = names(SERVE)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"options: unknown {', '.join(unknown)}; known: {', '.join(known)}")
    return build({k: v for k, v in options.items() if v is not None}, option_of, "serve_check")
