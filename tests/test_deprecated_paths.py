"""The deprecated import paths warn, name the version that removes them, and re-export."""

import importlib
import re
import sys

import pytest

pytestmark = pytest.mark.backend_independent

PATHS = {
    "records": "keras_memnmt.rundir.records",
    "compare": "keras_memnmt.evaluation.significance",
    "outputs": "keras_memnmt.rundir.outputs",
    "inference": "keras_memnmt.evaluation.translation",
    "results": "keras_memnmt.rundir.tables",
    "runs": "keras_memnmt.rundir.runs",
    "export.atomic": "keras_memnmt.atomic",
    "settings": "keras_memnmt.config.reference",
    "inspection": "keras_memnmt.pictures.inspection",
    "plots": "keras_memnmt.pictures.plots",
}


@pytest.mark.parametrize("old, new", sorted(PATHS.items()))
def test_a_deprecated_path_warns_and_re_exports(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, f"keras_memnmt.{old}", raising=False)
    message = f"keras_memnmt.{old} is deprecated and will be removed in keras-memnmt 0.3.0; import {new}"
    with pytest.warns(DeprecationWarning, match=re.escape(message)):
        module = importlib.import_module(f"keras_memnmt.{old}")
    target = importlib.import_module(new)
    public = [n for n in dir(target) if not n.startswith("_")]
    assert public and all(getattr(module, n) is getattr(target, n) for n in public)
