"""Models saved by an earlier version of the library load and compute the same numbers.

``tests/data/before_seam/`` holds small fixed-seed RNNsearch, Cho and MemDec models
(``.keras``) with their logits and beam-search output, saved under TensorFlow before
the model seam (encoder hook, ``DecoderCell`` base, model registry) existed.
"""

import os

import keras
import numpy as np
import pytest

import keras_memnmt.models  # noqa: F401  (registers the classes)

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

DATA = os.path.join(os.path.dirname(__file__), "data", "before_seam")


def _trim(tokens):
    """Best hypotheses as lists of ids up to (and with) eos, without the padding after it."""
    out = []
    for row in np.asarray(tokens)[:, 0]:
        ids = row.tolist()
        ids = ids[: ids.index(3) + 1] if 3 in ids else ids
        while ids and ids[-1] == 0:
            ids.pop()
        out.append(ids)
    return out


@pytest.mark.parametrize("name", ["rnnsearch", "cho", "memdec"])
def test_saved_model_gives_the_stored_logits_and_translations(name):
    inputs = np.load(os.path.join(DATA, "inputs.npz"))
    stored = np.load(os.path.join(DATA, f"{name}_outputs.npz"))
    model = keras.saving.load_model(os.path.join(DATA, f"{name}.keras"), compile=False)
    logits = keras.ops.convert_to_numpy(model((inputs["source"], inputs["target"]), training=False))
    np.testing.assert_allclose(logits, stored["logits"], atol=1e-5)
    out = model.generate(inputs["source"], beam_size=3, max_length_a=1.0, max_length_b=3)
    assert _trim(out["tokens"]) == _trim(stored["beam_tokens"])
    np.testing.assert_allclose(np.asarray(out["scores"]), stored["beam_scores"], atol=1e-4)


@pytest.mark.parametrize("name, model", [("memdec", "memdec"), ("rnnsearch", "rnnsearch")])
def test_run_configs_written_before_model_options_load(name, model):
    """config.json of older runs has one field per model option; it loads into model_options,
    without the fields of other models and of the MemDec recipe's stages."""
    import json

    from keras_memnmt.config import TrainConfig

    raw = json.load(open(os.path.join(DATA, f"{name}_config.json")))
    config = TrainConfig.from_dict(raw)
    assert config.model == model and config.learning_rate == raw["learning_rate"]
    assert config.model_options["decoder_units"] == raw["decoder_units"]
    assert config.tie_embeddings == raw["tie_embeddings"]
    if model == "memdec":
        assert config.model_options["memory_size"] == raw["memory_size"]
        assert config.model_options["warm_start_new"] == raw["warm_start_new"]
        assert "feedback_attention" not in config.model_options
    else:
        assert "memory_size" not in config.model_options
