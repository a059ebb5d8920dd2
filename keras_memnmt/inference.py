"""Deprecated import path: :mod:`keras_memnmt.evaluation.translation` (every name of that module is reachable here)."""

import warnings

from keras_memnmt.evaluation import translation as _module

warnings.warn(
    "keras_memnmt.inference is deprecated and will be removed in keras-memnmt 0.3.0; import keras_memnmt.evaluation.translation",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str):
    return getattr(_module, name)
