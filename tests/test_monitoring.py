"""TensorBoard after a tiny training: every scalar, text and image tag, read back from the
event files (run once per backend)."""

import glob
import io
import math
import os
import re

import numpy as np
import pytest

from keras_memnmt.recipes import load_recipe

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
    from keras_memnmt.pictures.inspection import inspect_pair
    from keras_memnmt.pictures.plots import DPI, figure_size
    from keras_memnmt.rundir.runs import load_run
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


# ----- docs/monitoring.md ---------------------------------------------------------------------

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "monitoring.md")
# The tags of the doc's table that a run writes only with some configs.
YLSTM_TAGS = {"epoch_translation_loss", "epoch_encoder_lm_loss"}
PER_EPOCH_VALIDATION_TAGS = {"epoch_bleu"}  # validate_every=0 only


def _doc() -> str:
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def _doc_tags() -> dict[str, set[str]]:
    """folder → the tags the doc's table lists for it."""
    tags: dict[str, set[str]] = {"train": set(), "validation": set()}
    for folder, cell in re.findall(r"^\| `(train|validation)` \| (.*?) \|", _doc(), flags=re.M):
        tags[folder] |= set(re.findall(r"`([^`]+)`", cell))
    return tags


def _event_files(folder: str):
    import tensorflow as tf

    for path in sorted(glob.glob(os.path.join(folder, "events.out.tfevents.*"))):
        yield from tf.compat.v1.train.summary_iterator(path)


def test_the_doc_lists_every_tag_a_run_writes_and_no_graph(run_dir):
    doc = _doc_tags()
    for folder, optional in (("train", YLSTM_TAGS), ("validation", PER_EPOCH_VALIDATION_TAGS)):
        events = list(_event_files(os.path.join(run_dir, "tensorboard", folder)))
        written = {value.tag for event in events for value in event.summary.value}
        assert written == doc[folder] - optional, folder
        assert not any(event.HasField("graph_def") for event in events), folder
        # Tensor summaries, Keras's included: EventAccumulator's Scalars() does not see them.
        assert all(value.HasField("tensor") for event in events for value in event.summary.value)


def test_the_docs_event_accumulator_example_reads_the_validation_bleu(run_dir):
    blocks = re.findall(r"^```python\n(.*?)^```$", _doc(), flags=re.M | re.S)
    assert len(blocks) == 1 and 'run = "runs/NAME"\n' in blocks[0]
    namespace: dict = {}
    exec(compile(blocks[0].replace('"runs/NAME"', repr(run_dir)), DOC, "exec"), namespace)
    expected = [
        (step, float(value)) for step, _, value in _events(os.path.join(run_dir, "tensorboard", "validation"))["bleu"]
    ]
    assert [step for step, _ in namespace["bleu"]] == [2, 4]
    assert namespace["bleu"] == expected
    assert {"bleu", "chrf", "loss", "perplexity"} <= set(namespace["tags"])
    assert namespace["events"].Tags()["scalars"] == []


@pytest.mark.backend_independent
def test_the_docs_plot_example_writes_into_a_folder_that_exists():
    outs = re.findall(r"memnmt plot .*?--out (\S+)", _doc(), flags=re.S)
    assert len(outs) == 2  # the usage line and the example
    for out in outs:
        folder = os.path.dirname(out)
        assert not folder or os.path.isdir(os.path.join(os.path.dirname(DOC), "..", folder)), out


@pytest.mark.slow
def test_validation_once_per_epoch_also_writes_epoch_bleu(tmp_path):
    """With validate_every=0 Keras's callback finds the BLEU in the epoch's logs (val_bleu)."""
    from keras_memnmt.cli import main
    from keras_memnmt.testing.tiny_runs import TINY_TRAIN_ARGS

    out = str(tmp_path / "run")
    assert (
        main(
            [
                "train",
                "quickstart",
                "--out",
                out,
                *TINY_TRAIN_ARGS,
                "--set",
                "max_steps=2",
                "--set",
                "validate_every=0",
                "--set",
                "tensorboard_pictures=0",
            ]
        )
        == 0
    )
    validation = _events(os.path.join(out, "tensorboard", "validation"))
    assert set(validation) == _doc_tags()["validation"] - {"pictures/0", "pictures/1"}
    assert [step for step, _, _ in validation["epoch_bleu"]] == [0]  # the epoch
    assert float(validation["epoch_bleu"][0][2]) == pytest.approx(float(validation["bleu"][0][2]))
