"""Luong model: the shared single step, saving, options and errors."""

import pytest

from keras_memnmt.config import TrainConfig, apply_overrides, build_model
from keras_memnmt.models import LuongNMT, get_model, model_options
from keras_memnmt.testing.utils import assert_model_round_trip, small_batch

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SIZES = dict(embedding_dim=8, encoder_units=10, decoder_units=10, readout_units=8, output_dropout=0.0)


@pytest.mark.parametrize(
    "options",
    [
        dict(num_layers=2, tie_embeddings=True, layer_dropout=0.5, bidirectional_bottom=True),
        dict(score="general", num_layers=1, init_state="zeros", input_feeding=False),
    ],
    ids=["dot_tied_feeding", "general_zeros_no_feeding"],
)
def test_teacher_forcing_equals_stepping_and_round_trip(tmp_path, options):
    model = LuongNMT(30, 25, **{**SIZES, **options})
    assert_model_round_trip(model, *small_batch(), tmp_path)


def test_registered_with_the_papers_defaults_and_clear_errors():
    assert get_model("luong") is LuongNMT
    options = model_options(LuongNMT)
    assert (options["num_layers"].default, options["score"].default, options["input_feeding"].default) == (
        4,
        "dot",
        True,
    )
    config = apply_overrides(
        TrainConfig(model="luong"),
        [
            "num_layers=1",
            "embedding_dim=16",
            "readout_units=16",
            "encoder_units=16",
            "decoder_units=16",
            "input_feeding=false",
        ],
    )
    model = build_model(config, 30, 25)
    assert (model.cell.score, model.cell.num_layers, model.cell.input_feeding) == ("dot", 1, False)
    with pytest.raises(ValueError, match="readout_units=8, embedding_dim=16"):
        LuongNMT(30, 25, **{**SIZES, "embedding_dim": 16}, tie_embeddings=True)
    with pytest.raises(ValueError, match="encoder_units=6, decoder_units=10"):
        LuongNMT(30, 25, **{**SIZES, "encoder_units": 6})
    with pytest.raises(ValueError, match="annotation_units == units"):  # "dot" reads e_s with h_t
        LuongNMT(30, 25, **{**SIZES, "encoder_units": 6, "init_state": "zeros"})
