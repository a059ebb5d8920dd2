"""``memnmt score``: the log-probability a run (or an ensemble) gives each given translation."""

from __future__ import annotations

import contextlib
import json
import sys

from keras_memnmt.cli.args import (
    ENSEMBLE_CHECKPOINT_HELP,
    MODEL_HELP,
    members_of,
    model_files,
    positive_int,
    progress,
    write,
)


def cmd_score(args) -> int:
    from keras_memnmt.data import CorpusError, read_lines
    from keras_memnmt.evaluation.scoring import score_pairs
    from keras_memnmt.rundir.loading import load_ensemble

    members = members_of(args)
    if args.output:
        from keras_memnmt.rundir.outputs import check_output

        check_output(
            "--output",
            args.output,
            inputs=[("the --source file", args.source), ("the --target file", args.target)]
            + [("a model file to score with", f) for f in model_files(members)],
        )
    sources, targets = read_lines(args.source), read_lines(args.target)  # bad files before the model
    if len(sources) != len(targets):
        raise CorpusError(
            f"--source {args.source} has {len(sources)} lines but --target {args.target} "
            f"has {len(targets)}: line N of one must translate line N of the other"
        )
    model, vocab, _ = load_ensemble(members)
    entries = score_pairs(
        model, vocab, sources, targets, per_token=args.per_token, batch_size=args.batch_size, progress=progress(args)
    )
    name = f"--output {args.output}" if args.output else "<stdout>"
    try:
        out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    except OSError as e:
        raise OSError(f"cannot write {name}: {e.strerror or e}") from e
    try:
        write(out, "".join(_line(entry, args.format) for entry in entries), name)
    finally:
        if args.output:
            with contextlib.suppress(OSError):
                out.close()
    return 0


def _line(entry: dict, form: str) -> str:
    """One pair's output line: a JSON object, or tab-separated ``line score tokens
    [token scores]`` (an empty source: score ``nan``)."""
    if form == "jsonl":
        rounded = {**entry, "score": None if entry["score"] is None else round(entry["score"], 4)}
        if "token_scores" in entry:
            rounded["token_scores"] = [round(x, 4) for x in entry["token_scores"]]
        return json.dumps(rounded, ensure_ascii=False) + "\n"
    fields = [str(entry["line"]), "nan" if entry["score"] is None else f"{entry['score']:.4f}", str(entry["tokens"])]
    if "token_scores" in entry:
        fields.append(" ".join(f"{x:.4f}" for x in entry["token_scores"]))
    return "\t".join(fields) + "\n"


def add_parsers(sub) -> None:
    """The ``score`` command."""
    sc = sub.add_parser(
        "score",
        help="the log-probability a trained run gives each given translation",
        description="Scores each target line as a translation of its source line: "
        "log P(target | source) under the model (sum of its subwords' "
        "log-probabilities, eos included), one output line per input "
        "pair, in input order. An ensemble (several --model) scores with "
        "its mixed distribution, as it translates.",
    )
    sc.add_argument("--model", required=True, action="append", help=MODEL_HELP)
    sc.add_argument("--checkpoint", action="append", help=ENSEMBLE_CHECKPOINT_HELP)
    sc.add_argument("--source", required=True, help="source sentences, one per line (plain or .gz)")
    sc.add_argument(
        "--target",
        required=True,
        help="their translations to score, line N translating --source's line N (plain or .gz)",
    )
    sc.add_argument(
        "--per-token", action="store_true", help="also each target subword (eos included) and its log-probability"
    )
    sc.add_argument(
        "--format",
        choices=("jsonl", "tsv"),
        default="jsonl",
        help="jsonl (default): one JSON object per pair, {line, score, tokens[, pieces, "
        "token_scores]}; tsv: line, score, tokens[, token scores] separated by tabs "
        "(score null / nan for an empty source line)",
    )
    sc.add_argument("--output", help="output file (default: stdout)")
    sc.add_argument(
        "--batch-size", type=positive_int, default=64, help="sentence pairs per teacher-forced batch (default 64)"
    )
    sc.add_argument("--quiet", action="store_true", help="no progress bar (drawn only on a terminal)")
    sc.set_defaults(func=cmd_score)
