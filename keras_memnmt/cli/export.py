"""``memnmt export``: a TensorFlow SavedModel that translates strings, or (``--format
ctranslate2``) a Transformer run as a CTranslate2 model.
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
    if args.format == "ctranslate2":
        return _export_ctranslate2(args, members)
    if args.quantization is not None:
        raise ValueError("--quantization is an option of --format ctranslate2 (the SavedModel keeps float32)")
    read = [("a run to export", run) for run, _ in members]
    check_output(
        "--out",
        args.out,
        directory=True,
        make_parents=True,
        inputs=read + [("a model file to export", f) for f in model_files(members)],
    )
    # SIGTERM becomes SystemExit, so an interrupted export removes its partial directory.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    export_runs(
        members,
        args.out,
        beam_size=settings.beam_size,
        max_length=args.max_length,
        n_best=settings.n_best,
        overwrite=args.overwrite,
        length_penalty=settings.length_penalty,
        alpha=settings.alpha,
    )
    with open(os.path.join(args.out, METADATA_FILE), encoding="utf-8") as f:
        print(as_json({"out": args.out, **json.load(f)}))
    return 0


def _export_ctranslate2(args, members) -> int:
    """``--format ctranslate2``: one run's Transformer; the search is chosen when translating
    (``ctranslate2.Translator.translate_batch``), so no search flag applies."""
    import signal

    from keras_memnmt.export.ctranslate2 import export_ctranslate2
    from keras_memnmt.rundir.outputs import check_output

    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise ValueError(
            "--format ctranslate2 needs the `ctranslate2` package: pip install 'keras-memnmt[ctranslate2]'"
        ) from None
    given = sorted(k[len("search_") :] for k, v in vars(args).items() if k.startswith("search_") and v is not None)
    if given:
        from keras_memnmt.decoding.settings import flag_of

        raise ValueError(
            f"{', '.join(flag_of(n) for n in given)}: --format ctranslate2 stores no search "
            "(choose it in ctranslate2.Translator.translate_batch)"
        )
    if len(members) != 1:
        raise ValueError(
            f"--format ctranslate2 exports one run, got {len(members)} (CTranslate2 has no "
            "ensembles of separate models)"
        )
    ((run, checkpoint),) = members
    check_output(
        "--out",
        args.out,
        directory=True,
        make_parents=True,
        inputs=[("a run to export", run)] + [("a model file to export", f) for f in model_files(members)],
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    metadata = export_ctranslate2(
        run, args.out, checkpoint=checkpoint, quantization=args.quantization or "float32", overwrite=args.overwrite
    )
    print(as_json({"out": args.out, **metadata}))
    return 0


def add_parsers(sub) -> None:
    """The ``export`` command."""
    ex = sub.add_parser(
        "export",
        help="write a TensorFlow SavedModel that translates strings (tokenizer, search and detokenizer in one graph)",
    )
    ex.add_argument("--model", required=True, action="append", help=MODEL_HELP)
    ex.add_argument("--checkpoint", action="append", help=ENSEMBLE_CHECKPOINT_HELP)
    ex.add_argument(
        "--out", required=True, help="the SavedModel directory (written beside it, then renamed into place)"
    )
    add_search_args(ex, "export")
    ex.add_argument(
        "--max-length",
        type=positive_int,
        default=200,
        metavar="N",
        help="source sentences are truncated to N subword tokens (default 200, as `memnmt translate`)",
    )
    ex.add_argument(
        "--format",
        choices=("savedmodel", "ctranslate2"),
        default="savedmodel",
        help="savedmodel (default): strings in, strings out, with this search; ctranslate2: a "
        "Transformer run as a model `ctranslate2.Translator` loads, its SentencePiece models "
        "beside it (needs the `ctranslate2` extra; docs/export.md)",
    )
    ex.add_argument(
        "--quantization",
        choices=("float32", "int8", "int8_float32", "int16"),
        default=None,
        help="--format ctranslate2: the weights' type in model.bin (default float32)",
    )
    ex.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    ex.set_defaults(func=cmd_export)
