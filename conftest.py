"""Rules for every test of the repository (``keras_memnmt/**/*_test.py`` and ``tests/``).

Two tiers, chosen per test module with ``pytestmark`` (or per test, which wins):

- ``pytest.mark.backend``: the result can depend on ``KERAS_BACKEND`` (cells, decoding,
  models, save/load, precision, distribution). CI runs these on TensorFlow, JAX and PyTorch
  (the ``slow`` ones with ``bash .ci/run --slow``).
- ``pytest.mark.backend_independent``: the same on every backend (command-line errors, run
  records, locks, compare, results, archive, docs tables, plots, data files). The README's
  test command and CI run these on one backend, PyTorch (its eager tiny models are the
  quickest to train and search).

A test with neither marker is a collection error, so that a new test cannot land without
saying which it is. ``--backend-tier`` keeps only the ``backend`` tests (what CI runs on
TensorFlow and JAX).

Every test starts from the same random state (Python, NumPy and the backend seeded with 0,
the float32 dtype policy), so no test depends on what ran before it. ``--shuffle SEED``
runs the modules, and the tests within each module, in a seeded random order: the suite
must pass in any order.

The README's test command and CI run the tests in four worker processes (pytest-xdist,
``-n 4``): besides using both cores, that bounds each process's memory, since TensorFlow
keeps about 100 MB per traced ``fit`` of these models for the life of a process. The
costliest fixtures (``shared_run``, the exports, the plugin model's run) are built once
for all the workers (``shared_folder`` in tests/conftest.py).
"""

from __future__ import annotations

import os
import random

import pytest

# A training on JAX writes its compiled programs to a persistent cache
# (keras_memnmt.runtime.enable_compilation_cache); the tests leave the user's cache alone:
# they use one of the pytest run's own (`_one_compilation_per_program`), and the tests of
# the cache give it a folder of their own.
os.environ.setdefault("MEMNMT_COMPILATION_CACHE", "off")
# In pytest-xdist's workers (the README's test command and CI: four on two cores), PyTorch
# computes on one thread, as do the commands the tests start: its default pool of a thread
# per core in each of four workers spins against the others' (a tiny model's training step
# ran about 3 times slower). TensorFlow and JAX measured the same either way. Set before
# torch is imported; a value the caller set wins.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# On JAX, XLA compiles every test's programs (a tiny model's training step, its searches)
# with its cheapest backend passes: compiling is most of the JAX tier's time, and two
# modules' worth of its tests, compiling and running, took about a sixth less time.
# Results agree within the tests' tolerances; the commands the tests start inherit it.
# A value the caller set wins.
if os.environ.get("KERAS_BACKEND") == "jax":
    os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true")

TIERS = ("backend", "backend_independent")


def pytest_addoption(parser):
    group = parser.getgroup("keras_memnmt")
    group.addoption(
        "--backend-tier",
        action="store_true",
        help="run only the tests marked `backend` (their result can depend on KERAS_BACKEND)",
    )
    group.addoption(
        "--shuffle",
        type=int,
        default=None,
        metavar="SEED",
        help="run the modules, and the tests within each module, in an order drawn from SEED",
    )


def tier(item) -> str | None:
    """The test's tier: the closest of its ``backend`` / ``backend_independent`` markers."""
    for marker in item.iter_markers():  # closest first: the test's own, then its class's, its module's
        if marker.name in TIERS:
            return marker.name
    return None


def pytest_collection_modifyitems(session, config, items):
    tiers = {item.nodeid: tier(item) for item in items}
    unclassified = [nodeid for nodeid, name in tiers.items() if name is None]
    if unclassified:
        shown = "\n  ".join(unclassified[:20])
        raise pytest.UsageError(
            f"{len(unclassified)} test(s) carry neither `pytest.mark.backend` nor "
            f"`pytest.mark.backend_independent` (set `pytestmark` in the module; see conftest.py):\n  {shown}"
        )
    if config.getoption("--backend-tier"):
        config.hook.pytest_deselected(items=[item for item in items if tiers[item.nodeid] != "backend"])
        items[:] = [item for item in items if tiers[item.nodeid] == "backend"]
    seed = config.getoption("--shuffle")
    if seed is not None:
        rng = random.Random(seed)
        modules: dict[str, list] = {}
        for item in items:
            modules.setdefault(item.nodeid.split("::")[0], []).append(item)
        order = list(modules)
        rng.shuffle(order)
        shuffled = []
        for name in order:
            tests = modules[name]
            rng.shuffle(tests)
            shuffled.extend(tests)
        items[:] = shuffled


def pytest_report_header(config):
    seed = config.getoption("--shuffle")
    return None if seed is None else f"keras_memnmt: tests shuffled with seed {seed}"


def _folder_cache(folder: str):
    """A persistent compilation cache in ``folder`` that many processes share without a lock:
    each entry is written to a file of its own and renamed into place (``os.replace`` is
    atomic), so a reader sees a whole entry or none, and nothing is ever evicted.

    Written here because JAX's own file cache falls short for four workers: unbounded it
    writes entries in place (another worker may read one half-written), and bounded
    (``jax_compilation_cache_max_size``) every write first reads the size and access time
    of every entry under one lock of the folder's: about 30 ms a write at 1,700 entries
    (two test modules' worth), growing with each entry; the JAX tier took 1483 s with it
    and 825 s with this cache and the flags above."""
    import pathlib

    from jax._src.compilation_cache_interface import CacheInterface

    class FolderCache(CacheInterface):
        def __init__(self, path: str):
            self._path = pathlib.Path(path)
            self._path.mkdir(parents=True, exist_ok=True)

        def get(self, key: str) -> bytes | None:
            try:
                return (self._path / f"{key}-cache").read_bytes()
            except FileNotFoundError:
                return None

        def put(self, key: str, value: bytes) -> None:
            entry = self._path / f"{key}-cache"
            if entry.exists():
                return
            partial = self._path / f"{key}-{os.getpid()}.partial"
            partial.write_bytes(value)
            os.replace(partial, entry)

    return FolderCache(folder)


@pytest.fixture(scope="session", autouse=True)
def _one_compilation_per_program(tmp_path_factory):
    """On JAX, one persistent compilation cache for the whole pytest run, shared by its
    workers: a program compiled once (a tiny model's training step or search, the same in
    many tests and in every worker) is read back by every later test that runs it. It
    lives in the run's temporary folder, which pytest removes with its old runs; its
    entries are written whole (`_folder_cache`)."""
    import keras

    if keras.backend.backend() == "jax":
        from jax._src import compilation_cache

        from keras_memnmt.runtime import enable_compilation_cache

        base = tmp_path_factory.getbasetemp()
        root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the workers' common folder
        folder = enable_compilation_cache(str(root / "jax_compilation_cache"))
        with compilation_cache._cache_initialized_mutex:  # what JAX's first compilation would do, with our cache
            compilation_cache._cache = _folder_cache(folder)
            compilation_cache._cache_initialized = True


@pytest.fixture(autouse=True)
def _same_start():
    """Seeds Python, NumPy and the backend, and restores the float32 dtype policy, around
    every test."""
    import keras

    keras.utils.set_random_seed(0)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")


# The local Multi30k copy (tests beside the code and in tests/ alike).
DATA_DIR = os.environ.get("MEMNMT_TEST_DATA")  # a local Multi30k copy; CI sets it (.ci/run)


@pytest.fixture(scope="session")
def data_dir() -> str:
    if not DATA_DIR:
        pytest.skip("MEMNMT_TEST_DATA names no local Multi30k copy")
    if not os.path.isfile(os.path.join(DATA_DIR, "val.en.gz")):
        pytest.skip(f"no local Multi30k copy at {DATA_DIR} (MEMNMT_TEST_DATA)")
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
