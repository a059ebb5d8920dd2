"""docs/extending.md followed as written: its Python blocks, each the file its first line
names, run in order as those modules, give a cell that passes ``run_cell_test`` against its
NumPy reference, and a recurrent model and a model without a cell that register, take
``--set`` options, pass ``run_decoder_test`` (a fit step, stepping, the searches, saving)
and translate. ``tests/test_extending.py`` runs the shared tests on them."""

from __future__ import annotations

import os
import re
import sys
import types

import keras
import numpy as np
import pytest

from keras_memnmt.config import ConfigError, TrainConfig, apply_overrides, build_model
from keras_memnmt.models import MODELS, get_model, model_options
from keras_memnmt.testing.utils import numpy, small_batch

pytestmark = pytest.mark.backend  # cells and models: the result can depend on KERAS_BACKEND

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "extending.md")
# The files the doc shows, in order; the registration file exists and gets one line per model.
FILES = (
    "keras_memnmt/layers/mycell.py",
    "keras_memnmt/layers/mycell_test.py",
    "keras_memnmt/models/mymodel.py",
    "keras_memnmt/models/__init__.py",
    "keras_memnmt/models/mymodel_test.py",
    "keras_memnmt/models/myconv.py",
    "keras_memnmt/models/__init__.py",
    "keras_memnmt/models/myconv_test.py",
)
REGISTRATION = "keras_memnmt/models/__init__.py"
# What the examples register; none may be a name the library already uses.
MODEL_NAMES = ("mymodel", "myconv")
KERAS_NAMES = ("keras_memnmt>MyCell", "keras_memnmt>MyModel", "keras_memnmt>MyConvModel")


def doc_files() -> list[tuple[str, str]]:
    """``(path, code)`` of the doc's ```python blocks, in order: the file each block's first
    line names (``# PATH``) and the code below that line."""
    with open(DOC, encoding="utf-8") as f:
        blocks = re.findall(r"^```python\n(.*?)^```$", f.read(), flags=re.M | re.S)
    files = []
    for block in blocks:
        first, _, code = block.partition("\n")
        assert first.startswith("# "), f"a block that names no file: {first!r}"
        files.append((first[2:].strip(), code))
    return files


def module_name(path: str) -> str:
    """The module a file of the doc is: ``keras_memnmt/layers/mycell.py`` is
    ``keras_memnmt.layers.mycell``, ``tests/test_x.py`` is ``test_x``."""
    stem = path[: -len(".py")]
    return stem.split("/", 1)[1] if stem.startswith("tests/") else stem.replace("/", ".")


@pytest.fixture
def example():
    """The doc's files run in order, each as the module it is (the registration lines run
    against them); what they register is removed after, and so are the modules."""
    assert not set(MODEL_NAMES) & set(MODELS), "the library already has a model named like an example"
    custom = keras.saving.get_custom_objects()
    assert not set(KERAS_NAMES) & set(custom), "the library already registers the example's classes"
    modules = {}
    try:
        for path, code in doc_files():
            if path == REGISTRATION:
                imports = code.strip().splitlines()[0]  # its second line is an entry of `__all__`
                exec(compile(imports, f"{DOC}: {path}", "exec"), {"__name__": "registration"})
                continue
            module = types.ModuleType(module_name(path))
            sys.modules[module.__name__] = modules[module.__name__] = module
            exec(compile(code, f"{DOC}: {path}", "exec"), module.__dict__)
        yield modules
    finally:
        for name in modules:
            sys.modules.pop(name, None)
        for registry in (MODELS, custom):
            for key in [k for k, v in registry.items() if getattr(v, "__module__", None) in modules]:
                del registry[key]


def test_the_doc_shows_every_file_and_no_elision():
    files = doc_files()
    assert tuple(path for path, _ in files) == FILES
    assert all("..." not in code for _, code in files)
    cell = dict(files)["keras_memnmt/layers/mycell.py"]
    assert "def _step(" in cell and "def step(" not in cell
    registrations = [code.strip().splitlines() for path, code in files if path == REGISTRATION]
    # Two lines each, in the file's own style: the import, and the name as an `__all__` entry.
    for lines in registrations:
        assert len(lines) == 2 and lines[0].startswith("from keras_memnmt.models."), lines
        assert re.fullmatch(r'\s+"(\w+)",', lines[1]) and lines[0].endswith(" import " + lines[1].strip()[1:-2]), lines


def test_the_doc_cell_passes_run_cell_test_against_its_reference(example):
    example["keras_memnmt.layers.mycell_test"].test_my_cell()


def test_the_doc_models_pass_run_decoder_test(example):
    example["keras_memnmt.models.mymodel_test"].test_my_model()
    example["keras_memnmt.models.myconv_test"].test_my_conv_model()


def test_the_doc_recurrent_model_registers_trains_one_step_and_translates(example):
    cls = example["keras_memnmt.models.mymodel"].MyModel
    assert get_model("mymodel") is cls
    options = model_options(cls)
    assert options["attention_units"].annotation is int and options["attention_units"].default == 256
    assert {"attention_remat", "annotation_dropout", "encoder_units"} <= set(options)
    config = apply_overrides(TrainConfig(), ["model=mymodel", "attention_units=7", "readout_units=9"])
    assert isinstance(build_model(config, 30, 25), cls)
    with pytest.raises(ConfigError, match="memory_size: .*model 'mymodel' has no such option"):
        apply_overrides(config, ["memory_size=4"])

    # What the model declares for the library's tools: its tiny sizes, its pictures, its matmul count.
    assert cls.tiny_options == dict(
        embedding_dim=8, encoder_units=6, decoder_units=10, attention_units=7, readout_units=9, output_dropout=0.0
    )
    assert [panel.detail for panel in cls.panels] == ["attention"]
    model = cls(30, 25, **cls.tiny_options)
    assert model.matmul_macs() == (2 * 3 * 6 * 14 + 2 * 6 * 7, 3 * 10 * 30 + 7 * 10 + 9 * 30 + 9 * 25)
    assert model.cell.dtype_policy.name == model.dtype_policy.name
    source, _ = small_batch()
    tokens = numpy(model.generate(source, beam_size=1, max_length_a=0.0, max_length_b=4)["tokens"])
    assert tokens.shape[:2] == (3, 1) and tokens.shape[2] <= 4
    assert np.all((tokens >= 0) & (tokens < 25))


def test_the_doc_model_without_a_cell_takes_only_its_bases_options(example):
    cls = example["keras_memnmt.models.myconv"].MyConvModel
    assert get_model("myconv") is cls
    assert set(model_options(cls)) == {"window", "embedding_dim", "dropout", "tie_embeddings"}
    config = apply_overrides(TrainConfig(), ["model=myconv", "window=2", "tie_embeddings=true"])
    model = build_model(config, 30, 25)
    assert isinstance(model, cls) and model.window == 2 and model.output_layer is None
    with pytest.raises(ConfigError, match="decoder_units: .*model 'myconv' has no such option"):
        apply_overrides(config, ["decoder_units=16"])
    # Its states: a (B, K, E) window of input embeddings, the annotations and the mask.
    source, target = small_batch()
    states = model.encode(source)
    assert [tuple(state.shape) for state in states] == [(3, 2, 256), (3, 6, 256), (3, 6)]
    _, _, attention = model.decode_step(keras.ops.convert_to_tensor(target[:, 0]), states)
    np.testing.assert_allclose(numpy(attention).sum(-1), 1.0, atol=1e-5)
    assert np.all(numpy(attention)[0, 4:] == 0.0)  # padded source positions
    assert cls(30, 25, **cls.tiny_options).matmul_macs() == (3 * 64, 3 * 64 + 8 * 25)
