"""docs/extending.md followed as written: its Python blocks, run in order, define a cell that
passes ``run_cell_test`` against its NumPy reference and a model that registers, takes
``--set`` options, trains one step and translates."""

from __future__ import annotations

import os
import re

import keras
import numpy as np
import pytest

from keras_memnmt.config import ConfigError, TrainConfig, apply_overrides, build_model
from keras_memnmt.models import MODELS, get_model, model_options
from keras_memnmt.testing.utils import numpy, small_batch

pytestmark = pytest.mark.backend  # cells and models: the result can depend on KERAS_BACKEND

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "extending.md")
# What the example registers; none may be a name the library already uses.
MODEL_NAME = "mymodel"
KERAS_NAMES = ("keras_memnmt>MyCell", "keras_memnmt>MyModel")
EXAMPLE_MODULE = "extending_doc"  # the module name the doc's classes get


def doc_blocks() -> list[str]:
    """The doc's ```python blocks, in order."""
    with open(DOC, encoding="utf-8") as f:
        return re.findall(r"^```python\n(.*?)^```$", f.read(), flags=re.M | re.S)


@pytest.fixture
def example():
    """The namespace of the doc's blocks run in order; what they register is removed after
    (only that: a library module first imported meanwhile keeps its registrations)."""
    assert MODEL_NAME not in MODELS, f"the library already has a model named {MODEL_NAME!r}"
    custom = keras.saving.get_custom_objects()
    assert not set(KERAS_NAMES) & set(custom), "the library already registers the example's classes"
    namespace = {"__name__": EXAMPLE_MODULE}
    try:
        for block in doc_blocks():
            exec(compile(block, DOC, "exec"), namespace)
        yield namespace
    finally:
        for registry in (MODELS, custom):
            for name in [k for k, v in registry.items() if getattr(v, "__module__", None) == EXAMPLE_MODULE]:
                del registry[name]


def test_the_doc_has_the_cell_its_test_and_the_model_and_no_elision():
    blocks = doc_blocks()
    assert len(blocks) == 3, f"{len(blocks)} python blocks"
    assert all("..." not in block for block in blocks)
    assert "def _step(" in blocks[0] and "def step(" not in blocks[0]


def test_the_doc_cell_passes_run_cell_test_against_its_reference(example):
    example["test_my_cell"]()


def test_the_doc_model_registers_trains_one_step_and_translates(example):
    cls = example["MyModel"]
    assert get_model(MODEL_NAME) is cls
    options = model_options(cls)
    assert options["attention_units"].annotation is int and options["attention_units"].default == 256
    config = apply_overrides(TrainConfig(), [f"model={MODEL_NAME}", "attention_units=7", "readout_units=9"])
    assert isinstance(build_model(config, 30, 25), cls)
    with pytest.raises(ConfigError, match=f"memory_size: .*model '{MODEL_NAME}' has no such option"):
        apply_overrides(config, ["memory_size=4"])

    # What the model declares for the library's tools: its tiny sizes, its pictures, its matmul count.
    assert cls.tiny_options == dict(embedding_dim=8, encoder_units=6, decoder_units=10, attention_units=7,
                                    readout_units=9, output_dropout=0.0)
    assert [panel.detail for panel in cls.panels] == ["attention"]
    model = cls(30, 25, **cls.tiny_options)
    assert model.matmul_macs() == (2 * 3 * 6 * 14 + 2 * 6 * 7, 3 * 10 * 30 + 7 * 10 + 9 * 30 + 9 * 25)
    source, target = small_batch()
    model.compile(optimizer=keras.optimizers.SGD(0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = numpy(model((source, target[:, :-1])))
    loss = model.fit((source, target[:, :-1]), target[:, 1:], batch_size=3, epochs=1,
                     verbose=0).history["loss"][0]
    assert np.isfinite(loss) and not np.allclose(numpy(model((source, target[:, :-1]))), before)
    assert model.cell.dtype_policy.name == model.dtype_policy.name
    tokens = numpy(model.generate(source, beam_size=1, max_length_a=0.0, max_length_b=4)["tokens"])
    assert tokens.shape[:2] == (3, 1) and tokens.shape[2] <= 4
    assert np.all((tokens >= 0) & (tokens < 25))
