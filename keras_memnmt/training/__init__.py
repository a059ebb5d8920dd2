"""Training: the fit loop, its callbacks, losses and optimizers (it knows no model by name)."""

from keras_memnmt.training.callbacks import BleuValidation, DivergenceStop, TrainingDiverged
from keras_memnmt.training.precision import apply_precision
from keras_memnmt.training.programs import ProgramData, program_config, program_data, program_parser
from keras_memnmt.training.trainer import (
    compile_arguments,
    compile_model,
    load_corpora,
    train,
    warm_start,
)

__all__ = [
    "BleuValidation",
    "DivergenceStop",
    "ProgramData",
    "TrainingDiverged",
    "apply_precision",
    "compile_arguments",
    "compile_model",
    "load_corpora",
    "program_config",
    "program_data",
    "program_parser",
    "train",
    "warm_start",
]
