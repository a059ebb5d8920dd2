"""MemDec model: serialization, shared single step, and pre-training from RNNsearch (§4.2)."""

import keras
import numpy as np
import pytest

from keras_memnmt.models import MemDec, RNNsearch, memdec_from_rnnsearch
from keras_memnmt.testing.utils import assert_stepping_matches

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SIZES = dict(embedding_dim=8, encoder_units=6, decoder_units=10, readout_units=7, attention_units=9, output_dropout=0.0)


def batch():
    rng = np.random.default_rng(1)
    src = rng.integers(4, 30, size=(3, 6)).astype("int32")
    src[0, 4:] = 0
    tgt = rng.integers(4, 25, size=(3, 5)).astype("int32")
    tgt[:, 0] = 2
    return src, tgt


def np_(x):
    return keras.ops.convert_to_numpy(x)


@pytest.mark.parametrize("query_state", [False, True])
def test_memdec_teacher_forcing_equals_stepping_and_round_trip(tmp_path, query_state):
    model = MemDec(30, 25, memory_size=4, memory_dim=5, query_state=query_state, **SIZES)
    src, tgt = batch()
    logits = np_(model((src, tgt)))
    assert_stepping_matches(model, src, tgt, logits)
    model.save(str(tmp_path / "m.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "m.keras"), compile=False)
    np.testing.assert_allclose(np_(loaded((src, tgt))), logits, atol=1e-6)
    assert loaded.get_config() == model.get_config()
    out = model.generate(src, beam_size=2, max_length_a=1.0, max_length_b=2)
    assert np_(out["tokens"]).shape[:2] == (3, 1)


def test_memdec_saved_with_shared_addressing_keeps_its_addressing():
    """Configs from before the `addressing` argument carry `shared_addressing=True`."""
    # Distinct memory cells (large Eq. 14 noise), so that the addressing modes differ clearly.
    model = MemDec(30, 25, memory_size=4, memory_dim=5, addressing="shared_parameters", init_noise_std=1.0, **SIZES)
    src, tgt = batch()
    logits = np_(model((src, tgt)))
    config = model.get_config()
    legacy = {**{k: v for k, v in config.items() if k != "addressing"}, "shared_addressing": True}
    old = MemDec.from_config(legacy)
    old((src, tgt))
    old.set_weights(model.get_weights())
    assert old.addressing == "shared_parameters" and old.get_config() == config
    np.testing.assert_allclose(np_(old((src, tgt))), logits, atol=1e-6)
    # The default reads with the previous write weights: a different model.
    default = MemDec(30, 25, memory_size=4, memory_dim=5, init_noise_std=1.0, **SIZES)
    default((src, tgt))
    default.set_weights(model.get_weights())
    assert default.addressing == "shared_weights"
    assert np.abs(np_(default((src, tgt))) - logits).max() > 1e-5


def test_pretraining_copies_every_shared_weight():
    rnnsearch = RNNsearch(30, 25, **SIZES)
    src, tgt = batch()
    rnnsearch((src, tgt))
    memdec = memdec_from_rnnsearch(rnnsearch, memory_size=4)
    for a, b in (
        (rnnsearch.encoder, memdec.encoder),
        (rnnsearch.target_embedding, memdec.target_embedding),
        (rnnsearch.cell.init_dense, memdec.cell.init_dense),
        (rnnsearch.cell.attention, memdec.cell.attention),
        (rnnsearch.cell.deep_output, memdec.cell.deep_output),
    ):
        for wa, wb in zip(a.get_weights(), b.get_weights(), strict=True):
            np.testing.assert_array_equal(wa, wb)
    k_src, r_src, b_src = rnnsearch.cell.gru_cell.get_weights()
    k_dst, r_dst, b_dst = memdec.cell.gru_cell.get_weights()
    np.testing.assert_array_equal(k_dst[: k_src.shape[0]], k_src)
    np.testing.assert_array_equal(r_dst, r_src)
    np.testing.assert_array_equal(b_dst, b_src)
    assert k_dst.shape[0] == k_src.shape[0] + memdec.cell.memory_dim  # fresh rows for r
    q_src, qb_src = rnnsearch.cell.query_dense.get_weights()
    q_dst, qb_dst = memdec.cell.query_dense.get_weights()
    e = SIZES["embedding_dim"]
    np.testing.assert_array_equal(q_dst[-e:], q_src[-e:])
    np.testing.assert_array_equal(qb_dst, qb_src)
    # the copied model runs, and one fine-tuning step changes it
    logits = np_(memdec((src, tgt)))
    assert logits.shape == (3, 5, 25) and np.isfinite(logits).all()
    from keras_memnmt.training.losses import MaskedCrossEntropy

    memdec.compile(keras.optimizers.Adam(1e-2), MaskedCrossEntropy())
    memdec.fit((src, tgt), tgt, epochs=1, verbose=0)
    assert not np.allclose(np_(memdec((src, tgt))), logits)
    # the zero-started read weights (default new_weights="zeros") learn from the first step
    assert np.abs(memdec.cell.gru_cell.get_weights()[0][k_src.shape[0] :]).max() > 0
    assert np.abs(memdec.cell.query_dense.get_weights()[0][:-e]).max() > 0


@pytest.mark.parametrize("new_weights", ["zeros", "initializer"])
def test_warm_start_new_read_weights(new_weights):
    """ "zeros": at the warm start the memory read has no effect on the output."""
    rnnsearch = RNNsearch(30, 25, **SIZES)
    src, tgt = batch()
    rnnsearch((src, tgt))
    memdec = memdec_from_rnnsearch(rnnsearch, new_weights=new_weights, memory_size=4)
    cell, rows = memdec.cell, rnnsearch.cell.gru_cell.get_weights()[0].shape[0]
    r_rows = cell.gru_cell.get_weights()[0][rows:]
    w_r = cell.query_dense.get_weights()[0][: cell.memory_dim]
    assert (np.abs(r_rows).max() == 0 and np.abs(w_r).max() == 0) == (new_weights == "zeros")
    logits = np_(memdec((src, tgt)))
    # change what the memory holds and how it is read and written
    for layer in (cell.memory_init_dense, cell.read_addressing, cell.erase_dense, cell.add_dense):
        layer.set_weights([w + 0.5 for w in layer.get_weights()])
    changed = not np.allclose(np_(memdec((src, tgt))), logits, atol=1e-6)
    assert changed == (new_weights == "initializer")


def test_warm_start_with_query_state_is_the_rnnsearch_it_comes_from():
    """query_state=True: the whole RNNsearch query is copied, so before fine-tuning the
    warm-started MemDec gives RNNsearch's logits and beam-search output."""
    rnnsearch = RNNsearch(30, 25, **SIZES)
    src, tgt = batch()
    expected = np_(rnnsearch((src, tgt)))
    memdec = memdec_from_rnnsearch(rnnsearch, memory_size=4, query_state=True, init_noise_std=1.0)
    np.testing.assert_allclose(np_(memdec((src, tgt))), expected, atol=1e-5)
    q_src = rnnsearch.cell.query_dense.get_weights()[0]
    q_dst = memdec.cell.query_dense.get_weights()[0]
    np.testing.assert_array_equal(q_dst[-q_src.shape[0] :], q_src)  # [s; e] rows
    assert np.abs(q_dst[: memdec.cell.memory_dim]).max() == 0  # W^r
    beam = dict(beam_size=3, max_length_a=1.0, max_length_b=2)
    np.testing.assert_array_equal(
        np_(memdec.generate(src, **beam)["tokens"]), np_(rnnsearch.generate(src, **beam)["tokens"])
    )
    # Without the W^s term (Eq. 5 as printed) the query loses s_{t-1}: a different model.
    printed = memdec_from_rnnsearch(rnnsearch, memory_size=4, init_noise_std=1.0)
    assert np.abs(np_(printed((src, tgt))) - expected).max() > 1e-3


def test_tied_warm_start_is_the_tied_rnnsearch_it_comes_from(tmp_path):
    """tie_embeddings reaches MemDec with the copy: with query_state=True the warm-started
    MemDec gives the tied RNNsearch's logits; stepping equals teacher forcing; round trip."""
    sizes = {**SIZES, "readout_units": SIZES["embedding_dim"]}
    rnnsearch = RNNsearch(30, 25, tie_embeddings=True, **sizes)
    src, tgt = batch()
    expected = np_(rnnsearch((src, tgt)))
    memdec = memdec_from_rnnsearch(rnnsearch, memory_size=4, query_state=True)
    assert memdec.tie_embeddings and memdec.cell.deep_output.logits is None
    np.testing.assert_allclose(np_(memdec((src, tgt))), expected, atol=1e-5)
    assert_stepping_matches(memdec, src, tgt, expected)
    memdec.save(str(tmp_path / "m.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "m.keras"), compile=False)
    np.testing.assert_allclose(np_(loaded((src, tgt))), expected, atol=1e-5)


def test_warm_start_bad_new_weights():
    rnnsearch = RNNsearch(30, 25, **SIZES)
    rnnsearch(batch())
    with pytest.raises(ValueError, match="new_weights"):
        memdec_from_rnnsearch(rnnsearch, new_weights="ones", memory_size=4)


def test_bad_memory_size():
    with pytest.raises(ValueError, match="memory_size"):
        MemDec(30, 25, memory_size=0, **SIZES)(batch())
