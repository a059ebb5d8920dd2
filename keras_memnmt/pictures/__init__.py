"""Pictures of what a model's decoder reads and writes over one sentence pair
(``memnmt plot``, the server's pictures, TensorBoard's validation images).

- :mod:`~keras_memnmt.pictures.inspection`: stepping a model over a pair and keeping the
  details of every step (:func:`inspect_pair`, :class:`Inspection`);
- :mod:`~keras_memnmt.pictures.plots`: drawing an :class:`Inspection`, one panel per step
  detail (:func:`figure`, :func:`save_plot`, :func:`png_bytes`, :func:`image_array`).
"""

from keras_memnmt.pictures.inspection import Inspection, inspect_pair
from keras_memnmt.pictures.plots import figure, image_array, png_bytes, save_plot

__all__ = ["Inspection", "figure", "image_array", "inspect_pair", "png_bytes", "save_plot"]
