"""The settings reference: every config field and every model option has its text, the
reference in docs/config.md is the one the code renders, and ``--show-config`` shows a
recipe's resolved settings without training."""

import os

import pytest

from keras_memnmt.cli import main
from keras_memnmt.config import reference
from keras_memnmt.models import model_names

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "config.md")


def test_every_config_field_has_its_text():
    fields = reference.config_fields()
    assert {f.name for f in fields} >= {"corpus", "model", "epochs", "seed", "shuffle_buffer"}
    assert [f.name for f in fields if not f.text] == []


@pytest.mark.parametrize("name", model_names())
def test_every_option_of_every_model_has_its_text(name):
    options = reference.model_settings(name)
    assert options, name
    assert [o.name for o in options if not o.text] == []


def test_docstring_args_reads_entries_and_their_continuations():
    def f():
        """Summary.

        Args (beyond :class:`X`):
            alpha: the first
                on two lines.
            beta (int): the second.

        Returns:
            gamma: not an argument.
        """

    assert reference.docstring_args(f) == {"alpha": "the first on two lines.", "beta": "the second."}


def test_the_reference_in_the_docs_is_the_one_the_code_renders():
    with open(DOC, encoding="utf-8") as f:
        assert f.read() == reference.markdown(), "run: python -m keras_memnmt.config.reference > docs/config.md"


def test_show_config_prints_the_resolved_settings_and_trains_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "quickstart", "--set", "epochs=3", "--set", "decoder_units=24", "--show-config"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# memnmt train quickstart --set epochs=3 --set decoder_units=24\n")
    assert "epochs = 3  #* passes over the training data" in out  # * : not the default
    assert "seed = 0  #  " in out
    assert "decoder_units = 24  #* " in out
    assert os.listdir(tmp_path) == []


def test_show_config_says_what_another_setting_makes_moot(capsys):
    assert main(["train", "quickstart", "--set", "test_prefix=data/test", "--show-config"]) == 0
    out = capsys.readouterr().out
    assert "test_prefix = 'data/test'  #* " in out
    assert [line for line in out.splitlines() if line.startswith("test_split = ")][0].endswith(
        "(not used: test_prefix gives the test set)"
    )
