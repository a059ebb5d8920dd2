"""Test helpers for keras_memnmt: NumPy reference steps (`reference`)."""
