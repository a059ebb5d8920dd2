"""``memnmt results``: tables rendered from runs' records, and the marked tables of Markdown files."""

from __future__ import annotations

import argparse
import os

from keras_memnmt.cli.args import (
    add_search_args,
    search_options,
)


def _results_text(args, base: str = "") -> str:
    """The table of ``memnmt results``; run paths are taken relative to ``base``."""
    from keras_memnmt.rundir.records import check_run_dir
    from keras_memnmt.rundir.tables import results_table, run_summary

    beam, search = search_options(args)
    summaries = []
    for run in args.runs:
        path = os.path.join(base, run)
        if os.path.isdir(path):  # a missing folder: run_summary's own message
            check_run_dir(path)
        summaries.append({**run_summary(path, split=args.split, beam_size=beam, **search), "run": run})
    return results_table(summaries, format=args.format)


def marked_tables(path: str) -> tuple[str, str, int]:
    """A Markdown file's text, the same text with its marked tables rendered again, and their count.

    Each table is marked by the ``memnmt results`` arguments that make it (see
    :func:`keras_memnmt.rundir.tables.update_marked_tables`), with run paths relative to the
    file's folder.
    """
    from keras_memnmt.rundir.tables import update_marked_tables

    parser = argparse.ArgumentParser(prog="memnmt")
    add_parsers(parser.add_subparsers(dest="command", required=True))
    base = os.path.dirname(path)

    def render(argv: list[str]) -> str:
        try:
            args = parser.parse_args(["results", *argv])
        except SystemExit:  # argparse has printed what it rejects
            raise ValueError("the marker's arguments are not those of `memnmt results` (above)") from None
        if args.update:
            raise ValueError("a marked table's command cannot itself use --update")
        return _results_text(args, base)

    with open(path, encoding="utf-8") as f:
        text = f.read()
    new, count = update_marked_tables(text, render, name=path)
    return text, new, count


def cmd_results(args) -> int:
    if args.update:
        if args.runs:
            raise ValueError("give run directories or --update FILE, not both")
        given = [
            flag
            for flag, value, default in (
                ("--format", args.format, "markdown"),
                ("--split", args.split, None),
                ("--beam", args.search_beam, None),
                ("--length-penalty", args.search_length_penalty, None),
                ("--alpha", args.search_alpha, None),
            )
            if value != default
        ]
        if given:
            raise ValueError(f"--update takes each table's options from its marker; remove {given[0]}")
        from keras_memnmt.rundir.outputs import check_output

        for path in args.update:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"--update: no such file: {path}")
            check_output("--update", path)
        updated = [(path, *marked_tables(path)) for path in args.update]  # every table renders before a write
        for path, old, new, count in updated:
            if new != old:
                from keras_memnmt.files import write_text

                write_text(os.path.realpath(path), new)  # a symbolic link stays one: its file is written
            print(f"{path}: {count} marked table{'s' * (count != 1)}, {'updated' if new != old else 'unchanged'}")
        return 0
    if not args.runs:
        raise ValueError("give run directories, or --update FILE")
    print(_results_text(args))
    return 0


def add_parsers(sub) -> None:
    """The ``results`` command."""
    rs = sub.add_parser("results", help="a results table rendered from run directories' records")
    rs.add_argument("runs", nargs="*", metavar="RUN", help="run directories")
    rs.add_argument("--format", choices=("markdown", "json"), default="markdown")
    rs.add_argument(
        "--update",
        nargs="+",
        metavar="FILE",
        help="render again every table these Markdown files mark with "
        "`<!-- memnmt results ARGS -->` ... `<!-- end memnmt results -->` "
        "(run paths relative to the file's folder)",
    )
    rs.add_argument(
        "--split",
        help="the scores stored for this split by `memnmt evaluate` or "
        "`memnmt compare` with the search options below (default: the training's own test)",
    )
    add_search_args(rs)
    rs.set_defaults(func=cmd_results)
