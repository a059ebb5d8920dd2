"""Search modes beyond greedy and beam: target prefixes and sampling (``generate``'s
``prefix``, ``sampling``, ``temperature`` and ``keys``; ``translate_chunks``' text level)."""

import numpy as np
import pytest
from keras import ops

from keras_memnmt.data import BOS_ID, EOS_ID, PAD_ID
from keras_memnmt.decoding import greedy_search
from keras_memnmt.decoding.common import gumbel_noise, parse_sampling
from keras_memnmt.evaluation.scoring import score_ids
from keras_memnmt.evaluation.translation import draw_key, translate_chunks
from keras_memnmt.models import MODELS
from keras_memnmt.testing.tiny_runs import TINY_OPTIONS, synthetic_vocab

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SOURCE = np.array([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0], [10, 11, 12, 13, 14, 3]], np.int32)
PREFIX = np.array([[10, 11, 0], [12, 0, 0], [0, 0, 0]], np.int32)  # the third sentence has none


def tiny(name, seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    model = MODELS[name](30, 25, **TINY_OPTIONS[name])
    model((SOURCE[:1], np.full((1, 1), BOS_ID, np.int32)))
    return model


def rows(tokens):
    """``(B, L)`` tokens -> each row's ids before pad (eos kept where it came)."""
    return [[int(t) for t in row if t != PAD_ID] for row in np.asarray(tokens)]


def sources():
    return [[int(t) for t in row if t] for row in SOURCE]


def numpy_noise(keys, step, vocab):
    """``gumbel_noise`` written again in NumPy's uint32 arithmetic, from its definition."""

    def mix(x):
        x = x.astype(np.uint32)
        x ^= x >> np.uint32(16)
        x = x * np.uint32(0x7FEB352D)
        x ^= x >> np.uint32(15)
        x = x * np.uint32(0x846CA68B)
        return x ^ (x >> np.uint32(16))

    with np.errstate(over="ignore"):
        row = mix(mix(np.asarray(keys, np.uint32)) + mix(np.uint32(step) + np.uint32(0x632BE5AB)))
        bits = mix(row[:, None] + np.arange(vocab, dtype=np.uint32)[None, :] * np.uint32(0x9E3779B9))
    # The uniform draw is (v + 1/2) / 2^24 for the top 24 bits v, in (0, 1): computed in
    # float64 (exact), then rounded to float32 below 1.
    uniform = ((bits >> np.uint32(8)).astype(np.float64) + 0.5) / float(1 << 24)
    uniform = np.minimum(uniform.astype(np.float32), np.nextafter(np.float32(1), np.float32(0)))
    return -np.log(-np.log(uniform))


def unmix(x: int) -> int:
    """The inverse of ``gumbel_noise``'s 32-bit hash (each of its steps is a bijection)."""

    def unshift(x, bits):  # x ^= x >> bits, undone
        y = x
        for _ in range(32 // bits + 1):
            y = x ^ (y >> bits)
        return y & 0xFFFFFFFF

    x = unshift(x, 16)
    x = (x * pow(0x846CA68B, -1, 1 << 32)) & 0xFFFFFFFF
    x = unshift(x, 15)
    x = (x * pow(0x7FEB352D, -1, 1 << 32)) & 0xFFFFFFFF
    return unshift(x, 16)


def key_reaching_the_top(token: int, step: int) -> int:
    """An int32 key whose noise for ``token`` at ``step`` comes from the top hash value
    (all 24 bits of the draw set), by inverting the hash."""

    def mix(x):
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    row = (unmix(0xFFFFFFFF) - token * 0x9E3779B9) & 0xFFFFFFFF
    mixed_key = (unmix(row) - mix((step + 0x632BE5AB) & 0xFFFFFFFF)) & 0xFFFFFFFF
    key = unmix(mixed_key)
    return key - (1 << 32) if key >= 1 << 31 else key


def test_the_noise_is_finite_at_the_top_hash_value_and_a_banned_token_is_never_drawn():
    vocab, step = 12, 3
    for token in (0, 2, 7):  # pad, bos, a token outside top-k
        key = key_reaching_the_top(token, step)
        keys = ops.convert_to_tensor(np.array([key], np.int32))
        noise = ops.convert_to_numpy(gumbel_noise(keys, ops.convert_to_tensor(step, "int32"), vocab))
        assert np.all(np.isfinite(noise)) and noise[0, token] == noise.max()  # the top draw, finite
        np.testing.assert_allclose(
            noise, numpy_noise(np.array([key], np.int64).astype(np.uint32), step, vocab), rtol=1e-5
        )
        from keras_memnmt.decoding.common import sample_tokens

        logp = np.log(np.full((1, vocab), 1.0 / (vocab - 1), np.float32))
        logp[0, token] = -np.inf  # banned: pad, bos, or not a row's forced token
        for spec in ("full", "topk:3", "topp:0.5"):
            drawn = ops.convert_to_numpy(
                sample_tokens(
                    ops.convert_to_tensor(logp), parse_sampling(spec), 1.0, keys, ops.convert_to_tensor(step, "int32")
                )
            )
            assert drawn[0] != token, (token, spec)


def test_the_noise_is_the_same_integer_hash_on_every_backend():
    keys = np.array([0, 1, 7, 2**31 - 1, 123456789], np.int32)
    for step in (0, 1, 57):
        got = ops.convert_to_numpy(gumbel_noise(ops.convert_to_tensor(keys), ops.convert_to_tensor(step, "int32"), 40))
        np.testing.assert_allclose(got, numpy_noise(keys.astype(np.uint32), step, 40), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spec, support", [("full", 6), ("topk:2", 2), ("topp:0.5", 2), ("topp:0.8", 4)])
def test_samples_follow_the_distribution_in_their_support(spec, support):
    # One step from a fixed distribution over tokens 3..8 (pad, unk and bos never drawn here).
    probs = np.array([0.0, 0.0, 0.0, 0.3, 0.25, 0.2, 0.12, 0.08, 0.05], np.float32)
    logits = np.log(np.maximum(probs, 1e-30))
    n = 6000

    def next_fn(tokens, states):
        return ops.tile(ops.convert_to_tensor(logits)[None, :], (ops.shape(tokens)[0], 1)), states, None

    # Limit 2: the first token is drawn, the second is eos by the length rule (the last
    # allowed position takes eos), unless the first already was eos (token 3).
    out = greedy_search(
        next_fn,
        [np.zeros((n, 1), np.float32)],
        n,
        max_length=2,
        sampling=parse_sampling(spec),
        keys=np.arange(n, dtype=np.int32),
    )
    tokens = ops.convert_to_numpy(out["tokens"])
    first = tokens[:, 0]
    drawn = np.bincount(first, minlength=len(probs)) / n
    kept = np.zeros_like(probs)
    kept[3 : 3 + support] = probs[3 : 3 + support]
    np.testing.assert_allclose(drawn, kept / kept.sum(), atol=0.025)
    np.testing.assert_array_equal(tokens[:, 1], np.where(first == EOS_ID, PAD_ID, EOS_ID))
    # Each sample scores its log-probability under the model, not under the restriction,
    # and so does the eos the rule adds.
    expected = np.log(probs[first]) + np.where(first == EOS_ID, 0.0, np.log(probs[EOS_ID]))
    np.testing.assert_allclose(ops.convert_to_numpy(out["scores"]), expected, atol=1e-5)


def test_a_lower_temperature_draws_the_likely_tokens_more_often():
    probs = np.array([0.0, 0.0, 0.0, 0.5, 0.3, 0.2], np.float32)
    logits = np.log(np.maximum(probs, 1e-30))
    n = 4000

    def next_fn(tokens, states):
        return ops.tile(ops.convert_to_tensor(logits)[None, :], (ops.shape(tokens)[0], 1)), states, None

    # Limit 2: the first token is drawn (the second is eos by the length rule).
    out = greedy_search(
        next_fn,
        [np.zeros((n, 1), np.float32)],
        n,
        max_length=2,
        sampling=("full", 0.0),
        temperature=0.5,
        keys=np.arange(n, dtype=np.int32),
    )
    drawn = np.bincount(ops.convert_to_numpy(out["tokens"])[:, 0], minlength=6)[3:] / n
    tempered = probs[3:] ** 2 / np.sum(probs[3:] ** 2)  # softmax(log p / 0.5)
    np.testing.assert_allclose(drawn, tempered, atol=0.025)


# The prefix acts in the searches, over any model's step: the three kinds of decoder (a
# recurrent cell with attention, a memory cell, no cell: the Transformer's caches).
FAMILIES = ["rnnsearch", "memdec", "transformer"]


@pytest.mark.parametrize("name", FAMILIES)
def test_a_prefix_starts_every_output_and_scores_as_teacher_forcing(name):
    model = tiny(name)
    for beam in (1, 3):
        out = model.generate(SOURCE, beam_size=beam, prefix=PREFIX, length_penalty="none")
        found = rows(np.asarray(out["tokens"])[:, 0])
        for row, prefix in zip(found, rows(PREFIX)):
            assert row[: len(prefix)] == prefix and len(row) > len(prefix)
        forced = score_ids(model, sources(), found)
        np.testing.assert_allclose([float(np.sum(x)) for x in forced], np.asarray(out["scores"])[:, 0], atol=1e-4)
        # No prefix and an empty one are the same search.
        plain = model.generate(SOURCE, beam_size=beam)
        empty = model.generate(SOURCE, beam_size=beam, prefix=np.zeros_like(PREFIX))
        assert rows(np.asarray(plain["tokens"])[:, 0]) == rows(np.asarray(empty["tokens"])[:, 0])
        assert found[2] == rows(np.asarray(plain["tokens"])[:, 0])[2]  # the sentence without a prefix


@pytest.mark.parametrize("name", ["rnnsearch", "transformer"])
def test_samples_are_reproducible_and_score_as_teacher_forcing(name):
    model = tiny(name)
    keys = np.array([11, 12, 13], np.int32)
    first = model.generate(SOURCE, sampling="full", keys=keys)
    again = model.generate(SOURCE, sampling="full", keys=keys)
    other = model.generate(SOURCE, sampling="full", keys=keys + 100)
    assert rows(np.asarray(first["tokens"])[:, 0]) == rows(np.asarray(again["tokens"])[:, 0])
    assert rows(np.asarray(first["tokens"])[:, 0]) != rows(np.asarray(other["tokens"])[:, 0])
    drawn = rows(np.asarray(first["tokens"])[:, 0])
    np.testing.assert_allclose(
        [float(np.sum(x)) for x in score_ids(model, sources(), drawn)], np.asarray(first["scores"])[:, 0], atol=1e-4
    )
    # topk:1 is greedy search; a prefix holds under sampling too.
    greedy = rows(np.asarray(model.generate(SOURCE)["tokens"])[:, 0])
    assert rows(np.asarray(model.generate(SOURCE, sampling="topk:1", keys=keys)["tokens"])[:, 0]) == greedy
    prefixed = rows(np.asarray(model.generate(SOURCE, sampling="full", keys=keys, prefix=PREFIX)["tokens"])[:, 0])
    assert prefixed[0][:2] == [10, 11] and prefixed[1][:1] == [12]


def test_sampling_asks_for_what_it_needs():
    model = tiny("rnnsearch")
    with pytest.raises(ValueError, match="needs beam_size 1"):
        model.generate(SOURCE, beam_size=3, sampling="full", keys=np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="needs keys"):
        model.generate(SOURCE, sampling="full")
    with pytest.raises(ValueError, match="topp:P"):
        model.generate(SOURCE, sampling="topp:1.5", keys=np.zeros(3, np.int32))


def test_text_samples_do_not_depend_on_batching_and_prefixes_lead_the_text():
    vocab = synthetic_vocab()
    model = MODELS["rnnsearch"](vocab.source.vocab_size, vocab.target.vocab_size, **TINY_OPTIONS["rnnsearch"])
    lines = ["the dog runs", "a big green fish sees the cars", "", "the cat"]

    def draws(**kw):
        return [
            x
            for chunk in translate_chunks(
                model, vocab, lines, beam_size=1, sampling="topk:5", samples=3, seed=7, progress=False, **kw
            )
            for x in chunk
        ]

    whole = draws()
    assert len(whole) == 4 and all(len(x) == 3 for x in whole) and whole[2] == ["", "", ""]
    assert draws(batch_size=1, chunk_size=1) == whole  # keyed by (seed, line, draw), not by batch
    tail = [
        x
        for chunk in translate_chunks(
            model, vocab, lines[1:], beam_size=1, sampling="topk:5", samples=3, seed=7, line_offset=1, progress=False
        )
        for x in chunk
    ]
    assert tail == whole[1:]  # what --resume continues
    assert draw_key(7, 0, 0) != draw_key(7, 0, 1) != draw_key(8, 0, 0)
    prefixed = [
        x
        for chunk in translate_chunks(
            model, vocab, lines, beam_size=2, progress=False, prefixes=["le hundo", "", "", "le"]
        )
        for x in chunk
    ]
    assert prefixed[0].startswith("le hundo") and prefixed[3].startswith("le") and prefixed[2] == ""
    with pytest.raises(ValueError, match="prefix line 1 .* cannot spell"):
        next(translate_chunks(model, vocab, lines, beam_size=1, prefixes=["漢字", "", "", ""], progress=False))


def test_an_ensemble_takes_prefixes_and_samples():
    from keras_memnmt.models import Ensemble

    ensemble = Ensemble([tiny("rnnsearch", seed=1), tiny("memdec", seed=2)])
    out = ensemble.generate(SOURCE, beam_size=3, prefix=PREFIX, length_penalty="none")
    found = rows(np.asarray(out["tokens"])[:, 0])
    assert found[0][:2] == [10, 11] and found[1][:1] == [12]
    np.testing.assert_allclose(
        [float(np.sum(x)) for x in score_ids(ensemble, sources(), found)], np.asarray(out["scores"])[:, 0], atol=1e-4
    )
    keys = np.array([1, 2, 3], np.int32)
    drawn = ensemble.generate(SOURCE, sampling="topk:4", keys=keys)
    assert rows(np.asarray(drawn["tokens"])[:, 0]) == rows(
        np.asarray(ensemble.generate(SOURCE, sampling="topk:4", keys=keys)["tokens"])[:, 0]
    )
    np.testing.assert_allclose(
        [float(np.sum(x)) for x in score_ids(ensemble, sources(), rows(np.asarray(drawn["tokens"])[:, 0]))],
        np.asarray(drawn["scores"])[:, 0],
        atol=1e-4,
    )


# Constraints: phrases separated by -1; the third sentence has none.
CONSTRAINTS = np.array([[7, 8, -1, 15], [12, 0, 0, 0], [0, 0, 0, 0]], np.int32)


def contains(row, phrase):
    return any(row[i : i + len(phrase)] == phrase for i in range(len(row) - len(phrase) + 1))


@pytest.mark.parametrize("name", FAMILIES)
def test_constrained_outputs_hold_every_phrase_and_score_as_teacher_forcing(name):
    model = tiny(name)
    out = model.generate(SOURCE, beam_size=3, constraints=CONSTRAINTS, length_penalty="none")
    found = rows(np.asarray(out["tokens"])[:, 0])
    assert contains(found[0], [7, 8]) and contains(found[0], [15]) and contains(found[1], [12])
    np.testing.assert_allclose(
        [float(np.sum(x)) for x in score_ids(model, sources(), found)], np.asarray(out["scores"])[:, 0], atol=1e-4
    )
    plain = model.generate(SOURCE, beam_size=3, length_penalty="none")
    assert found[2] == rows(np.asarray(plain["tokens"])[:, 0])[2]  # the sentence without constraints
    # With a prefix as well: the prefix first, the phrases somewhere in the output.
    both = rows(np.asarray(model.generate(SOURCE, beam_size=3, constraints=CONSTRAINTS, prefix=PREFIX)["tokens"])[:, 0])
    assert both[0][:2] == [10, 11] and contains(both[0], [7, 8]) and both[1][:1] == [12]
    with pytest.raises(ValueError, match="constraints need beam search"):
        model.generate(SOURCE, constraints=CONSTRAINTS)


def test_an_ensemble_meets_constraints():
    from keras_memnmt.models import Ensemble

    ensemble = Ensemble([tiny("rnnsearch", seed=1), tiny("memdec", seed=2)])
    out = ensemble.generate(SOURCE, beam_size=3, constraints=CONSTRAINTS, length_penalty="none", n_best=2)
    for j in range(2):
        found = rows(np.asarray(out["tokens"])[:, j])
        assert contains(found[0], [7, 8]) and contains(found[0], [15]) and contains(found[1], [12])
    found = rows(np.asarray(out["tokens"])[:, 0])
    np.testing.assert_allclose(
        [float(np.sum(x)) for x in score_ids(ensemble, sources(), found)], np.asarray(out["scores"])[:, 0], atol=1e-4
    )


def test_text_constraints_appear_in_the_translations():
    vocab = synthetic_vocab()
    model = MODELS["rnnsearch"](vocab.source.vocab_size, vocab.target.vocab_size, **TINY_OPTIONS["rnnsearch"])
    lines = ["the dog runs", "a big green fish sees the cars", "", "the cat"]
    wanted = ["hundo", "le hundo\tgrande", "", ""]
    out = [
        x
        for chunk in translate_chunks(
            model, vocab, lines, beam_size=3, progress=False, constraints=wanted, batch_size=2
        )
        for x in chunk
    ]
    # The phrases' subwords appear in order (a word may go on after a phrase's last subword).
    assert "hundo" in out[0] and "le hundo" in out[1] and "grande" in out[1] and out[2] == ""
    for given, beam, message in (
        (["漢字", "", "", ""], 3, "constraints line 1: '漢字' has a piece"),
        (["", "a\tb\tc", "", ""], 2, "constraints line 2 has 3 phrases, more than the beam"),
        (wanted, 1, "constraints needs beam search"),
    ):
        with pytest.raises(ValueError, match=message):
            next(translate_chunks(model, vocab, lines, beam_size=beam, constraints=given, progress=False))
