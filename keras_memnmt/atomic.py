"""Writing an output directory all at once: a temporary sibling, then a rename.

A directory written through :func:`atomic_directory` (an export) is either complete at
its destination or the destination is left as it was: the files are written into
``.NAME.partial-XXXX`` next to ``NAME`` and renamed into place only when they are
complete. An exception (an interrupt included) removes the temporary directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator

PARTIAL_MARK = ".partial-"


def check_destination(out_dir: str, overwrite: bool) -> None:
    """A ``FileExistsError`` when ``out_dir`` exists and ``overwrite`` is off."""
    if os.path.lexists(out_dir) and not overwrite:
        raise FileExistsError(
            f"{out_dir} already exists; pass --overwrite (overwrite=True) to replace it, or choose another --out"
        )


@contextlib.contextmanager
def atomic_directory(
    out_dir: str, overwrite: bool = False, check: Callable[[str, bool], None] = check_destination
) -> Iterator[str]:
    """Yields a fresh temporary directory that becomes ``out_dir`` when the block succeeds.

    1. Refuses an existing ``out_dir`` unless ``overwrite`` (``check``, before and after
       the block, so a directory that appeared meanwhile is not replaced silently).
    2. Creates ``.NAME.partial-XXXX`` in ``out_dir``'s parent (the same file system,
       so the final rename is atomic) and yields its path.
    3. On success renames it to ``out_dir``; an existing ``out_dir`` (with
       ``overwrite``) is first moved aside and removed after the rename.
    4. On any exception removes the temporary directory and re-raises.

    Args:
        out_dir: the destination directory.
        overwrite: replace an existing ``out_dir``.
        check: ``check(out_dir, overwrite)`` raises when ``out_dir`` may not be written
            (default :func:`check_destination`).
    """
    out_dir = os.path.abspath(out_dir)
    check(out_dir, overwrite)
    parent, name = os.path.split(out_dir)
    os.makedirs(parent, exist_ok=True)
    partial = tempfile.mkdtemp(prefix=f".{name}{PARTIAL_MARK}", dir=parent)
    try:
        yield partial
        check(out_dir, overwrite)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(partial, 0o777 & ~umask)  # mkdtemp's 0700, as a plain mkdir would have made it
        old = None
        if os.path.lexists(out_dir):
            old = tempfile.mkdtemp(prefix=f".{name}.old-", dir=parent)
            os.rename(out_dir, os.path.join(old, name))
        try:
            os.rename(partial, out_dir)
        except BaseException:
            if old is not None:  # put the earlier directory back
                os.rename(os.path.join(old, name), out_dir)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
