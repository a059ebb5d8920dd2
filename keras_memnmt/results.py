"""Deprecated import path: :mod:`keras_memnmt.rundir.tables` (every name of that module is reachable here)."""

import warnings

from keras_memnmt.rundir import tables as _module

warnings.warn(
    "keras_memnmt.results is deprecated and will be removed in keras-memnmt 0.3.0; import keras_memnmt.rundir.tables",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str):
    return getattr(_module, name)
