"""``memnmt average`` and ``memnmt archive``: files made from a run's own."""

from __future__ import annotations

import os
import sys

from keras_memnmt.cli.args import (
    as_json,
)


def cmd_average(args) -> int:
    from keras_memnmt.rundir.checkpoints import average_checkpoints, checkpoint_path, last_checkpoints
    from keras_memnmt.rundir.outputs import check_output

    if not args.out.endswith(".keras"):
        raise ValueError(f"--out must name a .keras file, got {args.out!r}")
    if args.last is not None:
        paths = last_checkpoints(args.model, args.last)
    else:
        if not os.path.isdir(args.model):
            raise FileNotFoundError(f"model directory not found: {args.model}")
        paths = [checkpoint_path(args.model, c) for c in args.checkpoint]
    check_output("--out", args.out, make_parents=True, inputs=[("one of the checkpoints to average", p) for p in paths])
    average_checkpoints(paths, args.out)
    print(as_json({"out": args.out, "averaged": paths}))
    return 0


def cmd_archive(args) -> int:
    from keras_memnmt.rundir.archive import archive_files, archive_run
    from keras_memnmt.rundir.outputs import check_output

    if len(args.runs) > 1 or args.into:  # each run into OUT/<its folder's name>
        names = [os.path.basename(os.path.normpath(run)) for run in args.runs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two runs named {twice[0]!r} would share one folder of --out; archive them one at a time")
        targets = [os.path.join(args.out, name) for name in names]
        check_output("--out", args.out, directory=True, make_parents=True, replaces="archive")
    else:
        targets = [args.out]
    for target in targets:  # an earlier archive may be replaced, never a run
        check_output(
            "--out",
            target,
            directory=True,
            make_parents=True,
            replaces="archive",
            inputs=[("a run to archive", run) for run in args.runs],
        )
    for run, target in zip(args.runs, targets):  # every refusal before the first copy
        archive_files(run, target, overwrite=args.overwrite)
    archived = {}
    for run, target in zip(args.runs, targets):
        archived[target] = archive_run(run, target, overwrite=args.overwrite)
        print(f"memnmt archive: {run} -> {target} ({len(archived[target])} files)", file=sys.stderr)
    print(as_json(archived))
    return 0


def add_parsers(sub) -> None:
    """The ``average`` and ``archive`` commands."""
    av = sub.add_parser("average", help="average the weights of a run's checkpoints into one .keras file")
    av.add_argument(
        "--model",
        required=True,
        help="run directory written by `memnmt train` (with --set keep_checkpoints=true for --last)",
    )
    which = av.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--last", type=int, metavar="K", help="the last K kept checkpoints, MODEL/checkpoints/step{N}.keras by N"
    )
    which.add_argument(
        "--checkpoint",
        action="append",
        help="a checkpoint to average, repeatable: a name in MODEL/checkpoints "
        "(e.g. step3199) or a path to a .keras file",
    )
    av.add_argument(
        "--out",
        required=True,
        help="the averaged model, a .keras file (float weights: "
        "the mean; integer state: the newest's; no optimizer state); translate with "
        "--checkpoint OUT",
    )
    av.set_defaults(func=cmd_average)

    ar = sub.add_parser(
        "archive",
        help="copy runs' records and translations, without weights, "
        "to a folder that can be kept with the code (`results` and `compare` read it)",
    )
    ar.add_argument("runs", nargs="+", metavar="RUN", help="run directories written by `memnmt train`")
    ar.add_argument(
        "--out",
        required=True,
        help="the archive folder of one RUN; with several RUNs "
        "(or --into), the folder that receives OUT/<RUN's folder name> for each",
    )
    ar.add_argument("--into", action="store_true", help="one RUN too goes to OUT/<its folder name>")
    ar.add_argument("--overwrite", action="store_true", help="replace an earlier archive in --out")
    ar.set_defaults(func=cmd_archive)
