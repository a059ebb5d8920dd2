"""The side-by-side benchmark's reading of OpenNMT-py's log and of our scripts' output;
the training-step profile's parts; gpu_batches.py's batchings and a smoke run."""

import os
import subprocess
import sys

import pytest

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import side_by_side  # noqa: E402

LOG = """\
[2026 INFO] Step 50/  400; acc: 9.1; ppl: 900.2; xent: 6.8; lr: 0.00100; sents:    3200; bsz:  820/ 900/64; 2000/ 2200 tok/s;     30 sec;
[2026 INFO] Step 150/  400; acc: 20.1; ppl: 100.2; xent: 4.6; lr: 0.00100; sents:    3200; bsz:  830/ 880/64; 1234/ 1300 tok/s;    123 sec;
[2026 INFO] Step 200/  400; acc: 22.0; ppl: 80.0; xent: 4.4; lr: 0.00100; sents:    3200; bsz:  830/ 800/64; 1100/ 1000 tok/s;    173 sec;
"""


def test_opennmt_pairs_per_second_counts_the_windows_after_warmup():
    pairs, words = side_by_side.opennmt_pairs_per_second(LOG, warmup=100)
    rates = [1300 * 64 / 880, 1000 * 64 / 800]  # tgt tok/s over tgt tokens per sentence
    assert pairs == pytest.approx(2 / (1 / rates[0] + 1 / rates[1]))
    assert words == pytest.approx((880 + 800) / 128)


def test_opennmt_log_without_steady_windows_is_an_error():
    with pytest.raises(ValueError, match="after step 500"):
        side_by_side.opennmt_pairs_per_second(LOG, warmup=500)


def test_parse_lines_reads_name_value_lines_only():
    text = "backend=tensorflow\n# throughput: python x.py --a=b\nrnnsearch_train_pairs_per_second=301.5\n"
    assert side_by_side.parse_lines(text) == {"backend": "tensorflow", "rnnsearch_train_pairs_per_second": "301.5"}


@pytest.mark.backend
@pytest.mark.parametrize("model_name", ["rmn"])  # RNNsearch's parts are a subset of RMN's
def test_profile_parts_cover_every_weight_and_reach_back(model_name):
    """The step profile's parts: each weight's gradient comes from some part, the parts
    reach no weight of a part that comes before or after them, and the decoder and output
    parts hand a gradient back to the part before them."""
    import keras
    import numpy as np
    import profile_step

    from keras_memnmt.config import TrainConfig
    from keras_memnmt.models import get_model
    from keras_memnmt.testing.tiny_runs import TINY_OPTIONS
    from keras_memnmt.training import compile_model

    options = dict(TINY_OPTIONS[model_name], dropout=0.1)
    model = get_model(model_name)(30, 40, **options)
    compile_model(model, TrainConfig(model=model_name, label_smoothing=0.1))
    rng = np.random.default_rng(0)
    x = (
        keras.ops.convert_to_tensor(rng.integers(3, 30, (4, 5)).astype("int32")),
        keras.ops.convert_to_tensor(rng.integers(3, 40, (4, 6)).astype("int32")),
    )
    y = keras.ops.convert_to_tensor(rng.integers(3, 40, (4, 6)).astype("int32"))
    model.train_on_batch(x, y)  # builds the weights and the optimizer
    timers = profile_step.part_timers(model, keras.backend.backend())
    assert set(timers) == set(profile_step.PARTS)

    variables = model.trainable_variables
    encoder = {id(v) for v in model.encoder.trainable_variables}
    cell = {id(v) for v in model.cell.trainable_variables}
    touched = {}
    for part in ("encoder", "decoder", "output_loss"):
        weight_grads, input_grads = timers[part](x, y)
        assert len(weight_grads) == len(variables)
        touched[part] = {
            id(v)
            for v, g in zip(variables, weight_grads)
            if g is not None and np.any(keras.ops.convert_to_numpy(g) != 0)
        }
        if part != "encoder":  # (the source mask among the states has none)
            assert any(np.any(keras.ops.convert_to_numpy(g) != 0) for g in input_grads if g is not None)
    missed = [v.path for v in variables if not any(id(v) in t for t in touched.values())]
    assert not missed
    # The encoder part ends with the cell's initial states (its key projection, its s_0).
    assert touched["encoder"] & encoder and not touched["encoder"] & touched["output_loss"]
    assert not touched["output_loss"] & encoder
    assert touched["decoder"] & cell and not touched["decoder"] & encoder
    before = [keras.ops.convert_to_numpy(v.value).copy() for v in variables]
    timers["optimizer"](x, y)
    if keras.backend.backend() != "jax":  # JAX's update is stateless: it returns the new values
        assert all(np.any(keras.ops.convert_to_numpy(v.value) != b) for v, b in zip(variables, before))


def test_saved_batches_read_back_the_same(tmp_path, small_vocab, val_corpus):
    """``throughput.py --save-batches`` / ``--load-batches``: the batches, their settings, the
    vocabulary and the test sentences come back as written, and a missing file is named."""
    import numpy as np
    import throughput

    rng = np.random.default_rng(0)
    batches = [
        (
            (rng.integers(0, 500, (3, s)).astype("int32"), rng.integers(0, 500, (3, t)).astype("int32")),
            rng.integers(0, 500, (3, t)).astype("int32"),
        )
        for s, t in ((4, 8), (12, 4))
    ]
    test = val_corpus.take(3)
    throughput.save_batches(str(tmp_path), batches, small_vocab, test, {"bucket_width": 16})
    loaded, settings, vocab, sources, targets = throughput.load_batches(str(tmp_path))
    assert settings == {"bucket_width": 16}
    assert len(loaded) == len(batches)
    for ((s, ti), to), ((s2, ti2), to2) in zip(batches, loaded):
        np.testing.assert_array_equal(s, s2)
        np.testing.assert_array_equal(ti, ti2)
        np.testing.assert_array_equal(to, to2)
    assert (sources, targets) == (test.source, test.target)
    assert vocab.target.encode(test.target) == small_vocab.target.encode(test.target)
    with pytest.raises(FileNotFoundError, match="batches.npz"):
        throughput.load_batches(str(tmp_path / "elsewhere"))


def test_gpu_batches_names_its_batchings_and_orders_shapes_by_frequency():
    import gpu_batches
    import numpy as np

    assert gpu_batches.parse_batchings("sentences64, tokens4096") == [
        ("sentences64", "sentences", 64),
        ("tokens4096", "tokens", 4096),
    ]
    for bad in ("tokens", "words64", "tokens0", "sentences64,sentences64"):
        with pytest.raises(ValueError, match="--batchings"):
            gpu_batches.parse_batchings(bad)

    def batch(rows, source, target):
        ids = np.ones((rows, target), "int32")
        return (np.ones((rows, source), "int32"), ids), ids

    batches = [batch(8, 5, 6), batch(4, 9, 9), batch(4, 9, 9), batch(8, 5, 6), batch(2, 9, 9), batch(4, 9, 9)]
    assert gpu_batches.shapes_by_frequency(batches) == [((4, 9), (4, 9)), ((8, 5), (8, 6)), ((2, 9), (2, 9))]


@pytest.mark.slow
def test_gpu_batches_smoke_run_prints_every_figure(tmp_path):
    """``gpu_batches.py --smoke``: batches written with ``--save-batches``, then read back and
    trained on under JAX with the compilation cache in ``tmp_path``."""
    import subprocess

    pytest.importorskip("jax")
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "gpu_batches.py")
    batchings = ["sentences64", "tokens128"]
    command = [sys.executable, script, "--smoke", "--batchings", ",".join(batchings)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "MEMNMT_COMPILATION_CACHE": str(tmp_path / "cache")}
    saved = subprocess.run(
        [*command, "--save-batches", str(tmp_path / "batches")], env=env, capture_output=True, text=True, check=True
    )
    assert side_by_side.parse_lines(saved.stdout)["tokens128_saved_batches"] == "3"
    done = subprocess.run(
        [*command, "--load-batches", str(tmp_path / "batches")],
        env={**env, "KERAS_BACKEND": "jax"},
        capture_output=True,
        text=True,
        check=True,
    )
    figures = side_by_side.parse_lines(done.stdout)
    assert figures["backend"] == "jax" and figures["device"] == "cpu"
    assert figures["tokens128_batches_batch_by"] == "tokens"
    for name in batchings:
        for figure in ("pairs_per_s", "target_tokens_per_s", "fraction_of_peak", "compile_s_per_shape"):
            float(figures[f"{name}_{figure}"])
        assert figures[f"{name}_shapes"] == figures[f"{name}_shapes_compiled"] == "1"  # one length bucket
        assert figures[f"{name}_timed_steps"] == "3"
        assert figures[f"{name}_timed_compiles"] == "0"  # every shape compiled before the timed steps
    assert figures["compilation_cache_dir"] == str(tmp_path / "cache")
    assert int(figures["compilation_cache_writes"]) == int(figures["compilation_cache_entries_after"]) > 0


# Analytic matmul FLOPs of one training batch of 14 source and 15 target tokens (vocabularies
# of 40 and 50), per model and options over the model's tiny options: the numbers of the
# per-model count as it stood in ``throughput.py`` before each model declared its own
# (``Seq2Seq.matmul_macs``), one row per branch of that count.
FLOPS = [
    ("rnnsearch", {}, 207108),
    ("rnnsearch", {"feedback_attention": False}, 207108),
    ("cho", {}, 173736),
    ("memdec", {}, 250308),
    ("memdec", {"addressing": "separate"}, 259308),
    ("memdec", {"addressing": "shared_parameters"}, 259308),
    ("memdec", {"memory_dim": 7, "address_units": 3}, 247068),
    ("memdec", {"memory_size": 3, "addressing": "separate"}, 255258),
    ("rmn", {}, 290268),
    ("rmn", {"context_once": "input"}, 282708),
    ("rmn", {"context_once": "output"}, 247068),
    ("rmn", {"memory_dim": 5}, 277668),
    ("rmr", {}, 362268),
    ("rmr", {"context_once": "output"}, 319068),
    ("rmr", {"memory_dim": 5, "context_once": "input"}, 342108),
    ("attentive", {}, 222780),
    ("attentive", {"self_score": "combined", "self_attention_units": 4}, 220980),
    ("attentive", {"score": "concat", "concat_units": 5}, 218580),
    ("attentive", {"bidirectional_bottom": True, "num_layers": 2}, 345180),
    ("attentive", {"score": "dot"}, 214380),
    ("luong", {}, 194580),
    ("luong", {"input_feeding": False}, 169380),
    ("luong", {"score": "general", "num_layers": 2}, 342180),
    ("luong", {"score": "concat", "concat_units": 3}, 197100),
    ("ylstm", {}, 551880),
    ("ylstm", {"encoder_lm_weight": 0.0}, 518280),
    ("ylstm", {"score": "general", "tracker_units": 4}, 411240),
    ("ylstm", {"num_layers": 3, "tracker_layer": 2}, 691080),
    ("transformer", {}, 258720),
    ("transformer", {"num_layers": 3}, 370080),
]


def test_every_library_model_counts_its_matmul_flops():
    """Each model the library registers declares its matmul count (``matmul_macs``), and
    ``throughput.py`` reads it; the Transformer's is its projections, feed-forward networks
    and output layer."""
    import throughput

    from keras_memnmt.models import get_model
    from keras_memnmt.testing.tiny_runs import library_models, tiny_options

    for name in library_models():
        model = get_model(name)(40, 50, **tiny_options(name))
        source, target = model.matmul_macs()
        assert source > 0 and target > 0, name
        assert throughput.train_flops_per_batch(model, 14, 15) == 6 * (14 * source + 15 * target)
    model = get_model("transformer")(40, 50, **tiny_options("transformer"))  # d 8, 2 layers, FFN 16
    per_source = 2 * (4 * 64 + 2 * 8 * 16) + 2 * 2 * 64
    per_target = 2 * (6 * 64 + 2 * 8 * 16) + 8 * 50
    assert throughput.train_flops_per_batch(model, 14, 15) == 6 * (14 * per_source + 15 * per_target)


@pytest.mark.parametrize("name, options, flops", FLOPS, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(FLOPS)])
def test_matmul_counts_are_unchanged(name, options, flops):
    import throughput

    from keras_memnmt.models import get_model
    from keras_memnmt.testing.tiny_runs import tiny_options

    model = get_model(name)(40, 50, **{**tiny_options(name), **options})
    assert throughput.train_flops_per_batch(model, 14, 15) == flops


def test_a_model_without_a_matmul_count_has_no_flops():
    """A model that declares no ``matmul_macs`` (the base's default) is timed without a FLOP rate."""
    import types

    import throughput

    from keras_memnmt.models import Seq2Seq

    assert Seq2Seq.matmul_macs(types.SimpleNamespace()) is None
    assert throughput.train_flops_per_batch(types.SimpleNamespace(matmul_macs=lambda: None), 14, 15) is None


def test_constraints_benchmark_meets_every_phrase_and_prints_each_figure(shared_run, tmp_path, capsys):
    import constraints

    from keras_memnmt.data.synthetic import synthetic_corpus

    corpus = synthetic_corpus(12, seed=5)
    (tmp_path / "src").write_text("".join(s + "\n" for s in corpus.source), encoding="utf-8")
    (tmp_path / "ref").write_text("".join(t + "\n" for t in corpus.target), encoding="utf-8")
    drawn = constraints.draw_constraints(list(corpus.target), 2, seed=1)
    assert all(1 <= len(p) <= 2 for p in drawn) and drawn == constraints.draw_constraints(
        list(corpus.target), 2, seed=1
    )
    for phrases, reference in zip(drawn, corpus.target):
        assert all(f" {p} " in f" {reference} " for p in phrases)
    assert (
        constraints.main(
            [
                "--run",
                shared_run,
                "--source",
                str(tmp_path / "src"),
                "--reference",
                str(tmp_path / "ref"),
                "--beam",
                "3",
            ]
        )
        == 0
    )
    figures = side_by_side.parse_lines(capsys.readouterr().out)
    assert float(figures["c1_coverage"]) == float(figures["c2_coverage"]) == 1.0
    assert int(figures["c2_phrases"]) == sum(map(len, drawn))
    assert {"none_bleu_lc", "c1_sentences_per_second", "c2_coverage_words"} <= set(figures)


@pytest.mark.slow
def test_serve_load_benchmark_prints_each_figure_without_errors(shared_run, tmp_path, capsys):
    import serve_load

    from keras_memnmt.data.synthetic import synthetic_corpus

    (tmp_path / "src").write_text("".join(s + "\n" for s in synthetic_corpus(6, seed=2).source), encoding="utf-8")
    assert (
        serve_load.main(["--run", shared_run, "--source", str(tmp_path / "src"), "--seconds", "1", "--clients", "1,3"])
        == 0
    )
    figures = side_by_side.parse_lines(capsys.readouterr().out)
    for mode in ("batched", "single"):
        for clients in (1, 3):
            assert int(figures[f"{mode}_c{clients}_errors"]) == 0
            assert int(figures[f"{mode}_c{clients}_mismatches"]) == 0
            assert float(figures[f"{mode}_c{clients}_sentences_per_second"]) > 0
    assert {"speedup_c1", "speedup_c3"} <= set(figures)


def test_suite_time_reads_pytests_summary_and_a_childs_peak(tmp_path):
    """suite_time.py's counts come from pytest's last summary line; its peak is the largest
    process of the run's (a child that holds 200 MB is seen through the pytest process)."""
    import suite_time

    assert suite_time.summary_counts("x\n== 3 failed, 12 passed, 2 skipped, 1 error in 9.10s ==\n") == {
        "passed": 12,
        "failed": 3,
        "skipped": 2,
        "errors": 1,
    }
    assert suite_time.summary_counts("no tests ran") == {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    (tmp_path / "test_holds.py").write_text(
        "import subprocess, sys\n\n"
        "def test_child_holds_memory():\n"
        "    subprocess.run([sys.executable, '-c', 'b = bytearray(200 * 2**20); b[::4096] = b\"x\" * len(b[::4096])'],"
        " check=True)\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            os.path.join(os.path.dirname(__file__), "..", "benchmarks", "suite_time.py"),
            "--",
            str(tmp_path / "test_holds.py"),
            "-p",
            "no:xdist",
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    figures = dict(line.split("=", 1) for line in out.splitlines())
    assert figures["suite_passed"] == "1" and figures["suite_returncode"] == "0"
    assert float(figures["suite_peak_rss_mb"]) >= 200


def test_joined_lengths_joins_lines_and_keeps_each_runs_translations(shared_run, tmp_path, capsys):
    import joined_lengths

    from keras_memnmt.data.synthetic import synthetic_corpus

    assert joined_lengths.joined(["a", "b", "c", "d", "e"], 2) == ["a b", "c d"]  # the short remainder is left out
    assert joined_lengths.joined(["a", "b"], 3) == []
    assert joined_lengths.joined(["A b.", "C d.", "E."], 2, ", ", ".") == ["A b, C d."]  # clauses of one sentence
    corpus = synthetic_corpus(9, seed=5)
    (tmp_path / "src").write_text("".join(s + "\n" for s in corpus.source), encoding="utf-8")
    (tmp_path / "ref").write_text("".join(t + "\n" for t in corpus.target), encoding="utf-8")
    out = tmp_path / "joined"
    argv = ["--run", shared_run, "--source", str(tmp_path / "src"), "--reference", str(tmp_path / "ref")]
    assert joined_lengths.main([*argv, "--joins", "1,3", "--beam", "2", "--out", str(out)]) == 0
    figures = side_by_side.parse_lines(capsys.readouterr().out)
    name = os.path.basename(os.path.normpath(shared_run))
    assert figures["join1_sentences"] == "9" and figures["join3_sentences"] == "3"
    for k, count in ((1, 9), (3, 3)):
        assert 0 <= float(figures[f"{name}_join{k}_bleu_lc"]) <= 100
        hyps = (out / f"{name}.join{k}.{'de'}").read_text(encoding="utf-8").splitlines()
        sources = (out / f"join{k}.en").read_text(encoding="utf-8").splitlines()
        assert len(hyps) == len(sources) == count
    assert sources[0] == " ".join(corpus.source[:3])
    with pytest.raises(SystemExit):  # an existing folder is refused, and left as it was
        joined_lengths.main([*argv, "--out", str(out)])
    assert "exists" in capsys.readouterr().err
    # --reuse reads the kept translations (a changed one is scored as it is now), --plot draws them.
    kept = out / f"{name}.join3.de"
    kept.write_text("".join(line + "\n" for line in sources), encoding="utf-8")  # the sources as output
    png = tmp_path / "joined.png"
    assert (
        joined_lengths.main([*argv, "--joins", "1,3", "--beam", "2", "--out", str(out), "--reuse", "--plot", str(png)])
        == 0
    )
    again = side_by_side.parse_lines(capsys.readouterr().out)
    assert again[f"{name}_join1_bleu_lc"] == figures[f"{name}_join1_bleu_lc"]
    assert kept.read_text(encoding="utf-8").splitlines() == sources
    assert float(again[f"{name}_join3_length_ratio"]) == pytest.approx(
        sum(len(s.split()) for s in sources) / sum(len(" ".join(corpus.target[i : i + 3]).split()) for i in (0, 3, 6)),
        abs=1e-3,
    )
    assert float(again[f"{name}_join1_bleu_lc_ci"]) >= 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit):
        joined_lengths.main([*argv, "--out", str(out), "--reuse", "--plot", str(tmp_path / "joined.svg")])
    assert "--plot" in capsys.readouterr().err
