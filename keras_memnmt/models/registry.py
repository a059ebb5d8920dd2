"""Model names → classes, and each model's options read from its own signature.

A model is registered once, under the name that ``TrainConfig.model`` and
``memnmt train --set model=NAME`` use::

    @register_model("rnnsearch")
    class RNNsearch(Seq2Seq):
        def __init__(self, source_vocab_size, target_vocab_size, attention_units: int = 512, ...):

Its options are the keyword arguments of its constructor (and of its base
classes' constructors, up to :class:`~keras_memnmt.models.EncoderDecoder`), with their
type hints and defaults, plus the keyword arguments of its ``warm_start``
classmethod. Nothing else lists them: the config, ``--set``, resume and warm
starts all read them from here.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any

import keras

MODELS: dict[str, type] = {}

# Constructor arguments that are not options: the vocabulary sizes come from the data.
_NOT_OPTIONS = ("self", "source_vocab_size", "target_vocab_size")


@dataclasses.dataclass(frozen=True)
class Option:
    """One model option: its name, type hint, default and which hook takes it."""

    name: str
    annotation: Any
    default: Any
    warm_start: bool = False  # an argument of ``warm_start``, not of the constructor


def register_model(name: str, package: str = "keras_memnmt"):
    """Class decorator: registers an :class:`EncoderDecoder` subclass under ``name``.

    Also registers it with Keras (``package>ClassName``) unless it already is, so
    that its ``.keras`` files load. Registering another class under a taken name
    is an error; registering the same class again (a re-imported module) replaces it.
    """

    def wrap(cls: type) -> type:
        old = MODELS.get(name)
        if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ValueError(f"model name {name!r} is taken by {old.__module__}.{old.__qualname__}")
        if keras.saving.get_registered_object(f"{package}>{cls.__name__}") is not cls:
            keras.saving.register_keras_serializable(package=package)(cls)
        cls.model_name = name
        MODELS[name] = cls
        return cls

    return wrap


def model_names() -> tuple[str, ...]:
    """The registered model names, in registration order."""
    return tuple(MODELS)


def get_model(name: str) -> type:
    """The model class registered under ``name``; a ``ValueError`` listing the names if none."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}: expected one of {model_names()}") from None


def _keyword_parameters(function, skip: tuple[str, ...]) -> list[tuple[str, Any, Any]]:
    hints = typing.get_type_hints(function)
    out = []
    for p in inspect.signature(function).parameters.values():
        if p.name in skip or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        out.append((p.name, hints.get(p.name, Any), None if p.default is p.empty else p.default))
    return out


def model_options(cls: type) -> dict[str, Option]:
    """``cls``'s options: its constructors' keyword arguments (most derived first), then
    the keyword arguments of its ``warm_start`` after ``pretrained``."""
    options: dict[str, Option] = {}
    for klass in cls.__mro__:
        # Keras's own classes (and mixins such as the search's) take no model options.
        if "__init__" not in vars(klass) or not issubclass(klass, keras.Model) or klass in keras.Model.__mro__:
            continue
        for name, hint, default in _keyword_parameters(klass.__init__, _NOT_OPTIONS):
            options.setdefault(name, Option(name, hint, default))
    warm_start = getattr(cls, "warm_start", None)
    if warm_start is not None:
        skip = ("cls", "pretrained", "options", "log")
        for name, hint, default in _keyword_parameters(warm_start, skip):
            options.setdefault(name, Option(name, hint, default, warm_start=True))
    return options
