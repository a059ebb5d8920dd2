"""RMN and RMR models: the shared single step, saving, options, and a memory block that is used."""

import keras
import numpy as np
import pytest

from keras_memnmt.config import TrainConfig, apply_overrides, build_model
from keras_memnmt.data import synthetic_corpus
from keras_memnmt.models import RMN, RMR, get_model, model_options
from keras_memnmt.testing.utils import assert_model_round_trip, numpy, small_batch, word_ids

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SIZES = dict(embedding_dim=8, encoder_units=6, decoder_units=10, readout_units=8, attention_units=9, output_dropout=0.0)


@pytest.mark.parametrize(
    "cls, options",
    [
        (RMN, dict(memory_size=3, tie_embeddings=True)),
        (RMR, dict(memory_size=2, context="fixed", context_once="input", memory_dim=5)),
    ],
    ids=["rmn_tied", "rmr_fixed_context"],
)
def test_teacher_forcing_equals_stepping_and_round_trip(tmp_path, cls, options):
    model = cls(30, 25, **SIZES, **options)
    assert_model_round_trip(model, *small_batch(), tmp_path)


def test_registered_with_their_options():
    assert get_model("rmn") is RMN and get_model("rmr") is RMR
    options = model_options(RMR)
    assert options["top_lstm"].default is True and options["memory_size"].default == 7
    assert model_options(RMN)["top_lstm"].default is False
    config = apply_overrides(TrainConfig(model="rmn"), ["memory_size=4", "context_once=none", "context=fixed"])
    model = build_model(config, 30, 25)
    assert (model.memory_size, model.context_once, model.context) == (4, None, "fixed")
    assert apply_overrides(config, ["context_once=output"]).context_once == "output"


def test_a_bad_option_names_itself():
    with pytest.raises(ValueError, match="context_once"):
        RMN(30, 25, context_once="twice", **SIZES)


def _kl_from_uniform(model, src, tgt_in, memory_size):
    """Mean KL(P_t || uniform over the filled slots) over real target steps with >= 3 words."""
    states = model.encode(src)
    inputs = model.cell.prepare_inputs(model.embed_target(tgt_in), tgt_in)
    divergences = []
    for t in range(tgt_in.shape[1]):
        weights = numpy(model.cell.memory_attention(inputs[:, t], states))
        _, states, _ = model.cell.step(inputs[:, t], states)
        filled = min(t + 1, memory_size)
        if filled >= 3:
            p = weights[tgt_in[:, t] != 0, :filled]
            divergences.append(np.sum(p * np.log(p * filled + 1e-12), axis=-1))
    return float(np.mean(np.concatenate(divergences)))


def test_trained_memory_attention_is_not_uniform():
    """After a short training on the synthetic corpus the block attends selectively."""
    keras.utils.set_random_seed(0)
    vocab, src, tgt_in, tgt_out = word_ids(synthetic_corpus(1000, seed=0))
    model = RMN(
        vocab,
        vocab,
        embedding_dim=16,
        encoder_units=16,
        decoder_units=32,
        attention_units=16,
        readout_units=16,
        memory_size=4,
        output_dropout=0.0,
    )
    model((src[:2], tgt_in[:2]))
    before = _kl_from_uniform(model, src[:200], tgt_in[:200], 4)
    model.compile(
        keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
    )
    model.fit((src, tgt_in), tgt_out, batch_size=100, epochs=2, verbose=0)  # 20 steps
    after = _kl_from_uniform(model, src[:200], tgt_in[:200], 4)
    assert after > 0.2 and after > 5 * before, (before, after)
