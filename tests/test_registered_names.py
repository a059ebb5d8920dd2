"""No module outside ``models/`` and ``layers/`` names a specific model: the library's tools
and the benchmarks ask the registry and the model (``tiny_options``, ``panels``,
``matmul_macs``, ...) instead, so that adding a model touches only its own files and one
registration line.

Scanned: every module of ``keras_memnmt/`` outside ``models/``, ``layers/`` and
``keras_memnmt/recipes/`` (a recipe's job is to choose a model), and ``benchmarks/``. A string constant
equal to a registered model name, or to a registered model's class name, is a finding. Not
scanned: ``tests/`` and the unit tests beside the code (``*_test.py``): a test may pick the
model it checks.
"""

import ast
import os

import pytest

import keras_memnmt
from keras_memnmt.models import MODELS

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

PACKAGE = os.path.dirname(keras_memnmt.__file__)
REPO = os.path.dirname(PACKAGE)
SKIPPED = tuple(os.path.join("keras_memnmt", name) for name in ("models", "layers", "recipes"))

# (file, name) → why that file names that model.
ALLOWED = {
    (
        "keras_memnmt/config/train.py",
        "rnnsearch",
    ): "TrainConfig's default model (the quickstart's), and the model a config without one means",
    (
        "keras_memnmt/testing/tiny_runs.py",
        "rnnsearch",
    ): "write_ensemble_runs's members are fixed: tests of ensembles rely on which architectures "
    "they are (two recurrent models with a cell and one without)",
    ("keras_memnmt/testing/tiny_runs.py", "memdec"): "as above: the ensemble fixtures' second recurrent model",
    ("keras_memnmt/testing/tiny_runs.py", "transformer"): "as above: the ensemble fixtures' model without a cell",
    (
        "benchmarks/side_by_side.py",
        "rnnsearch",
    ): "the side-by-side benchmark compares this model with OpenNMT-py's equivalent of it",
    (
        "benchmarks/translate_side_by_side.py",
        "transformer",
    ): "the translation side by side labels the peers' Transformer (OpenNMT-py's, CTranslate2's) "
    "and ours with the architecture they share",
}


def _scanned_files() -> list[str]:
    found = []
    for top in ("keras_memnmt", "benchmarks"):
        for folder, _, names in os.walk(os.path.join(REPO, top)):
            relative = os.path.relpath(folder, REPO)
            if relative.startswith(SKIPPED) or "__pycache__" in relative:
                continue
            found += [
                os.path.join(folder, name) for name in names if name.endswith(".py") and not name.endswith("_test.py")
            ]
    return sorted(found)


def _named_models(path: str, names: set[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of every string constant in ``path`` equal to one of ``names``."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]


def _library_names() -> set[str]:
    from keras_memnmt.testing.tiny_runs import library_models

    return {name for name in library_models()} | {MODELS[name].__name__ for name in library_models()}


def test_no_module_outside_models_and_layers_names_a_model():
    names = _library_names()
    found = []
    for path in _scanned_files():
        relative = os.path.relpath(path, REPO).replace(os.sep, "/")
        found += [
            f"{relative}:{line}: {name!r}"
            for line, name in _named_models(path, names)
            if (relative, name) not in ALLOWED
        ]
    assert not found, (
        "these modules name a model; ask the registry or the model instead "
        "(or allow it in ALLOWED, with the reason):\n" + "\n".join(found)
    )


def test_every_allowed_name_is_still_there():
    """An entry of ALLOWED whose file no longer names the model is removed."""
    stale = [
        key
        for key in ALLOWED
        if not any(name == key[1] for _, name in _named_models(os.path.join(REPO, key[0]), {key[1]}))
    ]
    assert not stale, stale


def test_the_scan_sees_a_name():
    """The scan finds a model's name, and its class name, where a module writes one."""
    names = _library_names()
    assert {"rnnsearch", "RNNsearch"} <= names
    assert _named_models(os.path.join(PACKAGE, "config", "train.py"), names)
