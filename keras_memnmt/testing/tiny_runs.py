"""Tiny run directories written without training, for tests of loading, ensembles and the CLI."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping

from keras_memnmt.data import SubwordVocab
from keras_memnmt.models import MODELS, get_model
from keras_memnmt.testing.utils import randomize_weights


def tiny_options(name: str) -> dict:
    """The options of a tiny ``name`` model (a few units per layer), as its class declares
    them (``EncoderDecoder.tiny_options``): what the shared tests build every model with."""
    return dict(get_model(name).tiny_options)


class _TinyOptions(Mapping):
    """Model name → ``tiny_options(name)``, over the library's models (``library_models()``);
    any registered name can be looked up."""

    def __getitem__(self, name: str) -> dict:
        if name not in MODELS:
            raise KeyError(name)
        return tiny_options(name)

    def __iter__(self) -> Iterator[str]:
        return iter(library_models())

    def __len__(self) -> int:
        return len(library_models())


# Each library model's tiny options, read from the models (a mapping for the tests that
# loop over every model).
TINY_OPTIONS: Mapping[str, dict] = _TinyOptions()


# A tiny `memnmt train` of the quickstart recipe (RNNsearch): a few seconds of training,
# validation and test evaluation on a CPU. The model's and the vocabulary's sizes:
TINY_SIZE_ARGS = [
    "--set",
    "embedding_dim=16",
    "--set",
    "encoder_units=8",
    "--set",
    "decoder_units=16",
    "--set",
    "attention_units=8",
    "--set",
    "readout_units=16",
    "--set",
    "vocab_size=200",
]
# ... the sentences validated and tested, and the test's beam; no TensorBoard pictures (drawing
# them is about two fifths of a tiny run's time; the shared run draws them, and
# tests/test_monitoring.py reads them there):
TINY_EVAL_ARGS = [
    "--set",
    "val_limit=8",
    "--set",
    "test_limit=4",
    "--set",
    "beam_size=2",
    "--set",
    "tensorboard_pictures=0",
]
# ... and all of it on 200 pairs of the synthetic corpus (no data files needed):
TINY_TRAIN_ARGS = ["--set", "corpus=synthetic", "--set", "synthetic_size=200", *TINY_SIZE_ARGS, *TINY_EVAL_ARGS]
# The run each test process trains once (``tests/conftest.py``, fixture ``trained_run``): four
# steps, a validation every two (step 2 and 4), every step logged to TensorBoard, each
# validation's checkpoint kept, the recipe's default of pictures drawn.
SHARED_RUN_ARGS = [
    *TINY_TRAIN_ARGS,
    "--set",
    "tensorboard_pictures=2",
    "--set",
    "max_steps=4",
    "--set",
    "validate_every=2",
    "--set",
    "log_every=1",
    "--set",
    "val_loss_sentences=8",
    "--set",
    "keep_checkpoints=true",
]


def run_fingerprint(run_dir: str) -> dict[str, str]:
    """Every file under ``run_dir`` (its path relative to ``run_dir``) with its sha256: equal
    before and after a command that must leave the run as it was."""
    from keras_memnmt.files import sha256_file

    found = {}
    for folder, _, names in os.walk(run_dir):
        for name in names:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, run_dir)] = sha256_file(path)
    return found


def library_models() -> list[str]:
    """The names of the models registered by the library itself (not by a test or a plugin)."""
    return [name for name, cls in MODELS.items() if cls.__module__.startswith("keras_memnmt.")]


def fast_tier_models() -> list[str]:
    """The library models that the tests' fast tier (the README's test command) runs in the
    tests that repeat for every model, those whose class sets ``fast_tier``; the others run
    there with the tests marked ``slow`` (CI runs both)."""
    return [name for name in library_models() if MODELS[name].fast_tier]


def library_model_params() -> list:
    """``library_models()`` as ``pytest.param``s for ``parametrize``, those beyond
    ``fast_tier_models()`` marked ``slow``."""
    import pytest

    fast = fast_tier_models()
    return [pytest.param(name, marks=() if name in fast else pytest.mark.slow) for name in library_models()]


def synthetic_vocab(size: int = 60, pairs: int = 200, seed: int = 0) -> SubwordVocab:
    """A small vocabulary trained on the synthetic corpus (the tiny runs' vocabulary)."""
    from keras_memnmt.data import synthetic_corpus

    corpus = synthetic_corpus(pairs, seed=seed)
    return SubwordVocab.train(corpus.source, corpus.target, size=size)


def write_tiny_run(
    out_dir: str, vocab: SubwordVocab, model: str, seed: int = 0, checkpoints: int = 0, synthetic_size: int = 200
) -> str:
    """A run directory as ``memnmt train`` leaves it (config.json, vocab/, best.keras and
    model.keras), with a tiny ``model`` (see ``tiny_options``) of random weights drawn
    from ``seed``, on the synthetic corpus (``memnmt evaluate`` then needs no data).

    ``checkpoints``: also ``checkpoints/step{10 i}.keras`` for ``i = 1..checkpoints``,
    each with weights of its own (as ``keep_checkpoints=True`` keeps them).
    Returns ``out_dir``.
    """
    options = tiny_options(model)
    net = get_model(model)(vocab.source.vocab_size, vocab.target.vocab_size, **options)
    net.build_weights()
    os.makedirs(out_dir, exist_ok=True)
    vocab.save(os.path.join(out_dir, "vocab"))
    config = {
        "corpus": "synthetic",
        "synthetic_size": synthetic_size,
        "model": model,
        "model_options": options,
        "seed": seed,
    }  # the other fields: TrainConfig's defaults
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for i in range(1, checkpoints + 1):
        os.makedirs(os.path.join(out_dir, "checkpoints"), exist_ok=True)
        randomize_weights(net, seed=1000 * seed + i)
        net.save(os.path.join(out_dir, "checkpoints", f"step{10 * i}.keras"))
    randomize_weights(net, seed=1000 * seed)
    for name in ("best.keras", "model.keras"):
        net.save(os.path.join(out_dir, name))
    return out_dir


def write_ensemble_runs(root: str, checkpoints: int) -> dict[str, str]:
    """Four tiny runs under ``root``: ``a`` (RNNsearch, ``checkpoints`` kept checkpoints), ``b``
    (MemDec) and ``t`` (a Transformer) on one vocabulary, and ``other`` (RNNsearch) on another."""
    vocab = synthetic_vocab()
    return {
        "a": write_tiny_run(os.path.join(root, "a"), vocab, "rnnsearch", seed=1, checkpoints=checkpoints),
        "b": write_tiny_run(os.path.join(root, "b"), vocab, "memdec", seed=2),
        "t": write_tiny_run(os.path.join(root, "t"), vocab, "transformer", seed=4),
        "other": write_tiny_run(os.path.join(root, "other"), synthetic_vocab(size=50, seed=1), "rnnsearch", seed=3),
    }
