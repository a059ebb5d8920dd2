"""docs/extending.md followed literally, in a copy of the repository: each of its code blocks
is written to the file its first line names (the registration lines added to the imports
of ``keras_memnmt/models/__init__.py``, the one existing file they change), and the tests
that repeat for every registered model then run with the doc's recurrent model and its
model without a cell included, in a pytest process of their own, and pass."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from test_extending_doc import MODEL_NAMES, REGISTRATION, REPO, doc_files

# What this checks is the house's: that following the doc adds a model the shared tests
# pick up. One backend shows it; the doc's models' own behaviour on every backend is
# tests/test_extending_doc.py's (backend tier). A subprocess over a copy of the repository.
pytestmark = [pytest.mark.backend_independent, pytest.mark.slow]

COPIED = ("keras_memnmt", "tests", "benchmarks", "conftest.py", "pyproject.toml")
# The tests that repeat for every registered model (the files that ask the registry, through
# `model_names()`, `library_models()` or `TINY_OPTIONS`), and the doc's own test files.
SHARED_TESTS = (
    "tests/test_models.py",
    "tests/test_mixed_precision.py",
    "tests/test_plot_cli.py",
    "tests/test_benchmarks.py",
    "tests/test_distribution.py",
    "tests/test_registered_names.py",
)
DOC_TESTS = (
    "keras_memnmt/layers/mycell_test.py",
    "keras_memnmt/models/mymodel_test.py",
    "keras_memnmt/models/myconv_test.py",
)
# The shared tests parametrized by model run for the two models alone; those that loop over
# every model inside one test are chosen by name.
LOOP_KEYWORDS = ("every_library_model", "padding_rows_change_no_loss", "no_module_outside_models")
SELECTION = " or ".join([*MODEL_NAMES, "mycell", *LOOP_KEYWORDS])
# Each model's parametrized shared tests (an id `[NAME]` or `[NAME-...]`), by file.
PARAMETRIZED = {
    "tests/test_models.py": (
        "test_teacher_forcing_equals_stepping_the_cell",
        "test_fit_builds_an_unbuilt_model_quietly_and_completely",
        "test_every_option_of_a_model_is_read_by_it",
        "test_every_dropout_option_of_a_model_changes_its_training_outputs",
    ),
    "tests/test_mixed_precision.py": ("test_every_model_trains_under_the_policy",),
    "tests/test_plot_cli.py": ("test_plot_draws_every_panel",),
}
LOOPS = (
    "tests/test_models.py::test_every_library_model_has_tiny_test_sizes",
    "tests/test_benchmarks.py::test_every_library_model_counts_its_matmul_flops",
    "tests/test_distribution.py::test_padding_rows_change_no_loss",
    "tests/test_registered_names.py::test_no_module_outside_models_and_layers_names_a_model",
    "keras_memnmt/layers/mycell_test.py::test_my_cell",
    "keras_memnmt/models/mymodel_test.py::test_my_model",
    "keras_memnmt/models/myconv_test.py::test_my_conv_model",
)


def _copy_with_the_doc_files(root: str) -> None:
    """The repository's code and tests under ``root``, and the doc's files added to it."""
    for name in COPIED:
        source = os.path.join(REPO, name)
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(root, name), ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif os.path.exists(source):
            shutil.copy(source, os.path.join(root, name))
    for path, code in doc_files():
        target = os.path.join(root, path)
        if path == REGISTRATION:  # the import after the models' imports, the name in `__all__`
            with open(target, encoding="utf-8") as f:
                text = f.read()
            imports, name = code.strip().splitlines()
            imports_end = text.index("\n# isort: on")
            text = text[:imports_end] + "\n" + imports + text[imports_end:]
            names_start = text.index("__all__ = [\n") + len("__all__ = [\n")
            text = text[:names_start] + name + "\n" + text[names_start:]
        else:
            assert not os.path.exists(target), f"the doc's {path} would replace a file of the library"
            os.makedirs(os.path.dirname(target), exist_ok=True)
            text = code
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)


def test_the_docs_models_pass_the_tests_that_repeat_for_every_model(tmp_path):
    root = str(tmp_path / "repo")
    os.makedirs(root)
    _copy_with_the_doc_files(root)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    found = subprocess.run(
        [sys.executable, "-c", "import keras_memnmt; print(keras_memnmt.__file__)"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert found.strip().startswith(root), f"the copy imports the library from {found}"

    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-rA",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        *SHARED_TESTS,
        *DOC_TESTS,
        "-k",
        SELECTION,
    ]
    result = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-6000:]
    passed = set(re.findall(r"^PASSED (\S+)", report, flags=re.M))
    missing = [test for test in LOOPS if test not in passed]
    for path, tests in PARAMETRIZED.items():
        for test in tests:
            for name in MODEL_NAMES:
                pattern = re.compile(rf"{re.escape(f'{path}::{test}')}\[{name}[\]-]")
                if not any(pattern.match(node) for node in passed):
                    missing.append(f"{path}::{test}[{name}]")
    assert not missing, f"not run or not passed: {missing}\n{report[-3000:]}"
