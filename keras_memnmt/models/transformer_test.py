"""Transformer model: cached stepping equals teacher forcing, the searches, padding, saving, options."""

import keras
import numpy as np
import pytest

from keras_memnmt.config import ConfigError, TrainConfig, validate
from keras_memnmt.data import BOS_ID, EOS_ID, PAD_ID, synthetic_corpus
from keras_memnmt.decoding import beam_search, greedy_search
from keras_memnmt.decoding.common import shapes_may_change
from keras_memnmt.models import Transformer, get_model, model_options
from keras_memnmt.testing import run_decoder_test
from keras_memnmt.testing.utils import numpy, randomize_weights, small_batch, word_ids
from keras_memnmt.training.losses import MaskedCrossEntropy

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SIZES = dict(embedding_dim=8, num_layers=2, num_heads=2, feedforward_units=16, dropout=0.0)


# scale_source_embedding changes the source rows' scale only: the test below checks it
# against an unscaled model, which passes this contract.
@pytest.mark.parametrize(
    "options, target_vocab",
    [
        (dict(), 25),
        (dict(tie_embeddings=True, num_layers=1, num_heads=4), 25),
        (dict(tie_embeddings=True, share_embeddings=True), 30),
        (dict(attention_dropout=0.3), 25),
    ],
    ids=["untied", "tied_one_layer", "shared", "attention_dropout"],
)
def test_the_transformer_passes_the_decoder_contract(options, target_vocab):
    """run_decoder_test: cached stepping equals teacher forcing, the searches score what
    teacher forcing gives their tokens, serialization, a fit step and a .keras round trip."""
    model = run_decoder_test(lambda: Transformer(30, target_vocab, **{**SIZES, **options}))
    assert (model.output_layer is None) == model.tie_embeddings
    assert (model.encoder.embedding is None) == model.share_embeddings
    assert not hasattr(model, "cell")


def test_shared_embeddings_are_one_matrix_read_by_the_source_scaled_as_the_target():
    """With share_embeddings the model holds one embedding matrix E; the encoder reads
    E[source] · sqrt(d), as the decoder reads E[target]: an encoder of its own given the
    rows E · sqrt(d) computes the same memory."""
    shared = Transformer(30, 30, **SIZES, tie_embeddings=True, share_embeddings=True)
    shared.build_weights()

    def path(w):  # a weight's path within its model
        return w.path.split("/", 1)[1]

    assert [path(w) for w in shared.weights if "embeddings" in w.path] == ["target_embedding/embeddings"]
    own = Transformer(30, 30, **SIZES, tie_embeddings=True)
    own.build_weights()
    by_path = {path(w): w for w in own.weights}
    for w in shared.weights:  # every shared weight is also the unshared model's, by path
        by_path[path(w)].assign(w)
    table = numpy(shared.target_embedding.embeddings)
    own.encoder.embedding.embeddings.assign(table * np.sqrt(8.0))
    src, _ = small_batch()
    np.testing.assert_allclose(numpy(shared.encode_source(src)[0]), numpy(own.encode_source(src)[0]), atol=1e-5)
    shared.target_embedding.embeddings.assign(table[::-1].copy())  # the encoder reads the target's matrix
    assert np.abs(numpy(shared.encode_source(src)[0]) - numpy(own.encode_source(src)[0])).max() > 1e-2


def test_a_scaled_source_embedding_starts_small_and_is_read_times_sqrt_d(tmp_path):
    """scale_source_embedding: rows at N(0, 1/d), lookups times sqrt(d) (Vaswani et al. 2017,
    §3.4); its memory equals an unscaled model's whose rows are the scaled rows; a .keras
    round trip keeps the option."""
    options = dict(SIZES, embedding_dim=64, num_heads=2, num_layers=1)
    scaled = Transformer(500, 25, **options, scale_source_embedding=True)
    plain = Transformer(500, 25, **options)
    for model in (scaled, plain):
        model.build_weights()
    rows = numpy(scaled.encoder.embedding.embeddings)
    assert abs(rows.std() - 1 / 8.0) < 0.01 and abs(numpy(plain.encoder.embedding.embeddings).std() - 1.0) < 0.05
    plain.set_weights(scaled.get_weights())
    plain.encoder.embedding.embeddings.assign(rows * 8.0)
    src, _ = small_batch()
    np.testing.assert_allclose(numpy(scaled.encode_source(src)[0]), numpy(plain.encode_source(src)[0]), atol=1e-5)
    scaled.save(tmp_path / "scaled.keras")
    again = keras.saving.load_model(tmp_path / "scaled.keras")
    assert again.scale_source_embedding and again.encoder.lookup_scale == 8.0
    np.testing.assert_allclose(numpy(again.encode_source(src)[0]), numpy(scaled.encode_source(src)[0]), atol=1e-6)


def test_the_caches_hold_one_slot_per_position_and_pass_the_source_through():
    """encode's states: memory, mask, step, then per layer a (B, 2, L, H, D/H) self-attention
    cache and the (B, 2, Tx, H, D/H) source keys and values; a step writes its own slot
    only (where the loop's shapes may change, a slot it appends: L = 0 at first), advances
    the step, and returns the source states as the very tensors given."""
    model = Transformer(30, 25, **SIZES)
    src, tgt = small_batch()
    grows = shapes_may_change()
    states = model.encode(src, cache_length=None if grows else 5)
    first = 0 if grows else 5
    assert [tuple(s.shape) for s in states] == [(3, 6, 8), (3, 6), (3, 1)] + [(3, 2, first, 2, 4), (3, 2, 6, 2, 4)] * 2
    np.testing.assert_array_equal(numpy(states[1]), src != PAD_ID)
    for t in range(3):
        _, new, attention = model.decode_step(keras.ops.convert_to_tensor(tgt[:, t]), states)
        attention = numpy(attention)  # (B, Tx): a distribution over the unpadded source
        assert attention.shape == (3, 6) and attention.dtype == np.float32
        np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-6)
        assert (attention[src == PAD_ID] == 0.0).all() and (attention[src != PAD_ID] > 0.0).all()
        assert all(new[i] is states[i] for i in (0, 1, 4, 6))
        np.testing.assert_array_equal(numpy(new[2]), t + 1)
        assert new[3].shape[2] == (t + 1 if grows else 5)
        written = np.abs(numpy(new[3])).sum(axis=(1, 3, 4))  # (B, L)
        assert (written[:, : t + 1] > 0).all() and (written[:, t + 1 :] == 0).all()
        states = new


@pytest.mark.skipif(not shapes_may_change(), reason="JAX's loop keeps its shapes: its caches never grow")
@pytest.mark.parametrize(
    "search",
    [
        dict(beam_size=1),
        dict(beam_size=3, n_best=2),
        dict(beam_size=3, prefix=True),
        dict(beam_size=3, constraints=True),
    ],
    ids=["greedy", "beam", "prefix", "constrained"],
)
def test_caches_that_grow_with_the_step_search_as_caches_of_the_whole_bound(monkeypatch, search):
    """Every search over caches that grow a position per step returns the tokens and
    scores of the same search over caches of the whole step bound, masked."""
    import keras_memnmt.models.transformer as module

    model = Transformer(30, 25, **{**SIZES, "embedding_dim": 16, "feedforward_units": 32})
    src = np.random.default_rng(3).integers(4, 30, (6, 9)).astype("int32")
    src[2, 5:] = PAD_ID
    options = dict(search, max_length_a=1.0, max_length_b=4)
    if options.pop("prefix", False):
        options["prefix"] = np.array([[5, 6], [7, 0]] * 3, "int32")
    if options.pop("constraints", False):
        options["constraints"] = np.array([[8, 9, -1, 11]] * 6, "int32")
    grown = model.generate(src, **options)
    assert model.search_states(src, 5)[3].shape[2] == 0
    monkeypatch.setattr(module, "shapes_may_change", lambda: False)
    assert model.search_states(src, 5)[3].shape[2] == 5
    model.__dict__.pop("_compiled_generate", None)  # trace the fixed caches anew
    fixed = model.generate(src, **options)
    np.testing.assert_array_equal(numpy(grown["tokens"]), numpy(fixed["tokens"]))
    np.testing.assert_allclose(numpy(grown["scores"]), numpy(fixed["scores"]), atol=1e-5)


def test_the_steps_attention_is_the_last_layers_cross_attention_averaged_over_its_heads():
    """Two steps of a two-layer model: the attention decode_step returns equals a NumPy
    reference of both layers fed their own weights (the source's memory and each step's
    input embedding are the model's): the last layer's cross-attention, the mean of its heads."""
    from keras_memnmt.layers.transformer_decoder_test import reference_step
    from keras_memnmt.models.transformer import _add_positions

    model = Transformer(30, 25, **{**SIZES, "dropout": 0.1})
    src, tgt = small_batch()
    model((src, tgt))
    randomize_weights(model, seed=2)
    states = model.search_states(src, 4)
    memory, mask = (numpy(x) for x in model.encode_source(src))
    past = [(np.zeros((3, 0, 2, 4)),) * 2 for _ in model.decoder_layers]
    for t in range(2):
        tokens = keras.ops.convert_to_tensor(tgt[:, t])
        _, states, attention = model.decode_step(tokens, states)
        x = numpy(_add_positions(model.target_positions, model.embed_target(tokens[:, None]), start_index=t))
        for i, layer in enumerate(model.decoder_layers):
            x, expected, *past[i] = reference_step(layer, x, memory, mask, *past[i])
        np.testing.assert_allclose(numpy(attention), expected, atol=1e-5)
        np.testing.assert_allclose(numpy(attention).sum(-1), 1.0, atol=1e-6)
        assert (numpy(attention)[src == PAD_ID] == 0.0).all()


def test_the_searches_attention_is_their_steps_and_leaves_their_outputs_as_they_are():
    """generate(return_attention=True): the tokens and scores of the search without it, and
    at each step of the best hypothesis the attention that stepping over its tokens gives."""
    model = Transformer(30, 25, **SIZES)
    src, _ = small_batch()
    for beam in (1, 3):
        plain = model.generate(src, beam_size=beam, max_length_a=1.0, max_length_b=3)
        out = model.generate(src, beam_size=beam, max_length_a=1.0, max_length_b=3, return_attention=True)
        width = min(numpy(plain["tokens"]).shape[-1], numpy(out["tokens"]).shape[-1])
        np.testing.assert_array_equal(numpy(out["tokens"])[..., :width], numpy(plain["tokens"])[..., :width])
        np.testing.assert_array_equal(numpy(out["scores"]), numpy(plain["scores"]))
        tokens, attention = numpy(out["tokens"])[:, 0], numpy(out["attention"])[:, 0]  # (B, L), (B, L, Tx)
        states, previous = model.search_states(src, tokens.shape[1]), np.full(len(src), BOS_ID, "int32")
        for t in range(tokens.shape[1]):
            _, states, step = model.decode_step(keras.ops.convert_to_tensor(previous), states)
            live = tokens[:, t] != PAD_ID  # rows still decoding at step t
            np.testing.assert_allclose(attention[live, t], numpy(step)[live], atol=1e-5)
            previous = tokens[:, t]


def test_padding_in_the_source_changes_nothing():
    """Extra pad columns change neither the logits of the real target positions nor the searches."""
    model = Transformer(30, 25, **SIZES)
    src, tgt = small_batch()
    wide = np.pad(src, ((0, 0), (0, 5)))
    np.testing.assert_allclose(numpy(model((wide, tgt))), numpy(model((src, tgt))), atol=1e-5)
    for beam in (1, 2):
        runs = [model.generate(x, beam_size=beam, max_length_a=1.0, max_length_b=3) for x in (src, wide)]
        tokens = [numpy(r["tokens"]) for r in runs]
        width = min(t.shape[-1] for t in tokens)
        np.testing.assert_array_equal(tokens[1][..., :width], tokens[0][..., :width])
        np.testing.assert_allclose(numpy(runs[1]["scores"]), numpy(runs[0]["scores"]), atol=1e-5)


@pytest.fixture(scope="module")
def fitted():
    """A one-layer Transformer fitted for a few epochs on 400 synthetic pairs (word ids)."""
    keras.utils.set_random_seed(0)
    vocab, src, tgt_in, tgt_out = word_ids(synthetic_corpus(400, seed=0))
    model = Transformer(
        vocab,
        vocab,
        embedding_dim=16,
        num_layers=1,
        num_heads=2,
        feedforward_units=32,
        dropout=0.0,
        tie_embeddings=True,
    )
    model.compile(keras.optimizers.Adam(3e-3), MaskedCrossEntropy())
    history = model.fit((src, tgt_in), tgt_out, batch_size=50, epochs=4, verbose=0).history
    return model, history["loss"], src[:6]


def test_a_tiny_model_learns_the_synthetic_task(fitted):
    _, losses, _ = fitted
    assert losses[-1] < 0.8 * losses[0], losses


def test_greedy_is_the_argmax_of_teacher_forcing_and_beam_one_is_greedy(fitted):
    model, _, src = fitted
    out = model.generate(src, beam_size=1, max_length_a=1.0, max_length_b=4)
    tokens = numpy(out["tokens"])[:, 0]  # (B, L)
    target_in = np.concatenate([np.full((len(src), 1), BOS_ID, "int32"), tokens[:, :-1]], axis=1)
    logits = numpy(keras.ops.cast(model((src, target_in)), "float32"))
    logits[..., [PAD_ID, BOS_ID]] = -np.inf  # never generated
    limits = (src != PAD_ID).sum(1) + 4  # max_length_a * |x| + max_length_b, eos included
    for row, row_tokens in enumerate(tokens):
        # Every row ends with eos: at its last allowed position by the length rule
        # (keras_memnmt.decoding.common), before it as the argmax.
        ended = np.flatnonzero(row_tokens == EOS_ID)
        assert len(ended), row_tokens
        length = ended[0] + 1
        assert length <= limits[row] and (row_tokens[length:] == PAD_ID).all(), row_tokens
        free = length - 1 if length == limits[row] else length  # the positions the argmax chose
        np.testing.assert_array_equal(logits[row, :free].argmax(-1), row_tokens[:free])

    steps = src.shape[1] + 4
    common = dict(max_length=steps, max_steps=steps, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID)
    greedy = greedy_search(model.decode_step, model.search_states(src, steps), len(src), **common)
    beam = beam_search(model.decode_step, model.search_states(src, steps), len(src), 1, **common)
    np.testing.assert_array_equal(numpy(beam["tokens"])[:, 0], numpy(greedy["tokens"]))
    np.testing.assert_allclose(numpy(beam["raw_scores"])[:, 0], numpy(greedy["scores"]), atol=1e-5)


def test_mixed_bfloat16_trains_and_decodes():
    """Weights in float32, logits and caches in bfloat16; the searches run."""
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        model = Transformer(30, 25, **SIZES)
        src, tgt = small_batch()
        assert keras.backend.standardize_dtype(model((src, tgt)).dtype) == "bfloat16"
        assert {keras.backend.standardize_dtype(w.dtype) for w in model.weights} == {"float32"}
        states = model.encode(src)
        assert keras.backend.standardize_dtype(states[3].dtype) == "bfloat16"
        for beam in (1, 2):
            out = model.generate(src, beam_size=beam, max_length_a=1.0, max_length_b=2)
            assert np.isfinite(numpy(out["scores"])).all()
    finally:
        keras.config.set_dtype_policy("float32")


def test_attention_dropout_is_the_attention_weights_rate_and_dropout_the_rest(tmp_path):
    """``attention_dropout`` sets the rate of every attention's weights (the encoder's
    self-attention, the decoder's self- and cross-attention) and leaves ``dropout`` on the
    sub-layers' outputs; saved and loaded, the model keeps both."""
    src, tgt = small_batch()

    def rates(model):
        encoder = [layer._self_attention_layer for layer in model.encoder.encoder_layers]
        decoder = [
            a for layer in model.decoder_layers for a in (layer._self_attention_layer, layer._cross_attention_layer)
        ]
        outputs = [layer._feedforward_dropout for layer in [*model.encoder.encoder_layers, *model.decoder_layers]]
        return {a._dropout for a in encoder + decoder}, {d.rate for d in outputs}

    model = Transformer(30, 25, **{**SIZES, "dropout": 0.3, "attention_dropout": 0.0})
    model((src, tgt))
    assert rates(model) == ({0.0}, {0.3})
    model.save(tmp_path / "m.keras")
    again = keras.saving.load_model(tmp_path / "m.keras")
    assert again.attention_dropout == 0.0 and rates(again) == ({0.0}, {0.3})
    default = Transformer(30, 25, **{**SIZES, "dropout": 0.3})
    default((src, tgt))
    assert default.attention_dropout is None and rates(default) == ({0.3}, {0.3})
    # Only the attention weights drop: with dropout 0, a training call differs from an inference one.
    only = Transformer(30, 25, **{**SIZES, "attention_dropout": 0.5})
    inference = numpy(only((src, tgt)))
    assert not np.allclose(numpy(only((src, tgt), training=True)), inference)
    none = Transformer(30, 25, **SIZES)
    np.testing.assert_allclose(numpy(none((src, tgt), training=True)), numpy(none((src, tgt))), atol=1e-6)


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("num_layers", 0, "num_layers must be a positive integer"),
        ("num_heads", 3, "embedding_dim must be a positive multiple of num_heads"),
        ("feedforward_units", 0, "feedforward_units must be a positive integer"),
        ("dropout", 1.0, "dropout must be in"),
        ("attention_dropout", -0.1, "attention_dropout must be in"),
        ("decoder_units", 64, "Unrecognized keyword arguments .*decoder_units"),
        ("share_embeddings", True, "share_embeddings needs tie_embeddings=True"),
    ],
)
def test_bad_options_are_errors_naming_them(option, value, message):
    with pytest.raises(ValueError, match=message):
        Transformer(30, 25, **{**SIZES, option: value})
    with pytest.raises(ValueError, match="share_embeddings needs one vocabulary .*joint_vocab"):
        Transformer(30, 25, **SIZES, tie_embeddings=True, share_embeddings=True)
    with pytest.raises(ValueError, match="source_vocab_size"):
        Transformer(0, 25, **SIZES)


def test_registered_with_the_base_recipes_shape():
    assert get_model("transformer") is Transformer
    options = model_options(Transformer)
    assert {
        k: options[k].default for k in ("num_layers", "num_heads", "feedforward_units", "embedding_dim", "dropout")
    } == dict(num_layers=3, num_heads=4, feedforward_units=1024, embedding_dim=256, dropout=0.1)
    assert not {"encoder_units", "decoder_units", "output_dropout", "attention_remat"} & set(options)
    with pytest.raises(ConfigError, match="model 'transformer' has no option 'encoder_units'"):
        validate(TrainConfig(model="transformer", model_options=dict(encoder_units=8)))


def test_the_published_small_data_recipe_shares_every_embedding_over_one_vocabulary():
    """multi30k_transformer_tiny: one joint vocabulary, one embedding matrix for source,
    target and output, batches of 4,096 tokens, Adam's 0.98 / 1e-9."""
    from keras_memnmt.config import build_model
    from keras_memnmt.recipes import load_recipe

    config = validate(load_recipe("multi30k_transformer_tiny"))
    assert config.joint_vocab and config.batch_by == "tokens" and config.batch_size == 4096
    assert (config.adam_beta_2, config.adam_epsilon, config.max_steps) == (0.98, 1e-9, 8000)
    model = build_model(config, 40, 40)
    model.build_weights()
    assert model.share_embeddings and model.encoder.embedding is None and model.output_layer is None
    assert sum("embeddings" in w.path for w in model.weights) == 1


def test_an_ensemble_sizes_its_transformers_caches_to_the_search():
    """A one-member ensemble decodes as its member, and asks it for caches of the search's length."""
    from keras_memnmt.models import Ensemble

    model = Transformer(30, 25, **SIZES)
    src, _ = small_batch()
    ensemble = Ensemble([model])
    assert tuple(ensemble.search_states(src, 7)[3].shape) == (3, 2, 0 if shapes_may_change() else 7, 2, 4)
    alone = model.generate(src, beam_size=2, max_length_a=1.0, max_length_b=3)
    together = ensemble.generate(src, beam_size=2, max_length_a=1.0, max_length_b=3)
    np.testing.assert_array_equal(numpy(together["tokens"]), numpy(alone["tokens"]))
    np.testing.assert_allclose(numpy(together["scores"]), numpy(alone["scores"]), atol=1e-5)
