"""``memnmt evaluate`` and ``memnmt compare``: scores of test splits, and systems tested against a baseline."""

from __future__ import annotations

import os
import sys

from keras_memnmt.cli.args import (
    ENSEMBLE_CHECKPOINT_HELP,
    MODEL_HELP,
    SPLIT_HELP,
    EnsembleSpec,
    add_search_args,
    as_json,
    members_of,
    model_files,
    positive_int,
    progress,
    search_options,
)

BY_LENGTH_WORDS = 5  # the bucket width of a bare --by-length


def _remade_by() -> dict:
    """``{"command": [...]}``: the command line that remakes a report, the ``--data-dir``
    folder as ``$MEMNMT_DATA`` as run records name it. An ensemble's scores belong to no run
    record, so the report itself says how to make them again (no date: the same command
    prints the same report)."""
    from keras_memnmt.rundir.archive import portable_command
    from keras_memnmt.rundir.provenance import command

    return {"command": portable_command(command())}


def cmd_evaluate(args) -> int:
    from keras_memnmt.evaluation.splits import (
        DEFAULT_TEST_SPLIT,
        available_test_sets,
        ensemble_label,
        translate_split,
    )
    from keras_memnmt.evaluation.translation import score
    from keras_memnmt.rundir.loading import load_ensemble

    beam, search = search_options(args, run=args.model[0])  # bad options fail before the model is loaded
    note = lambda msg: print(f"memnmt evaluate: {msg}", file=sys.stderr)  # noqa: E731
    given = _given_pairs(args, note)  # bad files fail before the model is loaded too
    members = members_of(args)
    model, vocab, config = load_ensemble(members)  # the first member's config
    models = {ensemble_label(members): (model, vocab)}
    if given:
        sets, skipped = [given], []
    else:
        sets, skipped = available_test_sets(config, args.split or DEFAULT_TEST_SPLIT, args.data_dir, note=note)
    ensemble = {"ensemble": [run if checkpoint is None else f"{run}:{checkpoint}" for run, checkpoint in members]}
    reports = []
    for test, split, name in sets:
        # A single run's own model keeps its translations of a whole split (translate_split).
        # Given files belong to no run: translated every time, stored nowhere.
        got = translate_split(
            members,
            test,
            split,
            beam,
            limit=args.limit,
            corpus_name=name,
            store=not given,
            reuse=not given,
            models=models,
            progress=progress(args),
            **search,
        )
        report = {
            "corpus": name,
            "beam_size": beam,
            **search,
            **(ensemble if len(members) > 1 else {}),
            **(got["scores"] or score(got["hypotheses"], got["references"])),
        }
        if got["file"]:
            report["hypotheses"] = got["file"]
        reports.append(report)
    if args.split == "all":
        print(as_json({"splits": reports, "skipped": skipped, **_remade_by()}))
    else:
        print(as_json({**reports[0], **_remade_by()}))
    return 0


def _given_pairs(args, note):
    """``(corpus, split, name)`` of ``--source`` and ``--reference``, or None without them."""
    from keras_memnmt.data import read_parallel

    if args.source is None and args.reference is None:
        return None
    if args.source is None or args.reference is None:
        raise ValueError(
            "--source and --reference go together: the file to translate and its reference translations, line by line"
        )
    if args.split is not None:
        raise ValueError(
            f"--split {args.split} and --source: give a split of the run's corpus or your own files, not both"
        )
    corpus = read_parallel(args.source, args.reference)
    if corpus.dropped_empty:
        note(f"{corpus.dropped_empty} pairs with an empty side left out")
    return corpus, os.path.basename(args.source), f"{args.source} -> {args.reference}"


def cmd_compare(args) -> int:
    from keras_memnmt.evaluation.significance import (
        compare,
        ensemble_system,
        parse_systems,
        print_table,
    )
    from keras_memnmt.rundir.outputs import check_output

    beam, search = search_options(args)
    systems = parse_systems(
        args.runs, [ensemble_system(s) if isinstance(s, EnsembleSpec) else s for s in args.system or []]
    )
    keep = None
    members = [m for s in systems for m in s.members or []]
    inputs = [("the model file to compare", f) for f in model_files(members)]
    if args.json:
        check_output("--json", args.json, inputs=inputs)
        if members:  # an ensemble's translations beside the JSON: no run stores them
            keep = os.path.splitext(args.json)[0] + ".hyps"
            check_output("--json", keep, directory=True)
    if args.by_length_plot:
        plot = args.by_length_plot
        if not plot.endswith(".png"):
            raise ValueError(f"--by-length-plot must name a .png file, got {plot!r}")
        check_output("--by-length-plot", plot, inputs=inputs)
        if args.json and os.path.realpath(plot) == os.path.realpath(args.json):
            raise ValueError(f"--by-length-plot {plot} is the --json file too; choose another path")
        if args.by_length is None:  # the picture draws the buckets of --by-length's default
            args.by_length = BY_LENGTH_WORDS
    log = (
        (lambda msg: None) if args.quiet else (lambda msg: print(f"memnmt compare: {msg}", file=sys.stderr, flush=True))
    )
    result = compare(
        systems,
        split=args.split,
        beam_size=beam,
        data_dir=args.data_dir,
        limit=args.limit,
        seed=args.seed,
        bootstrap=args.bootstrap,
        trials=args.trials,
        log=log,
        keep=keep,
        length_width=args.by_length,
        **search,
    )
    text = as_json({**result, **_remade_by()})
    if args.json:
        try:
            with open(args.json, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        except OSError as e:  # the comparison is not lost: its JSON goes to stdout
            print(text)
            raise OSError(f"cannot write --json {args.json}: {e.strerror or e}; the JSON went to stdout instead") from e
        print_table(result)
    else:  # the JSON on stdout, the table on stderr
        print_table(result, file=sys.stderr)
        print(text)
    if args.by_length_plot:
        from keras_memnmt.evaluation.length_plot import save_length_plot

        try:
            save_length_plot(result, args.by_length_plot)
        except OSError as e:
            raise OSError(f"cannot write --by-length-plot {args.by_length_plot}: {e.strerror or e}") from e
    return 0


def add_parsers(sub) -> None:
    """The ``evaluate`` and ``compare`` commands."""
    ev = sub.add_parser("evaluate", help="translate a split and print sacreBLEU scores as JSON")
    ev.add_argument("--model", required=True, action="append", help=MODEL_HELP)
    ev.add_argument("--checkpoint", action="append", help=ENSEMBLE_CHECKPOINT_HELP)
    ev.add_argument("--split", help=SPLIT_HELP)
    ev.add_argument(
        "--source",
        metavar="FILE",
        help="translate this file (plain or .gz, one sentence "
        "per line) instead of a split, and score it against --reference; nothing is stored",
    )
    ev.add_argument("--reference", metavar="FILE", help="the reference translations of --source, line by line")
    ev.add_argument("--data-dir")
    add_search_args(ev)
    ev.add_argument("--limit", type=positive_int, help="score only the first N sentences")
    ev.add_argument("--quiet", action="store_true", help="no progress bar (drawn only on a terminal)")
    ev.set_defaults(func=cmd_evaluate)
    _add_compare_parser(sub)


def _add_compare_parser(sub) -> None:
    """The ``compare`` command."""
    cp = sub.add_parser(
        "compare",
        help="test systems against a baseline on a split: sacreBLEU "
        "scores, 95%% confidence intervals, paired bootstrap and approximate "
        "randomization p-values",
    )
    cp.add_argument(
        "runs",
        nargs="*",
        metavar="RUN",
        help="run directories, each a system; the first system (these, then each --system) is the baseline",
    )
    cp.add_argument(
        "--system",
        action="append",
        metavar="NAME=RUN1,RUN2,...",
        help="a system of several runs (seeds): mean and standard deviation over them, "
        "and a test of each run against the baseline's run of the same position "
        "(or against the baseline's single run). Repeatable",
    )
    cp.add_argument(
        "--ensemble",
        action="append",
        dest="system",
        type=EnsembleSpec,
        metavar="NAME=RUN[:CHECKPOINT],...",
        help="a system that is one ensemble of these runs' models (each run's best.keras, "
        "or the CHECKPOINT named: a name in RUN/checkpoints, `best`, or a path to a "
        ".keras file such as `memnmt average` writes), translating "
        "as `memnmt evaluate --model ... --checkpoint ...` does; with --json F.json its "
        "translations are written to F.hyps/NAME.SPLIT.beamK.txt. Repeatable; "
        "systems are taken in the order given",
    )
    cp.add_argument("--split", default="test_2016_flickr", help=SPLIT_HELP)
    cp.add_argument("--data-dir")
    add_search_args(cp)
    cp.add_argument("--limit", type=positive_int, help="compare on the first N sentences only")
    cp.add_argument(
        "--seed",
        type=int,
        default=12345,
        help="seed of the resampling (sacreBLEU's SACREBLEU_SEED; default 12345, its own)",
    )
    cp.add_argument(
        "--bootstrap", type=positive_int, default=1000, metavar="N", help="paired bootstrap resamples (default 1000)"
    )
    cp.add_argument(
        "--trials",
        type=positive_int,
        default=10000,
        metavar="N",
        help="approximate randomization trials (default 10000)",
    )
    cp.add_argument(
        "--by-length",
        nargs="?",
        const=BY_LENGTH_WORDS,
        type=positive_int,
        metavar="WORDS",
        help="also BLEU and chrF of each run by source length, in buckets of WORDS source "
        f"words (default {BY_LENGTH_WORDS}), each with its 95%% confidence interval from a bootstrap "
        "of the bucket's sentences (--seed, --bootstrap), and each system's mean and standard "
        "deviation over its runs: the JSON's by_length and a second table",
    )
    cp.add_argument(
        "--by-length-plot",
        metavar="FILE.png",
        help="draw BLEU against source length to this PNG: a line per system, error bars of "
        "the 95%% confidence intervals, a system of several runs as their mean with a band of "
        f"± their standard deviation (implies --by-length, its buckets {BY_LENGTH_WORDS} words unless given)",
    )
    cp.add_argument(
        "--json",
        metavar="FILE",
        help="write the JSON here and the table to stdout (default: the JSON to stdout, the table to stderr)",
    )
    cp.add_argument("--quiet", action="store_true", help="no progress messages")
    cp.set_defaults(func=cmd_compare)
