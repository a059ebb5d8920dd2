"""`memnmt train / translate / evaluate` end to end, and every recipe for one step."""

import json
import os
import shutil
import warnings

import keras
import pytest

from keras_memnmt.cli import main
from keras_memnmt.recipes import load_recipe
from keras_memnmt.testing.tiny_runs import SHARED_RUN_ARGS, TINY_SIZE_ARGS, TINY_TRAIN_ARGS

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

# Two steps and a validation at the end, unless a test says otherwise.
TINY = [*TINY_TRAIN_ARGS, "--set", "max_steps=2", "--set", "validate_every=2"]


def test_train_writes_a_complete_trained_run(trained_run):
    for name in ("config.json", "vocab/vocab.json", "best.keras", "model.keras", "results.json", "log.csv"):
        assert os.path.isfile(os.path.join(trained_run, name)), name
    results = json.load(open(os.path.join(trained_run, "results.json")))
    assert results["corpus"] == "synthetic" and "nrefs:1" in results["bleu_signature"]
    assert os.listdir(os.path.join(trained_run, "tensorboard"))


def test_translate_keeps_one_line_per_input(trained_run, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("the cat sees a dog\n\n   \nthe dogs that sleep like a bird " + "cat " * 300 + "\n\u4e2d\n")
    out = tmp_path / "out.txt"
    assert (
        main(["translate", "--model", trained_run, "--beam", "2", "--input", str(src), "--output", str(out), "--quiet"])
        == 0
    )
    lines = out.read_text().split("\n")
    assert len(lines) == 6 and lines[-1] == ""  # 5 lines, each newline-terminated
    assert lines[1] == "" and lines[2] == ""
    assert "truncated" in capsys.readouterr().err


def test_evaluate_prints_scores(trained_run, capsys):
    assert main(["evaluate", "--model", trained_run, "--split", "test", "--beam", "1", "--limit", "5"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert {"bleu", "bleu_lowercase", "chrf", "ter", "bleu_signature"} <= set(scores)


def test_evaluate_length_penalty_reaches_the_search(trained_run, capsys, monkeypatch):
    from keras_memnmt.models import EncoderDecoder

    seen = []
    generate = EncoderDecoder.generate

    def spy(self, source_ids, **kwargs):
        seen.append((kwargs["length_penalty"], kwargs["alpha"]))
        return generate(self, source_ids, **kwargs)

    monkeypatch.setattr(EncoderDecoder, "generate", spy)
    assert (
        main(
            [
                "evaluate",
                "--model",
                trained_run,
                "--split",
                "test",
                "--beam",
                "2",
                "--limit",
                "3",
                "--length-penalty",
                "average",
                "--alpha",
                "0.9",
            ]
        )
        == 0
    )
    scores = json.loads(capsys.readouterr().out)
    assert (scores["length_penalty"], scores["alpha"]) == ("average", 0.9)
    assert seen and set(seen) == {("average", 0.9)}
    assert main(["evaluate", "--model", trained_run, "--split", "test", "--alpha", "-1"]) == 2
    assert "--alpha must be >= 0" in capsys.readouterr().err


def test_evaluate_a_chosen_checkpoint(trained_run, capsys):
    latest = os.path.join(trained_run, "model.keras")
    assert (
        main(
            [
                "evaluate",
                "--model",
                trained_run,
                "--checkpoint",
                latest,
                "--split",
                "test",
                "--beam",
                "1",
                "--limit",
                "3",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["sentences"] == 3
    assert main(["evaluate", "--model", trained_run, "--checkpoint", "step99", "--split", "test"]) == 2
    err = capsys.readouterr().err
    assert "checkpoint 'step99' not found" in err and "checkpoints holds: step2.keras, step4.keras" in err


def test_missing_or_incomplete_model_dir(tmp_path, capsys):
    assert main(["translate", "--model", str(tmp_path / "nope"), "--input", "x"]) == 2
    assert "model directory not found" in capsys.readouterr().err
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    assert main(["translate", "--model", str(tmp_path / "half")]) == 2
    assert "missing vocab/vocab.json" in capsys.readouterr().err


@pytest.mark.parametrize(
    "override, message",
    [
        ("epoch=3", "no such config field"),
        ("epochs=three", "expected int"),
        ("model=bert", "expected one of"),
        ("annotation_dropout=1.0", "annotation_dropout must be in [0, 1)"),
        ("dropout=-0.1", "dropout must be in [0, 1)"),
        ("epochs", "KEY=VALUE"),
        ("pretrain_checkpoint=step1", "needs pretrain_run"),
        ("learning_rate=-1e-3", "expected a finite number >= 0"),
        # An option of another model, or of another recipe: named with the chosen model.
        ("memory_size=4", "model 'rnnsearch' has no such option"),
        ("pretrain_epochs=3", "model 'rnnsearch' has no such option"),
    ],
)
def test_bad_recipe_fields_are_clear_errors(override, message, capsys):
    assert main(["train", "quickstart", "--set", override]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "override, message",
    [
        ("addressing=both", "must be one of"),
        ("memory_size=0", "memory_size"),
        ("pretrain_learning_rate=-1", "expected a number >= 0"),
        ("pretrain_epochs=-1", "expected an int >= 0"),
        ("feedback_attention=true", "model 'memdec' has no such option"),
    ],
)
def test_bad_memdec_options_are_clear_errors(override, message, capsys):
    assert main(["train", "multi30k_memdec", "--set", override]) == 2
    assert message in capsys.readouterr().err


def test_tied_embeddings_need_readout_units_equal_to_embedding_dim(capsys):
    assert main(["train", "quickstart", "--set", "tie_embeddings=true", "--set", "readout_units=64"]) == 2
    assert "tie_embeddings needs readout_units == embedding_dim" in capsys.readouterr().err


def test_addressing_and_its_legacy_name_cannot_disagree(capsys):
    assert main(["train", "multi30k_memdec", "--set", "shared_addressing=true"]) == 2
    assert "give `addressing` only" in capsys.readouterr().err


def test_unknown_recipe(capsys):
    assert main(["train", "no_such_recipe"]) == 2
    assert "multi30k_rnnsearch" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["multi30k_rnnsearch", "multi30k_cho"])
def test_recipe_runs_one_step(recipe, data_dir, tmp_path):
    assert load_recipe(recipe).corpus == "multi30k"
    out = str(tmp_path / recipe)
    sizes = (
        TINY_SIZE_ARGS
        if recipe != "multi30k_cho"
        else " ".join(TINY_SIZE_ARGS).replace("--set attention_units=8 ", "").split()
    )
    assert (
        main(
            [
                "train",
                recipe,
                "--data-dir",
                data_dir,
                "--out",
                out,
                "--set",
                "train_limit=64",
                *sizes,
                "--set",
                "val_limit=4",
                "--set",
                "test_limit=4",
                "--set",
                "beam_size=2",
                "--set",
                "max_steps=1",
                "--set",
                "validate_every=1",
            ]
        )
        == 0
    )
    assert json.load(open(os.path.join(out, "results.json")))["corpus"] == "multi30k en->de"


def test_resume_continues_a_run(trained_run):
    """The shared run (validations at steps 2 and 4) resumed to 6 steps. That it goes on with
    the batches and dropout masks of a run in one go: test_reliability."""
    assert (
        main(["train", "quickstart", "--out", trained_run, *SHARED_RUN_ARGS, "--set", "max_steps=6", "--resume"]) == 0
    )
    history = json.load(open(os.path.join(trained_run, "validations.json")))
    assert [h["step"] for h in history] == [2, 4, 6]
    assert history[-1]["train_seconds"] >= history[0]["train_seconds"]


def test_full_epochs_train_without_keras_false_alarms(tmp_path):
    """Keras warns "Your input ran out of data; interrupting training" at the end of the
    first epoch of a dataset of unknown length, and that `shuffle` is ignored for tf.data:
    both are false alarms here, and the trainer keeps them out of the log."""
    out = str(tmp_path / "epochs")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert (
            main(
                [
                    "train",
                    "quickstart",
                    "--out",
                    out,
                    *TINY,
                    "--set",
                    "max_steps=none",
                    "--set",
                    "validate_every=0",
                    "--set",
                    "epochs=2",
                ]
            )
            == 0
        )
    with open(os.path.join(out, "validations.json")) as f:
        assert len(json.load(f)) == 2  # one per epoch
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "ran out of data" in m or "`shuffle=True`" in m], messages


def test_resume_refuses_a_different_model(trained_run, capsys):
    names = ("config.json", "model.keras", "log.csv")
    before = {n: os.path.getmtime(os.path.join(trained_run, n)) for n in names}
    assert (
        main(["train", "quickstart", "--out", trained_run, *SHARED_RUN_ARGS, "--set", "decoder_units=24", "--resume"])
        == 2
    )
    err = capsys.readouterr().err
    assert "cannot resume" in err and "decoder_units=16 (now 24)" in err
    assert {n: os.path.getmtime(os.path.join(trained_run, n)) for n in before} == before


def test_train_refuses_to_overwrite_a_run_unless_told(trained_run, capsys):
    args = ["train", "quickstart", "--out", trained_run, *TINY]
    before = {n: os.path.getmtime(os.path.join(trained_run, n)) for n in ("model.keras", "best.keras")}
    assert main([*args, "--set", "max_steps=1"]) == 2
    err = capsys.readouterr().err
    assert "already holds a trained run" in err and "--resume" in err and "--overwrite" in err
    assert {n: os.path.getmtime(os.path.join(trained_run, n)) for n in before} == before  # nothing touched
    assert main([*args, "--set", "max_steps=1", "--resume", "--overwrite"]) == 2
    assert main([*args, "--set", "max_steps=1", "--set", "validate_every=1", "--overwrite"]) == 0
    assert [h["step"] for h in json.load(open(os.path.join(trained_run, "validations.json")))] == [1]


@pytest.mark.slow
def test_memdec_recipe_pretrains_then_fine_tunes(tmp_path):
    out = str(tmp_path / "memdec")
    assert (
        main(
            [
                "train",
                "multi30k_memdec_scratch",
                "--out",
                out,
                *TINY,
                "--set",
                "pretrain_epochs=1",
                "--set",
                "memory_size=3",
                "--set",
                "address_units=6",
                "--set",
                "pretrain_learning_rate=0.002",
                "--set",
                "learning_rate=0.0005",
            ]
        )
        == 0
    )
    assert os.path.isfile(os.path.join(out, "pretrain_rnnsearch", "results.json"))
    assert json.load(open(os.path.join(out, "config.json")))["model"] == "memdec"
    # Each stage trains at its own rate (the first validation improves, so no decay yet).
    for run, rate in ((os.path.join(out, "pretrain_rnnsearch"), 0.002), (out, 0.0005)):
        history = json.load(open(os.path.join(run, "validations.json")))
        assert history[0]["learning_rate"] == pytest.approx(rate)
    from keras_memnmt.rundir.runs import load_model

    cell = load_model(out).cell
    assert (cell.memory_size, cell.address_units) == (3, 6)
    assert cell.read_addressing.memory_kernel.shape == (cell.memory_dim, 6)


@pytest.mark.slow
def test_memdec_recipe_resumes_an_interrupted_pretraining_stage(tmp_path):
    """`--resume` continues the one-command recipe's RNNsearch stage where it stopped."""
    from keras_memnmt.rundir.runs import WRITTEN_BY_TRAIN

    out = str(tmp_path / "memdec")
    stage = os.path.join(out, "pretrain_rnnsearch")
    args = [
        "train",
        "multi30k_memdec",
        "--out",
        out,
        *TINY,
        "--set",
        "validate_every=1",
        "--set",
        "pretrain_epochs=1",
        "--set",
        "memory_size=2",
    ]
    assert main([*args, "--set", "max_steps=1"]) == 0
    # As if the process had been killed after the stage's first validation: the stage
    # has its model.keras but no results.json, and MemDec has not started.
    os.remove(os.path.join(stage, "results.json"))
    for name in set(WRITTEN_BY_TRAIN) - {"pretrain_rnnsearch", "config.json"}:
        path = os.path.join(out, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    assert main([*args, "--set", "max_steps=2", "--resume"]) == 0
    assert [h["step"] for h in json.load(open(os.path.join(stage, "validations.json")))] == [1, 2]
    assert os.path.isfile(os.path.join(stage, "results.json"))
    assert [h["step"] for h in json.load(open(os.path.join(out, "validations.json")))] == [1, 2]


def test_memdec_sizes_recipe_is_a_study():
    import keras_memnmt.recipes.multi30k_memdec_sizes as sizes

    assert sizes.SIZES == (4, 6, 8, 10, 12)
    assert load_recipe("multi30k_memdec_sizes").model == "memdec"


def test_pretraining_stage_is_rnnsearch_with_the_memdec_config_sizes():
    from keras_memnmt.recipes.multi30k_memdec import OPTIONS, stage_config

    config = load_recipe("multi30k_memdec")
    stage = stage_config(config, OPTIONS)
    assert stage.model == "rnnsearch" and stage.epochs == OPTIONS.pretrain_epochs
    assert stage.learning_rate == OPTIONS.pretrain_learning_rate != config.learning_rate
    assert "memory_size" not in stage.model_options
    shared = ("embedding_dim", "encoder_units", "decoder_units", "attention_units", "tie_embeddings")
    assert all(stage.model_options[k] == config.model_options[k] for k in shared)


def test_pretrain_stage_reuses_a_finished_stage_unless_overwritten(tmp_path, monkeypatch):
    import keras_memnmt.recipes.multi30k_memdec as recipe

    calls = []
    monkeypatch.setattr(recipe, "train", lambda config, run, **kw: calls.append((config.model, run, kw)))
    config = load_recipe("multi30k_memdec_sizes")
    stage = os.path.join(str(tmp_path), "pretrain_rnnsearch")
    os.makedirs(stage)
    open(os.path.join(stage, "results.json"), "w").write("{}")
    assert recipe.pretrain_stage(config, recipe.OPTIONS, str(tmp_path), log=lambda m: None) == stage
    assert calls == []
    recipe.pretrain_stage(config, recipe.OPTIONS, str(tmp_path), log=lambda m: None, overwrite=True)
    assert [(model, run, kw["overwrite"]) for model, run, kw in calls] == [("rnnsearch", stage, True)]


@pytest.mark.slow
def test_memory_size_study_pretrains_rnnsearch_once(tmp_path, monkeypatch, capsys):
    """The study warm-starts every run from one RNNsearch stage, OUT/pretrain_rnnsearch (§4.2),
    and writes its table; each run's own directory has no stage of its own."""
    import keras_memnmt.recipes.multi30k_memdec_sizes as sizes

    monkeypatch.setattr(sizes, "SIZES", (2, 3))
    out = str(tmp_path / "sizes")
    assert main(["train", "multi30k_memdec_sizes", "--out", out, *TINY, "--set", "pretrain_epochs=1"]) == 0
    stage = os.path.join(out, "pretrain_rnnsearch")
    assert os.path.isfile(os.path.join(stage, "results.json"))
    log = capsys.readouterr().err
    assert log.count("pre-training RNNsearch") == 1
    for n in (2, 3):
        run = os.path.join(out, f"memory_size={n}")
        assert not os.path.exists(os.path.join(run, "pretrain_rnnsearch"))
        run_config = json.load(open(os.path.join(run, "config.json")))
        assert (run_config["pretrain_run"], run_config["model_options"]["memory_size"]) == (stage, n)
    assert log.count(f"memdec warm start from {stage}") == 2
    rows = open(os.path.join(out, "results.md")).read().splitlines()
    assert [row.split("|")[1].strip() for row in rows[2:]] == ["2", "3"]


def test_rnnsearch_warm_starts_from_a_run_of_the_same_model(trained_run, tmp_path, capsys):
    """`pretrain_run` on a non-MemDec model (the control for MemDec's fine-tuning, §4.2):
    the run's weights and vocabulary, this config's dropout, and a fresh optimizer."""
    import numpy as np

    from keras_memnmt.rundir.runs import load_model

    data = [*TINY, "--set", f"pretrain_run={trained_run}", "--set", "max_steps=1", "--set", "validate_every=1"]
    out = str(tmp_path / "continued")
    assert (
        main(["train", "quickstart", "--out", out, *data, "--set", "learning_rate=0", "--set", "output_dropout=0.35"])
        == 0
    )
    assert f"rnnsearch warm start from {trained_run} (best.keras; fresh optimizer)" in capsys.readouterr().err
    before, after = load_model(trained_run), load_model(out)
    assert after.output_dropout == 0.35 != before.output_dropout
    for a, b in zip(before.weights, after.weights, strict=True):
        if "seed_generator" not in a.path and "optimizer" not in a.path:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)  # rate 0: unchanged
    latest = keras.saving.load_model(os.path.join(out, "model.keras"))  # saved with its optimizer
    assert int(keras.ops.convert_to_numpy(latest.optimizer.iterations)) == 1  # not the run's 2 steps carried on
    with (
        open(os.path.join(trained_run, "vocab", "vocab.json")) as f,
        open(os.path.join(out, "vocab", "vocab.json")) as g,
    ):
        assert f.read() == g.read()
    # Another architecture is a clear error before anything trains.
    other = str(tmp_path / "other")
    assert main(["train", "quickstart", "--out", other, *data, "--set", "decoder_units=24"]) == 2
    assert "cannot continue: decoder_units=16 (now 24)" in capsys.readouterr().err
    assert not os.path.exists(os.path.join(other, "model.keras"))


@pytest.mark.slow
def test_memdec_warm_starts_from_a_chosen_checkpoint(tmp_path, capsys):
    """`pretrain_checkpoint` picks a kept RNNsearch checkpoint instead of best.keras;
    the fine-tuning config sets the dropout rates."""
    import numpy as np

    from keras_memnmt.rundir.runs import load_model

    pre = str(tmp_path / "rnnsearch")
    data = TINY
    assert (
        main(
            [
                "train",
                "quickstart",
                "--out",
                pre,
                *data,
                "--set",
                "validate_every=1",
                "--set",
                "max_steps=2",
                "--set",
                "keep_checkpoints=true",
            ]
        )
        == 0
    )

    def embedding(model):
        return model.get_layer("target_embedding").get_weights()[0]

    kept = {name: embedding(load_model(pre, name)) for name in ("step1", "step2")}
    assert not np.allclose(kept["step1"], kept["step2"])
    # the kept checkpoint that is not best.keras (one of the two differs from it)
    chosen = next(n for n in kept if not np.allclose(kept[n], embedding(load_model(pre))))
    out = str(tmp_path / "memdec")
    assert (
        main(
            [
                "train",
                "multi30k_memdec",
                "--out",
                out,
                *data,
                "--set",
                f"pretrain_run={pre}",
                "--set",
                f"pretrain_checkpoint={chosen}",
                "--set",
                "memory_size=2",
                "--set",
                "tie_embeddings=false",  # as the quickstart RNNsearch
                "--set",
                "max_steps=1",
                "--set",
                "validate_every=1",
                "--set",
                "learning_rate=0",
                "--set",
                "dropout=0.1",
                "--set",
                "output_dropout=0.3",
                "--set",
                "annotation_dropout=0.4",
            ]
        )
        == 0
    )
    assert f"({chosen};" in capsys.readouterr().err
    # The fine-tuning recipe's dropout rates, not the pre-trained model's, train MemDec.
    memdec = load_model(out)
    assert (memdec.dropout, memdec.output_dropout, memdec.annotation_dropout) == (0.1, 0.3, 0.4)
    # learning_rate=0: the fine-tuned embedding is still exactly the chosen checkpoint's.
    np.testing.assert_array_equal(embedding(load_model(out)), kept[chosen])
    # A tied MemDec cannot start from an untied RNNsearch: the output layers differ.
    assert (
        main(
            [
                "train",
                "multi30k_memdec",
                "--out",
                str(tmp_path / "tied"),
                *data,
                "--set",
                f"pretrain_run={pre}",
                "--set",
                "tie_embeddings=true",
                "--set",
                "readout_units=16",
                "--set",
                "memory_size=2",
            ]
        )
        == 2
    )
    assert "tie_embeddings=False, this config tie_embeddings=True" in capsys.readouterr().err


def _synthetic_files(folder) -> tuple[str, str]:
    from keras_memnmt.data import synthetic_corpus

    corpus = synthetic_corpus(200, seed=0)
    paths = []
    for side, lines in (("en", corpus.source), ("de", corpus.target)):
        path = folder / f"train.{side}"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        paths.append(str(path))
    return paths[0], paths[1]


@pytest.mark.parametrize("source", ["vocab build", "a run"])
def test_a_given_vocabulary_trains_unchanged(shared_run, tmp_path, capsys, source):
    if source == "a run":
        given = os.path.join(shared_run, "vocab")
    else:
        src, tgt = _synthetic_files(tmp_path)
        given = str(tmp_path / "vocab")
        assert (
            main(["vocab", "build", "--src-file", src, "--tgt-file", tgt, "--size", "60", "--out", given, "--quiet"])
            == 0
        )
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "quickstart",
                "--out",
                str(run),
                *TINY_TRAIN_ARGS,
                "--set",
                "max_steps=2",
                "--set",
                f"vocab_dir={given}",
            ]
        )
        == 0
    )
    for name in ("source.model", "target.model"):
        with open(os.path.join(given, name), "rb") as a, open(run / "vocab" / name, "rb") as b:
            assert a.read() == b.read()
    with open(run / "vocab" / "vocab.json", encoding="utf-8") as f:
        assert json.load(f)["copied_from"] == os.path.abspath(given)
    with open(run / "record.json", encoding="utf-8") as f:
        assert json.load(f)["config"]["vocab_dir"] == given
    assert f"vocabulary: {given}, as it is" in capsys.readouterr().err


@pytest.mark.parametrize(
    "sets, message",
    [
        (["vocab_dir=NOWHERE"], "vocab_dir='NOWHERE': no vocabulary there"),
        (["vocab_dir=RUN", "joint_vocab=true"], "holds two vocabularies (source and target), and joint_vocab=true"),
    ],
)
def test_a_given_vocabulary_that_cannot_serve_is_one_line(shared_run, tmp_path, capsys, sets, message):
    places = {"NOWHERE": str(tmp_path / "nowhere"), "RUN": os.path.join(shared_run, "vocab")}
    sets = [s.replace(s.split("=")[1], places.get(s.split("=")[1], s.split("=")[1])) for s in sets]
    message = message.replace("NOWHERE", places["NOWHERE"])
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "quickstart",
                "--out",
                str(run),
                *TINY_TRAIN_ARGS,
                "--set",
                "max_steps=2",
                *[a for s in sets for a in ("--set", s)],
            ]
        )
        == 2
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert message in lines[-1] and lines[-1].startswith("memnmt: error: ")
    assert not run.exists()


def test_a_runs_config_trains_the_same_settings_again(shared_run, tmp_path, capsys):
    config = os.path.join(shared_run, "config.json")
    new = tmp_path / "again"
    assert main(["train", config, "--out", str(new)]) == 0
    with open(config, encoding="utf-8") as a, open(new / "config.json", encoding="utf-8") as b:
        assert json.load(a) == json.load(b)
    capsys.readouterr()
    for argv, message in [
        ([config], "names no run directory: give --out NEW"),
        ([config, "--out", shared_run, "--overwrite"], "holds config.json, the config it would"),
    ]:
        assert main(["train", *argv]) == 2
        assert message in capsys.readouterr().err


def test_a_json_config_of_ones_own_trains_and_an_unknown_key_is_one_line(tmp_path, capsys):
    settings = {
        "corpus": "synthetic",
        "synthetic_size": 200,
        "max_steps": 2,
        "val_limit": 8,
        "test_limit": 4,
        "beam_size": 2,
        "vocab_size": 200,
        "embedding_dim": 16,
        "encoder_units": 8,
        "decoder_units": 16,
        "attention_units": 8,
        "readout_units": 16,
    }
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps(settings), encoding="utf-8")
    assert main(["train", str(mine), "--out", str(tmp_path / "run")]) == 0
    with open(tmp_path / "run" / "config.json", encoding="utf-8") as f:
        saved = json.load(f)
    assert saved["max_steps"] == 2 and saved["model_options"]["decoder_units"] == 16
    mine.write_text(json.dumps({**settings, "epochz": 3}), encoding="utf-8")
    assert main(["train", str(mine), "--out", str(tmp_path / "other")]) == 2
    assert f"{mine}: epochz: no such config field or option of model 'rnnsearch'" in capsys.readouterr().err
