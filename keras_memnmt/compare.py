"""Deprecated import path: :mod:`keras_memnmt.evaluation.significance` (every name of that module is reachable here)."""

import warnings

from keras_memnmt.evaluation import significance as _module

warnings.warn(
    "keras_memnmt.compare is deprecated and will be removed in keras-memnmt 0.3.0; import keras_memnmt.evaluation.significance",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str):
    return getattr(_module, name)
