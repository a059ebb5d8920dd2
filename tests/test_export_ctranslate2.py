"""`memnmt export --format ctranslate2`: a Transformer run as a model `ctranslate2.Translator`
loads, whose teacher-forced log-probabilities are the Keras model's."""

import json
import os

import numpy as np
import pytest

from keras_memnmt.cli import main

ctranslate2 = pytest.importorskip("ctranslate2")

SOURCES = ["the cat sleeps", "a dog runs on the grass", "the bird sings"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from keras_memnmt.testing.tiny_runs import synthetic_vocab, write_tiny_run

    root = tmp_path_factory.mktemp("ct2_runs")
    vocab = synthetic_vocab()
    return {name: write_tiny_run(str(root / name), vocab, name, seed=3) for name in ("transformer", "rnnsearch")}


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ct2") / "model")
    assert main(["export", "--format", "ctranslate2", "--model", runs["transformer"], "--out", out]) == 0
    return out


def _our_log_probs(run, sources, targets):
    """The Keras model's log-probability of each target token and of the final eos."""
    from keras import ops

    from keras_memnmt.data.vocab import BOS_ID, EOS_ID, encode_sources
    from keras_memnmt.rundir.runs import load_run

    model, vocab, _ = load_run(run)
    src = encode_sources(vocab, sources)
    width, length = max(map(len, src)), max(map(len, targets)) + 1
    source_ids = np.array([r + [0] * (width - len(r)) for r in src])
    target_in = np.array([[BOS_ID] + t + [0] * (length - 1 - len(t)) for t in targets])
    logits = ops.convert_to_numpy(model((source_ids, target_in))).astype(np.float64)
    logp = (
        logits
        - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - logits.max(-1, keepdims=True)
    )
    return [logp[i, np.arange(len(t) + 1), t + [EOS_ID]] for i, t in enumerate(targets)]


@pytest.mark.backend  # the weights are read through the backend
def test_the_export_scores_as_the_keras_model(runs, exported):
    import sentencepiece as spm

    names = set(os.listdir(exported))
    assert {"model.bin", "config.json", "source.model", "target.model", "memnmt_ctranslate2.json"} <= names
    with open(os.path.join(exported, "memnmt_ctranslate2.json")) as f:
        assert json.load(f)["quantization"] == "float32"
    source = spm.SentencePieceProcessor(model_file=os.path.join(exported, "source.model"))
    target = spm.SentencePieceProcessor(model_file=os.path.join(exported, "target.model"))
    targets = [target.encode(t) for t in ["die katze schläft", "ein hund", "der vogel singt laut"]]
    translator = ctranslate2.Translator(exported)
    scored = translator.score_batch(
        source.encode(SOURCES, out_type=str), [[target.id_to_piece(i) for i in t] for t in targets]
    )
    for ours, theirs in zip(_our_log_probs(runs["transformer"], SOURCES, targets), scored):
        np.testing.assert_allclose(theirs.log_probs, ours, atol=1e-4)


@pytest.mark.backend_independent
def test_translator_and_int8(runs, exported, tmp_path):
    from keras_memnmt.export.ctranslate2 import CTranslate2Translator

    float32 = CTranslate2Translator(exported).translate(SOURCES, beam_size=2, max_decoding_length=8)
    assert len(float32) == len(SOURCES) and all(isinstance(t, str) for t in float32)
    out = str(tmp_path / "int8")
    assert (
        main(
            [
                "export",
                "--format",
                "ctranslate2",
                "--quantization",
                "int8",
                "--model",
                runs["transformer"],
                "--out",
                out,
            ]
        )
        == 0
    )
    assert len(CTranslate2Translator(out).translate(SOURCES, max_decoding_length=8)) == len(SOURCES)


@pytest.mark.backend_independent
@pytest.mark.parametrize(
    "extra, message",
    [
        (["--beam", "3"], "--beam: --format ctranslate2 stores no search"),
        (["--quantization", "int8", "--format", "savedmodel"], "--quantization is an option of --format ctranslate2"),
    ],
)
def test_bad_combinations(runs, tmp_path, capsys, extra, message):
    args = ["export", "--format", "ctranslate2", "--model", runs["transformer"], "--out", str(tmp_path / "x"), *extra]
    assert main(args) != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.backend_independent
def test_a_recurrent_run_and_an_existing_out_are_refused(runs, exported, tmp_path, capsys):
    assert main(["export", "--format", "ctranslate2", "--model", runs["rnnsearch"], "--out", str(tmp_path / "r")]) != 0
    assert "exports Transformer runs; this run's model is RNNsearch" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    before = os.path.getmtime(os.path.join(exported, "model.bin"))
    assert main(["export", "--format", "ctranslate2", "--model", runs["transformer"], "--out", exported]) != 0
    assert "already exists" in capsys.readouterr().err
    assert os.path.getmtime(os.path.join(exported, "model.bin")) == before
