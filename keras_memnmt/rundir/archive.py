"""Archives of runs: a run directory's record and translations, without its weights, in a
folder that can be committed and read anywhere (``memnmt archive``).

An archive is portable: its record names the data folder as ``$MEMNMT_DATA`` and holds no
folder of the machine that made it (the ``cwd`` entries are left out).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from keras_memnmt.files import write_bytes, write_json
from keras_memnmt.rundir.outputs import run_only_files
from keras_memnmt.rundir.records import (
    ARCHIVE_MARK,
    HYPS_DIR,
    RECORD_FILE,
    REQUIRED_CONFIG_FIELDS,
    check_run_dir,
    is_record,
    leads_outside,
    read_json,
)

DATA_DIR = "$MEMNMT_DATA"
# A run's translations of test sets without references (``memnmt translate --output
# RUN/blind/SOURCE_NAME.TGT``, e.g. ``blind/test_2017_flickr.de``): kept in its archive, one
# line per source line, so that they can be scored where the references are.
BLIND_DIR = "blind"
# What :data:`~keras_memnmt.rundir.records.ARCHIVE_MARK` holds.
MARK = {"library": "keras_memnmt", "made_by": "memnmt archive"}


def portable_command(argv: Sequence[str]) -> list[str]:
    """A recorded command line with the folder given to ``--data-dir`` as ``$MEMNMT_DATA``:
    where the corpus lay on the machine that made the run says nothing to a reader, who
    gives their own copy."""
    words, data_dir_next = [], False
    for arg in argv:
        if data_dir_next:
            words.append(DATA_DIR)
        elif arg.startswith("--data-dir="):
            words.append(f"--data-dir={DATA_DIR}")
        else:
            words.append(arg)
        data_dir_next = arg == "--data-dir"
    return words


def _portable(value):
    """``value`` (a record's JSON) with every ``command`` list in it made portable and
    every ``cwd`` (a folder of the machine that made the run) left out."""
    if isinstance(value, dict):
        return {
            k: portable_command(v) if k == "command" and isinstance(v, list) else _portable(v)
            for k, v in value.items()
            if k != "cwd"
        }
    if isinstance(value, list):
        return [_portable(v) for v in value]
    return value


def archive_files(run_dir: str, out_dir: str, overwrite: bool = False) -> list[str]:
    """What :func:`archive_run` would copy from ``run_dir`` to ``out_dir`` (paths relative
    to both), after every check it makes; copies nothing. A file to copy that is a symbolic
    link, or whose real path lies outside ``run_dir``, is a ``ValueError`` naming it."""
    names = check_run_dir(run_dir)
    hyps = os.path.join(run_dir, HYPS_DIR)
    if os.path.isdir(hyps):
        names += [os.path.join(HYPS_DIR, n) for n in sorted(os.listdir(hyps)) if n.endswith(".txt")]
    blind = os.path.join(run_dir, BLIND_DIR)
    if os.path.isdir(blind):
        names += [
            os.path.join(BLIND_DIR, n)
            for n in sorted(os.listdir(blind))
            if not n.startswith(".") and not n.endswith(".partial") and os.path.isfile(os.path.join(blind, n))
        ]
    for name in names:  # an archive holds the run's own files, never what a link leads to
        path = os.path.join(run_dir, name)
        if os.path.islink(path):
            raise ValueError(
                f"{path} is a symbolic link (to {os.readlink(path)}): an archive copies "
                "only the run's own files; replace it with the file, or remove it"
            )
        if leads_outside(run_dir, path):
            raise ValueError(
                f"{path} lies outside {run_dir} (its real path is {os.path.realpath(path)}): "
                "an archive copies only the run's own files"
            )
    if os.path.exists(out_dir):
        if not os.path.isdir(out_dir):
            raise FileExistsError(f"{out_dir} exists and is not a directory")
        if os.path.samefile(out_dir, run_dir):
            raise ValueError(f"{out_dir} is the run directory itself; choose another folder")
        held = run_only_files(out_dir)
        if held:
            raise FileExistsError(f"{out_dir} holds {held[0]}: it is a run, not an archive; choose another folder")
        if os.listdir(out_dir) and not overwrite:
            raise FileExistsError(f"{out_dir} exists and is not empty (pass --overwrite to replace the archive in it)")
        if os.listdir(out_dir):
            why = not_an_archive(out_dir)
            if why:
                raise FileExistsError(
                    f"{out_dir} is not an archive of a run ({why}): --overwrite "
                    "replaces only an earlier archive; choose another --out"
                )
    return names


def write_archive_mark(folder: str) -> None:
    """Writes ``folder/memnmt_archive.json`` (:data:`MARK`): the folder is an archive that
    ``memnmt archive`` made."""
    write_json(os.path.join(folder, ARCHIVE_MARK), MARK)


def has_archive_mark(folder: str) -> bool:
    """Whether ``folder`` holds the ``memnmt_archive.json`` that :func:`write_archive_mark` writes."""
    path = os.path.join(folder, ARCHIVE_MARK)
    return not os.path.islink(path) and read_json(path) == MARK


def not_an_archive(folder: str) -> str | None:
    """Why ``folder``, which holds files, is no archive that :func:`archive_run` wrote
    (``None`` when it is one): an archive holds the mark :func:`archive_run` writes first
    (``memnmt_archive.json``; an archive cut short may hold nothing else), and every one
    of :data:`RECORD_FILES` in it is what its name says. The files' content decides,
    never their names alone."""
    if not has_archive_mark(folder):
        return f"it holds no {ARCHIVE_MARK} that `memnmt archive` wrote"
    record = os.path.join(folder, RECORD_FILE)
    if os.path.lexists(record) and not is_record(record):
        return f"its {RECORD_FILE} is no run record"
    config = os.path.join(folder, "config.json")
    if os.path.lexists(config) and not _json_of(config, dict, REQUIRED_CONFIG_FIELDS):
        return f"its config.json is no run's config (a JSON object with {', '.join(REQUIRED_CONFIG_FIELDS)})"
    for name in ("results.json", "validations.json"):
        path = os.path.join(folder, name)
        if os.path.lexists(path) and not _json_of(path, dict if name == "results.json" else list):
            return f"its {name} is not what a run writes there"
    return None


def _json_of(path: str, kind: type, keys: Sequence[str] = ()) -> bool:
    """Whether the file ``path`` holds JSON of type ``kind`` (a dict: with ``keys``)."""
    value = read_json(path)
    return isinstance(value, kind) and all(k in value for k in keys)


def archive_run(run_dir: str, out_dir: str, overwrite: bool = False) -> list[str]:
    """Copies what a run directory records, without its weights, to ``out_dir``; returns
    the copied paths, relative to both folders.

    Copied: ``config.json``, ``record.json``, ``results.json`` and ``validations.json``
    where present, every ``hyps/*.txt``, and the translations of test sets without
    references in ``blind/`` (:data:`BLIND_DIR`; a ``.partial`` one, unfinished, is left out); the record's command lines name the data
    folder as ``$MEMNMT_DATA`` (:func:`portable_command`). Not copied: models, checkpoints, the
    vocabulary, TensorBoard logs. Written first: ``memnmt_archive.json``
    (:func:`write_archive_mark`). An existing ``out_dir`` that holds anything is refused
    unless ``overwrite``, and even then when it is no earlier archive (:func:`not_an_archive`)
    or holds what only a run holds (a model file, ``vocab/``, ``checkpoints/``, ...: a run,
    not an archive); with ``overwrite`` the archive's files are replaced and the rest of
    the folder is left alone.
    """
    names = archive_files(run_dir, out_dir, overwrite)
    os.makedirs(out_dir, exist_ok=True)
    write_archive_mark(out_dir)  # first: an archive cut short is still one that --overwrite replaces
    for name in names:
        with open(os.path.join(run_dir, name), "rb") as f:
            data = f.read()
        os.makedirs(os.path.dirname(os.path.join(out_dir, name)), exist_ok=True)
        if name == RECORD_FILE:
            write_json(os.path.join(out_dir, name), _portable(json.loads(data)))
        else:
            write_bytes(os.path.join(out_dir, name), data)
    return names
