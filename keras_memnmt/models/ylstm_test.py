"""Y-LSTM model: the shared single step, saving, the encoder's language-model loss, options."""

import keras
import numpy as np
import pytest

from keras_memnmt.config import TrainConfig, apply_overrides, build_model
from keras_memnmt.data import synthetic_corpus
from keras_memnmt.models import YLSTM, get_model, model_options
from keras_memnmt.testing.utils import assert_model_round_trip, numpy, small_batch, word_ids
from keras_memnmt.training.losses import MaskedCrossEntropy

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SIZES = dict(embedding_dim=8, encoder_units=8, decoder_units=8, num_layers=3, tracker_layer=2, output_dropout=0.0)


@pytest.mark.parametrize(
    "options",
    [
        dict(tie_embeddings=True, layer_dropout=0.3, tracker_units=6),
        dict(score="general", num_layers=1, tracker_layer=1, encoder_lm_weight=0.0),
        dict(same_step_context=True, encoder_lm_warmup=3, layer_dropout=0.2),
    ],
    ids=["dot_tied", "general_one_layer_no_lm", "same_step_context_lm_warmup"],
)
def test_teacher_forcing_equals_stepping_and_round_trip(tmp_path, options):
    model = YLSTM(30, 25, **{**SIZES, **options})
    assert_model_round_trip(model, *small_batch(), tmp_path)


def _fit(weight, epochs=3):
    keras.utils.set_random_seed(0)
    vocab, src, tgt_in, tgt_out = word_ids(synthetic_corpus(600, seed=0))
    model = YLSTM(
        vocab,
        vocab,
        **{**SIZES, "encoder_units": 16, "decoder_units": 16, "embedding_dim": 16},
        encoder_lm_weight=weight,
    )
    model.compile(keras.optimizers.Adam(1e-2), MaskedCrossEntropy())
    history = model.fit((src, tgt_in), tgt_out, batch_size=100, epochs=epochs, verbose=0).history
    return model, history, (src[:4], tgt_in[:4])


def test_the_encoder_language_model_loss_is_logged_apart_and_decreases():
    model, history, batch = _fit(1.0)
    lm, translation, total = history["encoder_lm_loss"], history["translation_loss"], history["loss"]
    assert lm[2] < lm[1] < lm[0] and lm[2] < 0.9 * lm[0], lm
    np.testing.assert_allclose(np.add(lm, translation), total, rtol=1e-4)
    model(batch, training=True)
    assert len(model.losses) == 1


def test_weight_zero_removes_the_language_model():
    model, history, batch = _fit(0.0, epochs=1)
    assert model.encoder.lm_output is None and "encoder_lm_loss" not in history
    model(batch, training=True)
    assert model.losses == []
    assert not any("lm_output" in w.path for w in model.weights)


def test_the_weight_scales_the_added_loss():
    model = YLSTM(30, 25, **SIZES, encoder_lm_weight=0.5)
    src, tgt = small_batch()
    keras.utils.set_random_seed(1)
    model((src, tgt), training=True)
    added = float(numpy(model.losses[0]))
    outputs = model.encoder.rnn(
        model.encoder.embedding(src), initial_state=model.encoder.cell.initial_states(3), mask=src != 0
    )
    lm = float(numpy(model.encoder.lm_loss(outputs[:, :, :8], src)))
    np.testing.assert_allclose(added, 0.5 * lm, rtol=1e-5)


def test_the_warmup_raises_the_language_models_weight_step_by_step():
    """Training call k adds ``weight * min(k / warmup, 1)`` times the language-model loss;
    calls outside training neither add nor count; the count is saved with the weights."""
    model = YLSTM(30, 25, **SIZES, encoder_lm_weight=0.5, encoder_lm_warmup=4)
    src, tgt = small_batch()
    model((src, tgt))
    assert float(numpy(model.encoder.lm_steps)) == 0.0 and model.losses == []
    outputs = model.encoder.rnn(
        model.encoder.embedding(src), initial_state=model.encoder.cell.initial_states(3), mask=src != 0
    )
    lm = float(numpy(model.encoder.lm_loss(outputs[:, :, :8], src)))
    for step in range(1, 7):
        model((src, tgt), training=True)
        np.testing.assert_allclose(float(numpy(model.losses[0])), 0.5 * min(step / 4, 1.0) * lm, rtol=1e-5)
    assert float(numpy(model.encoder.lm_steps)) == 6.0
    assert any(w.path.endswith("lm_steps") for w in model.non_trainable_weights)
    with pytest.raises(ValueError, match="lm_warmup_steps"):
        YLSTM(30, 25, **SIZES, encoder_lm_warmup=-1)


def test_registered_with_the_papers_defaults_and_clear_errors():
    assert get_model("ylstm") is YLSTM
    options = model_options(YLSTM)
    assert (
        options["num_layers"].default,
        options["tracker_layer"].default,
        options["score"].default,
        options["encoder_lm_weight"].default,
        options["encoder_lm_warmup"].default,
        options["same_step_context"].default,
    ) == (5, 3, "dot", 1.0, 0, False)
    config = apply_overrides(
        TrainConfig(model="ylstm"),
        ["num_layers=2", "tracker_layer=1", "embedding_dim=16", "encoder_units=16", "decoder_units=16"],
    )
    model = build_model(config, 30, 25)
    assert (model.cell.num_layers, model.cell.tracker_layer) == (2, 1)
    with pytest.raises(ValueError, match="tracker_layer"):
        YLSTM(30, 25, **{**SIZES, "tracker_layer": 4})
    with pytest.raises(ValueError, match="readout_units=8, embedding_dim=16"):
        YLSTM(30, 25, **{**SIZES, "embedding_dim": 16}, tie_embeddings=True)
