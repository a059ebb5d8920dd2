"""Experiments: one file per recipe, each a small typed ``CONFIG`` (see TrainConfig), and
the loader ``memnmt train`` uses: :func:`load_recipe` takes a recipe's name
(``memnmt train multi30k_rnnsearch``), the path of a recipe file of the user's own, or a
JSON file of settings (a run's ``config.json``: ``memnmt train RUN/config.json --out NEW``).

A recipe module defines ``CONFIG`` (a :class:`~keras_memnmt.config.TrainConfig`); one with
stages of its own also defines ``run(config, out_dir, options=..., **common)`` and may
declare ``OPTIONS``, a dataclass whose fields ``--set`` reaches like config fields.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import traceback
import typing

from keras_memnmt.config import ConfigError, TrainConfig, convert, parse_overrides, validate


def one_line(error: BaseException) -> str:
    """An exception's message on one line (its type's name when it has none)."""
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip()) or type(error).__name__


def recipe_module(name_or_path: str):
    """The recipe module: a name from this package or a path to a recipe .py file.

    Whatever goes wrong while the module runs (an exception, a missing import, a
    ``sys.exit``) is one :class:`~keras_memnmt.config.ConfigError` line naming the recipe
    and, where known, its line.
    """
    if name_or_path.endswith(".json"):
        return _json_recipe(name_or_path)
    if name_or_path.endswith(".py") or os.sep in name_or_path:
        if not os.path.isfile(name_or_path):
            raise ConfigError(f"recipe file not found: {name_or_path}")
        spec = importlib.util.spec_from_file_location("memnmt_recipe", name_or_path)
        if spec is None:
            raise ConfigError(f"recipe {name_or_path} is not a Python file (a .py recipe)")
        module = importlib.util.module_from_spec(spec)
        _run_recipe(name_or_path, spec.origin, lambda: spec.loader.exec_module(module))
        return module
    try:
        spec = importlib.util.find_spec(f"{__name__}.{name_or_path}")
    except (ImportError, ValueError):  # not a module name
        spec = None
    if spec is None:
        raise ConfigError(f"unknown recipe {name_or_path!r}; recipes: {', '.join(recipe_names())}")
    return _run_recipe(name_or_path, spec.origin, lambda: importlib.import_module(f"{__name__}.{name_or_path}"))


def _json_recipe(path: str):
    """A recipe made of a JSON file of settings: a run's ``config.json`` (train it again)
    or the user's own, an object of config fields and model options (the others keep
    their defaults). A key that is neither is a ``ConfigError`` naming the file."""
    import json
    import types

    from keras_memnmt.models import get_model
    from keras_memnmt.models.registry import model_options

    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except ValueError as e:  # not JSON, or not UTF-8
        raise ConfigError(f"{path} is not a JSON config ({e})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} is not a JSON config: expected an object of settings")
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    try:
        declared = model_options(get_model(raw.get("model", TrainConfig.model)))
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{path}: {e}") from None
    unknown = sorted(set(raw) - fields - set(declared))
    if unknown:
        raise ConfigError(
            f"{path}: {', '.join(unknown)}: no such config field or option of model "
            f"{raw.get('model', TrainConfig.model)!r} (docs/config.md)"
        )
    return types.SimpleNamespace(CONFIG=TrainConfig.from_dict(raw, source=path))


def recipe_names() -> list[str]:
    """The recipes of this package (``memnmt train NAME``)."""
    folder = os.path.dirname(__file__)
    return sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("_"))


def _run_recipe(name: str, origin: str | None, load):
    """``load()``, which runs the recipe module (``origin``: its file), with its failures as
    one ``ConfigError`` line naming the recipe and the line at fault."""
    try:
        return load()
    except SyntaxError as e:
        where = f", line {e.lineno}" if _same_file(e.filename, origin) else f": {e.filename}, line {e.lineno}"
        raise ConfigError(f"recipe {name}{where}: {e.msg}") from None
    except SystemExit as e:
        raise ConfigError(
            f"recipe {name}{_recipe_line(e, origin)}: calls sys.exit({e.code!r}) when "
            "loaded; a recipe defines CONFIG (and run), it trains nothing by itself"
        ) from None
    except Exception as e:
        raise ConfigError(f"recipe {name}{_recipe_line(e, origin)}: {type(e).__name__}: {one_line(e)}") from None


def _same_file(a: str | None, b: str | None) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)


def _recipe_line(error: BaseException, origin: str | None) -> str:
    """``", line N"``: the recipe file's last line in ``error``'s traceback (empty if none)."""
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__) if _same_file(frame.filename, origin)]
    return f", line {lines[-1]}" if lines else ""


def load_recipe(name_or_path: str, module=None):
    """A recipe's CONFIG: a name from this package or a path to a recipe .py file (``module``:
    the recipe module, when it is loaded already)."""
    module = module or recipe_module(name_or_path)
    if not hasattr(module, "CONFIG"):
        raise ConfigError(f"recipe {name_or_path} defines no CONFIG")
    if not isinstance(module.CONFIG, TrainConfig):
        raise ConfigError(
            f"recipe {name_or_path}: CONFIG is a {type(module.CONFIG).__name__}, "
            "expected a keras_memnmt.config.TrainConfig"
        )
    return validate(module.CONFIG)


def split_recipe_options(module, overrides: list[str]):
    """``(recipe OPTIONS with its --set keys applied, the other overrides)``.

    A recipe with stages of its own (``run``) may declare ``OPTIONS``, a dataclass
    instance whose fields ``--set`` reaches like config fields.
    """
    options = getattr(module, "OPTIONS", None)
    if options is None:
        return None, overrides
    hints = typing.get_type_hints(type(options))
    mine, rest = {}, []
    for item, (key, value) in zip(overrides, parse_overrides(overrides)):
        if key in hints:
            mine[key] = convert(key, value, hints[key])
        else:
            rest.append(item)
    return dataclasses.replace(options, **mine), rest
