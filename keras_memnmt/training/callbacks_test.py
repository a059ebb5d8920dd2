"""The validation callback's plateau schedule: learning-rate decay, early stop, resume."""

import keras
import numpy as np
import pytest

from keras_memnmt.config import ConfigError, TrainConfig, apply_overrides
from keras_memnmt.training.callbacks import BleuValidation

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend


def _callback(history=None, **kwargs):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    callback = BleuValidation(None, [], [], "unused", log=lambda msg: None, history=history, **kwargs)
    callback.set_model(model)
    return callback, model


def _rate(model):
    return float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))


def test_rate_decays_after_lr_patience_plateaus_and_training_stops_after_patience():
    callback, model = _callback(patience=3, lr_decay=0.5, lr_patience=2, min_lr=3e-4)
    callback._plateau()
    assert _rate(model) == pytest.approx(1e-3) and not model.stop_training
    callback._plateau()
    assert _rate(model) == pytest.approx(5e-4) and not model.stop_training
    callback._plateau()
    assert model.stop_training
    callback._plateau()
    assert _rate(model) == pytest.approx(3e-4)  # the floor


def test_constant_rate_by_default():
    callback, model = _callback(patience=0)
    for _ in range(4):
        callback._plateau()
    assert _rate(model) == pytest.approx(1e-3) and not model.stop_training


def test_resume_counts_plateaus_from_the_history():
    history = [
        {"step": 1, "train_seconds": 1.0, "val_bleu": 30.0, "learning_rate": 1e-3},
        {"step": 2, "train_seconds": 2.0, "val_bleu": 34.0, "learning_rate": 1e-3},
        {"step": 3, "train_seconds": 3.0, "val_bleu": 33.0, "learning_rate": 1e-3},
        {"step": 4, "train_seconds": 4.0, "val_bleu": 33.5, "learning_rate": 5e-4},  # decayed here
        {"step": 5, "train_seconds": 5.0, "val_bleu": 33.9, "learning_rate": 5e-4},
    ]
    callback, _ = _callback(history=history, lr_decay=0.5, lr_patience=2)
    assert callback.best_bleu == 34.0 and callback.step == 5
    assert callback.bad_rounds == 3
    assert callback.lr_bad_rounds == 1
    # Histories written before the rate was logged still resume.
    old = [{k: v for k, v in h.items() if k != "learning_rate"} for h in history]
    assert _callback(history=old)[0].bad_rounds == 3


@pytest.mark.parametrize("override", ["lr_decay=0", "lr_decay=1.5", "lr_patience=0"])
def test_bad_schedule_fields_are_clear_errors(override):
    with pytest.raises(ConfigError, match=override.split("=")[0]):
        apply_overrides(TrainConfig(), [override])


def test_schedule_fields_parse():
    config = apply_overrides(TrainConfig(), ["lr_decay=0.5", "lr_patience=2", "min_lr=1e-5"])
    assert (config.lr_decay, config.lr_patience, config.min_lr) == (0.5, 2, 1e-5)
    assert np.isclose(TrainConfig().lr_decay, 1.0)
