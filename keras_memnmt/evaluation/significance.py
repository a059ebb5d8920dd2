"""Comparing systems on a test split: scores, confidence intervals and significance.

A *system* is one run, several runs of one recipe (seeds), or an ensemble: the models of
several runs (or checkpoints) translating together (:func:`keras_memnmt.rundir.loading.load_ensemble`).
Each run's default model (``best.keras``) translates the split once: hypotheses stored in
the run's record for the same split and search settings are reused (see
:mod:`keras_memnmt.rundir.records`), new ones are stored. An ensemble translates every time; its
translations belong to no one run, so none is written. Every system is then tested
against the first (the baseline) with sacreBLEU's own paired tests
(:class:`sacrebleu.significance.PairedTest`), for cased BLEU, lowercased BLEU, chrF
and TER:

1. paired bootstrap resampling (Koehn 2004; ``test_type="bs"``, 1000 resamples): each
   run's score, the mean of its resampled scores with a 95% confidence interval
   (half its width, ``ci``), and the p-value of the difference to the baseline;
2. approximate randomization (Riezler & Maxwell 2005; ``test_type="ar"``, 10000
   trials): a second p-value of the same difference.

Both draw from a fixed seed (``SACREBLEU_SEED``, default 12345), so a comparison
gives the same numbers every time. Seeds of a system: with as many baseline runs as
system runs, run i is tested against baseline run i; a single run on either side is
tested against every run of the other side. A system of several runs also reports
the mean and the sample standard deviation (n − 1) of its runs' scores.

By source length (:func:`by_length`): each run's BLEU and chrF on the sentences of each
bucket of source lengths, with a 95% confidence interval from the same bootstrap (seed and
resamples) of that bucket's sentences alone (:func:`bootstrap_interval`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
from collections.abc import Callable, Sequence

from keras_memnmt.evaluation.splits import (  # noqa: F401  (re-exported: the names compare had)
    DEFAULT_TEST_SPLIT,
    SYNTHETIC_SPLIT,
    TEST_SPLITS,
    available_test_sets,
    ensemble_label,
    load_test_set,
    test_splits,
    translate_split,
)

METRICS = ("bleu", "bleu_lowercase", "chrf", "ter")
METRIC_LABELS = {"bleu": "BLEU", "bleu_lowercase": "BLEU lc", "chrf": "chrF", "ter": "TER"}
DEFAULT_SEED = 12345  # sacreBLEU's own default
LENGTH_METRICS = ("bleu", "chrf")  # the scores of each source-length bucket (by_length)


def _metric(name: str):
    import sacrebleu

    return {
        "bleu": lambda: sacrebleu.metrics.BLEU(),
        "bleu_lowercase": lambda: sacrebleu.metrics.BLEU(lowercase=True, tokenize="13a"),
        "chrf": lambda: sacrebleu.metrics.CHRF(),
        "ter": lambda: sacrebleu.metrics.TER(),
    }[name]()


# ----- significance ---------------------------------------------------------------------------


@contextlib.contextmanager
def _sacrebleu_seed(seed: int):
    before = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = before


def _check_seed(seed: int) -> None:
    # sacreBLEU runs the paired tests unseeded when its seed is 0 (``seed if seed else None``).
    if not isinstance(seed, int) or seed <= 0:
        raise ValueError(f"the significance seed must be an int > 0, got {seed!r}")


def _sacrebleu_test(
    named: Sequence[tuple[str, Sequence[str]]],
    references: Sequence[str],
    metric: str,
    test_type: str,
    samples: int,
    seed: int,
) -> tuple[str, list]:
    """One :class:`sacrebleu.significance.PairedTest` of ``named`` ``(name, hypotheses)``, the
    first the baseline, for ``metric``, drawn from ``seed``: its signature and its results
    (:class:`sacrebleu.significance.Result`, baseline first)."""
    from sacrebleu.significance import PairedTest

    with _sacrebleu_seed(seed):
        test = PairedTest(
            [(name, list(h)) for name, h in named],
            {metric: _metric(metric)},
            references=[list(references)],
            test_type=test_type,
            n_samples=samples,
            n_ar_confidence=-1,
        )
        signatures, scores = test()
    (name,) = [k for k in scores if k != "System"]
    return str(signatures[name]), scores[name]


def _interval(result) -> dict:
    return {"score": float(result.score), "mean": float(result.mean), "ci": float(result.ci)}


def paired_tests(
    baseline: Sequence[str],
    systems: Sequence[Sequence[str]],
    references: Sequence[str],
    metric: str,
    seed: int = DEFAULT_SEED,
    bootstrap: int = 1000,
    trials: int = 10000,
) -> dict:
    """sacreBLEU's paired bootstrap and approximate randomization tests of ``systems``
    (hypotheses) against ``baseline`` for one ``metric`` (``bleu``, ``bleu_lowercase``,
    ``chrf``, ``ter``).

    Returns ``{"baseline": {"score", "mean", "ci"}, "systems": [{"score", "mean", "ci",
    "p_bootstrap", "p_ar"}, ...], "signatures": {"bootstrap", "ar"}}``: ``mean`` and
    ``ci`` (half the 95% interval) from the bootstrap resamples, the p-values of the
    difference to the baseline (two-sided).
    """
    _check_seed(seed)
    if bootstrap < 1 or trials < 1:
        raise ValueError(f"bootstrap resamples and AR trials must be >= 1, got {bootstrap} and {trials}")
    named = [("baseline", baseline)] + [(f"system{i}", h) for i, h in enumerate(systems)]
    out: dict = {"signatures": {}}
    for test_type, samples in (("bs", bootstrap), ("ar", trials)):
        signature, (base, *rest) = _sacrebleu_test(named, references, metric, test_type, samples, seed)
        out["signatures"]["bootstrap" if test_type == "bs" else "ar"] = signature
        if test_type == "bs":
            out["baseline"] = _interval(base)
            out["systems"] = [{**_interval(r), "p_bootstrap": float(r.p_value)} for r in rest]
        else:
            for entry, r in zip(out["systems"], rest, strict=True):
                entry["p_ar"] = float(r.p_value)
    return out


def bootstrap_interval(
    hypotheses: Sequence[str],
    references: Sequence[str],
    metric: str,
    seed: int = DEFAULT_SEED,
    bootstrap: int = 1000,
) -> dict:
    """One system's ``{"score", "mean", "ci"}`` for ``metric`` from ``bootstrap`` resamples of
    its sentences drawn from ``seed``: what :func:`paired_tests` reports for each system (for
    as many sentences, sacreBLEU draws the same resamples for a system alone as in a paired
    test), without a second system to test against.
    """
    _check_seed(seed)
    if bootstrap < 1:
        raise ValueError(f"bootstrap resamples must be >= 1, got {bootstrap}")
    _, (result,) = _sacrebleu_test([("system", hypotheses)], references, metric, "bs", bootstrap, seed)
    return _interval(result)


# ----- systems --------------------------------------------------------------------------------


@dataclasses.dataclass
class System:
    """A name and its runs (several: seeds of one recipe); or, with ``members``, one
    ensemble of those ``(run, checkpoint)`` models (``checkpoint`` None: the run's
    best.keras), whose one "run" is its label (:func:`ensemble_label`)."""

    name: str
    runs: list[str]
    members: list[tuple[str, str | None]] | None = None


def parse_member(text: str) -> tuple[str, str | None]:
    """``RUN`` or ``RUN:CHECKPOINT`` as ``(run, checkpoint)``: CHECKPOINT a name in
    RUN/checkpoints, ``best``, or a path to a .keras file (:func:`keras_memnmt.rundir.checkpoints.checkpoint_path`);
    a directory whose own name holds a colon is a run."""
    run, sep, checkpoint = text.rpartition(":")
    if not sep or not run or not checkpoint or os.path.isdir(text):
        return text, None
    return run, checkpoint


def ensemble_system(spec: str) -> System:
    """``NAME=RUN[:CHECKPOINT],RUN[:CHECKPOINT],...`` (``memnmt compare --ensemble``)."""
    name, sep, rest = spec.partition("=")
    members = [parse_member(m) for m in rest.split(",") if m]
    if not sep or not name or not members:
        raise ValueError(f"--ensemble expects NAME=RUN[:CHECKPOINT],RUN[:CHECKPOINT],..., got {spec!r}")
    return System(name, [ensemble_label(members)], members)


def parse_systems(runs: Sequence[str] = (), specs: Sequence[str | System] = ()) -> list[System]:
    """Systems from the command line: each positional run on its own (named by its path),
    then each ``NAME=RUN1,RUN2,...`` (or a :class:`System` made already: an ensemble), in
    their order; the first is the baseline."""
    systems = [System(run, [run]) for run in runs]
    for spec in specs:
        if isinstance(spec, System):
            systems.append(spec)
            continue
        name, sep, rest = spec.partition("=")
        found = [r for r in rest.split(",") if r]
        if not sep or not name or not found:
            raise ValueError(f"--system expects NAME=RUN1,RUN2,..., got {spec!r}")
        systems.append(System(name, found))
    names = [s.name for s in systems]
    if len(systems) < 2:
        raise ValueError(f"compare needs at least two systems (a baseline and one more), got {len(systems)}")
    if len(set(names)) != len(names):
        raise ValueError(f"system names must differ, got {names}")
    return systems


def pairing(baseline_runs: int, system_runs: int) -> list[tuple[int, int]]:
    """``(baseline run, system run)`` index pairs: i with i when both have as many runs,
    else every run against the single run of the other side."""
    if baseline_runs == system_runs:
        return [(i, i) for i in range(system_runs)]
    if baseline_runs == 1:
        return [(0, i) for i in range(system_runs)]
    if system_runs == 1:
        return [(i, 0) for i in range(baseline_runs)]
    raise ValueError(
        f"the baseline has {baseline_runs} runs and a system {system_runs}: give as many "
        "runs (seed i is tested against baseline seed i), or one on either side"
    )


def _mean_std(values: list[float]) -> tuple[float, float | None]:
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def compare_hypotheses(
    systems: Sequence[System],
    hypotheses: dict[str, list[str]],
    references: Sequence[str],
    seed: int = DEFAULT_SEED,
    bootstrap: int = 1000,
    trials: int = 10000,
    metrics: Sequence[str] = METRICS,
) -> dict:
    """The comparison of systems whose runs' ``hypotheses`` (run → lines) are given.

    Returns ``{"baseline", "seed", "bootstrap_resamples", "ar_trials", "signatures",
    "systems"}``; each system: ``{"name", "runs", "mean", "std"}``; each run: ``{"run",
    METRIC: {"score", "mean", "ci"}, "tests"}``, its ``tests`` (none for the baseline's
    runs) ``[{"baseline_run", METRIC: {"difference", "p_bootstrap", "p_ar"}}]``.
    """
    _check_seed(seed)
    every = [r for s in systems for r in s.runs]
    if len(set(every)) != len(every):
        raise ValueError(f"a run may appear once among the systems' runs, got {every}")
    for system in systems[1:]:
        pairing(len(systems[0].runs), len(system.runs))  # a bad pairing fails before any test
    base_runs = systems[0].runs
    report_runs = {run: {"run": run, "tests": []} for s in systems for run in s.runs}
    signatures = {}
    for metric in metrics:
        # One test per baseline run, against every system run paired with it.
        for b, base_run in enumerate(base_runs):
            paired = [
                run
                for s in systems[1:]
                for bi, si in pairing(len(base_runs), len(s.runs))
                if bi == b
                for run in [s.runs[si]]
            ]
            result = paired_tests(
                hypotheses[base_run],
                [hypotheses[r] for r in paired],
                references,
                metric,
                seed=seed,
                bootstrap=bootstrap,
                trials=trials,
            )
            signatures[metric] = result["signatures"]
            report_runs[base_run][metric] = result["baseline"]
            for run, res in zip(paired, result["systems"], strict=True):
                report_runs[run][metric] = {k: res[k] for k in ("score", "mean", "ci")}
                tests = report_runs[run]["tests"]
                test = next((t for t in tests if t["baseline_run"] == base_run), None)
                if test is None:
                    test = {"baseline_run": base_run}
                    tests.append(test)
                test[metric] = {
                    "difference": res["score"] - result["baseline"]["score"],
                    "p_bootstrap": res["p_bootstrap"],
                    "p_ar": res["p_ar"],
                }
    out_systems = []
    for system in systems:
        runs = [report_runs[r] for r in system.runs]
        stats = {m: _mean_std([r[m]["score"] for r in runs]) for m in metrics}
        out_systems.append(
            {
                "name": system.name,
                "runs": runs,
                "mean": {m: stats[m][0] for m in metrics},
                "std": {m: stats[m][1] for m in metrics},
            }
        )
    return {
        "baseline": systems[0].name,
        "seed": seed,
        "bootstrap_resamples": bootstrap,
        "ar_trials": trials,
        "signatures": signatures,
        "systems": out_systems,
    }


def compare(
    systems: Sequence[System],
    split: str = DEFAULT_TEST_SPLIT,
    beam_size: int = 5,
    length_penalty: str = "gnmt",
    alpha: float = 0.6,
    data_dir: str | None = None,
    limit: int | None = None,
    seed: int = DEFAULT_SEED,
    bootstrap: int = 1000,
    trials: int = 10000,
    store: bool = True,
    log: Callable[[str], None] | None = None,
    keep: str | None = None,
    length_width: int | None = None,
) -> dict:
    """Translates (or reuses the stored translations of) every run on ``split`` and compares
    the systems (see :func:`compare_hypotheses`).

    An ensemble belongs to no run, so its translations are stored by no run: with
    ``keep`` (a folder) each ensemble's are written there, ``{name}.{split}.beam{K}.txt``,
    and its result's ``hypotheses`` names that file (else ``None``), so that its scores
    can be computed again from the files as a run's can.

    ``split="all"``: every test split the loader knows, a missing one skipped with a note;
    the result is then ``{"splits": [one result per split], "skipped": [...]}``. Every run
    must have the same test set (language pair, or synthetic corpus and seed).

    ``length_width``: each result gets ``by_length`` too (:func:`by_length`, buckets of that
    many source words, their confidence intervals from ``seed`` and ``bootstrap``).
    """
    from keras_memnmt.rundir import records
    from keras_memnmt.rundir.layout import read_config
    from keras_memnmt.rundir.loading import check_ensemble

    _check_seed(seed)
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be >= 1, got {limit}")
    for system in systems[1:]:
        pairing(len(systems[0].runs), len(system.runs))
    # What translates: each run alone, and each ensemble (its label) of its members.
    ensembles = {s.runs[0]: s.members for s in systems if s.members}
    ensemble_names = {s.runs[0]: s.name for s in systems if s.members}
    labels = list(dict.fromkeys(r for s in systems for r in s.runs))
    runs = list(dict.fromkeys(run for label in labels for run, _ in ensembles.get(label, [(label, None)])))
    for run in runs:
        if not os.path.isdir(run):
            raise FileNotFoundError(f"model directory not found: {run}")
    # Before any system translates: every ensemble's members (their checkpoints and
    # vocabularies), and where each run's record says its stored translations are.
    for members in ensembles.values():
        check_ensemble(members)
    for label in labels:
        if label not in ensembles:
            records.check_hypotheses_paths(label)
    configs = {run: read_config(run) for run in runs}
    first = runs[0]
    for run in runs[1:]:
        if configs[run].corpus != configs[first].corpus:
            raise ValueError(
                f"{first} is a {configs[first].corpus} run and {run} a "
                f"{configs[run].corpus} run: they have no test set in common"
            )
    sets, skipped = available_test_sets(configs[first], split, data_dir, note=log)
    models: dict = {}
    results = []
    for test, split_name, corpus_name in sets:
        for run in runs[1:]:
            own = load_test_set(configs[run], split_name, data_dir)[0]
            if own.target != test.target or own.source != test.source:
                raise ValueError(
                    f"{first} and {run} have different {split_name} test sets "
                    "(another language pair, or another synthetic corpus)"
                )
        hyps, files = {}, {}
        for label in labels:
            got = translate_split(
                ensembles.get(label, [(label, None)]),
                test,
                split_name,
                beam_size,
                length_penalty,
                alpha,
                limit,
                corpus_name=corpus_name,
                store=store,
                models=models,
            )
            if log:
                log(f"{label}: {'reused ' + got['file'] if got['reused'] else 'translated'} ({split_name})")
            hyps[label], files[label], references = got["hypotheses"], got["file"], got["references"]
            if keep is not None and label in ensembles:
                files[label] = _keep_translations(keep, ensemble_names[label], split_name, beam_size, hyps[label])
        result = compare_hypotheses(systems, hyps, references, seed=seed, bootstrap=bootstrap, trials=trials)
        for system in result["systems"]:
            for run in system["runs"]:
                run["hypotheses"] = files[run["run"]]
        if length_width is not None:
            result["by_length"] = by_length(
                test.source[: len(references)],
                references,
                hyps,
                length_width,
                seed=seed,
                bootstrap=bootstrap,
                systems=systems,
            )
        results.append(
            {
                "split": split_name,
                "corpus": corpus_name,
                "sentences": len(references),
                "beam_size": beam_size,
                "length_penalty": length_penalty,
                "alpha": alpha,
                **result,
            }
        )
    if split == "all":
        return {"splits": results, "skipped": skipped}
    return results[0]


def by_length(
    sources: Sequence[str],
    references: Sequence[str],
    hypotheses: dict[str, list[str]],
    width: int = 5,
    seed: int = DEFAULT_SEED,
    bootstrap: int = 1000,
    systems: Sequence[System] = (),
) -> list[dict]:
    """Corpus BLEU and chrF of each run's ``hypotheses`` (run → lines) on the sentences of each
    source length: buckets of ``width`` source words (``1-5``, ``6-10``, ... for 5; an empty
    source is left out), as Bahdanau et al. (2014, Fig. 2) plot BLEU against sentence length.

    Each score has its 95% confidence interval (half its width, ``bleu_ci``, ``chrf_ci``) from
    ``bootstrap`` resamples of the bucket's own sentences drawn from ``seed``
    (:func:`bootstrap_interval`, the resampling :func:`compare_hypotheses` reports for the
    whole split). Each of ``systems`` gets the mean and sample standard deviation (n − 1;
    ``None`` for one run) of its runs' scores in the bucket.

    Returns one ``{"words": "1-5", "sentences": N, "runs": {RUN: {"bleu", "chrf", "bleu_ci",
    "chrf_ci"}}, "systems": {NAME: {"mean": {"bleu", "chrf"}, "std": {"bleu", "chrf"}}}}`` per
    bucket that holds a sentence, shortest first; every number rounded to 2 decimals
    (``"systems"`` only with ``systems``).
    """
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"--by-length: a bucket width in source words >= 1, got {width!r}")
    buckets: dict[int, list[int]] = {}
    for i, source in enumerate(sources):
        words = len(source.split())
        if words:
            buckets.setdefault((words - 1) // width, []).append(i)
    out = []
    for bucket in sorted(buckets):
        rows = buckets[bucket]
        refs = [references[i] for i in rows]
        scores: dict[str, dict] = {}
        for run, lines in hypotheses.items():
            hyps = [lines[i] for i in rows]
            got = {m: bootstrap_interval(hyps, refs, m, seed=seed, bootstrap=bootstrap) for m in LENGTH_METRICS}
            scores[run] = {m: got[m]["score"] for m in LENGTH_METRICS}
            scores[run].update({f"{m}_ci": got[m]["ci"] for m in LENGTH_METRICS})
        entry: dict = {"words": f"{bucket * width + 1}-{(bucket + 1) * width}", "sentences": len(rows), "runs": scores}
        if systems:
            entry["systems"] = {}
            for system in systems:
                stats = {m: _mean_std([scores[r][m] for r in system.runs]) for m in LENGTH_METRICS}
                entry["systems"][system.name] = {
                    "mean": {m: round(stats[m][0], 2) for m in LENGTH_METRICS},
                    "std": {m: None if stats[m][1] is None else round(stats[m][1], 2) for m in LENGTH_METRICS},
                }
        for one in scores.values():
            one.update({k: round(v, 2) for k, v in one.items()})
        out.append(entry)
    return out


def format_length_table(result: dict) -> str:
    """The ``by_length`` part of a comparison as a table: one row per bucket; in the columns,
    BLEU / chrF ± their 95% confidence half-widths of each run, then the mean ± standard
    deviation of each system of several runs."""
    table = result["by_length"]
    runs = list(table[0]["runs"]) if table else []
    several = [s for s in result["systems"] if len(s["runs"]) > 1]
    rows = [["source words", "sentences", *runs, *(f"{s['name']} mean ± std" for s in several)]]
    for b in table:
        cells = [b["words"], str(b["sentences"])]
        for run in runs:
            r = b["runs"][run]
            cells.append(" / ".join(f"{r[m]:.2f} ± {r[m + '_ci']:.2f}" for m in LENGTH_METRICS))
        for system in several:
            stats = b["systems"][system["name"]]
            cells.append(" / ".join(f"{stats['mean'][m]:.2f} ± {stats['std'][m]:.2f}" for m in LENGTH_METRICS))
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    legend = (
        f"BLEU / chrF ± 95% CI half-width (bootstrap of each bucket's sentences, "
        f"{result['bootstrap_resamples']} resamples, seed {result['seed']})"
        + ("; a system of several runs: the mean ± std of its runs' scores" if several else "")
    )
    return "\n".join([f"BLEU / chrF by source length ({result['split']})", legend, *lines])


def _keep_translations(folder: str, name: str, split: str, beam_size: int, hypotheses: Sequence[str]) -> str:
    """Writes an ensemble's translations, one line each, to ``folder`` (made if missing)
    whole or not at all; returns the file's path."""
    from keras_memnmt.files import write_text

    os.makedirs(folder, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_.+" else "_" for c in name)
    path = os.path.join(folder, f"{safe}.{split}.beam{beam_size}.txt")
    write_text(path, "".join(line + "\n" for line in hypotheses))
    return path


# ----- the terminal table ---------------------------------------------------------------------


def _p(value: float) -> str:
    return f"{value:.4f}"


def format_table(result: dict) -> str:
    """A comparison (one split) as an aligned text table: each run's score ± its 95%
    confidence half-width, the p-values (bootstrap / AR) against its baseline run, and
    each multi-run system's mean ± standard deviation."""
    metrics = [m for m in METRICS if m in result["signatures"]]
    head = (
        f"{result['split']} ({result['corpus']}, {result['sentences']} sentences), beam "
        f"{result['beam_size']}, length penalty {result['length_penalty']}"
        + (f" alpha {result['alpha']:g}" if result["length_penalty"] == "gnmt" else "")
    )
    legend = (
        f"score ± 95% CI half-width (paired bootstrap, {result['bootstrap_resamples']} resamples); "
        f"p: paired bootstrap / approximate randomization ({result['ar_trials']} trials) against "
        f"the baseline {result['baseline']!r}; seed {result['seed']}"
    )
    several = len(result["systems"][0]["runs"]) > 1  # name the baseline run of each test
    rows = [["system", "run"] + [c for m in metrics for c in (METRIC_LABELS[m], "p (bs / ar)")]]
    for s, system in enumerate(result["systems"]):
        for r, run in enumerate(system["runs"]):
            for t, test in enumerate(run["tests"] or [None]):
                label = run["run"] if t == 0 and run["run"] != system["name"] else ""
                if test is not None and several:
                    label += f" (vs {test['baseline_run']})"
                row = [system["name"] if r == t == 0 else "", label.strip()]
                for m in metrics:
                    row.append(f"{run[m]['score']:.2f} ± {run[m]['ci']:.2f}" if t == 0 else "")
                    if test is None:
                        row.append("baseline" if s == 0 else "")
                    else:
                        row.append(f"{_p(test[m]['p_bootstrap'])} / {_p(test[m]['p_ar'])}")
                rows.append(row)
        if len(system["runs"]) > 1:
            rows.append(
                ["", f"mean ± std ({len(system['runs'])} runs)"]
                + [c for m in metrics for c in (f"{system['mean'][m]:.2f} ± {system['std'][m]:.2f}", "")]
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([head, legend, *lines])


def print_table(result: dict, file=None) -> None:
    """Prints :func:`format_table` for one comparison, or for each split of ``--split all``
    (to ``file``, default stdout)."""
    file = file or sys.stdout
    for i, one in enumerate(result.get("splits", [result])):
        print(("\n" if i else "") + format_table(one), file=file)
        if "by_length" in one:
            print("\n" + format_length_table(one), file=file)
    for skipped in result.get("skipped", []):
        print(f"skipped {skipped['split']}: {skipped['reason']}", file=file)
