"""The back-translation recipe: its halves, and its stages end to end on a slice of Multi30k."""

import json
import os

import pytest

from keras_memnmt.cli import main
from keras_memnmt.config import ConfigError
from keras_memnmt.data import load_multi30k, read_lines
from keras_memnmt.recipes.multi30k_backtranslation import Options, backtranslate, halves
from keras_memnmt.testing.tiny_runs import TINY_SIZE_ARGS

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

TINY = [
    *TINY_SIZE_ARGS,
    "--set",
    "max_steps=2",
    "--set",
    "validate_every=2",
    "--set",
    "val_limit=4",
    "--set",
    "test_limit=4",
    "--set",
    "beam_size=2",
    "--set",
    "train_limit=64",
    "--set",
    "backtranslation_beam=2",
    "--set",
    "chunk_size=10",
]


@pytest.mark.parametrize("n", [2, 3, 64, 29000])
def test_halves_are_disjoint_and_cover_the_data(n):
    real, mono = halves(n)
    assert not set(real) & set(mono)
    assert sorted([*real, *mono]) == list(range(n))
    assert list(real) == list(range(len(real)))  # the real half is the first pairs
    assert len(mono) - len(real) in (0, 1)


def test_halves_need_two_pairs():
    with pytest.raises(ConfigError, match="at least 2"):
        halves(1)


@pytest.mark.parametrize(
    "override, message",
    [
        ("backtranslation_beam=0", "expected an int >= 1"),
        ("reverse_model=bert", "expected one of"),
        ("corpus=synthetic", "needs a language pair"),
        ("bt_decoding=topp:0.9", "expected beam, sampling or topk:K"),
        ("bt_decoding=topk:0", "expected beam, sampling or topk:K"),
    ],
)
def test_bad_options_are_clear_errors(override, message, capsys, tmp_path):
    assert main(["train", "multi30k_backtranslation", "--out", str(tmp_path / "bt"), "--set", override]) == 2
    assert message in capsys.readouterr().err


@pytest.fixture(scope="module")
def recipe_out(data_dir, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("bt") / "bt")
    assert main(["train", "multi30k_backtranslation", "--data-dir", data_dir, "--out", out, *TINY]) == 0
    return out


@pytest.mark.slow
def test_recipe_runs_every_stage(recipe_out, data_dir, capsys):
    for stage in ("reverse", "union", "baseline"):
        assert os.path.isfile(os.path.join(recipe_out, stage, "results.json")), stage
    pairs = load_multi30k("en", "de", "train", data_dir=data_dir).take(64)
    german = read_lines(os.path.join(recipe_out, "synthetic.de"))
    assert german == pairs.target[32:]  # the second half's German, one line each
    assert len(read_lines(os.path.join(recipe_out, "synthetic.en"))) == len(german)
    union = json.load(open(os.path.join(recipe_out, "union", "config.json")))
    assert union["train_prefix"] == os.path.join(recipe_out, "union") and union["train_limit"] is None
    assert read_lines(os.path.join(recipe_out, "union.de")) == pairs.target
    reverse = json.load(open(os.path.join(recipe_out, "reverse", "config.json")))
    assert (reverse["src"], reverse["tgt"], reverse["train_limit"]) == ("de", "en", 32)
    comparison = json.load(open(os.path.join(recipe_out, "comparison.json")))
    for name in ("reverse", "baseline", "union"):
        assert {"bleu", "chrf"} <= set(comparison[name]) and comparison[name]["bleu"] is not None
    assert comparison["reverse"]["direction"] == "de->en"
    assert (comparison["real_pairs"], comparison["synthetic_pairs"]) == (32, 32)

    # Run again: every stage is finished and skipped; the table is printed.
    capsys.readouterr()
    assert main(["train", "multi30k_backtranslation", "--data-dir", data_dir, "--out", recipe_out, *TINY]) == 0
    captured = capsys.readouterr()
    assert "| union | en->de | 32 real + 32 synthetic |" in captured.out
    assert captured.err.count("is finished; skipped") == 3 and "is complete" in captured.err
    # A finished stage with other settings is an error, not silently reused.
    assert (
        main(
            [
                "train",
                "multi30k_backtranslation",
                "--data-dir",
                data_dir,
                "--out",
                recipe_out,
                *TINY,
                "--set",
                "beam_size=3",
            ]
        )
        == 2
    )
    assert "beam_size=2, now 3" in capsys.readouterr().err


@pytest.mark.slow
def test_an_interrupted_backtranslation_continues(recipe_out, tmp_path):
    german = read_lines(os.path.join(recipe_out, "synthetic.de"))
    english = read_lines(os.path.join(recipe_out, "synthetic.en"))
    prefix, reverse = str(tmp_path / "synthetic"), os.path.join(recipe_out, "reverse")
    options = Options(backtranslation_beam=2, chunk_size=10)
    assert backtranslate(reverse, german, prefix, "en", "de", options, log=lambda m: None) == 32
    assert read_lines(prefix + ".en") == english
    # Stopped after 12 lines and in the middle of the 13th: the cut line is translated again.
    with open(prefix + ".en", "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in english[:12]) + "half a li")
    assert backtranslate(reverse, german, prefix, "en", "de", options, log=lambda m: None) == 20
    resumed = read_lines(prefix + ".en")
    assert len(resumed) == 32 and resumed[:12] == english[:12] and "half a li" not in resumed
    assert backtranslate(reverse, german, prefix, "en", "de", options, log=lambda m: None) == 0
    # Files made with another beam are not mixed with new ones.
    with pytest.raises(ConfigError, match="other beam_size"):
        backtranslate(reverse, german, prefix, "en", "de", Options(backtranslation_beam=3), log=lambda m: None)


@pytest.mark.slow
def test_backtranslation_by_sampling_draws_the_same_after_a_stop(recipe_out, tmp_path):
    german = read_lines(os.path.join(recipe_out, "synthetic.de"))
    beam = read_lines(os.path.join(recipe_out, "synthetic.en"))
    reverse = os.path.join(recipe_out, "reverse")
    options = Options(bt_decoding="topk:5", chunk_size=10)
    whole = str(tmp_path / "whole")
    assert backtranslate(reverse, german, whole, "en", "de", options, log=lambda m: None, seed=3) == 32
    drawn = read_lines(whole + ".en")
    assert len(drawn) == 32 and drawn != beam
    with open(whole + ".json") as f:
        assert {"decoding": "topk:5", "seed": 3}.items() <= json.load(f).items()
    # Stopped after 12 lines: the rest is drawn as an uninterrupted call draws it.
    cut = str(tmp_path / "cut")
    assert backtranslate(reverse, german, cut, "en", "de", options, log=lambda m: None, seed=3) == 32
    with open(cut + ".en", "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in drawn[:12]))
    assert backtranslate(reverse, german, cut, "en", "de", options, log=lambda m: None, seed=3) == 20
    assert read_lines(cut + ".en") == drawn
    with pytest.raises(ConfigError, match="other seed"):
        backtranslate(reverse, german, cut, "en", "de", options, log=lambda m: None, seed=4)
