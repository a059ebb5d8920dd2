"""Where a command may write: the one check every `memnmt` command makes on each path it writes.

An output is never a file of a run directory (or of a run's archive), nor the command's
own input, however its path is spelled: paths are compared by their real paths, so a
symbolic link, ``..`` or a trailing slash leads to the same answer; an existing file with
other names (hard links) is refused, as one of them could be a run's file. The check runs
before any work, so a refusal loads no model and writes, truncates or removes nothing.

A folder is a run (or a run's archive, see :func:`keras_memnmt.rundir.archive.archive_run`) when
it holds any of :data:`RUN_MARKS`, or a ``config.json`` together with
``vocab/vocab.json`` (a run stopped before its first validation). Refused:

- a file output whose real path is a name a run owns (:data:`RUN_NAMES`) in a run
  folder, or lies anywhere under a run's own folders (:data:`RUN_FOLDERS`); a new file
  of another name beside a run's files (``run/avg.keras``) is fine;
- a folder output that is a run folder (except the run a training writes, and an
  earlier archive that ``memnmt archive`` replaces) or lies under a run's own folders;
- an output whose real path is an input file of the command, or (a folder output) holds one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from keras_memnmt.rundir.layout import RUN_FILES, WRITTEN_BY_TRAIN
from keras_memnmt.rundir.lock import LOCK_FILE
from keras_memnmt.rundir.records import (
    ARCHIVE_MARK,
    HYPS_DIR,
    MODEL_FILES,
    RECORD_FILE,
    RECORD_FILES,
)

# Any one of these makes a folder a run (or a run's archive).
RUN_MARKS = (RECORD_FILE, *MODEL_FILES, "validations.json", "results.json", ARCHIVE_MARK)
# The folders a run owns: nothing is written anywhere below them.
RUN_FOLDERS = ("checkpoints", "vocab", HYPS_DIR, "tensorboard")
# The names a run (or its archive) owns in its folder.
RUN_NAMES = frozenset({*WRITTEN_BY_TRAIN, *RECORD_FILES, *MODEL_FILES, LOCK_FILE, ARCHIVE_MARK})
# What an archive never holds: a folder with one of these is a run itself.
NOT_IN_ARCHIVES = tuple(sorted(RUN_NAMES - {*RECORD_FILES, HYPS_DIR, ARCHIVE_MARK}))


def run_marks(folder: str) -> list[str]:
    """The names that make ``folder`` a run or a run's archive (empty: neither)."""
    marks = [n for n in RUN_MARKS if os.path.isfile(os.path.join(folder, n))]
    if not marks and all(os.path.isfile(os.path.join(folder, p)) for p in RUN_FILES):
        marks = list(RUN_FILES)
    return marks


def run_only_files(folder: str) -> list[str]:
    """The names in ``folder`` that a run holds and its archive never does (empty for an
    archive, or a folder that is no run)."""
    return [n for n in NOT_IN_ARCHIVES if os.path.lexists(os.path.join(folder, n))]


def check_output(
    flag: str,
    path: str,
    directory: bool = False,
    make_parents: bool = False,
    inputs: Sequence[tuple[str, str]] = (),
    replaces: str | None = None,
) -> None:
    """A one-line ``ValueError`` naming ``flag`` and ``path`` when ``path`` cannot be ``flag``'s
    output (see the module docstring); makes no change.

    Args:
        flag: the command-line flag that gave ``path``, e.g. ``"--output"``.
        path: the file (or with ``directory``, the folder) to be written.
        directory: ``path`` is a folder.
        make_parents: the writer creates missing parent folders (else they must exist).
        inputs: ``(what, path)`` of each file or folder the command reads, ``what`` saying
            which (``"the --input file"``); missing ones are skipped.
        replaces: the kind of folder ``path`` may be: ``"run"`` (the run a training writes;
            whether it may go on is the trainer's decision; never a run's archive) or ``"archive"`` (an earlier
            archive of a run, which ``memnmt archive`` replaces).
    """
    _check_writable(flag, path, directory, make_parents)
    real = os.path.realpath(path)
    if not directory and os.path.isfile(real) and os.stat(real).st_nlink > 1:
        # Another name of the same file (a hard link) could be a run's file or an input,
        # which a write in place would change too.
        raise ValueError(
            f"{flag} {path}: the file has other names (hard links), which writing "
            "it would change too; remove it or choose another path"
        )
    for what, source in inputs:
        if not os.path.exists(source):
            continue
        read = os.path.realpath(source)
        if not directory and read == real:
            named = "" if os.path.abspath(source) == os.path.abspath(path) else f" {source}"
            raise ValueError(
                f"{flag} {path} is {what}{named}: writing it would replace what "
                f"this command reads; choose another {flag}"
            )
        if directory and os.path.commonpath([real, read]) == real:
            raise ValueError(
                f"{flag} {path} is or holds {source} ({what}): it would be replaced; choose another {flag}"
            )
    if directory and os.path.isdir(real):
        marks = run_marks(real)
        only = run_only_files(real) if marks else []
        if marks and (replaces != "run" or not only):  # a training writes into a run, never an archive
            if replaces != "archive" or only:
                kind = "a run directory" if only else "a run's archive"
                raise ValueError(f"{flag} {path}: {kind} (it holds {(only or marks)[0]}); choose another path")
    _check_not_in_a_run(flag, path, real)


def _check_not_in_a_run(flag: str, path: str, real: str) -> None:
    """Refuses ``real`` when it is a name a run owns in a run folder, or lies under a run's
    own folders (checked for every folder above it)."""
    folder = real
    while True:
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent
        inside = os.path.relpath(real, folder).split(os.sep)
        if inside[0] not in RUN_NAMES or not run_marks(folder):
            continue
        run = _as_spelled(path, folder)
        if len(inside) == 1:
            what = "a folder" if inside[0] in RUN_FOLDERS else "a file"
            raise ValueError(f"{flag} {path}: {what} of the run {run}; choose another path")
        if inside[0] in RUN_FOLDERS:
            raise ValueError(f"{flag} {path}: inside {inside[0]}/ of the run {run}; choose another path")


def _as_spelled(path: str, real_folder: str) -> str:
    """``real_folder`` as ``path`` spells it (the part of ``path`` that leads there), else
    ``real_folder`` itself."""
    spelled = path.rstrip(os.sep) or os.sep
    while True:
        if os.path.realpath(spelled or ".") == real_folder:
            return spelled or "."
        parent = os.path.dirname(spelled)
        if parent == spelled:
            return real_folder
        spelled = parent


def _check_writable(flag: str, path: str, directory: bool, make_parents: bool) -> None:
    """A file (or with ``directory``, a folder) whose parent folder exists, unless the writer
    creates it (``make_parents``), and may be written."""
    if directory:
        if os.path.exists(path) and not os.path.isdir(path):
            raise ValueError(f"{flag} {path}: exists and is not a directory")
    elif os.path.isdir(path):
        raise ValueError(f"{flag} {path}: is a directory, expected a file")
    parent = os.path.dirname(os.path.abspath(path))
    existing = parent
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ValueError(f"{flag} {path}: {existing} is not a directory")
    if existing != parent and not make_parents:
        raise ValueError(f"{flag} {path}: the folder {parent} does not exist")
    target = path if os.path.exists(path) else existing
    if not os.access(target, os.W_OK):
        raise ValueError(f"{flag} {path}: {target} is not writable")
