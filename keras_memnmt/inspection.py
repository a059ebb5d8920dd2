"""Deprecated import path: :mod:`keras_memnmt.pictures.inspection` (every name of that module is reachable here)."""

import warnings

from keras_memnmt.pictures import inspection as _module

warnings.warn(
    "keras_memnmt.inspection is deprecated and will be removed in keras-memnmt 0.3.0; import keras_memnmt.pictures.inspection",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str):
    return getattr(_module, name)
