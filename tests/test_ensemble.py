"""Ensembles (the mixed step, greedy and beam search through `generate`) and checkpoint averaging."""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest
from keras import ops
from keras.src.backend.common import global_state
from keras.src.saving.serialization_lib import ObjectSharingScope

from keras_memnmt.layers.gru import GRUCell
from keras_memnmt.models import ChoEncoderDecoder, Ensemble, MemDec, RNNsearch
from keras_memnmt.models.encoder import BidirectionalEncoder, StackedLSTMEncoder
from keras_memnmt.rundir.runs import (
    average_checkpoints,
    check_same_vocab,
    last_checkpoints,
    load_ensemble,
)
from keras_memnmt.testing.fake_decoder import (
    FakeDecoder,
    log_softmax_np,
    ruled_beam,
    ruled_brute_force,
    ruled_greedy,
)
from keras_memnmt.testing.tiny_runs import write_ensemble_runs
from keras_memnmt.testing.utils import compiled, numpy, small_batch

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SIZES = dict(embedding_dim=8, encoder_units=6, decoder_units=10, readout_units=7, output_dropout=0.0)


def rnnsearch(target_vocab=25, source_vocab=30):
    return RNNsearch(source_vocab, target_vocab, attention_units=9, **SIZES)


def memdec():
    return MemDec(30, 25, memory_size=4, memory_dim=5, attention_units=9, **SIZES)


def built(*models):
    src, tgt = small_batch()
    for m in models:
        m((src, tgt))
    return models


def log_softmax(x):
    x = np.asarray(x, np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


# ----- an ensemble of one -------------------------------------------------------------------


@pytest.mark.parametrize("beam_size, n_best", [(1, 1), (3, 2)])
def test_an_ensemble_of_one_is_its_model(beam_size, n_best):
    (model,) = built(rnnsearch())
    src, tgt = small_batch()
    kwargs = dict(beam_size=beam_size, n_best=n_best, max_length_a=1.0, max_length_b=3)
    alone = model.generate(src, **kwargs)
    ensemble = Ensemble([model])
    together = ensemble.generate(src, **kwargs)
    for key in ("tokens", "scores"):
        np.testing.assert_array_equal(numpy(together[key]), numpy(alone[key]))
    np.testing.assert_array_equal(numpy(ensemble((src, tgt))), numpy(ops.log_softmax(model((src, tgt)), axis=-1)))


# ----- two members against a NumPy mixture ----------------------------------------------------


class FakeMember(keras.Model):
    """A `FakeDecoder` behind a model's `encode` / `decode_step`: source row `[4 + s]` is
    sentence `s`, whose states are looked up (so the lookup runs inside jit / tf.function)."""

    def __init__(self, decoder: FakeDecoder, num_sentences: int, **kwargs):
        super().__init__(**kwargs)
        self.decoder = decoder
        self.target_vocab_size = decoder.vocab_size
        self.source_vocab_size = 4 + num_sentences
        self.tables = decoder.initial_states(list(range(num_sentences)))  # bias, history, memory, mask

    def encode(self, source_ids, training=False):
        sentence = ops.cast(source_ids[:, 0], "int32") - 4  # (B,)
        return [ops.take(ops.convert_to_tensor(t), sentence, axis=0) for t in self.tables]

    def decode_step(self, tokens, states):
        return self.decoder.next_fn(tokens, states)

    def call(self, inputs, training=False):
        source_ids, target_in = inputs
        states, logits = self.encode(source_ids), []
        for t in range(target_in.shape[1]):
            step, states, _ = self.decode_step(target_in[:, t], states)
            logits.append(step)
        return ops.stack(logits, axis=1)  # (B, T, V)


class MixtureNP:
    """The ensemble's documented step in NumPy float64, one hypothesis at a time (the
    interface `ruled_brute_force` and the reference searches use): the renormalized mean of
    the members' log-probabilities; the history is one per member."""

    def __init__(self, decoders: list[FakeDecoder]):
        self.decoders = decoders
        self.vocab_size = decoders[0].vocab_size

    def initial_state_np(self, s):
        return tuple(d.initial_state_np(s) for d in self.decoders)

    def step(self, s, token, history):
        steps = [d.step(s, token, h) for d, h in zip(self.decoders, history, strict=True)]
        mean = np.mean([logp for logp, _ in steps], axis=0)
        return log_softmax_np(mean), tuple(h for _, h in steps)


SENTENCES = 3
LIMIT = 4  # every hypothesis of up to 4 tokens over 4 generable tokens can be enumerated


def fake_ensemble(seeds):
    decoders = [FakeDecoder(seed=s, vocab_size=6, num_sentences=SENTENCES) for s in seeds]
    ensemble = Ensemble([FakeMember(d, SENTENCES) for d in decoders])
    return ensemble, MixtureNP(decoders)


def decode(ensemble, **kwargs):
    src = np.arange(4, 4 + SENTENCES, dtype="int32")[:, None]  # (S, 1): sentence s is [4 + s]
    out = ensemble.generate(src, max_length_a=0.0, max_length_b=LIMIT, **kwargs)  # limit = LIMIT
    tokens, scores = numpy(out["tokens"]), numpy(out["scores"])
    hyps = [[[int(t) for t in row if t != 0] for row in sentence] for sentence in tokens]
    return hyps, scores


def test_greedy_search_follows_the_mixture():
    ensemble, mixture = fake_ensemble([0, 1])
    hyps, scores = decode(ensemble, beam_size=1)
    for s in range(SENTENCES):
        tokens, raw = ruled_greedy(mixture, s, LIMIT)
        assert hyps[s][0] == tokens
        np.testing.assert_allclose(scores[s, 0], raw, rtol=1e-5)
    # The mixture is not either member: some sentence decodes differently from each.
    alone = [decode(Ensemble([m]), beam_size=1)[0] for m in ensemble.members]
    assert all(a != hyps for a in alone)


@pytest.mark.parametrize("kind", ["gnmt", "average"])
def test_beam_search_follows_the_mixture(kind):
    ensemble, mixture = fake_ensemble([0, 1])
    hyps, scores = decode(ensemble, beam_size=3, n_best=2, length_penalty=kind)
    for s in range(SENTENCES):
        expected = ruled_beam(mixture, s, 3, LIMIT, kind, n_best=2)
        assert hyps[s] == [h[2] for h in expected]
        np.testing.assert_allclose(scores[s], [h[0] for h in expected], rtol=1e-5)


def test_four_members_beam_16_average_finds_the_best_mixture_hypotheses():
    """Beam 16 (C = 32 candidates a step) with the paper's average length normalization,
    four members: the documented algorithm, and the brute-force optimum."""
    ensemble, mixture = fake_ensemble([0, 1, 2, 3])
    hyps, scores = decode(ensemble, beam_size=16, n_best=4, length_penalty="average")
    for s in range(SENTENCES):
        expected = ruled_beam(mixture, s, 16, LIMIT, "average", n_best=4)
        assert hyps[s] == [h[2] for h in expected]
        np.testing.assert_allclose(scores[s], [h[0] for h in expected], rtol=1e-5)
        best = ruled_brute_force(mixture, s, LIMIT, "average")[0]
        assert hyps[s][0] == best[2]
        np.testing.assert_allclose(scores[s, 0], best[0], rtol=1e-5)


def test_decode_step_mixes_log_probs_and_passes_states_through():
    ensemble, mixture = fake_ensemble([0, 1])
    src = np.arange(4, 4 + SENTENCES, dtype="int32")[:, None]
    states = ensemble.encode(src)
    assert len(states) == 8  # four per member
    tokens = ops.convert_to_tensor(np.array([2, 4, 5], "int32"))
    logp, new_states, attention = ensemble.decode_step(tokens, states)
    # bias, memory and mask pass through as the very tensors given (beam search relies on it)
    for i in (0, 2, 3, 4, 6, 7):
        assert new_states[i] is states[i]
    member_steps = [m.decode_step(tokens, states[4 * i : 4 * i + 4]) for i, m in enumerate(ensemble.members)]
    expected = log_softmax(np.mean([log_softmax(numpy(x)) for x, _, _ in member_steps], axis=0))
    np.testing.assert_allclose(numpy(logp), expected, atol=1e-5)
    np.testing.assert_allclose(numpy(attention), np.mean([numpy(a) for _, _, a in member_steps], axis=0), atol=1e-6)


# ----- real models ----------------------------------------------------------------------------


def test_members_of_different_architectures():
    """RNNsearch, MemDec and Cho (no attention) together: teacher forcing is the mixture of
    the members' own outputs, the attention the mean of those that have one, and greedy
    and beam search run."""
    members = built(rnnsearch(), memdec(), ChoEncoderDecoder(30, 25, **SIZES))
    ensemble = Ensemble(members)
    src, tgt = small_batch()
    bos = np.full((3,), 2, "int32")

    def run():
        attentions = [m.decode_step(bos, m.encode(src))[2] for m in members]
        return (
            [m((src, tgt)) for m in members],
            ensemble((src, tgt)),
            ensemble.decode_step(bos, ensemble.encode(src))[2],
            attentions[:2],
            attentions[2],
        )

    logits, mixed, attention, own, cho = compiled(run)()
    expected = log_softmax(np.mean([log_softmax(numpy(x)) for x in logits], axis=0))
    np.testing.assert_allclose(numpy(mixed), expected, atol=1e-5)
    assert cho is None
    np.testing.assert_allclose(numpy(attention), (numpy(own[0]) + numpy(own[1])) / 2, atol=1e-6)
    out = ensemble.generate(src, beam_size=3, max_length_a=1.0, max_length_b=3, return_attention=True)
    assert numpy(out["tokens"]).shape[:2] == (3, 1)
    assert np.isfinite(numpy(out["scores"])).all()
    np.testing.assert_allclose(numpy(out["attention"]).sum(-1)[numpy(out["tokens"]) > 0], 1.0, atol=1e-5)


def test_four_members_beam_16_average_scores_are_the_ensembles_log_probs():
    """Four tiny models, beam 16, length_penalty="average": each returned hypothesis's
    score is its log-probability under the ensemble's teacher forcing over its length."""
    members = built(rnnsearch(), memdec(), ChoEncoderDecoder(30, 25, **SIZES), rnnsearch())
    ensemble = Ensemble(members)
    src, _ = small_batch()
    out = ensemble.generate(src, beam_size=16, n_best=16, length_penalty="average", max_length_a=0.5, max_length_b=2)
    tokens, scores = numpy(out["tokens"]), numpy(out["scores"])
    assert tokens.shape[:2] == (3, 16) and np.isfinite(scores).all()
    assert (np.diff(scores, axis=1) <= 1e-6).all()  # best first
    rows = tokens.reshape(48, -1)  # every hypothesis of the three sentences
    target_in = np.concatenate([np.full((48, 1), 2, "int32"), rows[:, :-1]], axis=1)
    logp = numpy(compiled(lambda: ensemble((np.repeat(src, 16, axis=0), target_in)))())  # (48, L, V)
    picked = np.take_along_axis(logp, rows[:, :, None], axis=2)[:, :, 0]
    raw = np.where(rows != 0, picked, 0.0).sum(axis=1)
    np.testing.assert_allclose(scores.reshape(48), raw / (rows != 0).sum(axis=1), rtol=1e-4, atol=1e-5)


def test_members_must_share_the_vocabularies():
    a, b = rnnsearch(25), rnnsearch(26)
    with pytest.raises(ValueError, match="share the target vocabulary") as error:
        Ensemble([a, b])
    assert f"member 0 ({a.name}): target_vocab_size=25" in str(error.value)
    assert f"member 1 ({b.name}): target_vocab_size=26" in str(error.value)
    with pytest.raises(ValueError, match="share the source vocabulary"):
        Ensemble([rnnsearch(25, 30), rnnsearch(25, 31)])
    with pytest.raises(ValueError, match="at least one member"):
        Ensemble([])


def test_keras_round_trip(tmp_path):
    members = built(rnnsearch(), memdec())
    ensemble = Ensemble(members)
    src, tgt = small_batch()
    before = numpy(ensemble((src, tgt)))
    path = str(tmp_path / "ensemble.keras")
    ensemble.save(path)
    loaded = keras.saving.load_model(path, compile=False)
    assert type(loaded) is Ensemble and [type(m) for m in loaded.members] == [RNNsearch, MemDec]
    np.testing.assert_allclose(numpy(loaded((src, tgt))), before, atol=1e-6)


class _EverySeen(dict):
    """A map of Keras's load-time object sharing in which every ``id()`` was seen before:
    what the map holds for an object whose address an earlier, freed object had (an
    ensemble's second member, built in the same load as the first)."""

    stale = None

    def __contains__(self, key):
        return True

    def __getitem__(self, key):
        return {}

    def get(self, key, default=None):
        return self.stale


@pytest.mark.parametrize(
    "make, birnn",
    [
        (lambda: BidirectionalEncoder(20, 4, 4), lambda e: e.birnn),
        (lambda: StackedLSTMEncoder(20, 4, 4, num_layers=2, bidirectional_bottom=True), lambda e: e.lstms[0]),
    ],
    ids=["gru", "lstm"],
)
def test_an_encoder_built_while_a_model_loads_gets_layers_of_its_own(make, birnn):
    stale = keras.layers.RNN(GRUCell(4), return_sequences=True, return_state=True)
    with ObjectSharingScope():
        seen = _EverySeen()
        seen.stale = stale
        global_state.set_global_attribute("shared_objects/id_to_config_map", _EverySeen())
        global_state.set_global_attribute("shared_objects/id_to_obj_map", seen)
        encoder = make()
        assert global_state.get_global_attribute("shared_objects/id_to_obj_map") is seen  # the load's scope goes on
    directions = birnn(encoder).forward_layer, birnn(encoder).backward_layer
    assert stale not in directions and [layer.go_backwards for layer in directions] == [False, True]


# ----- run directories: loading several, averaging checkpoints ------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return write_ensemble_runs(str(root), checkpoints=3)


def test_load_ensemble(runs):
    model, vocab, config = load_ensemble([runs["a"], runs["b"]])
    assert isinstance(model, Ensemble) and [type(m) for m in model.members] == [RNNsearch, MemDec]
    assert config.model == "rnnsearch"
    single, _, _ = load_ensemble([(runs["a"], "step10")])
    assert isinstance(single, RNNsearch)
    snapshots, _, _ = load_ensemble([(runs["a"], "step10"), (runs["a"], "step20")])
    assert len(snapshots.members) == 2
    with pytest.raises(ValueError, match="different target vocabularies") as error:
        load_ensemble([runs["a"], runs["other"]])
    assert runs["a"] in str(error.value) and runs["other"] in str(error.value)


def test_runs_must_share_the_source_vocabulary_too(runs):
    from keras_memnmt.data import SubwordVocab

    same = SubwordVocab.load(os.path.join(runs["a"], "vocab"))
    other = SubwordVocab.load(os.path.join(runs["other"], "vocab"))
    check_same_vocab("run_a", same, "run_b", SubwordVocab.load(os.path.join(runs["b"], "vocab")))
    mixed = SubwordVocab(other.source, same.target, same.config)  # the same target side only
    with pytest.raises(ValueError, match="run_a and run_b have different source vocabularies"):
        check_same_vocab("run_a", same, "run_b", mixed)


def test_averaging_two_checkpoints_is_the_mean_of_their_weights(runs, tmp_path):
    paths = last_checkpoints(runs["a"], 2)
    assert [os.path.basename(p) for p in paths] == ["step20.keras", "step30.keras"]
    out = str(tmp_path / "avg.keras")
    averaged = average_checkpoints(paths, out)
    # The weights (a .keras file keeps no seed-generator state: a loaded model draws its own).
    weights = [keras.saving.load_model(p, compile=False).weights for p in paths]
    loaded = keras.saving.load_model(out, compile=False)
    assert type(loaded) is RNNsearch
    for v, a, b, got in zip(averaged.weights, *weights, loaded.weights, strict=True):
        assert "float" in keras.backend.standardize_dtype(v.dtype)
        expected = (numpy(a).astype(np.float64) + numpy(b)) / 2
        np.testing.assert_allclose(numpy(v), expected, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(numpy(got), numpy(v))
    src, _ = small_batch(source_vocab=loaded.source_vocab_size)
    assert numpy(loaded.generate(src, beam_size=2, max_length_a=1.0, max_length_b=2)["tokens"]).shape[:2] == (3, 1)


def test_averaging_needs_enough_kept_checkpoints(runs):
    with pytest.raises(FileNotFoundError, match="need the last 4 checkpoints, found 3") as error:
        last_checkpoints(runs["a"], 4)
    assert "checkpoints holds: step10.keras, step20.keras, step30.keras" in str(error.value)
    with pytest.raises(FileNotFoundError, match="keep_checkpoints") as error:
        last_checkpoints(runs["b"], 1)
    assert os.path.join(runs["b"], "checkpoints") in str(error.value)
    with pytest.raises(ValueError, match="different models"):
        average_checkpoints([os.path.join(runs["a"], "best.keras"), os.path.join(runs["b"], "best.keras")])
