"""The import graph: no package imports one above it, and loading a run needs no training code.

Levels, lowest first: ``files``, ``data`` and ``runtime``; ``layers`` and ``decoding``; ``models``
and ``testing``; ``config``, ``inference``, ``inspection`` and ``plots``; ``runs`` and
``records``; ``training``, ``compare`` and ``results``; ``cli``. A module may import its own
level or below (imports inside functions included).
"""

import ast
import os
import subprocess
import sys

import pytest

import keras_memnmt

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

LEVELS = {"files": 0, "data": 0, "runtime": 0, "layers": 1, "decoding": 1, "models": 2, "testing": 2,
          "config": 3, "inference": 3, "inspection": 3, "plots": 3, "runs": 4, "records": 4,
          "export": 5, "training": 5, "compare": 5, "results": 5, "cli": 6}
ROOT = os.path.dirname(keras_memnmt.__file__)


def _unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "keras_memnmt" else None


def _imports(path: str):
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            if node.module == "keras_memnmt":
                yield from (f"keras_memnmt.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_no_package_imports_one_above_it():
    wrong = []
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if not name.endswith(".py") or name.endswith("_test.py"):
                continue
            path = os.path.join(folder, name)
            unit = os.path.relpath(path, ROOT).split(os.sep)[0].removesuffix(".py")
            if unit not in LEVELS:
                continue
            for module in _imports(path):
                other = _unit(module)
                if other in LEVELS and LEVELS[other] > LEVELS[unit]:
                    wrong.append(f"{os.path.relpath(path, ROOT)} imports {module}")
    assert not wrong, wrong


def test_loading_and_translating_a_run_does_not_import_training():
    code = ("import sys, keras_memnmt.runs, keras_memnmt.inference, keras_memnmt.cli; "
            "print(sorted(m for m in sys.modules if m.startswith('keras_memnmt.training')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
