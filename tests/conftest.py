"""Shared fixtures: the local Multi30k copy and a small vocabulary trained on it."""

import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = os.environ.get("MEMNMT_TEST_DATA") or os.path.join(REPO, "..", "shared", "data", "multi30k")


@pytest.fixture(scope="session")
def data_dir() -> str:
    if not os.path.isfile(os.path.join(DATA_DIR, "val.en.gz")):
        pytest.skip(f"no local Multi30k copy at {DATA_DIR}")
    return DATA_DIR


@pytest.fixture(scope="session")
def val_corpus(data_dir):
    from keras_memnmt.data import load_multi30k

    return load_multi30k("en", "de", "val", data_dir=data_dir)


@pytest.fixture(scope="session")
def small_vocab(val_corpus):
    from keras_memnmt.data import SubwordVocab

    return SubwordVocab.train(val_corpus.source, val_corpus.target, size=500)


@pytest.fixture(autouse=True)
def _no_env_data(monkeypatch):
    # Tests choose their data explicitly; a developer's $MEMNMT_DATA must not leak in.
    monkeypatch.delenv("MEMNMT_DATA", raising=False)
