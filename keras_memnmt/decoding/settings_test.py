"""SearchSettings: each value's check, each combination's, the names each front end spells,
the flags made from the fields, the stored-translation key, and the doc's table."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys

import pytest

from keras_memnmt.decoding import settings as search
from keras_memnmt.decoding.settings import SearchSettings, SettingError

pytestmark = pytest.mark.backend_independent

DOC = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "docs", "decoding.md")


@pytest.mark.parametrize(
    "given, message",
    [
        ({"beam": 0}, "beam must be an integer >= 1, got 0"),
        ({"beam": True}, "beam must be an integer >= 1, got True"),
        ({"alpha": -0.1}, "alpha must be >= 0, got -0.1"),
        ({"alpha": float("nan")}, "alpha must be a finite number, got nan"),
        ({"length_penalty": "wu"}, "length_penalty must be one of gnmt, average, none, got 'wu'"),
        ({"sampling": "topk:0"}, "sampling 'topk:0': expected full, topk:K (an int >= 1) or topp:P (0 < P <= 1)"),
        ({"sampling": "full", "temperature": 0.0}, "temperature must be > 0, got 0.0"),
        ({"min_length": -1}, "min_length must be an integer >= 0, got -1"),
        ({"no_repeat_ngram_size": 1.5}, "no_repeat_ngram_size must be an integer >= 0, got 1.5"),
        ({"mbr": 1}, "mbr must be an integer >= 2, got 1"),
        ({"mode": "diverse"}, "mode must be one of greedy, beam, sampling, constrained, mbr, got 'diverse'"),
        ({"temperature": 0.5}, "temperature sets how sampling draws; give sampling (full, topk:K or topp:P)"),
        ({"samples": 3}, "samples sets how sampling draws; give sampling"),
        ({"sampling": "full", "beam": 4}, "sampling draws one token at a time; it does not combine with beam 4"),
        ({"n_best": 6}, "n_best 6 is more than beam 5"),
        ({"max_length": 9, "max_length_b": 3}, "max_length N bounds every output at N subwords; max_length_a"),
        ({"mbr": 8, "n_best": 2}, "mbr outputs one translation per sentence; not with n_best"),
        ({"mbr": 8, "beam": 4}, "mbr 8 takes the n-best list of a beam of 8: beam 4 keeps fewer"),
        ({"mbr_utility": "bleu"}, "mbr_utility sets how mbr compares candidates; give mbr N"),
        ({"mode": "greedy", "beam": 3}, "the greedy mode keeps one hypothesis: not with beam 3"),
        ({"mode": "sampling"}, "the sampling mode draws as sampling says"),
        ({"mode": "constrained", "beam": 1}, "constraints needs beam search: beam 2 or more (got beam 1)"),
    ],
)
def test_a_bad_value_or_combination_is_one_line_naming_the_setting(given, message):
    with pytest.raises(SettingError) as caught:
        SearchSettings(**given)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_each_front_end_spells_the_names_its_own_way():
    with pytest.raises(SettingError) as caught:
        SearchSettings(sampling="full", beam=3)
    assert (
        caught.value.render(search.flag_of) == "--sampling draws one token at a time; it does not combine with --beam 3"
    )
    assert caught.value.render(search.option_of).startswith("options.sampling draws one token")
    with pytest.raises(ValueError, match=r"^options\.beam must be an integer from 1 to 64, got 65$"):
        search.from_options({"beam": 65})  # the server's narrower range
    with pytest.raises(ValueError, match=r"^options: unknown samples, width; known: mode, beam"):
        search.from_options({"width": 1, "samples": 2})
    assert search.from_options({"beam": None, "alpha": 1}).alpha == 1.0


@pytest.mark.parametrize(
    "given, mode, beam",
    [
        ({}, "beam", 5),
        ({"beam": 1}, "greedy", 1),
        ({"sampling": "topk:5"}, "sampling", 1),
        ({"mbr": 8}, "mbr", 8),
        ({"mbr": 8, "sampling": "full"}, "mbr", 1),
        ({"mode": "greedy"}, "greedy", 1),
    ],
)
def test_the_mode_and_beam_follow_from_the_settings(given, mode, beam):
    settings = SearchSettings(**given)
    assert (settings.mode_name, settings.beam_size) == (mode, beam)
    assert settings.for_inputs(constraints=True).mode_name == "constrained" if mode == "beam" else True


def test_constraints_need_beam_search():
    SearchSettings(beam=2).for_inputs(constraints=True)
    with pytest.raises(SettingError, match=r"^constraints needs beam search: beam 2 or more \(got beam 1\)$"):
        SearchSettings(beam=1).for_inputs(constraints=True)
    with pytest.raises(SettingError) as caught:
        SearchSettings(sampling="full").for_inputs(constraints=True)
    assert caught.value.render(search.flag_of) == "--constraints needs beam search: --beam 2 or more, not --sampling"
    with pytest.raises(SettingError, match="beam 2 or more, not the mbr mode"):
        SearchSettings(mbr=4).for_inputs(constraints=True)


def test_the_key_of_the_default_searches_is_the_stored_one_and_other_settings_extend_it():
    assert SearchSettings().key() == "beam5.gnmt0.6"
    assert SearchSettings(beam=1, length_penalty="average").key() == "beam1.average"
    assert SearchSettings(beam=3, alpha=1.0, batch_size=7).key() == "beam3.gnmt1"  # batching changes no output
    assert (
        SearchSettings(min_length=2, no_repeat_ngram_size=3).key()
        == "beam5.gnmt0.6.min_length=2.no_repeat_ngram_size=3"
    )


def parse(front, argv):
    parser = argparse.ArgumentParser()
    search.add_flags(parser, front)
    return search.from_flags(parser.parse_args(argv), front)


def test_the_flags_are_made_from_the_fields_with_their_help():
    parser = argparse.ArgumentParser()
    search.add_flags(parser, search.TRANSLATE)
    helps = {a.option_strings[0]: a.help for a in parser._actions if a.option_strings and a.help}
    for name in search.names(search.TRANSLATE):
        flag = "--beam" if name == "beam" else search.flag_of(name)
        assert helps[flag] == search.help_of(name)
    assert parse(
        "translate",
        ["--beam", "4", "--no-repeat-ngram-size", "2", "--mbr-utility", "bleu", "--mbr", "4", "--max-tokens", "900"],
    ) == SearchSettings(beam=4, no_repeat_ngram_size=2, mbr_utility="bleu", mbr=4, max_tokens=900)
    assert search.names(search.EVALUATE) == ("beam", "length_penalty", "alpha")
    assert search.names(search.EXPORT) == ("beam", "n_best", "length_penalty", "alpha")
    for argv in (["--min-length", "two"], ["--beam", "0"], ["--alpha", "inf"], ["--mode", "fast"]):
        with pytest.raises(SystemExit):  # argparse's usage error, naming the flag
            parse("translate", argv)
    with pytest.raises(ValueError, match=r"^--alpha must be >= 0, got -1.0$"):  # a range: one line
        parse("translate", ["--alpha", "-1"])
    with pytest.raises(ValueError, match=r"^--n-best 4 is more than --beam 3"):
        parse("translate", ["--beam", "3", "--n-best", "4"])


def test_every_setting_is_in_the_docs_table():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    table = text[text.index("## Settings") : text.index("## The length bound")]
    for f in dataclasses.fields(SearchSettings):
        flag = "--beam" if f.name == "beam" else search.flag_of(f.name)
        assert re.search(rf"`{re.escape(flag)}[ `]", table), f"{flag} is missing from docs/decoding.md"
        if search.SERVE in f.metadata["fronts"]:
            assert f"`{f.name}`" in table, f"options.{f.name} is missing from docs/decoding.md"


def test_the_settings_and_modes_import_no_backend():
    code = (
        "import sys; import keras_memnmt.decoding.settings as s; s.SearchSettings(mbr=4).mode_object(); "
        "print(sorted(m for m in ('keras', 'tensorflow', 'jax', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
