"""Run records: how a run directory was made, and the translations it was scored on.

``memnmt train`` writes ``RUN/record.json`` when it starts and completes it when it
ends; ``memnmt evaluate`` and ``memnmt compare`` add the evaluations they make::

    command, cwd          the command line (``memnmt train RECIPE ...``) and its folder
                          (an archive leaves ``cwd`` out)
    started, finished     ISO dates (``finished`` is null while training runs)
    code                  the library's version, and its git commit and dirty flag in a checkout
    environment           the Keras backend; Python, Keras, TensorFlow, sacreBLEU, NumPy,
                          SentencePiece and the backend library's versions
    machine               CPU model, cores (all and usable), memory, the backend's GPUs
    config                the full TrainConfig
    train_seconds         training time without validation; total_seconds: this invocation's
    validations, steps    how many validations, and the training steps at the last
    best_validation       index, step, epoch (runs that validate per epoch) and val BLEU
    resumes               one entry (command, dates, code, environment, machine) per --resume
    test                  the key of the training's own test evaluation in ``evaluations``
    evaluations           key → split, search settings, the model file and its sha256, the
                          hypotheses file, the scores with their sacreBLEU signatures, and
                          the command, date, code, environment and machine that made them

Hypotheses are written one per line to ``RUN/hyps/{key}.txt``, where the key is
``{split}.beam{K}.{gnmt{alpha}|average|none}`` (plus ``.first{N}`` when only the first
``N`` sentences were translated), e.g. ``hyps/test_2016_flickr.beam5.gnmt0.6.txt``.
:func:`stored_hypotheses` gives them back while the model file is unchanged (same
sha256) and the references are the same, so that a comparison need not translate again.

:func:`keras_memnmt.rundir.archive.archive_run` copies a run's records without its weights (``memnmt archive``): the
JSON files above and ``hyps/``, a few hundred kB that can be kept with the code. ``memnmt
results`` renders an archive like the run itself, and ``memnmt compare`` tests an archive
on the translations its record holds (an archive has no model file, so no sha256 to check:
its stored hypotheses are taken as they are).

How a record names what made it (command, dates, code, environment, machine) is
:mod:`keras_memnmt.rundir.provenance`, whose names are reachable here too.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence

from keras_memnmt.files import sha256_file, write_json, write_text
from keras_memnmt.rundir.provenance import MATMUL_EXTENSIONS as MATMUL_EXTENSIONS
from keras_memnmt.rundir.provenance import _memory_gb as _memory_gb
from keras_memnmt.rundir.provenance import _version as _version
from keras_memnmt.rundir.provenance import code_version as code_version
from keras_memnmt.rundir.provenance import command as command
from keras_memnmt.rundir.provenance import cpu_extensions as cpu_extensions
from keras_memnmt.rundir.provenance import cpu_model as cpu_model
from keras_memnmt.rundir.provenance import environment as environment
from keras_memnmt.rundir.provenance import gpus as gpus
from keras_memnmt.rundir.provenance import machine as machine
from keras_memnmt.rundir.provenance import now, provenance
from keras_memnmt.rundir.provenance import set_command as set_command

RECORD_FILE = "record.json"
HYPS_DIR = "hyps"
# The fields every run's config.json holds (``TrainConfig.to_dict`` writes all of them,
# and run directories made before it had these too): without them a file is no run's config.
REQUIRED_CONFIG_FIELDS = ("model", "seed")
# The record files a run directory of `memnmt train` has from its start on (`results` reads them).
RECORD_FILES = ("config.json", RECORD_FILE, "results.json", "validations.json")
MODEL_FILES = ("best.keras", "model.keras")
# What `memnmt archive` writes in every archive it makes, and nothing else writes: an
# archive's ``--overwrite`` replaces only a folder holding it.
ARCHIVE_MARK = "memnmt_archive.json"
FORMAT = 1


def read_record(run_dir: str) -> dict | None:
    """``RUN/record.json``, or ``None`` for a run made before run records."""
    path = os.path.join(run_dir, RECORD_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def is_record(path: str) -> bool:
    """Whether the file ``path`` is a run record (a JSON object with the record ``format``),
    whatever its name: the content, not the name, tells a record from a user's file."""
    record = read_json(path)
    return isinstance(record, dict) and isinstance(record.get("format"), int)


def write_record(run_dir: str, record: dict) -> None:
    """Writes ``RUN/record.json`` whole (a temporary file renamed into place)."""
    write_json(os.path.join(run_dir, RECORD_FILE), record)


def start_record(run_dir: str, config: dict, resume: bool = False) -> dict:
    """Writes the record of a training that starts now (``train`` calls it).

    A resumed run keeps its record and appends this invocation to ``resumes``; a run
    resumed without a record gets one whose top-level command is the resuming one.
    """
    made = provenance()
    record = read_record(run_dir) if resume else None
    if record is None:
        record = {
            "format": FORMAT,
            "command": made["command"],
            "cwd": made["cwd"],
            "started": made["date"],
            "finished": None,
            "resumed": bool(resume),
            "code": made["code"],
            "environment": made["environment"],
            "machine": made["machine"],
            "config": config,
        }
    else:
        record.setdefault("resumes", []).append(
            {
                "command": made["command"],
                "cwd": made["cwd"],
                "started": made["date"],
                "finished": None,
                "code": made["code"],
                "environment": made["environment"],
                "machine": made["machine"],
            }
        )
        record.update(config=config, finished=None)
    write_record(run_dir, record)
    return record


def finish_record(
    run_dir: str,
    results: dict,
    hypotheses: Sequence[str],
    references: Sequence[str],
    split: str,
    length_penalty: str = "gnmt",
    alpha: float = 0.6,
    limit: int | None = None,
) -> dict:
    """Completes the record when training ends: times, the best validation, and the test
    evaluation (``results``: what ``results.json`` holds; its hypotheses are written to
    ``hyps/``)."""
    key = store_evaluation(
        run_dir,
        split,
        hypotheses,
        references,
        results,
        beam_size=results["beam_size"],
        length_penalty=length_penalty,
        alpha=alpha,
        limit=limit,
        corpus=results.get("corpus"),
    )["key"]
    record = read_record(run_dir) or {"format": FORMAT}
    finished = now()
    if record.get("resumes"):
        record["resumes"][-1]["finished"] = finished
    history = results.get("validations") or []
    record.update(
        finished=finished,
        parameters=results.get("parameters"),
        train_seconds=results.get("train_seconds"),
        total_seconds=results.get("total_seconds"),
        test=key,
        validations=len(history),
        steps=history[-1].get("step") if history else None,
        best_validation=best_validation(history, (record.get("config") or {}).get("validate_every")),
    )
    write_record(run_dir, record)
    return record


def fail_record(run_dir: str, message: str) -> dict:
    """Marks the record of a training that stopped on an error (``failed``: the message);
    ``finished`` stays empty."""
    record = read_record(run_dir) or {"format": FORMAT}
    entry = record["resumes"][-1] if record.get("resumes") else record
    entry.update(failed=message, stopped=now())
    write_record(run_dir, record)
    return record


def best_validation(history: Sequence[dict], validate_every: int | None = None) -> dict | None:
    """The validation that picked ``best.keras`` (the first with the highest val BLEU):
    ``{"index", "step", "epoch", "val_bleu", "train_seconds"}``; ``epoch`` only for a run
    that validates once per epoch (``validate_every`` 0)."""
    if not history:
        return None
    index = max(range(len(history)), key=lambda i: (history[i]["val_bleu"], -i))
    entry = history[index]
    best = {
        "index": index,
        "step": entry.get("step"),
        "val_bleu": entry["val_bleu"],
        "train_seconds": entry.get("train_seconds"),
    }
    if not validate_every:
        best["epoch"] = index + 1
    return best


def hypotheses_key(
    split: str, beam_size: int, length_penalty: str = "gnmt", alpha: float = 0.6, limit: int | None = None
) -> str:
    """``{split}.{settings key}``, e.g. ``test_2016_flickr.beam5.gnmt0.6``
    (:meth:`~keras_memnmt.decoding.settings.SearchSettings.key`), with ``.first{N}`` added
    for the first ``N`` sentences."""
    from keras_memnmt.decoding.settings import SearchSettings

    search = SearchSettings(beam=beam_size, length_penalty=length_penalty, alpha=alpha)
    key = f"{split}.{search.key()}"
    return f"{key}.first{limit}" if limit else key


def sha256_lines(lines: Sequence[str]) -> str:
    """The sha256 of ``lines`` joined one per line (how references are fingerprinted)."""
    return hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()


def run_model_file(run_dir: str) -> str:
    """The model file a run translates with by default: ``best.keras``, else ``model.keras``."""
    for name in MODEL_FILES:
        path = os.path.join(run_dir, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"no best.keras or model.keras in {run_dir}")


SCORE_KEYS = (
    "bleu",
    "bleu_signature",
    "bleu_lowercase",
    "bleu_lowercase_signature",
    "chrf",
    "chrf_signature",
    "ter",
    "ter_signature",
    "sentences",
)


def store_evaluation(
    run_dir: str,
    split: str,
    hypotheses: Sequence[str],
    references: Sequence[str],
    scores: dict,
    beam_size: int,
    length_penalty: str = "gnmt",
    alpha: float = 0.6,
    limit: int | None = None,
    corpus: str | None = None,
    model_file: str | None = None,
) -> dict:
    """Writes ``hypotheses`` to ``RUN/hyps/{key}.txt`` and their ``scores`` (those of
    :func:`~keras_memnmt.evaluation.translation.score`) into the record's ``evaluations``, with what made
    them; returns the entry. ``model_file``: the model translated with (default: the
    run's ``best.keras``, else ``model.keras``)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    key = hypotheses_key(split, beam_size, length_penalty, alpha, limit)
    os.makedirs(os.path.join(run_dir, HYPS_DIR), exist_ok=True)
    relative = os.path.join(HYPS_DIR, f"{key}.txt")
    write_text(os.path.join(run_dir, relative), "".join(h.replace("\n", " ") + "\n" for h in hypotheses))
    model_file = model_file or run_model_file(run_dir)
    made = provenance()
    entry = {
        "key": key,
        "split": split,
        "corpus": corpus,
        "beam_size": beam_size,
        "length_penalty": length_penalty,
        "alpha": alpha,
        "limit": limit,
        "sentences": len(hypotheses),
        "model_file": os.path.basename(model_file),
        "model_sha256": sha256_file(model_file),
        "references_sha256": sha256_lines(references),
        "hypotheses": relative,
        "scores": {k: scores[k] for k in SCORE_KEYS if k in scores},
        **{k: made[k] for k in ("command", "cwd", "date", "code", "environment", "machine")},
    }
    record = read_record(run_dir) or {"format": FORMAT}
    record.setdefault("evaluations", {})[key] = entry
    write_record(run_dir, record)
    return entry


def hypotheses_path(run_dir: str, entry: dict) -> str:
    """The translations file of the record's evaluation ``entry``: its ``hypotheses``, a
    path relative to ``run_dir``. One that is absolute or leads out of ``run_dir`` (by
    ``..`` or a symbolic link) is a ``ValueError`` naming the record and the path: a
    record names a file of its own run or archive, never one elsewhere."""
    relative = entry.get("hypotheses")
    record = os.path.join(run_dir, RECORD_FILE)
    if not isinstance(relative, str) or not relative:
        raise ValueError(
            f"{record}: evaluation {entry.get('key')!r} names no translations file (hypotheses={relative!r})"
        )
    path = os.path.join(run_dir, relative)
    if os.path.isabs(relative) or leads_outside(run_dir, path):
        raise ValueError(
            f"{record}: evaluation {entry.get('key')!r} names translations outside "
            f"{run_dir}: {relative!r}; a record's hypotheses are a file of its own folder"
        )
    return path


def leads_outside(folder: str, path: str) -> bool:
    """Whether the real path of ``path`` lies outside the real path of ``folder`` (by ``..``
    or a symbolic link, of the file or of a folder above it)."""
    root = os.path.realpath(folder)
    return os.path.commonpath([root, os.path.realpath(path)]) != root


def check_hypotheses_paths(run_dir: str) -> None:
    """:func:`hypotheses_path` of every evaluation in the run's record (a ``ValueError`` for
    the first that leads out of ``run_dir``); a run without a record passes."""
    for entry in ((read_record(run_dir) or {}).get("evaluations") or {}).values():
        hypotheses_path(run_dir, entry)


def stored_hypotheses(
    run_dir: str,
    split: str,
    beam_size: int,
    references: Sequence[str],
    length_penalty: str = "gnmt",
    alpha: float = 0.6,
    limit: int | None = None,
) -> tuple[list[str], dict] | None:
    """``(hypotheses, entry)`` stored for these search settings, or ``None``.

    ``references``: the whole split's. Stored hypotheses count while the run's model
    file has the sha256 they were made with and the references they were scored on are
    the same; hypotheses of the whole split also serve a request for its first
    ``limit`` sentences. In a run directory without a model file (an archive, see
    :func:`archive_run`) they count as they are: nothing else could make them again.
    """
    record = read_record(run_dir)
    if not record or not record.get("evaluations"):
        return None
    try:
        model_sha = sha256_file(run_model_file(run_dir))
    except FileNotFoundError:
        model_sha = None  # an archive: no weights to check the translations against
    keys = [hypotheses_key(split, beam_size, length_penalty, alpha, limit)]
    if limit:
        keys.append(hypotheses_key(split, beam_size, length_penalty, alpha))
    for key in keys:
        entry = record["evaluations"].get(key)
        if not entry or (model_sha is not None and entry.get("model_sha256") != model_sha):
            continue
        n = entry["sentences"]
        if entry.get("references_sha256") != sha256_lines(references[:n]):
            continue
        path = hypotheses_path(run_dir, entry)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", newline="") as f:
            hyps = f.read().split("\n")[:-1]
        if len(hyps) != n or (limit and n < min(limit, len(references))):
            continue
        return hyps[:limit] if limit else hyps, entry
    return None


def check_run_dir(run_dir: str) -> list[str]:
    """The :data:`RECORD_FILES` that ``run_dir`` holds; a ``FileNotFoundError`` when it holds
    none of them (or is no folder)."""
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"run directory not found: {run_dir}")
    names = [n for n in RECORD_FILES if os.path.isfile(os.path.join(run_dir, n))]
    if not names:
        raise FileNotFoundError(f"{run_dir} is not a run directory (it has none of {', '.join(RECORD_FILES)})")
    return names


def read_json(path: str):
    """The JSON value in the file ``path``; ``None`` where it cannot be read as JSON."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
