"""`memnmt compare`: sacreBLEU's paired tests between systems of tiny untrained runs, the
reuse of stored hypotheses, seed pairing, and `--split all` (with `memnmt evaluate`)."""

import gzip
import json
import os
import shutil
import statistics

import pytest
import sacrebleu
from sacrebleu.significance import PairedTest

from keras_memnmt.cli import main
from keras_memnmt.evaluation.significance import (
    ensemble_system,
    paired_tests,
    pairing,
    parse_member,
    parse_systems,
)

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

SACREBLEU_NAMES = {"bleu": "BLEU", "bleu_lowercase": "BLEU", "chrf": "chrF2", "ter": "TER"}


def _tiny_run(path, vocab, model, seed, config_seed=0, **config):
    """A tiny run whose synthetic test set is drawn from ``config_seed`` (shared by the runs)."""
    from keras_memnmt.testing.tiny_runs import write_tiny_run

    run = write_tiny_run(str(path), vocab, model, seed=seed)
    with open(os.path.join(run, "config.json")) as f:
        raw = json.load(f)
    raw.update(seed=config_seed, **config)
    with open(os.path.join(run, "config.json"), "w") as f:
        json.dump(raw, f)
    return run


@pytest.fixture(scope="module")
def vocab():
    from keras_memnmt.testing.tiny_runs import synthetic_vocab

    return synthetic_vocab()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, vocab):
    root = tmp_path_factory.mktemp("compare")
    spec = {
        "a": ("rnnsearch", 1),
        "b": ("memdec", 2),
        "c0": ("rnnsearch", 3),
        "c1": ("rnnsearch", 4),
        "d0": ("cho", 5),
        "d1": ("cho", 6),
    }
    return {name: _tiny_run(root / name, vocab, model, seed) for name, (model, seed) in spec.items()}


@pytest.fixture(autouse=True)
def _default_sacrebleu_seed(monkeypatch):
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)  # sacreBLEU's default, 12345


def _references():
    from keras_memnmt.data import synthetic_splits

    return synthetic_splits(200, seed=0)[2].target


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def test_compare_reports_sacrebleus_own_paired_tests(runs, tmp_path, capsys):
    out = tmp_path / "compare.json"
    assert main(["compare", runs["a"], runs["b"], "--beam", "1", "--json", str(out), "--quiet"]) == 0
    table = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert (result["split"], result["corpus"], result["sentences"]) == ("synthetic-test", "synthetic", 500)
    assert (result["baseline"], result["seed"], result["bootstrap_resamples"], result["ar_trials"]) == (
        runs["a"],
        12345,
        1000,
        10000,
    )
    (base,), (other,) = [system["runs"] for system in result["systems"]]
    assert base["tests"] == [] and other["tests"][0]["baseline_run"] == runs["a"]
    # The hypotheses were stored in the runs; sacreBLEU called directly on them gives the same numbers.
    hyps = [_lines(base["hypotheses"]), _lines(other["hypotheses"])]
    assert base["hypotheses"] == os.path.join(runs["a"], "hyps", "synthetic-test.beam1.gnmt0.6.txt")
    refs = [_references()]
    named = [("a", hyps[0]), ("b", hyps[1])]
    for metrics in (
        {"bleu": sacrebleu.metrics.BLEU(), "chrf": sacrebleu.metrics.CHRF(), "ter": sacrebleu.metrics.TER()},
        {"bleu_lowercase": sacrebleu.metrics.BLEU(lowercase=True)},
    ):
        bs_signatures, bs = PairedTest(named, metrics, references=refs, test_type="bs")()
        ar_signatures, ar = PairedTest(named, metrics, references=refs, test_type="ar")()
        for metric in metrics:
            name = SACREBLEU_NAMES[metric]
            (bs_base, bs_other), (_, ar_other) = bs[name], ar[name]
            assert base[metric] == {"score": bs_base.score, "mean": bs_base.mean, "ci": bs_base.ci}
            assert other[metric] == {"score": bs_other.score, "mean": bs_other.mean, "ci": bs_other.ci}
            test = other["tests"][0][metric]
            assert (test["p_bootstrap"], test["p_ar"]) == (bs_other.p_value, ar_other.p_value)
            assert test["difference"] == pytest.approx(bs_other.score - bs_base.score)
            assert result["signatures"][metric] == {
                "bootstrap": str(bs_signatures[name]),
                "ar": str(ar_signatures[name]),
            }
    assert "seed:12345" in result["signatures"]["bleu"]["bootstrap"]
    # The table on stdout shows the same numbers.
    assert "baseline" in table and f"{other['bleu']['score']:.2f} ± {other['bleu']['ci']:.2f}" in table
    p = other["tests"][0]["ter"]
    assert f"{p['p_bootstrap']:.4f} / {p['p_ar']:.4f}" in table


def test_compare_prints_json_on_stdout_and_the_table_on_stderr(runs, capsys):
    assert (
        main(
            [
                "compare",
                runs["a"],
                runs["b"],
                "--beam",
                "1",
                "--limit",
                "30",
                "--trials",
                "100",
                "--bootstrap",
                "100",
                "--seed",
                "7",
                "--quiet",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["sentences"] == 30 and result["seed"] == 7
    assert "seed:7" in result["signatures"]["chrf"]["ar"] and "bs:100" in result["signatures"]["chrf"]["bootstrap"]
    assert "p (bs / ar)" in captured.err and "seed 7" in captured.err


def test_stored_hypotheses_are_reused_while_the_model_is_unchanged(tmp_path, vocab, monkeypatch, capsys):
    import keras_memnmt.evaluation.splits as splits

    x, y = (_tiny_run(tmp_path / n, vocab, "rnnsearch", s) for n, s in (("x", 1), ("y", 2)))
    calls = []
    translate = splits.translate

    def spy(model, vocab, sentences, **kwargs):
        calls.append(len(sentences))
        return translate(model, vocab, sentences, **kwargs)

    monkeypatch.setattr(splits, "translate", spy)
    args = ["compare", x, y, "--beam", "1", "--trials", "50", "--bootstrap", "50"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert calls == [500, 500]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert calls == [500, 500] and json.loads(captured.out) == first
    assert f"reused {os.path.join(x, 'hyps', 'synthetic-test.beam1.gnmt0.6.txt')}" in captured.err
    # The first N sentences come from the whole split's stored hypotheses.
    assert main(args + ["--limit", "25"]) == 0
    assert calls == [500, 500] and json.loads(capsys.readouterr().out)["sentences"] == 25
    # Another model file (another sha256), other search settings: translated again.
    shutil.copy(os.path.join(y, "best.keras"), os.path.join(x, "best.keras"))
    assert main(args) == 0
    assert calls == [500, 500, 500]
    assert main(args[:3] + ["--beam", "2", "--length-penalty", "average"] + args[5:]) == 0
    assert calls[3:] == [500, 500]
    assert os.path.isfile(os.path.join(y, "hyps", "synthetic-test.beam2.average.txt"))
    capsys.readouterr()


def test_seeds_are_paired_with_the_baselines_seeds(runs, tmp_path, capsys):
    out = tmp_path / "seeds.json"
    c0, c1, d0, d1 = runs["c0"], runs["c1"], runs["d0"], runs["d1"]
    assert (
        main(
            [
                "compare",
                "--system",
                f"rnnsearch={c0},{c1}",
                "--system",
                f"cho={d0},{d1}",
                "--beam",
                "1",
                "--trials",
                "200",
                "--bootstrap",
                "200",
                "--json",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    result = json.loads(out.read_text())
    base, cho = result["systems"]
    assert (base["name"], cho["name"], result["baseline"]) == ("rnnsearch", "cho", "rnnsearch")
    assert [t["baseline_run"] for run in cho["runs"] for t in run["tests"]] == [c0, c1]
    refs = _references()
    for base_run, run in zip(base["runs"], cho["runs"]):
        direct = paired_tests(
            _lines(base_run["hypotheses"]), [_lines(run["hypotheses"])], refs, "bleu", bootstrap=200, trials=200
        )
        assert run["tests"][0]["bleu"]["p_bootstrap"] == direct["systems"][0]["p_bootstrap"]
        assert run["tests"][0]["bleu"]["p_ar"] == direct["systems"][0]["p_ar"]
        assert base_run["bleu"] == direct["baseline"]
    for system in (base, cho):
        for metric in ("bleu", "bleu_lowercase", "chrf", "ter"):
            scores = [run[metric]["score"] for run in system["runs"]]
            assert system["mean"][metric] == pytest.approx(statistics.mean(scores))
            assert system["std"][metric] == pytest.approx(statistics.stdev(scores))
    assert "mean ± std (2 runs)" in table and f"(vs {c1})" in table
    # A single baseline run: every seed is tested against it.
    assert (
        main(
            [
                "compare",
                runs["a"],
                "--system",
                f"cho={d0},{d1}",
                "--beam",
                "1",
                "--trials",
                "50",
                "--bootstrap",
                "50",
                "--quiet",
            ]
        )
        == 0
    )
    single = json.loads(capsys.readouterr().out)
    assert [t["baseline_run"] for run in single["systems"][1]["runs"] for t in run["tests"]] == [runs["a"]] * 2
    assert single["systems"][0]["std"]["bleu"] is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["--system", "x={a},{b}", "--system", "y={a},{b},{c}"], "the baseline has 2 runs and a system 3"),
        (["{a}"], "at least two systems"),
        (["{a}", "--system", "nameonly"], "--system expects NAME=RUN1,RUN2"),
        (["{a}", "{b}", "--seed", "0"], "seed must be an int > 0"),
        (["{a}", "{a}"], "system names must differ"),
        (["{a}", "--system", "x={a}"], "a run may appear once"),
        (["{a}", "--ensemble", "{b}"], "--ensemble expects NAME=RUN[:CHECKPOINT],RUN[:CHECKPOINT]"),
        (["{a}", "--ensemble", "x={a}:step999"], "step999"),
    ],
)
def test_compare_errors(runs, capsys, args, message):
    names = {"a": runs["a"], "b": runs["b"], "c": runs["c0"]}
    assert main(["compare", *(arg.format(**names) for arg in args), "--beam", "1", "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_an_ensemble_is_a_system_translating_as_evaluate_does(runs, tmp_path, capsys):
    """``--ensemble NAME=RUN[:CHECKPOINT],...``: one system of several runs' models (of two
    architectures here), tested against the baseline like any run; it translates as
    `memnmt evaluate` does with the same members, and writes into none of its runs."""
    from keras_memnmt.testing.tiny_runs import run_fingerprint

    a, b, c = runs["a"], runs["b"], runs["c0"]
    out = tmp_path / "ensemble.json"
    untouched = {run: run_fingerprint(run) for run in (b, c)}
    assert (
        main(
            [
                "compare",
                a,
                "--ensemble",
                f"ab={a}:best,{b}",
                "--system",
                f"c={c}",
                "--beam",
                "2",
                "--limit",
                "60",
                "--trials",
                "100",
                "--bootstrap",
                "100",
                "--json",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert [s["name"] for s in result["systems"]] == [a, "ab", "c"]  # in the order given
    (ensemble,) = result["systems"][1]["runs"]
    # Its translations are kept beside the JSON (no run stores them): its score recomputes.
    kept_file = tmp_path / "ensemble.hyps" / f"ab.{result['split']}.beam2.txt"
    assert ensemble["run"] == f"{a}:best+{b}" and ensemble["hypotheses"] == str(kept_file)
    kept = open(ensemble["hypotheses"], encoding="utf-8").read().splitlines()
    assert len(kept) == 60 == result["sentences"]
    assert ensemble["tests"][0]["baseline_run"] == a and f"{a}:best+{b}" in table
    # ... and the JSON says how to make them again.
    assert result["command"] == [
        "memnmt",
        "compare",
        a,
        "--ensemble",
        f"ab={a}:best,{b}",
        "--system",
        f"c={c}",
        "--beam",
        "2",
        "--limit",
        "60",
        "--trials",
        "100",
        "--bootstrap",
        "100",
        "--json",
        str(out),
        "--quiet",
    ]
    assert main(["evaluate", "--model", a, "--model", b, "--beam", "2", "--limit", "60", "--quiet"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["ensemble"] == [a, b]
    assert evaluated["command"] == [
        "memnmt",
        "evaluate",
        "--model",
        a,
        "--model",
        b,
        "--beam",
        "2",
        "--limit",
        "60",
        "--quiet",
    ]
    assert round(ensemble["bleu"]["score"], 2) == evaluated["bleu"]
    assert ensemble["bleu"]["score"] != result["systems"][0]["runs"][0]["bleu"]["score"]
    assert {run: run_fingerprint(run) for run in (b, c)} == untouched
    from keras_memnmt.evaluation.splits import load_test_set
    from keras_memnmt.evaluation.translation import score
    from keras_memnmt.rundir.runs import read_config

    test = load_test_set(read_config(a), result["split"])[0]
    assert score(kept, test.target[:60])["bleu"] == evaluated["bleu"]  # recomputed from the kept file
    # The same comparison again writes the same files (its own outputs, not a run's).
    assert (
        main(
            [
                "compare",
                a,
                "--ensemble",
                f"ab={a}:best,{b}",
                "--system",
                f"c={c}",
                "--beam",
                "2",
                "--limit",
                "60",
                "--trials",
                "100",
                "--bootstrap",
                "100",
                "--json",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert kept_file.read_text(encoding="utf-8").splitlines() == kept


@pytest.mark.parametrize("fault", ["checkpoint", "vocabulary", "incomplete"])
def test_every_ensemble_is_checked_before_any_translation(runs, tmp_path, monkeypatch, capsys, fault):
    """A bad member of the last system (a checkpoint it does not hold, another vocabulary, a
    run without its vocabulary) is found before the first system translates."""
    import keras_memnmt.evaluation.splits as splits
    from keras_memnmt.testing.tiny_runs import synthetic_vocab

    def translate(*args, **kwargs):
        raise AssertionError("translated before every system was checked")

    monkeypatch.setattr(splits, "translate", translate)
    a, b = runs["a"], runs["b"]
    other = _tiny_run(tmp_path / "other", synthetic_vocab(size=50, seed=1), "rnnsearch", 9)
    if fault == "incomplete":
        shutil.rmtree(os.path.join(other, "vocab"))
    member, message = {
        "checkpoint": (f"{b}:step999", f"checkpoint 'step999' not found (tried step999, {b}/checkpoints/"),
        "vocabulary": (other, f"{a} and {other} have different target vocabularies"),
        "incomplete": (other, f"incomplete model directory {other}: missing vocab/vocab.json"),
    }[fault]
    assert (
        main(
            [
                "compare",
                a,
                "--system",
                f"b={b}",
                "--ensemble",
                f"x={a},{member}",
                "--beam",
                "3",
                "--limit",
                "4",
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("memnmt: error: ") and message in err and err.count("\n") == 1


def test_ensemble_members_name_a_run_and_optionally_its_checkpoint(tmp_path):
    assert parse_member("runs/t") == ("runs/t", None)
    assert parse_member("runs/t:step4610") == ("runs/t", "step4610")
    assert parse_member("runs/t:best") == ("runs/t", "best")
    assert parse_member("runs/t:runs/t_average.keras") == ("runs/t", "runs/t_average.keras")
    odd = tmp_path / "run:1"
    odd.mkdir()
    assert parse_member(str(odd)) == (str(odd), None)  # a run whose own name holds a colon
    system = ensemble_system("both=runs/t:step4610,runs/l")
    assert (system.name, system.runs, system.members) == (
        "both",
        ["runs/t:step4610+runs/l"],
        [("runs/t", "step4610"), ("runs/l", None)],
    )


def test_runs_with_different_test_sets_cannot_be_compared(runs, tmp_path, vocab, capsys):
    other = _tiny_run(tmp_path / "other", vocab, "rnnsearch", 9, config_seed=7)
    assert main(["compare", runs["a"], other, "--beam", "1", "--limit", "5", "--quiet"]) == 2
    assert "different synthetic-test test sets" in capsys.readouterr().err


def test_pairing():
    assert pairing(3, 3) == [(0, 0), (1, 1), (2, 2)]
    assert pairing(1, 2) == [(0, 0), (0, 1)]
    assert pairing(2, 1) == [(0, 0), (1, 0)]
    with pytest.raises(ValueError, match="2 runs and a system 3"):
        pairing(2, 3)
    systems = parse_systems(["r1"], ["s=r2,r3"])
    assert [(s.name, s.runs) for s in systems] == [("r1", ["r1"]), ("s", ["r2", "r3"])]


# ----- --split all ----------------------------------------------------------------------------


@pytest.fixture()
def multi30k_runs(tmp_path, vocab):
    """Two tiny en→de Multi30k runs and a data folder that holds test_2016_flickr only."""
    data = tmp_path / "data"
    data.mkdir()
    test = _references()  # any aligned text will do: synthetic pairs, 12 of them
    from keras_memnmt.data import synthetic_splits

    corpus = synthetic_splits(200, seed=0)[2]
    for lang, lines in (("en", corpus.source[:12]), ("de", test[:12])):
        with gzip.open(data / f"test_2016_flickr.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
    runs = [
        _tiny_run(tmp_path / name, vocab, "rnnsearch", seed, corpus="multi30k", src="en", tgt="de")
        for name, seed in (("m1", 1), ("m2", 2))
    ]
    return runs, str(data)


def test_split_all_evaluates_every_available_test_split(multi30k_runs, capsys):
    (run, _), data = multi30k_runs
    assert main(["evaluate", "--model", run, "--split", "all", "--data-dir", data, "--beam", "1"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert [s["corpus"] for s in report["splits"]] == ["multi30k en->de test_2016_flickr"]
    assert report["splits"][0]["sentences"] == 12
    assert report["splits"][0]["hypotheses"] == os.path.join(run, "hyps", "test_2016_flickr.beam1.gnmt0.6.txt")
    skipped = {s["split"]: s["reason"] for s in report["skipped"]}
    assert sorted(skipped) == ["test_2017_flickr", "test_2017_mscoco", "test_2018_flickr"]
    assert "has no test_2017_mscoco.en.gz" in skipped["test_2017_mscoco"]
    assert "skipping test_2018_flickr" in captured.err
    assert report["command"][-4:] == ["--data-dir", "$MEMNMT_DATA", "--beam", "1"]  # as run records name it
    # A single split that is not there is an error, as before.
    assert main(["evaluate", "--model", run, "--split", "test_2017_flickr", "--data-dir", data]) == 2
    assert "has no test_2017_flickr.en.gz" in capsys.readouterr().err


def test_compare_split_all(multi30k_runs, capsys):
    (m1, m2), data = multi30k_runs
    assert (
        main(
            [
                "compare",
                m1,
                m2,
                "--split",
                "all",
                "--data-dir",
                data,
                "--beam",
                "1",
                "--trials",
                "50",
                "--bootstrap",
                "50",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert [r["split"] for r in result["splits"]] == ["test_2016_flickr"]
    assert result["splits"][0]["sentences"] == 12
    assert result["command"][6:8] == ["--data-dir", "$MEMNMT_DATA"]
    assert [s["split"] for s in result["skipped"]] == ["test_2017_flickr", "test_2017_mscoco", "test_2018_flickr"]
    assert "skipping test_2017_flickr" in captured.err and "skipped test_2018_flickr" in captured.err


def test_archives_are_compared_on_their_stored_translations(runs, tmp_path, capsys):
    args = ["--beam", "1", "--trials", "100", "--bootstrap", "100", "--quiet"]
    assert main(["compare", runs["a"], runs["b"], *args]) == 0
    direct = json.loads(capsys.readouterr().out)
    shelf = tmp_path / "records"
    assert main(["archive", runs["a"], runs["b"], "--out", str(shelf)]) == 0
    copied = json.loads(capsys.readouterr().out)
    a, b = str(shelf / "a"), str(shelf / "b")
    assert sorted(copied) == [a, b]
    assert "hyps/synthetic-test.beam1.gnmt0.6.txt" in copied[a] and "config.json" in copied[a]
    assert not [n for n in os.listdir(a) if n.endswith(".keras")]
    assert main(["compare", a, b, *args]) == 0
    archived = json.loads(capsys.readouterr().out)
    for system_direct, system_archived in zip(direct["systems"], archived["systems"]):
        for run_direct, run_archived in zip(system_direct["runs"], system_archived["runs"]):
            for metric in ("bleu", "bleu_lowercase", "chrf", "ter"):
                assert run_archived[metric] == run_direct[metric]
                assert [t[metric] for t in run_archived["tests"]] == [t[metric] for t in run_direct["tests"]]
    # Nothing stored for beam 2, and no weights to translate with: the error names both.
    assert main(["compare", a, b, "--beam", "2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "holds no model file" in err and "synthetic-test.beam2.gnmt0.6" in err
    assert "synthetic-test.beam1.gnmt0.6" in err
    # `results` renders an archive like the run it came from.
    assert main(["results", runs["a"], a, "--split", "synthetic-test", "--beam", "1", "--format", "json"]) == 0
    row_run, row_archive = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in row_archive.items() if k != "run"} == {k: v for k, v in row_run.items() if k != "run"}


@pytest.mark.parametrize("where", ["../../elsewhere/hyps.txt", "ABSOLUTE", "hyps/link.txt"])
def test_a_record_naming_translations_outside_its_folder_is_refused(runs, tmp_path, capsys, where):
    """An archive's record whose ``hypotheses`` leads out of the archive (by ``..``, an
    absolute path, or a symbolic link in ``hyps/``) is refused by name: compare never reads
    a file outside the run or archive as its translations."""
    args = ["--beam", "1", "--trials", "100", "--bootstrap", "100", "--quiet"]
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    shutil.copytree(runs["a"], a)
    shutil.copytree(runs["b"], b)
    assert main(["compare", a, b, *args]) == 0  # stores their translations
    shelf = tmp_path / "shelf"
    assert main(["archive", a, b, "--out", str(shelf)]) == 0
    capsys.readouterr()
    stored = shelf / "b" / "hyps" / "synthetic-test.beam1.gnmt0.6.txt"
    elsewhere = tmp_path / "elsewhere" / "hyps.txt"
    elsewhere.parent.mkdir()
    shutil.copy(stored, elsewhere)  # as many lines as the stored ones: they would be read
    if where == "hyps/link.txt":
        os.symlink(elsewhere, shelf / "b" / where)
    where = str(elsewhere) if where == "ABSOLUTE" else where
    record_file = shelf / "b" / "record.json"
    record = json.loads(record_file.read_text())
    (entry,) = record["evaluations"].values()
    entry["hypotheses"] = where
    record_file.write_text(json.dumps(record))
    assert main(["compare", str(shelf / "a"), str(shelf / "b"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(record_file) in err and repr(where) in err
    assert "outside" in err


def test_an_archived_record_names_the_data_folder_as_memnmt_data(runs, tmp_path, capsys):
    """The run keeps its own record; the archive's commands give ``--data-dir`` as
    ``$MEMNMT_DATA`` (both spellings, every command of the record)."""
    run = str(tmp_path / "run")
    shutil.copytree(runs["a"], run)
    record = {
        "format": 1,
        "command": ["memnmt", "train", "x", "--data-dir", "/corpora/m30k", "--out", "r"],
        "resumes": [{"command": ["memnmt", "train", "x", "--data-dir=/corpora/m30k", "--resume"]}],
    }
    with open(os.path.join(run, "record.json"), "w") as f:
        json.dump(record, f)
    assert main(["archive", run, "--out", str(tmp_path / "shelf")]) == 0
    capsys.readouterr()
    archived = json.load(open(tmp_path / "shelf" / "record.json"))
    assert archived["command"] == ["memnmt", "train", "x", "--data-dir", "$MEMNMT_DATA", "--out", "r"]
    assert archived["resumes"][0]["command"] == ["memnmt", "train", "x", "--data-dir=$MEMNMT_DATA", "--resume"]
    assert json.load(open(os.path.join(run, "record.json"))) == record


def test_an_archive_keeps_the_translations_of_blind_test_sets(runs, tmp_path, capsys):
    """``RUN/blind/``: what ``memnmt translate`` wrote of sources without references is
    archived as it is, one line per source line; an unfinished ``.partial`` is not."""
    run = tmp_path / "run"
    shutil.copytree(runs["a"], run)
    source = tmp_path / "test_2017_flickr.en"
    source.write_text("a man rides a bike .\n\ntwo dogs play .\n", encoding="utf-8")
    (run / "blind").mkdir()
    assert (
        main(
            [
                "translate",
                "--model",
                str(run),
                "--input",
                str(source),
                "--output",
                str(run / "blind" / "test_2017_flickr.de"),
                "--quiet",
            ]
        )
        == 0
    )
    (run / "blind" / "test_2018_flickr.de.partial").write_text("half\n", encoding="utf-8")
    assert main(["archive", str(run), "--out", str(tmp_path / "shelf")]) == 0
    copied = json.loads(capsys.readouterr().out)
    kept = tmp_path / "shelf" / "blind" / "test_2017_flickr.de"
    assert kept.read_bytes() == (run / "blind" / "test_2017_flickr.de").read_bytes()
    assert len(kept.read_text(encoding="utf-8").splitlines()) == 3
    assert not (tmp_path / "shelf" / "blind" / "test_2018_flickr.de.partial").exists()
    assert "blind/test_2017_flickr.de" in json.dumps(copied)


def test_archive_refuses_to_replace_what_it_should_not(runs, tmp_path, capsys):
    out = tmp_path / "kept"
    assert main(["archive", runs["a"], "--out", str(out)]) == 0
    assert main(["archive", runs["a"], "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["archive", runs["a"], "--out", str(out), "--overwrite"]) == 0
    assert main(["archive", runs["b"], "--out", runs["a"], "--overwrite"]) == 2  # a run, not an archive
    assert "holds best.keras" in capsys.readouterr().err
    assert main(["archive", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert "is not a run directory" in capsys.readouterr().err
    assert main(["archive", runs["a"], runs["a"], "--out", str(tmp_path / "y")]) == 2
    assert "two runs named 'a'" in capsys.readouterr().err
    # A refusal for the second run comes before the first is copied.
    shelf = tmp_path / "shelf"
    (shelf / "b").mkdir(parents=True)
    (shelf / "b" / "notes.txt").write_text("kept")
    assert main(["archive", runs["a"], runs["b"], "--out", str(shelf)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert sorted(os.listdir(shelf)) == ["b"] and os.listdir(shelf / "b") == ["notes.txt"]


# ----- --split names --------------------------------------------------------------------------


def _files(run):
    """Every file of a run directory with its bytes."""
    found = {}
    for root, _, names in os.walk(run):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, run)] = f.read()
    return found


@pytest.mark.parametrize("split", ["bogus", "val", "test_2017_flickr"])
def test_a_synthetic_run_refuses_a_split_it_does_not_have(trained_run, split, capsys):
    before = _files(trained_run)
    assert main(["evaluate", "--model", trained_run, "--split", split, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--split {split!r}: a synthetic run has one test set" in err
    assert _files(trained_run) == before  # nothing scored, nothing stored


@pytest.mark.parametrize("split", [[], ["--split", "test"], ["--split", "synthetic-test"]])
def test_a_synthetic_run_scores_its_test_set_under_its_names_and_the_default(shared_run, split, capsys):
    assert main(["evaluate", "--model", shared_run, *split, "--beam", "1", "--limit", "2", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["corpus"] == "synthetic"


def test_split_all_on_a_synthetic_run_is_its_one_test_set(shared_run, capsys):
    assert main(["evaluate", "--model", shared_run, "--split", "all", "--beam", "1", "--limit", "2", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [s["corpus"] for s in report["splits"]] == ["synthetic"] and report["skipped"] == []


def test_unknown_split_names(runs, multi30k_runs, capsys):
    (run, _), data = multi30k_runs
    assert main(["evaluate", "--model", run, "--split", "bogus", "--data-dir", data, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--split 'bogus': not a Multi30k split; expected one of train, val," in err
    assert main(["compare", runs["a"], runs["b"], "--split", "val", "--beam", "1", "--quiet"]) == 2
    assert "--split 'val': a synthetic run has one test set" in capsys.readouterr().err


def test_by_length_scores_each_bucket_of_source_words(runs, capsys):
    from keras_memnmt.evaluation.significance import by_length

    sources = ["a b", "a b c", "", "a b c d e f g", "a"]
    references = ["x y", "x y z", "", "p q r s t u v", "x"]
    hyps = {"r1": ["x y", "x z", "", "p q r s t u w", "y"], "r2": ["x", "x y z", "", "p q", "x"]}
    buckets = by_length(sources, references, hyps, width=3)
    assert [(b["words"], b["sentences"]) for b in buckets] == [("1-3", 3), ("7-9", 1)]  # the empty one left out
    for bucket, rows in zip(buckets, ([0, 1, 4], [3])):
        for run, lines in hyps.items():
            refs = [[references[i] for i in rows]]
            got = [lines[i] for i in rows]
            scores = bucket["runs"][run]
            assert (scores["bleu"], scores["chrf"]) == (
                round(sacrebleu.metrics.BLEU().corpus_score(got, refs).score, 2),
                round(sacrebleu.metrics.CHRF().corpus_score(got, refs).score, 2),
            )
    with pytest.raises(ValueError, match="--by-length"):
        by_length(sources, references, hyps, width=0)
    # From the command line: the JSON's by_length covers every sentence, and a second table.
    assert (
        main(
            [
                "compare",
                runs["a"],
                runs["b"],
                "--beam",
                "1",
                "--limit",
                "40",
                "--trials",
                "10",
                "--bootstrap",
                "10",
                "--quiet",
                "--by-length",
                "3",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert sum(b["sentences"] for b in result["by_length"]) == 40
    assert set(result["by_length"][0]["runs"]) == {runs["a"], runs["b"]}
    assert "BLEU / chrF by source length" in captured.err


def _bucket_interval(hypotheses, references, metric, seed=12345, n_samples=1000):
    """sacreBLEU's own bootstrap of these sentences alone: ``(score, ci)`` of ``metric``."""
    metrics = {"bleu": sacrebleu.metrics.BLEU(), "chrf": sacrebleu.metrics.CHRF()}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SACREBLEU_SEED", str(seed))
        _, scores = PairedTest([("x", hypotheses)], {metric: metrics[metric]}, [references], "bs", n_samples)()
    (result,) = scores[SACREBLEU_NAMES[metric]]
    return result.score, result.ci


def test_by_length_intervals_come_from_each_buckets_own_sentences():
    from keras_memnmt.evaluation.significance import System, by_length, format_length_table

    # Bucket 1-3: guesses; bucket 4-6: r1 is the references themselves, r2 not quite.
    sources = ["a b", "a b c", "a", "a b", "a b c d e", "a b c d e f", "a b c d", "a b c d e"]
    references = ["x y", "x y z", "x", "y x", "p q r s t", "p q r s t u", "p q r s", "t s r q p"]
    hyps = {
        "r1": ["x y", "x z", "y", "y y", "p q r s t", "p q r s t u", "p q r s", "t s r q p"],
        "r2": ["x", "x y z", "x", "y x", "p q", "p q r s t", "p r s", "t s r q p"],
    }
    systems = [System("both", ["r1", "r2"]), System("one", ["r1"])]
    short, long = by_length(sources, references, hyps, width=3, seed=7, bootstrap=200, systems=systems)
    assert (short["words"], short["sentences"], long["words"], long["sentences"]) == ("1-3", 4, "4-6", 4)
    # The references themselves: BLEU and chrF 100 in every resample, an interval of width 0.
    assert long["runs"]["r1"] == {"bleu": 100.0, "chrf": 100.0, "bleu_ci": 0.0, "chrf_ci": 0.0}
    # Each interval is sacreBLEU's bootstrap (seed, resamples) of that bucket's sentences only.
    for bucket, rows in ((short, range(4)), (long, range(4, 8))):
        refs = [references[i] for i in rows]
        for run, lines in hyps.items():
            for metric in ("bleu", "chrf"):
                score, ci = _bucket_interval([lines[i] for i in rows], refs, metric, seed=7, n_samples=200)
                assert bucket["runs"][run][metric] == round(score, 2)
                assert bucket["runs"][run][f"{metric}_ci"] == round(ci, 2)
    # ... which another seed, or the resamples of every sentence, would not give.
    _, other_seed = _bucket_interval(hyps["r2"][4:], references[4:], "chrf")
    _, every_sentence = _bucket_interval(hyps["r2"], references, "chrf", seed=7, n_samples=200)
    assert long["runs"]["r2"]["chrf_ci"] > 0
    assert long["runs"]["r2"]["chrf_ci"] not in (round(other_seed, 2), round(every_sentence, 2))
    # A system's mean and sample standard deviation over its runs; None for a single run.
    for bucket in (short, long):
        for metric in ("bleu", "chrf"):
            values = [bucket["runs"][r][metric] for r in ("r1", "r2")]
            assert bucket["systems"]["both"]["mean"][metric] == pytest.approx(statistics.mean(values), abs=0.01)
            assert bucket["systems"]["both"]["std"][metric] == pytest.approx(statistics.stdev(values), abs=0.01)
        assert bucket["systems"]["one"]["std"] == {"bleu": None, "chrf": None}
    assert "systems" not in by_length(sources, references, hyps, width=3, bootstrap=10)[0]
    # The table: each score ± its half-width, the mean ± std of the system of several runs only.
    result = {"split": "t", "seed": 7, "bootstrap_resamples": 200, "by_length": [short, long]}
    result["systems"] = [{"name": s.name, "runs": [{"run": r} for r in s.runs]} for s in systems]
    table = format_length_table(result)
    assert "100.00 ± 0.00 / 100.00 ± 0.00" in table and "both mean ± std" in table and "one mean" not in table
    r2 = long["runs"]["r2"]
    assert f"{r2['bleu']:.2f} ± {r2['bleu_ci']:.2f} / {r2['chrf']:.2f} ± {r2['chrf_ci']:.2f}" in table
    assert "200 resamples, seed 7" in table


def test_bootstrap_interval_is_the_paired_tests_interval():
    from keras_memnmt.evaluation.significance import bootstrap_interval

    references = ["p q r s t", "x y z", "a b c d", "t s r q p", "x y"]
    baseline = ["p q r s", "x y z", "a b d", "t s r q p", "y"]
    system = ["p q r s t", "x z", "a b c d", "t s q p", "x y"]
    paired = paired_tests(baseline, [system], references, "bleu", seed=3, bootstrap=300, trials=10)
    alone = [bootstrap_interval(h, references, "bleu", seed=3, bootstrap=300) for h in (baseline, system)]
    assert alone[0] == paired["baseline"]
    assert alone[1] == {k: paired["systems"][0][k] for k in ("score", "mean", "ci")}
    with pytest.raises(ValueError, match="must be >= 1"):
        bootstrap_interval(system, references, "bleu", bootstrap=0)


def test_by_length_in_the_json_and_its_picture(runs, tmp_path, capsys):
    from matplotlib.image import imread

    json_out, plot = tmp_path / "compare.json", tmp_path / "by_length.png"
    plot.write_bytes(b"an earlier picture")  # replaced, as --json replaces its file
    args = ["compare", runs["a"], "--system", f"rnnsearch={runs['c0']},{runs['c1']}", "--beam", "1", "--limit", "60"]
    args += ["--trials", "10", "--bootstrap", "100", "--quiet", "--json", str(json_out)]
    # One bucket of every sentence: its intervals are those of the whole test set's bootstrap.
    assert main([*args, "--by-length", "1000", "--by-length-plot", str(plot)]) == 0
    assert "BLEU / chrF by source length" in capsys.readouterr().out
    result = json.loads(json_out.read_text())
    (bucket,) = result["by_length"]
    assert bucket["sentences"] == 60
    for system in result["systems"]:
        for run in system["runs"]:
            for metric in ("bleu", "chrf"):
                got = bucket["runs"][run["run"]]
                assert (got[metric], got[f"{metric}_ci"]) == (
                    round(run[metric]["score"], 2),
                    round(run[metric]["ci"], 2),
                )
    mean = bucket["systems"]["rnnsearch"]["mean"]["bleu"]
    assert mean == pytest.approx(result["systems"][1]["mean"]["bleu"], abs=0.01)
    assert bucket["systems"][runs["a"]]["std"]["bleu"] is None
    assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert imread(str(plot)).ndim == 3
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []
    # --by-length-plot alone draws --by-length's buckets of 5 words.
    assert main([*args[:-2], "--by-length-plot", str(plot)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["by_length"][0]["words"] == "1-5"


@pytest.mark.parametrize(
    "plot, message",
    [
        ("{tmp}/picture.svg", "--by-length-plot must name a .png file, got '{tmp}/picture.svg'"),
        (
            "{tmp}/missing/picture.png",
            "--by-length-plot {tmp}/missing/picture.png: the folder {tmp}/missing does not exist",
        ),
        ("{tmp}/folder.png", "--by-length-plot {tmp}/folder.png: is a directory, expected a file"),
        ("{tmp}/compare.png", "--by-length-plot {tmp}/compare.png is the --json file too"),
        ("{run}/vocab/picture.png", "--by-length-plot {run}/vocab/picture.png: inside vocab/ of the run {run}"),
    ],
)
def test_a_bad_by_length_plot_is_refused_before_any_translation(runs, tmp_path, capsys, monkeypatch, plot, message):
    import keras_memnmt.evaluation.significance as significance

    (tmp_path / "folder.png").mkdir()
    monkeypatch.setattr(significance, "translate_split", lambda *a, **k: pytest.fail("translated"))
    names = {"tmp": str(tmp_path), "run": runs["a"]}
    args = ["compare", runs["a"], runs["b"], "--beam", "1", "--quiet", "--by-length-plot", plot.format(**names)]
    assert main([*args, "--json", str(tmp_path / "compare.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(**names) in err
    assert sorted(os.listdir(tmp_path)) == ["folder.png"]  # nothing written
