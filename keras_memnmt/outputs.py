"""Deprecated import path: :mod:`keras_memnmt.rundir.outputs` (every name of that module is reachable here)."""

import warnings

from keras_memnmt.rundir import outputs as _module

warnings.warn(
    "keras_memnmt.outputs is deprecated and will be removed in keras-memnmt 0.3.0; import keras_memnmt.rundir.outputs",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str):
    return getattr(_module, name)
