"""Files written whole or not at all: a temporary name in the same folder, renamed into place.

A process killed while writing (SIGKILL, a full disk, a power cut after the ``fsync``)
leaves the earlier file untouched: ``os.replace`` is atomic within one file system, so
a reader sees the old version or the new one, never a part. Every file of a run
directory that a later command reads (models, checkpoints, configs, records, the
vocabulary, translations) is written through these helpers. :func:`sha256_file` is the
one file fingerprint (downloads checked against their pinned sums, model files in run
records). :func:`set_writer` turns a process's writes off (the processes of a run on
several hosts other than process 0). A file that is appended to (a run's ``log.csv``) is
first made a file of its own (:func:`own_file`), so that no write reaches another name of it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

_WRITER = [True]


@contextlib.contextmanager
def set_writer(writes: bool) -> Iterator[None]:
    """While the block runs, this process's writes through these helpers happen
    (``writes``) or go nowhere: :func:`replacing` yields ``os.devnull`` and
    :func:`save_with` does not call its ``save``."""
    before = _WRITER[0]
    _WRITER[0] = writes
    try:
        yield
    finally:
        _WRITER[0] = before


def writes() -> bool:
    """Whether this process writes (:func:`set_writer`)."""
    return _WRITER[0]


def _sync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _mode(path: str) -> int:
    """The permissions ``path`` keeps (its own where it exists), else those of a new file
    under the process's umask (``mkstemp``'s temporary is 0600 whatever the umask)."""
    with contextlib.suppress(FileNotFoundError):
        return os.stat(path).st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def replacing(path: str, suffix: str = "") -> Iterator[str]:
    """Yields a temporary path beside ``path`` to write; renamed onto ``path`` when the
    block ends without an exception, removed otherwise.

    ``suffix``: the temporary name's ending, for writers that insist on one (Keras
    saves only to names ending in ``.keras``).
    """
    if not writes():
        yield os.devnull
        return
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp" + suffix, dir=folder)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, _mode(path))
        _sync(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def write_text(path: str, text: str) -> None:
    """Writes ``text`` (UTF-8, newlines as given) to ``path`` whole."""
    with replacing(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def write_bytes(path: str, data: bytes) -> None:
    with replacing(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def write_json(path: str, obj: Any, indent: int = 2) -> None:
    """Writes ``obj`` as JSON (and a final newline) to ``path`` whole."""
    write_text(path, json.dumps(obj, indent=indent) + "\n")


def save_with(save: Callable[[str], Any], path: str) -> None:
    """Calls ``save(tmp)`` for a temporary path with ``path``'s extension, then renames
    it onto ``path`` (``save_with(model.save, "run/best.keras")``)."""
    if not writes():
        return
    with replacing(path, suffix=os.path.splitext(path)[1]) as tmp:
        save(tmp)


def own_file(path: str) -> bool:
    """Makes ``path`` a file of its own before it is written in place (appended to): where it
    has other names (hard links, ``st_nlink > 1``: a run copied with ``cp -al``) or is a
    symbolic link, its content is copied to a new file renamed onto ``path``
    (:func:`replacing`), so that the write leaves the other names' content as it was.
    Returns whether it copied."""
    try:
        shared = os.path.islink(path) or os.stat(path).st_nlink > 1
    except FileNotFoundError:
        return False
    if not shared or not writes():
        return False
    with replacing(path) as tmp:
        shutil.copyfile(path, tmp)
    return True


def sha256_file(path: str) -> str:
    """The hex sha256 of the file at ``path``, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# replacing()'s names: "." + the file's name + "." + mkstemp's 8 random characters + ".tmp" + suffix.
_TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp(\.\w+)?")


def remove_temporaries(folder: str) -> list[str]:
    """Removes the temporary files that :func:`replacing` left in ``folder`` when its process
    was killed mid-write (a run directory's writer calls it when it takes the directory
    over); returns their names."""
    if not os.path.isdir(folder):
        return []
    stale = [n for n in os.listdir(folder) if _TEMPORARY.fullmatch(n) and os.path.isfile(os.path.join(folder, n))]
    for name in stale:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(folder, name))
    return stale
