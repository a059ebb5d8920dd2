"""Exporting a trained model as a TensorFlow SavedModel that translates strings.

:func:`export_translator` (a model and its vocabulary) and :func:`export_runs` (run
directories, one or an ensemble) write a SavedModel whose ``translate`` and
``translate_n_best`` signatures take ``tf.string`` sentences and return translations;
loading it needs only ``tensorflow`` and ``tensorflow_text``. See docs/export.md.
"""

from keras_memnmt.atomic import atomic_directory
from keras_memnmt.export.saved_model import (
    SIGNATURES,
    ExportError,
    check_options,
    export_runs,
    export_translator,
)

__all__ = ["SIGNATURES", "ExportError", "atomic_directory", "check_options", "export_runs", "export_translator"]
