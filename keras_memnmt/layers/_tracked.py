"""The tracked stack, under its former module name: see :mod:`keras_memnmt.layers.tracked`."""

from keras_memnmt.layers.tracked import TrackedStack

__all__ = ["TrackedStack"]
