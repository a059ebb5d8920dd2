"""Aligned parallel text from files (plain or ``.gz``).

Every error names the file (and the line where there is one) and nothing is
lost: pairs with an empty side are dropped *and counted*, never silently.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import os
from collections.abc import Sequence
from typing import BinaryIO


class CorpusError(ValueError):
    """Bad corpus input: missing file, misaligned files, invalid UTF-8, empty corpus."""


@dataclasses.dataclass
class ParallelCorpus:
    """Aligned sentence pairs.

    Attributes:
        source: source sentences, one string per pair.
        target: target sentences, aligned with ``source``.
        dropped_empty: number of pairs dropped because one side was empty.
        name: where the pairs came from (for messages).
    """

    source: list[str]
    target: list[str]
    dropped_empty: int = 0
    name: str = ""

    def __len__(self) -> int:
        return len(self.source)

    def take(self, n: int | None) -> ParallelCorpus:
        """The first ``n`` pairs (all of them when ``n`` is None or larger)."""
        if n is None or n >= len(self):
            return self
        if n < 1:
            raise CorpusError(f"take: n must be >= 1, got {n}")
        return dataclasses.replace(self, source=self.source[:n], target=self.target[:n])


def read_lines(path: str | os.PathLike) -> list[str]:
    """Reads a text file (``.gz`` decompressed) as a list of lines, newline stripped.

    Raises:
        CorpusError: the file is missing or not valid UTF-8 (the message gives
            the file and the 1-based line number).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CorpusError(f"file not found: {path}")
    if os.path.isdir(path):
        raise CorpusError(f"expected a file, got a directory: {path}")
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        raise unreadable(path, _whole_lines(opener, path), e) from e
    return decode_lines(raw, path)


def unreadable(path: str, lines: int, error: BaseException) -> CorpusError:
    """The error for a file that cannot be read past its first ``lines`` whole lines (a
    truncated or corrupt ``.gz``, a failing disk): it names the file and that line."""
    where = f" after line {lines}" if lines else ""
    return CorpusError(f"cannot read {path}{where}: {getattr(error, 'strerror', None) or error}")


def _whole_lines(opener, path: str) -> int:
    """How many whole lines of ``path`` can be read before its read error."""
    count = 0
    with contextlib.suppress(OSError, EOFError), opener(path, "rb") as f:
        for _ in f:
            count += 1
    return count


def read_stream_lines(stream: BinaryIO, name: str = "<stdin>") -> list[str]:
    """Reads a binary stream (``sys.stdin.buffer``) to its end as lines, as :func:`read_lines`
    reads a file; ``name`` stands for the stream in messages.

    A text stream is read too (its text encoded back with ``surrogateescape``, which
    restores the bytes Python's own standard input decoding let through).

    Raises:
        CorpusError: the stream cannot be read or is not valid UTF-8 (the message gives
            ``name`` and the 1-based line number).
    """
    try:
        raw = stream.read()
    except OSError as e:
        raise CorpusError(f"cannot read {name}: {e}") from e
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    return decode_lines(raw, name)


def decode_lines(raw: bytes, name: str) -> list[str]:
    """UTF-8 ``raw`` as a list of lines: split at ``\\n``, a ``\\r`` before it stripped, no
    empty line for a final newline.

    Raises:
        CorpusError: invalid UTF-8; the message gives ``name`` (the file, or ``<stdin>``)
            and the 1-based line number.
    """
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for i, line in enumerate(lines, start=1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorpusError(
                f"{name}, line {i}: invalid UTF-8 (byte {e.start}: {line[e.start : e.start + 1]!r})"
            ) from e
        out.append(text.rstrip("\r"))
    return out


def pair_lines(
    source: Sequence[str],
    target: Sequence[str],
    source_name: str = "source",
    target_name: str = "target",
) -> ParallelCorpus:
    """Aligns two lists of lines, drops (and counts) pairs with an empty side.

    Raises:
        CorpusError: the line counts differ, or no pair is left.
    """
    if len(source) != len(target):
        raise CorpusError(
            f"source and target line counts differ: {source_name} has {len(source)} lines, "
            f"{target_name} has {len(target)} lines"
        )
    src, tgt, dropped = [], [], 0
    for s, t in zip(source, target):
        s, t = s.strip(), t.strip()
        if not s or not t:
            dropped += 1
            continue
        src.append(s)
        tgt.append(t)
    if not src:
        raise empty_corpus(source_name, target_name, dropped)
    return ParallelCorpus(src, tgt, dropped, name=f"{source_name} | {target_name}")


def empty_corpus(source_name: str, target_name: str, dropped: int) -> CorpusError:
    """The error for aligned files with no pair of two sides: ``dropped`` pairs had an empty
    side (none: both files are empty)."""
    if not dropped:
        return CorpusError(f"empty corpus: {source_name} and {target_name} are empty")
    return CorpusError(
        f"empty corpus: no sentence pair in {source_name} | {target_name} "
        f"({dropped} pairs with an empty side were dropped)"
    )


def prefix_files(prefix: str, src: str, tgt: str) -> tuple[str, str]:
    """The files of a corpus named by its prefix: ``{prefix}.{src}`` and ``{prefix}.{tgt}``,
    each else its ``.gz`` when only that exists."""

    def one(lang: str) -> str:
        path = f"{prefix}.{lang}"
        return path if os.path.isfile(path) or not os.path.isfile(path + ".gz") else path + ".gz"

    return one(src), one(tgt)


def read_prefix(prefix: str, src: str, tgt: str) -> ParallelCorpus:
    """The pairs of the files :func:`prefix_files` names, read and checked as
    :func:`read_parallel` reads any parallel text."""
    return read_parallel(*prefix_files(prefix, src, tgt))


def read_parallel(source_file: str | os.PathLike, target_file: str | os.PathLike) -> ParallelCorpus:
    """Reads aligned parallel text: line N of ``source_file`` translates line N of ``target_file``.

    Example:
        >>> corpus = read_parallel("train.en.gz", "train.de.gz")  # doctest: +SKIP
        >>> len(corpus), corpus.dropped_empty  # doctest: +SKIP
        (29000, 0)
    """
    src = read_lines(source_file)
    tgt = read_lines(target_file)
    return pair_lines(src, tgt, os.fspath(source_file), os.fspath(target_file))
