"""Fixtures of the tests that cross modules: one tiny trained run shared by the workers, and
its export (the Multi30k fixtures are the root conftest.py's, for the tests beside the code too)."""

import os
import pathlib

import pytest


@pytest.fixture(scope="session")
def shared_folder(tmp_path_factory):
    """``shared_folder(name, build)``: the folder ``name`` that ``build(folder)`` fills once per
    pytest run, for every test that asks (read it, never change it).

    Under pytest-xdist the workers share it: the first to need it builds it in the run's
    common temporary folder while holding a lock there, the others wait, then read it."""
    import fcntl
    import shutil

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the workers' common folder

    def make(name: str, build) -> pathlib.Path:
        folder, done = root / name, root / f"{name}.done"
        with open(root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                shutil.rmtree(folder, ignore_errors=True)  # a worker that failed while building it
                folder.mkdir()
                build(folder)
                done.touch()
        return folder

    return make


@pytest.fixture(scope="session")
def shared_run(shared_folder) -> str:
    """The tiny run each pytest run trains once (``SHARED_RUN_ARGS``: quickstart's RNNsearch
    on the synthetic corpus, 4 steps, validations at steps 2 and 4, checkpoints kept). Read
    it, never change it: a test that writes into a run takes ``trained_run``, its own copy.
    What ``memnmt train`` wrote on stderr (its log) is in ``stderr.txt`` beside it."""
    from keras_memnmt.cli import main
    from keras_memnmt.testing.tiny_runs import SHARED_RUN_ARGS

    def train(folder):
        import contextlib

        with open(folder / "stderr.txt", "w", encoding="utf-8") as err, contextlib.redirect_stderr(err):
            assert main(["train", "quickstart", "--out", str(folder / "run"), *SHARED_RUN_ARGS]) == 0

    return str(shared_folder("shared_run", train) / "run")


@pytest.fixture()
def trained_run(shared_run, tmp_path) -> str:
    """A copy of ``shared_run`` of this test's own, at ``tmp_path/run``."""
    import shutil

    return shutil.copytree(shared_run, str(tmp_path / "run"))


@pytest.fixture(scope="session")
def export_dir(shared_run, shared_folder) -> str:
    """``shared_run`` exported with beam 3 and 2-best lists (the SavedModel TensorFlow
    Serving would load), once per pytest run. Read it, never change it."""
    from keras_memnmt.export import export_translator
    from keras_memnmt.rundir.runs import load_run

    def build(root):
        model, vocab, _ = load_run(shared_run)
        export_translator(model, vocab, str(root / "export"), beam_size=3, n_best=2)

    return str(shared_folder("serve_export", build) / "export")
