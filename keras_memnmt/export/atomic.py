"""Deprecated import path: :mod:`keras_memnmt.atomic` (every name of that module is reachable here)."""

import warnings

from keras_memnmt import atomic as _module

warnings.warn(
    "keras_memnmt.export.atomic is deprecated and will be removed in keras-memnmt 0.3.0; import keras_memnmt.atomic",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str):
    return getattr(_module, name)
