"""Training: the fit loop, its callbacks, losses and optimizers (it knows no model by name)."""

from keras_memnmt.training.callbacks import BleuValidation, DivergenceStop, TrainingDiverged
from keras_memnmt.training.precision import apply_precision
from keras_memnmt.training.trainer import compile_model, load_corpora, train, warm_start

__all__ = ["BleuValidation", "DivergenceStop", "TrainingDiverged", "apply_precision", "compile_model", "load_corpora",
           "train", "warm_start"]
