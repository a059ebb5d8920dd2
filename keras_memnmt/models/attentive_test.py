"""Attentive NMT model: the shared single step, saving, options, the stacked-LSTM encoder."""

import numpy as np
import pytest

from keras_memnmt.config import TrainConfig, apply_overrides, build_model
from keras_memnmt.models import AttentiveNMT, StackedLSTMEncoder, get_model, model_options
from keras_memnmt.testing.utils import assert_model_round_trip, numpy, small_batch

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SIZES = dict(embedding_dim=8, encoder_units=10, decoder_units=10, readout_units=8, output_dropout=0.0)


@pytest.mark.parametrize(
    "options",
    [
        dict(score="general", history_length=4, tie_embeddings=True, layer_dropout=0.5, bidirectional_bottom=True),
        dict(score="dot", self_score="combined", num_layers=1, init_state="zeros", history_length=50),
    ],
    ids=["general_tied_sliding_window", "dot_combined_zeros"],
)
def test_teacher_forcing_equals_stepping_and_round_trip(tmp_path, options):
    model = AttentiveNMT(30, 25, **{**SIZES, **options})
    assert_model_round_trip(model, *small_batch(), tmp_path)


def test_the_encoder_hands_every_layer_over():
    encoder = StackedLSTMEncoder(30, 8, 10, num_layers=3, bidirectional_bottom=True)
    src, _ = small_batch()
    out = encoder(src)
    assert len(out.final_states) == 3 and all(len(layer) == 2 for layer in out.final_states)
    np.testing.assert_array_equal(numpy(out.summary), numpy(out.final_states[-1][0]))
    assert tuple(out.annotations.shape) == (3, 6, 10)
    model = AttentiveNMT(30, 25, num_layers=3, **SIZES)
    states = model.encode(src)
    for i in range(6):
        assert tuple(states[i].shape) == (3, 10)


def test_registered_with_options_and_clear_errors():
    assert get_model("attentive") is AttentiveNMT
    options = model_options(AttentiveNMT)
    assert options["score"].default == "general" and options["self_score"].default == "single"
    config = apply_overrides(
        TrainConfig(model="attentive"),
        [
            "score=dot",
            "num_layers=1",
            "embedding_dim=16",
            "encoder_units=16",
            "decoder_units=16",
            "self_score=combined",
            "history_length=20",
        ],
    )
    model = build_model(config, 30, 25)
    assert (model.cell.score, model.cell.num_layers, model.cell.history_length) == ("dot", 1, 20)
    with pytest.raises(ValueError, match="readout_units=8, embedding_dim=16"):
        AttentiveNMT(30, 25, **{**SIZES, "embedding_dim": 16}, tie_embeddings=True)
    with pytest.raises(ValueError, match="encoder_units=6, decoder_units=10"):
        AttentiveNMT(30, 25, **{**SIZES, "encoder_units": 6})
