"""The reference of every setting: each :class:`~keras_memnmt.config.TrainConfig` field and
each option of every registered model, with its type, default and meaning.

The text is the code's own: a field's comment in :mod:`keras_memnmt.config.train` (the
lines above it and the one beside it) and an option's entry in the ``Args`` section of the
model class (or base class) that declares it, or of its ``warm_start``. So the reference
cannot drift from the code, and a test fails when a field or an option has no text.

- :func:`show_config` renders a resolved config with its comments
  (``memnmt train RECIPE --show-config``);
- :func:`markdown` renders the whole reference (``docs/config.md``:
  ``python -m keras_memnmt.config.reference > docs/config.md``).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing

from keras_memnmt.config.train import TrainConfig
from keras_memnmt.models.registry import get_model, model_names, model_options

_SECTION = re.compile(r"^# --- (.+) ---$")
_ARGS_HEADER = re.compile(r"^(Args|Arguments)\b.*:$")
_ARG = re.compile(r"^(\w+)(?: \([^)]*\))?:\s*(.*)$")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting: its name, type (as written), default, meaning and group."""

    name: str
    type: str
    default: typing.Any
    text: str
    group: str


def _type_name(hint: typing.Any) -> str:
    text = hint if isinstance(hint, str) else getattr(hint, "__name__", None) or repr(hint)
    return str(text).replace("typing.", "")


def config_fields() -> list[Setting]:
    """Every ``TrainConfig`` field, in the order of the class, with the comment of its
    line and of the comment lines right above it (or, for a field without either, the
    comment above the fields before it where that names it); the ``# --- name ---`` lines
    group them."""
    hints = typing.get_type_hints(TrainConfig)
    defaults = {
        f.name: (f.default if f.default is not dataclasses.MISSING else f.default_factory())
        for f in dataclasses.fields(TrainConfig)
    }
    source = inspect.getsource(TrainConfig).splitlines()
    fields, pending, group, block = [], [], "", ""
    for line in source[1:]:
        stripped = line.strip()
        if stripped.startswith(("def ", "@")):
            break
        section = _SECTION.match(stripped)
        if section:
            group, pending = section.group(1), []
        elif stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
        elif ":" in stripped and stripped.split(":")[0].isidentifier():
            name = stripped.split(":")[0]
            beside = stripped.split("  # ", 1)[1] if "  # " in stripped else ""
            text = " ".join(pending + ([beside] if beside else []))
            if pending:
                block = " ".join(pending)
            elif not text and name in block:  # one comment above two fields, naming both
                text = block
            if name in defaults:
                fields.append(Setting(name, _type_name(hints[name]), defaults[name], text, group))
            pending = []
        elif not stripped:
            pending = []
    return fields


def docstring_args(obj) -> dict[str, str]:
    """``name -> text`` of every entry of the ``Args`` sections of ``obj``'s docstring (an
    ``Args (beyond X):`` header counts; continuation lines are joined)."""
    args, current, indent, inside = {}, None, None, False
    for line in inspect.cleandoc(inspect.getdoc(obj) or "").splitlines():
        stripped = line.strip()
        lead = len(line) - len(line.lstrip())
        if lead == 0 and stripped:
            inside, current, indent = bool(_ARGS_HEADER.match(stripped)), None, None
            continue
        if not inside or not stripped:
            continue
        match = _ARG.match(stripped)
        if match and (indent is None or lead == indent):
            indent, current = lead, match.group(1)
            args[current] = match.group(2)
        elif current is not None:
            args[current] = f"{args[current]} {stripped}".strip()
    return args


def model_settings(name: str) -> list[Setting]:
    """Every option of the registered model ``name`` (its constructor's keyword arguments
    through its base classes, then its ``warm_start``'s), with the text of the ``Args``
    entry of the class that declares it; the group says which class (or ``warm_start``)."""
    cls = get_model(name)
    texts: dict[str, tuple[str, str]] = {}
    for klass in cls.__mro__:
        for option, text in docstring_args(klass).items():
            texts.setdefault(option, (text, klass.__name__))
    warm = getattr(cls, "warm_start", None)
    warm_texts = docstring_args(warm) if warm is not None else {}
    settings = []
    for option in model_options(cls).values():
        if option.warm_start:
            text, group = warm_texts.get(option.name, ""), "warm_start"
        else:
            text, group = texts.get(option.name, ("", ""))
        settings.append(Setting(option.name, _type_name(option.annotation), option.default, text, group))
    return settings


def _value(value: typing.Any) -> str:
    return repr(value) if not isinstance(value, dict) else repr(dict(value))


def show_config(config: TrainConfig, title: str = "") -> str:
    """``config`` as ``name = value  # meaning`` lines: its fields, then every option of
    its model (given or default), each with its reference text."""
    lines = [f"# {title}"] if title else []
    lines.append("# * = not the default (set by the recipe or --set)")
    given = config.model_options
    defaults = TrainConfig()
    unused = _unused(config)
    for setting in config_fields():
        if setting.name == "model_options":
            continue
        value = getattr(config, setting.name)
        mark = "*" if value != getattr(defaults, setting.name) else " "
        note = f" (not used: {unused[setting.name]})" if setting.name in unused else ""
        lines.append(f"{setting.name} = {_value(value)}  #{mark} {setting.text}{note}")
    lines.append(f"# the options of model {config.model!r} (--set NAME=VALUE; * = given by the recipe or --set)")
    for setting in model_settings(config.model):
        mark = "*" if setting.name in given else " "
        lines.append(f"{setting.name} = {_value(getattr(config, setting.name))}  #{mark} {setting.text}")
    return "\n".join(lines) + "\n"


def _unused(config: TrainConfig) -> dict[str, str]:
    """The fields of ``config`` that another field makes moot, with why."""
    from keras_memnmt.config.train import resolved_corpus

    unused = {}
    if config.test_prefix:
        unused["test_split"] = "test_prefix gives the test set"
    if resolved_corpus(config) != config.corpus:
        unused["corpus"] = "the three prefixes are the corpus"
    return unused


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(settings: list[Setting], first: str) -> list[str]:
    rows = [f"| {first} | type | default | meaning |", "|---|---|---|---|"]
    rows += [f"| `{s.name}` | `{_cell(s.type)}` | `{_cell(_value(s.default))}` | {_cell(s.text)} |" for s in settings]
    return rows


def markdown() -> str:
    """The reference as Markdown (docs/config.md)."""
    out = [
        "# Settings",
        "",
        "Every setting of `memnmt train`: the fields of `TrainConfig` and the options of each",
        "model. A recipe sets them in its `CONFIG`; `--set KEY=VALUE` overrides any of them",
        "(`--set epochs=2 --set memory_size=4`); `memnmt train RECIPE --show-config` prints a",
        "recipe's resolved values with these texts. Generated from the code by",
        "`python -m keras_memnmt.config.reference > docs/config.md`; do not edit by hand.",
        "",
    ]
    fields = [s for s in config_fields() if s.name != "model_options"]
    for group in dict.fromkeys(s.group for s in fields):
        out += [f"## {group[:1].upper()}{group[1:]}", ""]
        out += _table([s for s in fields if s.group == group], "field") + [""]
    out += [
        "## Model options",
        "",
        "Each model's options are its constructor's keyword arguments (its base classes'",
        "included), and those of its `warm_start` (how `pretrain_run` is loaded).",
        "",
    ]
    # The library's own models (a program or a test may register others in this process).
    for name in [n for n in model_names() if get_model(n).__module__.startswith("keras_memnmt.models.")]:
        out += [f"### `{name}` ({get_model(name).__name__})", ""]
        out += _table(model_settings(name), "option") + [""]
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown(), end="")
