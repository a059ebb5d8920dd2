"""Models saved by an earlier version of the library load and compute the same numbers.

``tests/data/before_seam/`` holds small fixed-seed RNNsearch, Cho and MemDec models
(``.keras``) with their logits and beam-search output, saved under TensorFlow before
the model seam (encoder hook, ``DecoderCell`` base, model registry) existed. The stored
search output predates the length rule (a hypothesis takes eos at its last allowed
position, ``keras_memnmt.decoding.common``), so the search is checked against the
reference beam search under that rule instead, stepped by teacher forcing (the call whose
logits match the stored ones).
"""

import os

import keras
import numpy as np
import pytest

import keras_memnmt.models  # noqa: F401  (registers the classes)
from keras_memnmt.testing.fake_decoder import log_softmax_np, ruled_beam

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


class TeacherForced:
    """A model as the reference searches' step (``keras_memnmt.testing.fake_decoder``):
    the log-probabilities of the token after a hypothesis of sentence ``s``, from
    teacher forcing bos and its tokens (the history)."""

    def __init__(self, model, source):
        self.model, self.source = model, source

    def initial_state_np(self, s):
        return ()

    def step(self, s, token, history):
        history = (*history, int(token))
        logits = self.model((self.source[s : s + 1], np.array([history], "int32")), training=False)
        return log_softmax_np(keras.ops.convert_to_numpy(logits)[0, -1].astype(np.float64)), history


@pytest.mark.parametrize("name", ["rnnsearch", "cho", "memdec"])
def test_saved_model_gives_the_stored_logits_and_translations(name):
    inputs = np.load(os.path.join(DATA, "inputs.npz"))
    stored = np.load(os.path.join(DATA, f"{name}_outputs.npz"))
    model = keras.saving.load_model(os.path.join(DATA, f"{name}.keras"), compile=False)
    logits = keras.ops.convert_to_numpy(model((inputs["source"], inputs["target"]), training=False))
    np.testing.assert_allclose(logits, stored["logits"], atol=1e-5)
    source = inputs["source"]
    out = model.generate(source, beam_size=3, max_length_a=1.0, max_length_b=3)
    limits = (source != 0).sum(1) + 3  # max_length_a * |x| + max_length_b
    expected = [ruled_beam(TeacherForced(model, source), s, 3, int(limit), "gnmt")[0] for s, limit in enumerate(limits)]
    assert _trim(out["tokens"]) == [tokens for _, _, tokens in expected]
    np.testing.assert_allclose(np.asarray(out["scores"])[:, 0], [score for score, _, _ in expected], atol=1e-4)
    # The rule matters here: the stored best hypothesis of sentence 0 ran into its limit without eos.
    assert 3 not in _trim(stored["beam_tokens"])[0] and len(_trim(stored["beam_tokens"])[0]) == limits[0]


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
