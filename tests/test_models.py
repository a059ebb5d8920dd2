"""Seq2Seq models: shapes, the shared single step, serialization, learning."""

import keras
import numpy as np
import pytest

from keras_memnmt.data import BOS_ID
from keras_memnmt.models import MODELS, ChoEncoderDecoder, RNNsearch
from keras_memnmt.testing import reference
from keras_memnmt.testing.tiny_runs import TINY_OPTIONS, library_model_params, library_models
from keras_memnmt.testing.utils import assert_stepping_matches

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

SIZES = dict(embedding_dim=8, encoder_units=6, decoder_units=10, readout_units=7, output_dropout=0.0)


def make(kind, **kw):
    if kind == "rnnsearch":
        return RNNsearch(30, 25, attention_units=9, **{**SIZES, **kw})
    return ChoEncoderDecoder(30, 25, **{**SIZES, **kw})


def batch(seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(4, 30, size=(3, 6)).astype("int32")
    src[0, 4:] = 0  # a padded sentence
    tgt = rng.integers(4, 25, size=(3, 5)).astype("int32")
    tgt[:, 0] = BOS_ID
    return src, tgt


@pytest.mark.parametrize("name", library_model_params())
def test_teacher_forcing_equals_stepping_the_cell(name):
    """call() (keras.layers.RNN over the cell's input side computed for the whole sequence)
    and decode_step (the decoders' path, one position at a time) give the same logits."""
    model = MODELS[name](30, 25, **TINY_OPTIONS[name])
    src, tgt = batch()
    logits = keras.ops.convert_to_numpy(model((src, tgt)))
    assert logits.shape == (3, 5, 25)
    assert_stepping_matches(model, src, tgt, logits)


@pytest.mark.parametrize("kind", ["rnnsearch", "cho"])
def test_keras_round_trip(kind, tmp_path):
    model = make(kind)
    src, tgt = batch()
    before = keras.ops.convert_to_numpy(model((src, tgt)))
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, compile=False)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded((src, tgt))), before, atol=1e-6)
    clone = type(model).from_config(model.get_config())
    clone((src, tgt))
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(keras.ops.convert_to_numpy(clone((src, tgt))), before, atol=1e-6)
    assert clone.get_config() == model.get_config()


def test_generate_greedy_and_beam_shapes():
    model = make("rnnsearch")
    src, _ = batch()
    greedy = model.generate(src, beam_size=1, max_length_a=1.0, max_length_b=3)
    beam = model.generate(src, beam_size=3, n_best=2, max_length_a=1.0, max_length_b=3)
    g = keras.ops.convert_to_numpy(greedy["tokens"])
    b = keras.ops.convert_to_numpy(beam["tokens"])
    assert g.shape[:2] == (3, 1) and b.shape[:2] == (3, 2)
    assert set(np.unique(g)) <= set(range(25))


@pytest.mark.parametrize("beam_size", [1, 3])
def test_generate_is_the_same_at_every_padded_width(beam_size):
    """Extra pad columns change nothing; TensorFlow traces one search for both widths
    (its output buffers sized for a width cap), and that search gives the tokens of the
    per-width search that return_attention takes."""
    model = make("rnnsearch")
    src, _ = batch()
    wide = np.pad(src, ((0, 0), (0, 7)))  # width 6 -> 13
    runs = [model.generate(x, beam_size=beam_size, max_length_a=1.0, max_length_b=3) for x in (src, wide)]
    with_attention = model.generate(src, beam_size=beam_size, max_length_a=1.0, max_length_b=3, return_attention=True)
    tokens = [keras.ops.convert_to_numpy(r["tokens"]) for r in runs + [with_attention]]
    width = min(t.shape[-1] for t in tokens)
    for t in tokens:
        assert (t[..., width:] == 0).all()  # only padding beyond the shortest buffer
        np.testing.assert_array_equal(t[..., :width], tokens[0][..., :width])
    for r in runs[1:] + [with_attention]:
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(r["scores"]), keras.ops.convert_to_numpy(runs[0]["scores"]), atol=1e-5
        )
    if keras.backend.backend() == "tensorflow":
        shared = [f for (*_, width_cap), f in model._compiled_generate.items() if width_cap]
        assert len(shared) == 1 and shared[0].experimental_get_tracing_count() == 1


def test_bad_arguments():
    with pytest.raises(ValueError, match="target_vocab_size"):
        RNNsearch(30, 2)
    with pytest.raises(ValueError, match="vocab_size"):
        RNNsearch(0, 30)


def test_every_library_model_has_tiny_test_sizes():
    """The shared tests (mixed precision, plots, fit from an unbuilt model) run every model
    the library registers at its class's ``tiny_options``: each is one of the model's options,
    and the tests' mapping reads them from the models."""
    from keras_memnmt.models import model_options

    assert sorted(library_models()) == sorted(TINY_OPTIONS)
    for name in library_models():
        cls = MODELS[name]
        assert set(cls.tiny_options) <= set(model_options(cls)), name
        assert TINY_OPTIONS[name] == cls.tiny_options and TINY_OPTIONS[name] is not cls.tiny_options
    assert any(MODELS[name].fast_tier for name in library_models())


def test_a_model_that_declares_nothing_gets_the_defaults():
    """A model that declares none of the tools' knowledge builds at the base's tiny sizes, is
    left to the slow tier, draws the source attention where its step computes one and has
    no matmul count (the benchmarks time it without a FLOP rate)."""
    from keras_memnmt.layers import ChoDecoderCell
    from keras_memnmt.models import SOURCE_ATTENTION, Seq2Seq

    class Plain(Seq2Seq):
        def make_cell(self):
            return ChoDecoderCell(
                self.decoder_units,
                self.target_vocab_size,
                readout_units=7,
                annotation_units=self.encoder.annotation_units,
            )

    model = Plain(30, 25, **Plain.tiny_options)
    src, tgt = batch()
    assert keras.ops.convert_to_numpy(model((src, tgt))).shape == (3, 5, 25)
    assert not Plain.fast_tier and Plain.panels == (SOURCE_ATTENTION,)
    assert Plain.curves_title == "per target step" and model.matmul_macs() is None


@pytest.mark.parametrize("name", library_model_params())
def test_fit_builds_an_unbuilt_model_quietly_and_completely(name):
    """`fit` on a model never called builds it by tracing `call`. On PyTorch Keras traces
    on the "meta" device first; MemDec's `initial_states` once failed there (`ops.full`
    calls `.item()`), and Keras warned that the model was "marked as built, despite not
    being actually built" and created its weights during the first step instead."""
    import warnings

    kwargs = TINY_OPTIONS[name]
    model = MODELS[name](30, 25, **kwargs)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    src, tgt = batch()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit((src, tgt), tgt, epochs=1, verbose=0)
    build_warnings = [str(w.message) for w in caught if "built" in str(w.message)]
    assert build_warnings == []
    reference_model = MODELS[name](30, 25, **kwargs)
    reference_model.build_weights()

    def layout(m):  # names carry auto-numbered suffixes, so compare the shapes
        return sorted(tuple(w.shape) for w in m.weights)

    assert layout(model) == layout(reference_model)


@pytest.mark.slow
def test_overfits_twenty_pairs():
    """The model memorizes 20 sentence pairs: BLEU > 90 on them (greedy)."""
    from keras_memnmt.config import TrainConfig, build_model
    from keras_memnmt.data import SubwordVocab, make_dataset, synthetic_corpus
    from keras_memnmt.evaluation.translation import score, translate
    from keras_memnmt.training import compile_model

    keras.utils.set_random_seed(0)
    corpus = synthetic_corpus(20, seed=5)
    vocab = SubwordVocab.train(corpus.source, corpus.target, size=80)
    ds, _ = make_dataset(corpus, vocab, batch_size=20, max_length=60)
    config = TrainConfig(
        model_options=dict(
            embedding_dim=32,
            encoder_units=32,
            decoder_units=64,
            attention_units=32,
            readout_units=64,
            output_dropout=0.0,
        ),
        learning_rate=1e-2,
    )
    model = build_model(config, vocab.source.vocab_size, vocab.target.vocab_size)
    compile_model(model, config)
    model.fit(ds, epochs=30, verbose=0)  # BLEU above 90 from epoch 20, 100 from epoch 25, on all three backends
    hyps = translate(model, vocab, corpus.source, beam_size=1, progress=False)
    assert score(hyps, corpus.target)["bleu"] > 90, hyps[:3]


def test_translate_fills_a_short_last_batch_without_changing_results():
    """translate() pads the last batch with filler rows; outputs match one big batch."""
    from keras_memnmt.data import SubwordVocab, synthetic_corpus
    from keras_memnmt.evaluation.translation import translate

    corpus = synthetic_corpus(30, seed=2)
    vocab = SubwordVocab.train(corpus.source, corpus.target, size=60)
    # Seeded: some random starts end every one of these sentences at once (all outputs empty).
    keras.utils.set_random_seed(0)
    model = RNNsearch(vocab.source.vocab_size, vocab.target.vocab_size, attention_units=9, **SIZES)
    sentences = list(corpus.source[:10]) + ["", "  "]
    small = translate(model, vocab, sentences, beam_size=2, batch_size=4, progress=False)
    big = translate(model, vocab, sentences, beam_size=2, batch_size=64, progress=False)
    assert small == big and len(small) == 12 and small[10:] == ["", ""]
    assert any(small[:10])
    assert translate(model, vocab, sentences, beam_size=2, progress=False) == small  # the default


@pytest.mark.parametrize("beam, sentences", [(1, 256), (2, 256), (3, 213), (5, 128), (16, 40), (641, 1)])
def test_default_batch_size_keeps_the_rows_of_a_search_step_near_640(beam, sentences):
    from keras_memnmt.evaluation.translation import default_batch_size

    assert default_batch_size(beam) == sentences


@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_translate_names_a_bad_batch_size(bad):
    from keras_memnmt.evaluation.translation import translate

    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        translate(None, None, ["a b"], batch_size=bad)


@pytest.mark.parametrize("model_name", ["rnnsearch", "memdec", "rmn"])
def test_attention_remat_reaches_the_attention_and_keeps_the_outputs(model_name):
    """TrainConfig.attention_remat → model → cell → AdditiveAttention.rematerialize; same logits."""
    from keras_memnmt.config import TrainConfig, apply_overrides, build_model

    sizes = [f"{k}={v}" for k, v in SIZES.items()] + ["attention_units=9", f"model={model_name}"]
    models = {}
    for remat in (True, False):
        config = apply_overrides(TrainConfig(), [*sizes, f"attention_remat={remat}"])
        models[remat] = build_model(config, 30, 25)
        assert models[remat].cell.attention.rematerialize is remat
        assert type(models[remat]).from_config(models[remat].get_config()).attention_remat is remat
    src, tgt = batch()
    models[True]((src, tgt))
    models[False]((src, tgt))
    models[False].set_weights(models[True].get_weights())
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(models[False]((src, tgt))),
        keras.ops.convert_to_numpy(models[True]((src, tgt))),
        atol=1e-6,
    )


@pytest.mark.parametrize(
    "name, options",
    [("rnnsearch", {}), ("luong", {"score": "dot"}), ("attentive", {"score": "dot"})],
    ids=["rnnsearch", "luong_dot", "attentive_dot"],
)
def test_annotation_dropout_drops_annotations_in_training_only(name, options):
    """Inference is the model without it (same weights); in training each annotation
    entry is either dropped or scaled by 1 / (1 - p), and the summary is untouched. The
    models with a dot attention over the annotations (Luong's score) take it as the
    additive-attention models do, from the constructor and from a training config."""
    from keras_memnmt.config import TrainConfig, build_model

    sizes = {**TINY_OPTIONS[name], **options}
    model, plain = MODELS[name](30, 25, **sizes, annotation_dropout=0.5), MODELS[name](30, 25, **sizes)
    src, tgt = batch()
    model((src, tgt))
    plain((src, tgt))
    plain.set_weights(model.get_weights())
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(model((src, tgt))), keras.ops.convert_to_numpy(plain((src, tgt))), atol=1e-6
    )
    dropped_out, clean = model.encoder(src, training=True), plain.encoder(src, training=False)
    ann, summary = (keras.ops.convert_to_numpy(x) for x in (dropped_out.annotations, dropped_out.summary))
    base, base_summary = (keras.ops.convert_to_numpy(x) for x in (clean.annotations, clean.summary))
    np.testing.assert_allclose(summary, base_summary, atol=1e-6)
    real = base != 0.0  # padded source positions are zero either way
    kept = np.isclose(ann, 2.0 * base, atol=1e-6) & real
    dropped = (ann == 0.0) & real
    assert np.all(kept | dropped | ~real)
    assert 0.3 < dropped.sum() / real.sum() < 0.7
    trained = keras.ops.convert_to_numpy(model((src, tgt), training=True))
    assert not np.allclose(trained, keras.ops.convert_to_numpy(plain((src, tgt), training=True)), atol=1e-6)
    restored = type(model).from_config(model.get_config())
    assert (restored.annotation_dropout, restored.encoder.annotation_dropout) == (0.5, 0.5)
    config = TrainConfig(model=name, model_options={**sizes, "annotation_dropout": 0.5})
    assert build_model(config, 30, 25).encoder.annotation_dropout == 0.5


@pytest.mark.backend_independent  # argument checks
@pytest.mark.parametrize(
    "name, option, value",
    [
        ("cho", "annotation_dropout", 0.2),
        ("cho", "attention_remat", False),
        ("ylstm", "annotation_dropout", 0.2),
        ("ylstm", "attention_remat", False),
        ("transformer", "decoder_units", 64),
        ("transformer", "output_dropout", 0.3),
    ],
)
def test_an_option_a_model_does_not_take_is_an_error_naming_both(name, option, value):
    """Cho's decoder reads only the summary and has no attention, the Y-LSTM has neither
    annotation dropout nor a tanh attention, the Transformer no recurrent sizes: their
    classes do not take these options (the recurrent base without the source attention's,
    the encoder-decoder base). Setting one fails, in the config and in the constructor; a
    stored config that holds one (written when every model took them, without effect)
    still loads, without it."""
    from keras_memnmt.config import ConfigError, TrainConfig, validate
    from keras_memnmt.models.base import FORMER_BASE_OPTIONS

    assert option in FORMER_BASE_OPTIONS
    with pytest.raises(ConfigError, match=f"model '{name}' has no option '{option}'"):
        validate(TrainConfig(model=name, model_options={option: value}))
    with pytest.raises(ValueError, match=f"Unrecognized keyword arguments .*{option}"):
        MODELS[name](30, 25, **{**TINY_OPTIONS[name], option: value})
    stored = TrainConfig(model=name).to_dict()
    stored["model_options"] = {option: value}
    assert option not in TrainConfig.from_dict(stored).model_options
    config = {**MODELS[name](30, 25, **TINY_OPTIONS[name]).get_config(), option: value}
    assert option not in MODELS[name].from_config(config).get_config()


@pytest.mark.parametrize("kind", ["rnnsearch", "cho"])
def test_tied_output_projects_with_the_target_embedding(kind, tmp_path):
    """tie_embeddings: logits = tanh(o W_o + b_o) E^T + b_y (NumPy, fed the model's weights,
    E the target embedding, the decoder fed sqrt(E)-scaled lookups); no output kernel of its
    own; the decoders' step gives the same logits; the .keras round trip is identical."""
    model = make(kind, tie_embeddings=True, readout_units=8)
    src, tgt = batch()
    logits = keras.ops.convert_to_numpy(model((src, tgt)))
    deep = model.cell.deep_output
    assert deep.logits is None
    w_o, b_o, b_y = (keras.ops.convert_to_numpy(w) for w in (deep.hidden.kernel, deep.hidden.bias, deep.logits_bias))
    assert len(deep.weights) == 3 and b_y.shape == (25,)
    embeddings = keras.ops.convert_to_numpy(model.target_embedding.embeddings)  # (V, E)
    assert 0.25 < embeddings.std() < 0.5  # N(0, 1/E), E = 8; the lookups are scaled by sqrt(E)
    outputs = keras.ops.convert_to_numpy(
        model.decoder_rnn(embeddings[tgt] * 8**0.5, initial_state=model.encode(src))
    )  # sqrt(E)
    np.testing.assert_allclose(logits, reference.readout(outputs, w_o, b_o, embeddings.T, b_y), atol=1e-5)
    assert_stepping_matches(model, src, tgt, logits)
    model.save(str(tmp_path / "m.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "m.keras"), compile=False)
    assert loaded.tie_embeddings and loaded.get_config() == model.get_config()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded((src, tgt))), logits, atol=1e-6)


@pytest.mark.parametrize("tied", [True, False])
def test_tied_output_trains_every_embedding_row(tied):
    """One SGD step: tied, the output projection moves the embedding rows of words that
    are never decoder inputs; untied, only the looked-up rows move."""
    model = make("rnnsearch", tie_embeddings=tied, readout_units=8)
    src, tgt = batch()
    labels = np.roll(tgt, -1, axis=1)
    model.compile(keras.optimizers.SGD(0.5), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model((src, tgt))
    before = keras.ops.convert_to_numpy(model.target_embedding.embeddings).copy()
    model.train_on_batch((src, tgt), labels)
    moved = np.abs(keras.ops.convert_to_numpy(model.target_embedding.embeddings) - before).max(axis=1) > 0
    unseen = np.setdiff1d(np.arange(25), tgt)
    assert moved[np.unique(tgt)].all()
    assert moved[unseen].all() if tied else not moved[unseen].any()


def test_tied_output_needs_matching_sizes():
    with pytest.raises(ValueError, match="readout_units=7, embedding_dim=8"):
        make("rnnsearch", tie_embeddings=True)
    deep = make("rnnsearch", tie_embeddings=True, readout_units=8).cell.deep_output
    with pytest.raises(ValueError, match="needs output_embedding"):
        deep(np.zeros((2, 3), "float32"))


# Options a constructor turns into another attribute without keeping them.
CONSUMED_BY_THE_CONSTRUCTOR = {"memdec": {"shared_addressing"}}  # resolved into `addressing`


@pytest.mark.backend_independent  # which attributes the model's code reads
@pytest.mark.parametrize("name", library_model_params())
def test_every_option_of_a_model_is_read_by_it(name):
    """No setting is silently ignored: every option a model accepts (`model_options`, what
    `--set` and the config take) is read by the model while it is built and trains one
    step; `get_config`, which lists them all, does not count. An option is a keyword
    argument of the model's constructor or of its base classes' (`EncoderDecoder`,
    `RecurrentEncoderDecoder`, `Seq2Seq`): a model whose decoder would not read one of a
    base's options is built on the base without it."""
    import sys

    from keras_memnmt.models.registry import model_options

    cls = MODELS[name]
    options = {n for n, option in model_options(cls).items() if not option.warm_start}
    options -= CONSUMED_BY_THE_CONSTRUCTOR.get(name, set())
    read, counting = set(), [True]

    class Probe(cls):
        def __getattribute__(self, attr):
            # Reads by the library's own code (Keras reads every attribute when it tracks them).
            if attr in options and counting[0] and "keras_memnmt" in sys._getframe(1).f_code.co_filename:
                read.add(attr)
            return super().__getattribute__(attr)

        def get_config(self):
            counting[0] = False
            try:
                return super().get_config()
            finally:
                counting[0] = True

    model = Probe(30, 25, **TINY_OPTIONS[name])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    src, tgt = batch()
    model.fit((src, tgt), tgt, epochs=1, verbose=0)
    assert sorted(options - read) == []


@pytest.mark.parametrize("name", library_model_params())
def test_every_dropout_option_of_a_model_changes_its_training_outputs(name):
    """A dropout rate a model accepts acts in training: with every other rate at 0, the rate
    at 0.5 gives other training-mode logits than at 0, from the same weights (a rate read
    but applied where nothing follows, as annotation dropout for a decoder that reads only
    the summary, would not)."""
    from keras_memnmt.models.registry import model_options

    cls = MODELS[name]
    rates = [n for n in model_options(cls) if n.endswith("dropout")]
    assert rates, f"{name} has no dropout option"
    src, tgt = batch()
    base = {**TINY_OPTIONS[name], **{rate: 0.0 for rate in rates}}
    reference = cls(30, 25, **base)
    expected = keras.ops.convert_to_numpy(reference((src, tgt), training=True))
    for rate in rates:
        model = cls(30, 25, **{**base, rate: 0.5})
        model((src, tgt))
        model.set_weights(reference.get_weights())
        logits = keras.ops.convert_to_numpy(model((src, tgt), training=True))
        assert not np.allclose(logits, expected), f"{name}: {rate}=0.5 changes nothing in training"


@pytest.mark.parametrize("name", library_model_params())
def test_a_batch_of_one_predicts_at_any_new_width(name):
    """``predict_on_batch`` of one sentence, then of widths not seen before: on TensorFlow the
    second trace has a known batch of 1 and an unknown width, through which every state of
    the decoder's loop must keep its batch size."""
    model = MODELS[name](30, 25, **TINY_OPTIONS[name])
    for width in (8, 16, 24):
        logits = model.predict_on_batch((np.full((1, width), 5, "int32"), np.full((1, 8), BOS_ID, "int32")))
        assert np.asarray(logits).shape == (1, 8, 25)
