"""Results tables rendered from run directories, so that no number is typed by hand.

:func:`run_summary` reads what a run directory holds: its record (``record.json``,
see :mod:`keras_memnmt.rundir.records`) and, for runs made before records, ``results.json``,
``config.json`` and ``validations.json``; a field that none of them holds is ``None``
and named in the summary's ``missing``. :func:`results_table` renders summaries as a
Markdown table (missing fields shown as ``—``) or as JSON. :func:`update_marked_tables`
re-renders the tables that a Markdown file marks with the command that makes them, so the
documentation's tables can be regenerated and checked against the records.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
from collections.abc import Callable, Sequence

from keras_memnmt.rundir.archive import DATA_DIR, portable_command
from keras_memnmt.rundir.records import best_validation, hypotheses_key, read_record

MISSING = "—"
SCORES = ("bleu", "bleu_lowercase", "chrf", "ter")


def _read_json(path: str):
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def command_text(argv: Sequence[str] | None) -> str | None:
    """A recorded command line as a shell command (``memnmt ...`` for the CLI's own entry points).

    The folder given to ``--data-dir`` is shown as ``$MEMNMT_DATA``
    (:func:`keras_memnmt.rundir.archive.portable_command`).

    >>> command_text(["/venv/bin/memnmt", "train", "x", "--data-dir", "/data/m30k", "--out", "a b"])
    "memnmt train x --data-dir $MEMNMT_DATA --out 'a b'"
    """
    if not argv:
        return None
    argv = portable_command(argv)
    if os.path.basename(argv[0]) in ("memnmt", "cli.py", "__main__.py"):
        argv[0] = "memnmt"
    unquoted = (DATA_DIR, f"--data-dir={DATA_DIR}")
    return " ".join(arg if arg in unquoted else shlex.quote(arg) for arg in argv)


def recipe_of(argv: Sequence[str] | None) -> str | None:
    """The recipe a ``memnmt train RECIPE ...`` command line names."""
    argv = list(argv or [])
    if "train" not in argv:
        return None
    rest = argv[argv.index("train") + 1 :]
    return next((a for a in rest if not a.startswith("-")), None)


def run_summary(
    run_dir: str, split: str | None = None, beam_size: int = 5, length_penalty: str = "gnmt", alpha: float = 0.6
) -> dict:
    """One run's row: recipe, seed, best validation, training time, test scores, date, command.

    ``split``: the scores of the evaluation stored for that split and search settings
    (``memnmt evaluate`` and ``memnmt compare`` store them); default: the training's
    own test evaluation.
    """
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"model directory not found: {run_dir}")
    record = read_record(run_dir) or {}
    config = record.get("config") or _read_json(os.path.join(run_dir, "config.json")) or {}
    results = _read_json(os.path.join(run_dir, "results.json")) or {}
    history = _read_json(os.path.join(run_dir, "validations.json")) or results.get("validations") or []
    validate_every = config.get("validate_every")
    best = record.get("best_validation") or best_validation(history, validate_every)
    finished = bool(record.get("finished")) if record.get("command") else bool(results)

    evaluations = record.get("evaluations") or {}
    if split is None:
        entry = evaluations.get(record.get("test") or "")
        scores = (entry or {}).get("scores") or results
        test = (entry or {}).get("split") or results.get("test_split")
        beam = (entry or {}).get("beam_size") or results.get("beam_size")
        limit = (entry or {}).get("limit") if entry else config.get("test_limit") if results else None
    else:
        entry = evaluations.get(hypotheses_key(split, beam_size, length_penalty, alpha))
        scores, test, beam, limit = (entry or {}).get("scores") or {}, split, beam_size, None

    train_seconds = record.get("train_seconds")
    if train_seconds is None:
        train_seconds = results.get("train_seconds")
    if train_seconds is None and history:
        train_seconds = history[-1].get("train_seconds")

    date, date_source = (record.get("finished") or record.get("started")), "record"
    if not date:
        stamped = next(
            (p for p in (os.path.join(run_dir, n) for n in ("results.json", "validations.json")) if os.path.isfile(p)),
            None,
        )
        date, date_source = (
            (
                datetime.datetime.fromtimestamp(os.path.getmtime(stamped)).astimezone().isoformat(timespec="seconds"),
                "file",
            )
            if stamped
            else (None, None)
        )
    commands = [record.get("command")] + [r.get("command") for r in record.get("resumes", [])]
    summary = {
        "run": run_dir,
        "recipe": recipe_of(record.get("command")),
        "model": config.get("model"),
        "seed": config.get("seed"),
        "best_epoch": (best or {}).get("epoch"),
        "best_step": (best or {}).get("step"),
        "best_val_bleu": (best or {}).get("val_bleu"),
        "validations": len(history) if history else record.get("validations"),
        "validate_every": validate_every,
        "steps": history[-1].get("step") if history else record.get("steps"),
        "train_seconds": train_seconds,
        "finished": finished,
        "test_split": test,
        "beam_size": beam,
        "test_limit": limit,
        **{k: scores.get(k) for k in SCORES},
        "bleu_signature": scores.get("bleu_signature"),
        "date": date,
        "date_source": date_source,
        "command": command_text(record.get("command")),
        "resumed_with": [command_text(c) for c in commands[1:] if c],
        "recorded": bool(record.get("command")),
    }
    wanted = ("recipe", "seed", "best_val_bleu", "train_seconds", "test_split", *SCORES, "date", "command")
    summary["missing"] = [k for k in wanted if summary[k] is None]
    return summary


def _number(value, digits: int = 2) -> str:
    return MISSING if value is None else f"{value:.{digits}f}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(s: dict) -> list[str]:
    if s["best_val_bleu"] is None:
        best = MISSING
    elif s["best_epoch"] is not None:
        best = f"epoch {s['best_epoch']} ({s['best_val_bleu']:.2f})"
    else:
        best = f"step {s['best_step']} ({s['best_val_bleu']:.2f})"
    if s["train_seconds"] is None:
        training = MISSING
    else:
        span = (
            f"{s['validations']} epochs, "
            if s["validations"] and not s["validate_every"]
            else f"{s['steps']} steps, "
            if s["steps"]
            else ""
        )
        training = f"{span}{s['train_seconds'] / 60:.1f} min" + ("" if s["finished"] else ", unfinished")
    test = (
        MISSING
        if s["test_split"] is None
        else s["test_split"]
        + (f" (first {s['test_limit']})" if s["test_limit"] else "")
        + (f", beam {s['beam_size']}" if s["beam_size"] else "")
    )
    date = MISSING if s["date"] is None else s["date"][:10] + (" (file)" if s["date_source"] == "file" else "")
    command = (
        MISSING if s["command"] is None else f"`{s['command']}`" + "".join(f"; then `{c}`" for c in s["resumed_with"])
    )
    return [
        f"`{s['run']}`",
        s["recipe"] or MISSING,
        MISSING if s["seed"] is None else str(s["seed"]),
        best,
        training,
        test,
        *(_number(s[k]) for k in SCORES),
        date,
        _cell(command),
    ]


HEADER = [
    "run",
    "recipe",
    "seed",
    "best (val BLEU)",
    "training",
    "test",
    "cased",
    "lc",
    "chrF",
    "TER",
    "date",
    "command",
]


def results_table(summaries: Sequence[dict], format: str = "markdown") -> str:
    """Summaries (:func:`run_summary`) as a Markdown table, or as a JSON list (``format="json"``).

    The Markdown table's notes explain the marks: ``—`` a field no file of the run
    holds, ``(file)`` a date taken from a file's modification time.
    """
    if format == "json":
        return json.dumps(list(summaries), indent=2, ensure_ascii=False)
    if format != "markdown":
        raise ValueError(f"format must be 'markdown' or 'json', got {format!r}")
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(_row(s)) + " |" for s in summaries]
    notes = []
    if any(s["missing"] for s in summaries):
        notes.append(
            f"{MISSING}: not held by the run directory (a run made before run records "
            "holds no command or date; an unfinished run has no test scores)."
        )
    if any(s["date_source"] == "file" for s in summaries):
        notes.append(
            "(file): the modification date of the run's results.json (or validations.json), not a recorded date."
        )
    if summaries and all(s["bleu_signature"] for s in summaries):
        signatures = sorted({s["bleu_signature"] for s in summaries})
        notes.append("cased: sacreBLEU " + ", ".join(f"`{sig}`" for sig in signatures) + "; lc: the same, lowercased.")
    return "\n".join(lines + ([""] + notes if notes else []))


TABLE_START = re.compile(r"^<!-- memnmt results (.*) -->$")
TABLE_END = "<!-- end memnmt results -->"


def update_marked_tables(text: str, render: Callable[[list[str]], str], name: str = "text") -> tuple[str, int]:
    """``text`` with every marked table rendered again, and how many tables it marks.

    A marked table is the lines between ``<!-- memnmt results ARGS -->`` and
    ``<!-- end memnmt results -->``; ``render(ARGS split as a shell would)`` gives its new
    body. ``name`` (the file) and the marker's line number are named in the error for a
    start marker without its end and in a ``ValueError`` or ``FileNotFoundError`` of
    ``render``.
    """
    lines = text.split("\n")
    out, count, i = [], 0, 0
    while i < len(lines):
        out.append(lines[i])
        match = TABLE_START.match(lines[i].strip())
        if not match:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == TABLE_END), None)
        if end is None:
            raise ValueError(
                f"{name} line {i + 1}: a `<!-- memnmt results ... -->` table without its closing `{TABLE_END}`"
            )
        try:
            body = render(shlex.split(match.group(1)))
        except (ValueError, FileNotFoundError) as error:  # which table of which file
            raise type(error)(f"{name} line {i + 1}: {error}") from error
        out += [body, lines[end]]
        count, i = count + 1, end + 1
    return "\n".join(out), count
