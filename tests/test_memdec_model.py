"""MemDec model: serialization, shared single step, and pre-training from RNNsearch (§4.2)."""

import keras
import numpy as np
import pytest

from keras_memnmt.models import MemDec, RNNsearch, memdec_from_rnnsearch

SIZES = dict(embedding_dim=8, encoder_units=6, decoder_units=10, readout_units=7, attention_units=9,
             output_dropout=0.0)


def batch():
    rng = np.random.default_rng(1)
    src = rng.integers(4, 30, size=(3, 6)).astype("int32")
    src[0, 4:] = 0
    tgt = rng.integers(4, 25, size=(3, 5)).astype("int32")
    tgt[:, 0] = 2
    return src, tgt


def np_(x):
    return keras.ops.convert_to_numpy(x)


def test_memdec_teacher_forcing_equals_stepping_and_round_trip(tmp_path):
    model = MemDec(30, 25, memory_size=4, memory_dim=5, **SIZES)
    src, tgt = batch()
    logits = np_(model((src, tgt)))
    states = model.encode(src)
    for t in range(tgt.shape[1]):
        step_logits, states, _ = model.decode_step(keras.ops.convert_to_tensor(tgt[:, t]), states)
        np.testing.assert_allclose(np_(step_logits), logits[:, t], atol=1e-5)
    model.save(str(tmp_path / "m.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "m.keras"), compile=False)
    np.testing.assert_allclose(np_(loaded((src, tgt))), logits, atol=1e-6)
    assert loaded.get_config() == model.get_config()
    out = model.generate(src, beam_size=2, max_length_a=1.0, max_length_b=2)
    assert np_(out["tokens"]).shape[:2] == (3, 1)


def test_pretraining_copies_every_shared_weight():
    rnnsearch = RNNsearch(30, 25, **SIZES)
    src, tgt = batch()
    rnnsearch((src, tgt))
    memdec = memdec_from_rnnsearch(rnnsearch, memory_size=4)
    for a, b in ((rnnsearch.encoder, memdec.encoder), (rnnsearch.target_embedding, memdec.target_embedding),
                 (rnnsearch.cell.init_dense, memdec.cell.init_dense),
                 (rnnsearch.cell.attention, memdec.cell.attention),
                 (rnnsearch.cell.deep_output, memdec.cell.deep_output)):
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


def test_bad_memory_size():
    with pytest.raises(ValueError, match="memory_size"):
        MemDec(30, 25, memory_size=0, **SIZES)(batch())
