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


@pytest.fixture(scope="session")
def shared_run(tmp_path_factory) -> str:
    """The tiny run the test session trains once (``SHARED_RUN_ARGS``: quickstart's RNNsearch
    on the synthetic corpus, 4 steps, validations at steps 2 and 4, checkpoints kept). Read
    it, never change it: a test that writes into a run takes ``trained_run``, its own copy.

    Under pytest-xdist the workers share one: the first to need it trains it in the
    session's common folder while holding a lock there, the others wait and read it."""
    import fcntl
    import shutil

    from keras_memnmt.cli import main
    from keras_memnmt.testing.tiny_runs import SHARED_RUN_ARGS

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the session's, under xdist
    out, done = root / "shared_run" / "run", root / "shared_run" / "done"
    out.parent.mkdir(exist_ok=True)
    with open(root / "shared_run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)  # a worker that failed while training it
            assert main(["train", "quickstart", "--out", str(out), *SHARED_RUN_ARGS]) == 0
            done.touch()
    return str(out)


@pytest.fixture()
def trained_run(shared_run, tmp_path) -> str:
    """A copy of ``shared_run`` of this test's own, at ``tmp_path/run``."""
    import shutil

    return shutil.copytree(shared_run, str(tmp_path / "run"))
