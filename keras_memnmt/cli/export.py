"""``memnmt export``: a TensorFlow SavedModel that translates strings.
"""

from __future__ import annotations

import json
import os
import sys

from keras_memnmt.cli.args import (
    ENSEMBLE_CHECKPOINT_HELP,
    MODEL_HELP,
    add_search_args,
    as_json,
    members_of,
    model_files,
    positive_int,
    search_settings,
)


def cmd_export(args) -> int:
    import signal

    from keras_memnmt.export import export_runs
    from keras_memnmt.export.saved_model import METADATA_FILE
    from keras_memnmt.rundir.outputs import check_output

    settings = search_settings(args, "export")  # bad options fail before the model is loaded
    members = members_of(args)
    read = [("a run to export", run) for run, _ in members]
    check_output("--out", args.out, directory=True, make_parents=True,
                 inputs=read + [("a model file to export", f) for f in model_files(members)])
    # SIGTERM becomes SystemExit, so an interrupted export removes its partial directory.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    export_runs(members, args.out, beam_size=settings.beam_size, max_length=args.max_length,
                n_best=settings.n_best, overwrite=args.overwrite, length_penalty=settings.length_penalty,
                alpha=settings.alpha)
    with open(os.path.join(args.out, METADATA_FILE), encoding="utf-8") as f:
        print(as_json({"out": args.out, **json.load(f)}))
    return 0


def add_parsers(sub) -> None:
    """The ``export`` command."""
    ex = sub.add_parser("export", help="write a TensorFlow SavedModel that translates strings "
                        "(tokenizer, search and detokenizer in one graph)")
    ex.add_argument("--model", required=True, action="append", help=MODEL_HELP)
    ex.add_argument("--checkpoint", action="append", help=ENSEMBLE_CHECKPOINT_HELP)
    ex.add_argument("--out", required=True, help="the SavedModel directory (written beside it, "
                    "then renamed into place)")
    add_search_args(ex, "export")
    ex.add_argument("--max-length", type=positive_int, default=200, metavar="N",
                    help="source sentences are truncated to N subword tokens (default 200, as "
                         "`memnmt translate`)")
    ex.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    ex.set_defaults(func=cmd_export)
