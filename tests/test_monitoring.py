"""TensorBoard after a tiny training: every scalar, text and image tag, read back from the
event files (run once per backend)."""

import glob
import io
import math
import os

import numpy as np
import pytest

from keras_memnmt.cli import load_recipe

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

TRAIN_TAGS = {"loss", "perplexity", "learning_rate", "gradient_norm", "target_tokens_per_second"}
VALIDATION_SCALARS = {"loss", "perplexity", "bleu", "chrf"}


def _events(folder: str) -> dict:
    """tag → [(step, plugin, value)] from every event file in ``folder``."""
    import tensorflow as tf

    found = {}
    for path in sorted(glob.glob(os.path.join(folder, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name
                tensor = tf.make_ndarray(value.tensor) if value.HasField("tensor") else value.simple_value
                found.setdefault(value.tag, []).append((event.step, plugin, tensor))
    return found


@pytest.fixture()
def run_dir(shared_run):
    """The shared run (``SHARED_RUN_ARGS``: 4 steps, every step logged, validations at
    steps 2 and 4 on 8 sentences), read only (``tests/conftest.py``)."""
    return shared_run


def test_training_scalars_every_logging_interval(run_dir):
    train = _events(os.path.join(run_dir, "tensorboard", "train"))
    assert TRAIN_TAGS <= set(train), sorted(train)
    assert "epoch_loss" in train  # Keras's own callback, per epoch
    for tag in TRAIN_TAGS:
        steps = [step for step, plugin, _ in train[tag]]
        assert steps == [1, 2, 3, 4], (tag, steps)
        assert {plugin for _, plugin, _ in train[tag]} == {"scalars"}
        values = [float(v) for _, _, v in train[tag]]
        assert all(math.isfinite(v) for v in values), (tag, values)
    losses = [float(v) for _, _, v in train["loss"]]
    perplexities = [float(v) for _, _, v in train["perplexity"]]
    np.testing.assert_allclose(perplexities, np.exp(losses), rtol=1e-4)
    assert all(0.0 < v < 10.0 for v in losses)
    rate = load_recipe("quickstart").learning_rate
    assert all(float(v) == pytest.approx(rate) for _, _, v in train["learning_rate"])
    assert all(float(v) > 0.0 for _, _, v in train["gradient_norm"])
    assert all(float(v) > 0.0 for _, _, v in train["target_tokens_per_second"])


def test_validation_scalars_samples_and_pictures(run_dir):
    from matplotlib.image import imread

    from keras_memnmt.data import synthetic_splits
    from keras_memnmt.inspection import inspect_pair
    from keras_memnmt.plots import DPI, figure_size
    from keras_memnmt.runs import load_run
    from keras_memnmt.training.monitor import picture_pairs

    validation = _events(os.path.join(run_dir, "tensorboard", "validation"))
    expected = VALIDATION_SCALARS | {"samples", "pictures/0", "pictures/1"}
    assert expected <= set(validation), sorted(validation)
    for tag in expected:
        assert [step for step, _, _ in validation[tag]] == [2, 4], tag
    for tag in VALIDATION_SCALARS:
        assert all(math.isfinite(float(v)) for _, _, v in validation[tag]), tag
    for tag in ("bleu", "chrf"):
        assert all(0.0 <= float(v) <= 100.0 for _, _, v in validation[tag]), tag
    loss, perplexity = float(validation["loss"][-1][2]), float(validation["perplexity"][-1][2])
    assert 0.0 < loss < 10.0 and perplexity == pytest.approx(math.exp(loss), rel=1e-4)

    model, vocab, _ = load_run(run_dir)
    val = synthetic_splits(200, seed=0)[1].take(8)
    text = validation["samples"][-1][2].item().decode()
    assert validation["samples"][-1][1] == "text"
    assert text.count("\n") == 4 and val.source[0] in text and val.target[0] in text  # header, rule, 3 rows

    pairs = picture_pairs(vocab, val.source, val.target, 2)
    assert len(pairs) == 2
    for i, (source, reference) in enumerate(pairs):
        width, height = figure_size(inspect_pair(model, vocab, source, reference))
        for _, plugin, tensor in validation[f"pictures/{i}"]:
            assert plugin == "images"
            assert (int(tensor[0]), int(tensor[1])) == (round(width * DPI), round(height * DPI))
            pixels = imread(io.BytesIO(tensor[2]), format="png")
            assert pixels.shape[:2] == (round(height * DPI), round(width * DPI))
            assert pixels[..., :3].std() > 0.05  # not blank
