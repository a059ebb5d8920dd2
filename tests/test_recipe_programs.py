"""The plain-Keras programs of ``recipes/``: each trains at tiny sizes (slow tier), and a
program's first training steps give the losses of ``memnmt train PRESET`` with the same seed."""

import os
import runpy
import unittest.mock

import keras
import numpy as np
import pytest

from keras_memnmt.recipes import load_recipe
from keras_memnmt.testing.tiny_runs import tiny_options

RECIPES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "recipes")

# Each program and the preset it takes its numbers from.
PROGRAMS = {
    "rnnsearch": "multi30k_rnnsearch",
    "cho": "multi30k_cho",
    "memdec": "multi30k_memdec_scratch",
    "memdec_pretrained": "multi30k_memdec",
    "rmn": "multi30k_rmn",
    "rmr": "multi30k_rmr",
    "attentive_nmt": "multi30k_attentive_dot",
    "luong": "multi30k_luong",
    "ylstm": "multi30k_ylstm",
    "transformer_tiny": "multi30k_transformer_tiny",
}


def tiny_sets(preset: str) -> list[str]:
    """``--set`` items that make a run of ``preset`` tiny: its model at the tests' tiny
    sizes (untied output), 200 synthetic pairs in batches of one shape, 4 validation and 2
    test sentences, greedy search."""
    config = load_recipe(preset)
    options = tiny_options(config.model)
    if "share_embeddings" not in config.model_options:  # a Transformer's shared matrix is tied
        options["tie_embeddings"] = False
    settings = {
        "corpus": "synthetic",
        "synthetic_size": 200,
        "vocab_size": 120,
        "val_limit": 4,
        "test_limit": 2,
        "beam_size": 1,
        **options,
        # One bucket (every pair has at most 48 pieces a side): every batch has one
        # shape, and TensorFlow traces each step once.
        "max_length": 48,
        "bucket_width": 48,
    }
    items = []
    for key, value in settings.items():
        items += ["--set", f"{key}={value}"]
    return items


def program(name: str):
    """The ``main`` of ``recipes/NAME.py`` (the folder is no package: read from its path)."""
    return runpy.run_path(os.path.join(RECIPES, f"{name}.py"), run_name=f"recipes_{name}")["main"]


class _Enough(BaseException):
    """Raised after the steps a test compares: the run ends there (nothing validated or tested)."""


class _Losses(keras.callbacks.Callback):
    """The running training loss Keras reports after each step, for ``steps`` steps."""

    def __init__(self, steps: int):
        super().__init__()
        self.steps, self.values = steps, []

    def on_train_batch_end(self, batch, logs=None):
        self.values.append(float(keras.ops.convert_to_numpy(logs["loss"])))
        if len(self.values) == self.steps:
            raise _Enough


def first_losses(steps: int, run) -> list[float]:
    """The first ``steps`` training losses of ``run()``, which calls ``model.fit``: each
    fit's callbacks get a :class:`_Losses` first, which ends the run after them."""
    losses = _Losses(steps)
    fit = keras.Model.fit

    def recorded(self, *args, callbacks=None, **kwargs):
        return fit(self, *args, callbacks=[losses, *(callbacks or [])], **kwargs)

    with unittest.mock.patch.object(keras.Model, "fit", recorded), pytest.raises(_Enough):
        run()
    return losses.values


@pytest.mark.backend
def test_the_rnnsearch_program_trains_as_memnmt_train(tmp_path):
    """``memnmt train multi30k_rnnsearch --set ...`` (as its command runs it: the preset
    with the overrides, into ``train``) and ``recipes/rnnsearch.py --set ...``: the same
    first losses, on the synthetic corpus at tiny sizes."""
    from keras_memnmt.config import apply_overrides
    from keras_memnmt.training import train

    steps, sets = 4, tiny_sets("multi30k_rnnsearch")
    config = apply_overrides(load_recipe("multi30k_rnnsearch"), sets[1::2])
    cli = first_losses(steps, lambda: train(config, str(tmp_path / "cli"), log=lambda _: None))
    own = first_losses(steps, lambda: program("rnnsearch")(["--out", str(tmp_path / "program"), *sets]))
    assert len(cli) == len(own) == steps
    np.testing.assert_allclose(own, cli, rtol=1e-5)


# Whether a program runs to its end is the same on every backend (each ran here on
# TensorFlow and JAX); CI runs these on one, the loss test above on every backend.
@pytest.mark.backend_independent
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_each_program_trains_tests_and_exports_at_tiny_sizes(name, tmp_path):
    out = tmp_path / name
    export = name == "rnnsearch"  # the SavedModel once: tracing the search costs more than training
    results = program(name)(
        [
            "--out",
            str(out),
            "--steps",
            "2",
            *tiny_sets(PROGRAMS[name]),
            *(["--set", "pretrain_epochs=1"] if name == "memdec_pretrained" else []),
            *([] if export else ["--no-export"]),
        ]
    )
    assert results["sentences"] == 2 and 0.0 <= results["bleu"] <= 100.0
    assert (out / "best.keras").is_file() and (out / "last.keras").is_file()
    assert (out / "tensorboard" / "train").is_dir()
    assert (out / "export" / "saved_model.pb").is_file() == export
    if name == "memdec_pretrained":
        assert (out / "pretrain_rnnsearch" / "best.keras").is_file()


@pytest.mark.backend_independent
def test_every_program_names_its_preset_and_no_program_is_installed():
    programs = sorted(f[:-3] for f in os.listdir(RECIPES) if f.endswith(".py"))
    assert programs == sorted(PROGRAMS)
    for name, preset in PROGRAMS.items():
        with open(os.path.join(RECIPES, f"{name}.py"), encoding="utf-8") as f:
            text = f.read()
        assert f'program_parser("{preset}"' in text, name
        assert "model.fit(" in text and "model.compile(" in text, name
    with open(os.path.join(os.path.dirname(RECIPES), "pyproject.toml"), encoding="utf-8") as f:
        assert '[tool.setuptools.packages.find]\ninclude = ["keras_memnmt*"]\n' in f.read()


@pytest.mark.backend_independent
def test_the_flags_change_the_preset_and_what_a_program_does_not_follow_is_refused():
    from keras_memnmt.config import ConfigError
    from keras_memnmt.training import program_config, program_parser

    def config(preset, *argv):
        args = program_parser(preset).parse_args(list(argv))
        return program_config(load_recipe(args.preset), args)

    assert config("multi30k_transformer_tiny").max_steps == 8000  # the preset's
    shorter = config("multi30k_transformer_tiny", "--epochs", "2")
    assert (shorter.epochs, shorter.max_steps, shorter.num_heads) == (2, None, 4)
    assert config("multi30k_rnnsearch", "--epochs", "2", "--steps", "3", "--set", "seed=5").max_steps == 3
    for refused in ("validate_every=5", "distribution=data_parallel", "pretrain_run=runs/x"):
        with pytest.raises(ConfigError, match=refused.split("=")[0]):
            config("multi30k_rnnsearch", "--set", refused)
