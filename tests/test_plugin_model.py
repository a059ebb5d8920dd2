"""A model defined outside the library trains, translates, evaluates, resumes and reloads
through `memnmt`, with no edit to the library: the seams are real.

The model here is a stacked-LSTM encoder whose layers hand their final states to an
LSTM decoder with Luong dot attention (the shape of the Luong and Y-LSTM models): a
new encoder (``make_encoder``), a new cell (``DecoderCell``), a registered name
(``register_model``), options read from the constructor.
"""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
from keras import ops

from keras_memnmt.cli import main
from keras_memnmt.data.vocab import PAD_ID
from keras_memnmt.layers import DecoderCell, DeepOutput, EncoderOutput
from keras_memnmt.models import Seq2Seq, get_model, model_options, register_model
from keras_memnmt.testing import run_cell_test
from keras_memnmt.testing.tiny_runs import TINY_EVAL_ARGS

# The result can depend on KERAS_BACKEND: run on every backend (conftest.py).
pytestmark = pytest.mark.backend

PACKAGE = "keras_memnmt_plugin_test"


@keras.saving.register_keras_serializable(package=PACKAGE)
class StackedLSTMEncoder(keras.layers.Layer):
    """Embedding + ``layers`` unidirectional LSTMs; every layer's final ``[h, c]`` is handed over."""

    def __init__(self, vocab_size: int, embedding_dim: int, units: int, layers: int, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.embedding_dim, self.units, self.layers = vocab_size, embedding_dim, units, layers
        self.embedding = keras.layers.Embedding(vocab_size, embedding_dim, name="source_embedding")
        self.lstms = [
            keras.layers.LSTM(units, return_sequences=True, return_state=True, name=f"lstm_{i}") for i in range(layers)
        ]

    @property
    def annotation_units(self) -> int:
        return self.units

    def call(self, source_ids, training=False):
        mask = ops.not_equal(source_ids, PAD_ID)  # (B, Tx)
        x = self.embedding(source_ids)  # (B, Tx, E)
        final_states = []
        for lstm in self.lstms:
            x, h, c = lstm(x, mask=mask, training=training)  # (B, Tx, U), (B, U), (B, U)
            final_states.append([h, c])
        return EncoderOutput(x, ops.cast(mask, x.dtype), final_states[-1][0], tuple(final_states))

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "layers": self.layers,
        }


@keras.saving.register_keras_serializable(package=PACKAGE)
class DotAttentionLSTMCell(DecoderCell):
    """LSTM decoder step with Luong dot attention over the annotations.

        [h_t, c_t] = LSTM([h_{t-1}, c_{t-1}], e)
        ctx_t, a_t = sum_j softmax_j(h_t . h_j) h_j    (masked)
        o_t = [h_t; ctx_t]

    States ``[h, c, annotations (B, Tx*D), mask (B, Tx)]``; ``h`` and ``c`` start from
    the top encoder layer's final states (``encoded.final_states[-1]``), or zeros.
    """

    def __init__(self, units, target_vocab_size, readout_units, annotation_units, **kwargs):
        super().__init__(units, target_vocab_size, readout_units, annotation_units, **kwargs)
        if annotation_units != units:
            raise ValueError(f"dot attention needs annotation_units == units, got {annotation_units}, {units}")
        self.lstm = keras.layers.LSTMCell(units, name="lstm")
        self.deep_output = DeepOutput(
            readout_units,
            target_vocab_size,
            output_dropout=self.output_dropout,
            tied=self.tied_output,
            name="deep_output",
        )

    @property
    def state_size(self):
        return [self.units, self.units, None, None]

    def compute_output_size(self, embedding_dim):
        return 2 * self.units

    def build(self, input_shape):
        self.set_embedding_dim(input_shape)
        self.lstm.build((None, self._embedding_dim))
        self.deep_output.build((None, 2 * self.units))
        self.built = True

    def initial_states_from(self, encoded, training=False):
        annotations = ops.cast(encoded.annotations, self.compute_dtype)
        mask = ops.cast(encoded.mask, self.compute_dtype)
        if encoded.final_states:
            h, c = encoded.final_states[-1]
        else:
            h = c = ops.zeros((ops.shape(annotations)[0], self.units), self.compute_dtype)
        return [h, c, self.flatten(annotations), mask]

    def step(self, inputs, states, training=False):
        h, c, annotations_flat, mask = states
        annotations = self.unflatten(annotations_flat, mask, self.annotation_units)  # (B, Tx, D)
        _, (h, c) = self.lstm(inputs, [h, c], training=training)
        scores = ops.sum(annotations * ops.expand_dims(h, 1), axis=-1)  # (B, Tx)
        scores = ops.where(mask > 0, scores, -1e9)
        weights = ops.softmax(scores, axis=-1) * mask
        weights = weights / ops.sum(weights, axis=-1, keepdims=True)
        context = ops.sum(ops.expand_dims(weights, -1) * annotations, axis=1)  # (B, D)
        return ops.concatenate([h, context], axis=-1), [h, c, annotations_flat, mask], weights


@register_model("plugin_lstm", package=PACKAGE)
class PluginLSTMTranslator(Seq2Seq):
    """Stacked-LSTM encoder, layer-by-layer hand-off, dot-attention LSTM decoder.

    Args (beyond :class:`Seq2Seq`):
        encoder_layers: stacked LSTM layers in the encoder.
        readout_units: size of the deep-output layer.
    """

    def __init__(
        self, source_vocab_size: int, target_vocab_size: int, encoder_layers: int = 2, readout_units: int = 16, **kwargs
    ):
        self.encoder_layers = encoder_layers
        self.readout_units = readout_units
        super().__init__(source_vocab_size, target_vocab_size, **kwargs)

    def make_encoder(self):
        return StackedLSTMEncoder(
            self.source_vocab_size, self.embedding_dim, self.encoder_units, self.encoder_layers, name="encoder"
        )

    def make_cell(self):
        return DotAttentionLSTMCell(
            self.decoder_units,
            self.target_vocab_size,
            self.readout_units,
            self.encoder.annotation_units,
            output_dropout=self.output_dropout,
            tied_output=self.tie_embeddings,
            name="lstm_cell",
        )

    def get_config(self):
        return {**super().get_config(), "encoder_layers": self.encoder_layers, "readout_units": self.readout_units}


def test_the_plugin_cell_passes_the_cell_contract():
    run_cell_test(lambda: DotAttentionLSTMCell(6, 11, readout_units=5, annotation_units=6))


def test_the_registry_reads_the_plugin_options_from_its_constructor():
    assert get_model("plugin_lstm") is PluginLSTMTranslator
    options = model_options(PluginLSTMTranslator)
    assert options["encoder_layers"].default == 2 and options["encoder_layers"].annotation is int
    assert {"embedding_dim", "encoder_units", "decoder_units", "tie_embeddings"} <= set(options)
    assert "memory_size" not in options


def test_every_encoder_layer_hands_its_final_states_to_the_decoder():
    model = PluginLSTMTranslator(20, 15, encoder_layers=3, embedding_dim=8, encoder_units=6, decoder_units=6)
    source = np.array([[5, 6, 7, 0], [8, 9, 0, 0]], "int32")
    encoded = model.encoder(source)
    assert len(encoded.final_states) == 3
    h0, c0, *_ = model.encode(source)
    np.testing.assert_array_equal(ops.convert_to_numpy(h0), ops.convert_to_numpy(encoded.final_states[-1][0]))
    np.testing.assert_array_equal(ops.convert_to_numpy(c0), ops.convert_to_numpy(encoded.final_states[-1][1]))


# The plugin's own sizes (it has no attention_units), on the tiny runs' corpus and evaluation.
TINY = [
    "--set",
    "corpus=synthetic",
    "--set",
    "synthetic_size=120",
    *TINY_EVAL_ARGS,
    "--set",
    "val_limit=4",
    "--set",
    "model=plugin_lstm",
    "--set",
    "embedding_dim=12",
    "--set",
    "encoder_units=10",
    "--set",
    "decoder_units=10",
    "--set",
    "encoder_layers=2",
    "--set",
    "readout_units=12",
    "--set",
    "vocab_size=150",
    "--set",
    "validate_every=1",
]


@pytest.fixture(scope="module")
def plugin_run(shared_folder):
    def train(folder):
        assert main(["train", "quickstart", "--out", str(folder / "run"), *TINY, "--set", "max_steps=2"]) == 0

    return str(shared_folder("plugin_run", train) / "run")


def test_the_plugin_model_trains_through_memnmt_train(plugin_run):
    config = json.load(open(os.path.join(plugin_run, "config.json")))
    assert config["model"] == "plugin_lstm" and config["model_options"]["encoder_layers"] == 2
    assert "attention_units" not in config["model_options"]  # the recipe's RNNsearch option, dropped
    assert json.load(open(os.path.join(plugin_run, "results.json")))["sentences"] == 4


def test_the_plugin_model_translates_and_evaluates(plugin_run, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("the cat sees a dog\n\nthe dogs sleep\n")
    out = tmp_path / "out.txt"
    assert (
        main(["translate", "--model", plugin_run, "--beam", "2", "--input", str(src), "--output", str(out), "--quiet"])
        == 0
    )
    assert len(out.read_text().split("\n")) == 4  # three lines, each newline-terminated
    capsys.readouterr()
    assert main(["evaluate", "--model", plugin_run, "--split", "test", "--beam", "2", "--limit", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["sentences"] == 4


def test_the_plugin_model_reloads_with_the_same_outputs(plugin_run):
    from keras_memnmt.rundir.runs import load_run

    model, vocab, config = load_run(plugin_run, "model.keras")
    assert isinstance(model, PluginLSTMTranslator) and config.encoder_layers == 2
    again = keras.saving.load_model(os.path.join(plugin_run, "model.keras"), compile=False)
    source = np.array([[5, 6, 7, 3]], "int32")
    target = np.array([[2, 8, 9]], "int32")
    np.testing.assert_array_equal(
        ops.convert_to_numpy(model((source, target))), ops.convert_to_numpy(again((source, target)))
    )


@pytest.mark.slow
def test_the_plugin_model_resumes_and_warm_starts(plugin_run, tmp_path, capsys):
    import shutil

    run = str(tmp_path / "resumed")
    shutil.copytree(plugin_run, run)
    assert main(["train", "quickstart", "--out", run, *TINY, "--set", "max_steps=3", "--resume"]) == 0
    assert [h["step"] for h in json.load(open(os.path.join(run, "validations.json")))] == [1, 2, 3]
    capsys.readouterr()
    # A changed weight-shaping option is refused, by the model's own get_config().
    assert (
        main(
            [
                "train",
                "quickstart",
                "--out",
                run,
                *TINY,
                "--set",
                "encoder_layers=3",
                "--set",
                "max_steps=4",
                "--resume",
            ]
        )
        == 2
    )
    assert "encoder_layers=2 (now 3)" in capsys.readouterr().err
    warm = str(tmp_path / "warm")
    assert (
        main(
            ["train", "quickstart", "--out", warm, *TINY, "--set", f"pretrain_run={plugin_run}", "--set", "max_steps=1"]
        )
        == 0
    )
    assert "plugin_lstm warm start from" in capsys.readouterr().err


def test_an_option_of_another_model_names_the_option_and_the_model(capsys):
    assert main(["train", "quickstart", *TINY, "--set", "memory_size=4"]) == 2
    err = capsys.readouterr().err
    assert "memory_size" in err and "'plugin_lstm' has no such option" in err
