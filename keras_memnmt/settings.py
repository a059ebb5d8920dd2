"""Deprecated import path: :mod:`keras_memnmt.config.reference` (every name of that module is reachable here)."""

import warnings

from keras_memnmt.config import reference as _module

warnings.warn(
    "keras_memnmt.settings is deprecated and will be removed in keras-memnmt 0.3.0; import keras_memnmt.config.reference",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str):
    return getattr(_module, name)


if __name__ == "__main__":  # python -m keras_memnmt.settings prints the reference too
    print(_module.markdown(), end="")
