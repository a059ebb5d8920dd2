"""``memnmt plot``: a picture of what a run's decoder reads and writes for one sentence."""

from __future__ import annotations

from keras_memnmt.cli.args import (
    CHECKPOINT_HELP,
    as_json,
    model_files,
)


def cmd_plot(args) -> int:
    from keras_memnmt.pictures.inspection import inspect_pair
    from keras_memnmt.pictures.plots import figure_size, layout, save_plot
    from keras_memnmt.rundir.loading import load_run
    from keras_memnmt.rundir.outputs import check_output

    if not args.out.endswith(".png"):
        raise ValueError(f"--out must name a .png file, got {args.out!r}")
    check_output(
        "--out", args.out, inputs=[("the model file to plot", f) for f in model_files([(args.model, args.checkpoint)])]
    )
    model, vocab, _ = load_run(args.model, args.checkpoint)
    inspection = inspect_pair(model, vocab, args.source, args.reference)
    save_plot(inspection, args.out)
    width, height = figure_size(inspection)
    print(
        as_json(
            {
                "out": args.out,
                "model": inspection.model_name,
                "source": inspection.source,
                "target": inspection.target,
                "teacher_forced": inspection.teacher_forced,
                "panels": [name for row in layout(inspection) for name in row],
                "inches": [width, height],
            }
        )
    )
    return 0


def add_parsers(sub) -> None:
    """The ``plot`` command."""
    pl = sub.add_parser(
        "plot",
        help="draw what a run's decoder attends to, reads and writes for one "
        "sentence (a PNG: source attention, memory read/write weights, ...)",
    )
    pl.add_argument("--model", required=True, help="run directory written by `memnmt train`")
    pl.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    pl.add_argument("--source", required=True, help="the source sentence")
    pl.add_argument(
        "--reference", help="a target sentence to force the decoder on (default: the model's own greedy translation)"
    )
    pl.add_argument("--out", default="plot.png", help="the PNG file to write (default: plot.png)")
    pl.set_defaults(func=cmd_plot)
