"""Word alignments from a search's source attention (``memnmt translate --alignments``).

A model attends over source *subwords* at each target *subword*; an alignment links
words. The weights of a source word's subwords are summed (the attention it received),
those of a target word's subwords averaged (each is a distribution over the source), and
the eos column left out, each target word's row renormalized: the word-level attention
``A (target words, source words)``. ``hard``: each target word is linked to its most
attended source word, written as Pharaoh pairs ``i-j`` (source word ``i``, target word
``j``, from 0; sorted), as Marian's ``--alignment hard``, fairseq's
``--print-alignment`` and OpenNMT-py's ``-report_align`` write them. ``soft``: each target
word's row of ``A``, its weights joined by commas and the rows by spaces (Marian's
``--alignment soft``). Words are SentencePiece's: a piece that starts with "▁" starts one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

WORD_START = "\u2581"  # SentencePiece's word boundary mark
ALIGNMENT_KINDS = ("hard", "soft")


def word_index(pieces: Sequence[str]) -> list[int]:
    """The word of each piece, from 0: a piece that starts with "▁" starts a new word (the
    first piece starts word 0 whatever it is)."""
    words, current = [], -1
    for n, piece in enumerate(pieces):
        if n == 0 or piece.startswith(WORD_START):
            current += 1
        words.append(current)
    return words


def word_attention(source_pieces: Sequence[str], target_pieces: Sequence[str], weights: np.ndarray) -> np.ndarray:
    """``(target words, source words)`` attention from the subword attention ``weights``
    ``(>= len(target_pieces), >= len(source_pieces))`` (rows: target steps, columns:
    source positions; later rows and columns, eos and padding, are left out): source
    subwords summed per word, target subwords averaged per word, rows renormalized."""
    weights = np.asarray(weights, np.float64)[: len(target_pieces), : len(source_pieces)]
    src, tgt = word_index(source_pieces), word_index(target_pieces)
    by_source = np.zeros((len(target_pieces), src[-1] + 1))
    np.add.at(by_source.T, src, weights.T)  # sum the columns of each source word
    words = np.zeros((tgt[-1] + 1, src[-1] + 1))
    np.add.at(words, tgt, by_source)
    words /= np.bincount(tgt)[:, None]  # the mean of each target word's rows
    total = words.sum(axis=1, keepdims=True)
    return np.divide(words, total, out=np.full_like(words, 1.0 / words.shape[1]), where=total > 0)


def format_alignment(
    source_pieces: Sequence[str], target_pieces: Sequence[str], weights: np.ndarray, kind: str = "hard"
) -> str:
    """The alignment of one translation as a line: Pharaoh ``i-j`` pairs (``hard``) or
    each target word's weights over the source words (``soft``); empty when either side
    has no piece."""
    if kind not in ALIGNMENT_KINDS:
        raise ValueError(f"alignment kind {kind!r}: expected one of {', '.join(ALIGNMENT_KINDS)}")
    if not source_pieces or not target_pieces:
        return ""
    words = word_attention(source_pieces, target_pieces, weights)
    if kind == "soft":
        return " ".join(",".join(f"{w:.3f}" for w in row) for row in words)
    links = sorted((int(np.argmax(row)), j) for j, row in enumerate(words))
    return " ".join(f"{i}-{j}" for i, j in links)


def parse_pharaoh(line: str) -> list[tuple[int, int]]:
    """``"0-0 2-1"`` -> ``[(0, 0), (2, 1)]``."""
    return [tuple(int(x) for x in pair.split("-")) for pair in line.split()]


def alignment_accuracy(
    predicted: Sequence[Sequence[tuple[int, int]]], gold: Sequence[Sequence[tuple[int, int]]]
) -> float:
    """The share of predicted links ``(i, j)`` that the gold alignment of the same sentence
    holds: with one predicted link per target word (``hard``), the share of target words
    linked to a source word they translate."""
    hits = total = 0
    for links, truth in zip(predicted, gold, strict=True):
        truth = set(map(tuple, truth))
        hits += sum(tuple(link) in truth for link in links)
        total += len(links)
    return hits / total if total else 0.0
