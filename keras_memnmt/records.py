"""Deprecated import path: :mod:`keras_memnmt.rundir.records` and, for archives,
:mod:`keras_memnmt.rundir.archive` (every name of those modules is reachable here)."""

import warnings

from keras_memnmt.rundir import archive as _archive
from keras_memnmt.rundir import records as _module

warnings.warn(
    "keras_memnmt.records is deprecated and will be removed in keras-memnmt 0.3.0; import keras_memnmt.rundir.records",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str):
    return getattr(_module if hasattr(_module, name) else _archive, name)
