"""Text-level translation and sacreBLEU evaluation over any Seq2Seq model.

Sentences are sorted by length, batched and padded to multiples of
``pad_multiple`` (few distinct shapes, so compiled decoding is reused), decoded
with :meth:`Seq2Seq.generate` (or an :class:`~keras_memnmt.models.Ensemble`'s),
detokenized (``SentencePieceVocab.decode``) and put back in input order;
:func:`translate_chunks` does it a chunk of the input at a time.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

import numpy as np

from keras_memnmt.data.vocab import EOS_ID, MAX_INPUT_TOKENS, PAD_ID, SubwordVocab, encode_sources
from keras_memnmt.decoding.modes import Hypothesis
from keras_memnmt.decoding.settings import SearchSettings
from keras_memnmt.evaluation.alignment import format_alignment, parse_pharaoh

# Rows (sentences x beam) per search step by default. A step is a few matmuls over the
# rows; more rows amortize each step's fixed cost, fewer rows waste less on the sentences
# that finished early. test_2016_flickr with a trained RNNsearch, TensorFlow, two threads
# (docs/benchmarks.md): greedy 1.41 s at 64 sentences, 1.05 s at 256, 1.14 s at 512;
# beam 5 4.0 s at 64 sentences, 3.8 s at 128.
SEARCH_ROWS = 640
MAX_BATCH_SENTENCES = 256


def default_batch_size(beam_size: int) -> int:
    """Sentences per batch when none is given: 256 for greedy, ``640 // beam_size`` for beams."""
    return max(1, min(MAX_BATCH_SENTENCES, SEARCH_ROWS // max(beam_size, 1)))


def translate(
    model,
    vocab: SubwordVocab,
    sentences: Sequence[str],
    beam_size: int | None = None,
    batch_size: int | None = None,
    pad_multiple: int = 8,
    progress: bool | None = None,
    **generate_kwargs,
) -> list[str]:
    """Translates ``sentences``; one output per input, empty input → empty output.

    ``beam_size``: 5 by default (1 with ``sampling``); the other search settings by name
    (:class:`~keras_memnmt.decoding.settings.SearchSettings`, as :func:`translate_chunks`).
    ``batch_size``: sentences per batch; None: :func:`default_batch_size` of ``beam_size``.
    ``progress``: a progress bar on stderr (None: only when it is a terminal).
    """
    results: list[str] = []
    for chunk in translate_chunks(
        model,
        vocab,
        sentences,
        beam_size=beam_size,
        batch_size=batch_size,
        pad_multiple=pad_multiple,
        progress=progress,
        **generate_kwargs,
    ):
        results += chunk
    return results


def translate_chunks(
    model,
    vocab: SubwordVocab,
    sentences: Sequence[str],
    chunk_size: int | None = None,
    beam_size: int | None = None,
    batch_size: int | None = None,
    pad_multiple: int = 8,
    progress: bool | None = None,
    alignments: bool = False,
    prefixes: Sequence[str] | None = None,
    word_alignment: str | None = None,
    constraints: Sequence[str] | None = None,
    n_best: int | None = None,
    fill_batches: bool = False,
    samples: int = 1,
    seed: int = 0,
    line_offset: int = 0,
    log_probs: bool = False,
    settings: SearchSettings | None = None,
    **search,
) -> Iterator[list]:
    """Translates ``sentences`` ``chunk_size`` at a time, yielding each chunk's outputs in input order.

    The search is ``settings`` (a :class:`~keras_memnmt.decoding.settings.SearchSettings`),
    or the one that ``beam_size``, ``n_best``, ``samples``, ``seed``, ``batch_size`` and the
    other settings given by name in ``search`` (``length_penalty``, ``alpha``, ``sampling``,
    ``temperature``, ``max_length_a``, ``min_length``, ``mbr``, ...) make; its mode
    (:mod:`keras_memnmt.decoding.modes`) says how the model searches and which candidate
    comes out.

    Each chunk is sorted by length and batched on its own, so a caller can write a
    large file's translations as they finish (``memnmt translate --output``); with
    ``chunk_size=None`` the whole input is one chunk (what :func:`translate` does).
    A batch holds ``batch_size`` sentences (:func:`default_batch_size` of the beam when
    ``None``), fewer where ``max_tokens`` source subwords (padding included) come first.
    The progress bar counts the non-empty sentences of the whole input; it is drawn on
    stderr when ``progress`` is True, never when False, and with None (default) only
    when stderr is a terminal (so logs stay free of it).

    With ``alignments=True`` each output is a pair ``(translation, alignment)``, the
    alignment one ``(target piece, source piece, weight)`` per target subword (eos
    left out): the source subword with the largest attention weight at that step of
    the search (the model must have source attention).

    With ``word_alignment`` (``"hard"`` or ``"soft"``) each output is a pair
    ``(translation, alignment line)`` between source and target words
    (:mod:`keras_memnmt.evaluation.alignment`; the model must have source attention).

    ``prefixes``: one target prefix per sentence (``""``: none); each translation starts
    with its prefix's subwords (:meth:`Generator.generate`'s ``prefix``). A prefix with a
    piece the target vocabulary lacks is a ``ValueError`` naming its line.

    ``constraints``: one line per sentence of target phrases separated by tabs (``""``:
    none); each translation contains every phrase (lexically constrained beam search,
    :mod:`keras_memnmt.decoding.constrained`; ``beam_size`` 2 or more, and no more
    phrases on a line than ``beam_size``). A phrase the target vocabulary cannot spell
    is a ``ValueError`` naming its line.

    ``fill_batches``: every batch is filled up to ``batch_size`` rows (a server that
    translates batches of any size keeps to a few compiled batch sizes this way).

    With ``n_best`` each output is a list of ``n_best`` pairs ``(translation, score)``,
    best first, ``score`` the length-normalized log-probability whatever the beam
    (:func:`score_kinds`; an empty input gets ``("", 0.0)`` pairs, as the SavedModel export
    answers); with ``log_probs``, ``(translation, score, log_prob, finished)`` instead,
    ``log_prob`` the model's log-probability of the translation's subwords, eos included
    (``memnmt score``'s), and ``finished`` whether it ends with eos (every search output
    does: ``decoding.common``'s length rule).

    With ``sampling`` (``"full"``, ``"topk:K"``, ``"topp:P"``, and ``temperature``), each
    sentence gets ``samples`` draws, the ``j``-th of input line ``n`` (counted from 0, plus
    ``line_offset``) keyed by ``(seed, n, j)``: the same seed gives the same samples
    whatever the batching, chunking or backend. Each output is then a list of ``samples``
    translations (a single string when ``samples`` is 1).
    """
    from tqdm.auto import tqdm

    from keras_memnmt.decoding.settings import SearchSettings

    if settings is None:
        given = dict(search, beam=beam_size, n_best=n_best, samples=samples, seed=seed, batch_size=batch_size)
        settings = SearchSettings(**{k: v for k, v in given.items() if v is not None})
    elif search or beam_size is not None or n_best is not None:
        raise ValueError("give the search as settings or by name, not both")
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    size = chunk_size or max(len(sentences), 1)
    mode = settings.for_inputs(
        constraints=constraints is not None and any(c.strip() for c in constraints)
    ).mode_object()
    if alignments and word_alignment:
        raise ValueError("alignments (per subword) and word_alignment: choose one")
    if settings.n_best is not None and (alignments or word_alignment):
        raise ValueError("n_best lists are of plain translations: not with alignments")
    if (alignments or word_alignment) and (mode.rows(settings) > 1 or mode.picks):
        raise ValueError(
            f"alignments are of the search's best translation: not with the {mode.name} mode"
            + (" and several samples" if settings.samples > 1 else "")
        )
    for name, given in (("prefixes", prefixes), ("constraints", constraints)):
        if given is not None and len(given) != len(sentences):
            raise ValueError(f"{len(given)} {name} for {len(sentences)} sentences: give one per sentence")
    job = _Job(settings, mode, pad_multiple, bool(alignments), word_alignment, bool(log_probs))
    total = sum(1 for s in sentences if s.strip())
    # A short last batch is filled up with one-token rows (eos) to the full batch size
    # when the input has more than one batch (or always, with fill_batches): the compiled
    # search then sees one batch size and compiles per width only.
    job.fill = job.batch_size if total > job.batch_size or fill_batches else None
    with tqdm(
        total=total, desc="translating", unit="sent", disable=progress_disabled(progress, total), file=sys.stderr
    ) as bar:
        for start in range(0, len(sentences), size):
            job.prefixes = None if prefixes is None else prefixes[start : start + size]
            job.constraints = None if constraints is None else constraints[start : start + size]
            yield _translate_chunk(model, vocab, sentences[start : start + size], job, bar, line_offset + start)


class _Job:
    """What every chunk of one :func:`translate_chunks` call shares."""

    def __init__(
        self,
        settings: SearchSettings,
        mode,
        pad_multiple: int,
        alignments: bool,
        word_alignment: str | None,
        log_probs: bool,
    ):
        self.settings, self.mode, self.pad_multiple = settings, mode, pad_multiple
        self.alignments, self.word_alignment, self.log_probs = alignments, word_alignment, log_probs
        self.search = mode.search(settings)
        self.copies = mode.rows(settings)
        self.batch_size = settings.batch_size or default_batch_size(self.search["beam_size"])
        self.fill: int | None = None
        self.prefixes = self.constraints = None


def progress_disabled(progress: bool | None, total: int | None = None) -> bool | None:
    """tqdm's ``disable`` for ``progress`` True (drawn), False (not) or None (only on a
    terminal: tqdm's own None); always disabled with nothing to count (``total == 0``)."""
    if progress is False or total == 0:
        return True
    return None if progress is None else False


def _batches(order: list, ids: dict, job: _Job) -> Iterator[list]:
    """``order``'s rows ``(sentence, draw)`` (sorted by length) cut into batches of at most
    ``job.batch_size`` rows and, with ``max_tokens``, of at most that many source subwords
    once padded to the batch's width (a longer sentence still gets a batch of its own)."""
    budget = job.settings.max_tokens
    if budget is None:
        for start in range(0, len(order), job.batch_size):
            yield order[start : start + job.batch_size]
        return
    batch: list = []
    for row in order:
        width = -(-max(len(ids[row[0]]), 1) // job.pad_multiple) * job.pad_multiple
        if batch and (len(batch) == job.batch_size or (len(batch) + 1) * width > budget):
            yield batch
            batch = []
        batch.append(row)
    if batch:
        yield batch


def _translate_chunk(model, vocab: SubwordVocab, sentences: Sequence[str], job: _Job, bar, first_line: int = 0) -> list:
    settings, mode, copies = job.settings, job.mode, job.copies
    listed = settings.n_best is not None
    nothing = ("", 0.0, 0.0, True) if job.log_probs else ("", 0.0)
    empty = (
        ("", [])
        if job.alignments
        else ("", "")
        if job.word_alignment
        else [nothing] * settings.n_best
        if listed
        else ""
    )
    attend = job.alignments or bool(job.word_alignment)
    many = settings.samples > 1  # several samples out, one line each
    results: list = [empty if not many else [""] * copies for _ in sentences]
    todo = [i for i, s in enumerate(sentences) if s.strip()]
    if not todo:
        return results
    ids = dict(zip(todo, encode_sources(vocab, [sentences[i] for i in todo])))
    forced = prefix_ids(vocab, job.prefixes, todo, first_line) if job.prefixes else {}
    beam = job.search["beam_size"]
    wanted = constraint_ids(vocab, job.constraints, todo, first_line, beam) if job.constraints else {}
    candidates: dict[int, list] = {i: [] for i in todo}
    # Each item is one search row: (sentence, draw); without sampling one per sentence.
    order = [(i, j) for i in sorted(todo, key=lambda i: len(ids[i])) for j in range(copies)]
    for chunk in _batches(order, ids, job):
        rows = job.fill
        if rows is None and settings.max_tokens is not None:  # a few compiled batch sizes: powers of 2
            rows = 1 << max(0, len(chunk) - 1).bit_length()
        batch = padded_rows([ids[i] for i, _ in chunk], rows, job.pad_multiple, EOS_ID)
        extra = {}
        if forced:
            extra["prefix"] = padded_rows([forced.get(i, []) for i, _ in chunk], rows, job.pad_multiple, PAD_ID)
        if wanted:
            extra["constraints"] = padded_rows([wanted.get(i, []) for i, _ in chunk], rows, job.pad_multiple, PAD_ID)
        if "sampling" in job.search:
            keys = [draw_key(settings.seed, first_line + i, j) for i, j in chunk]
            extra["keys"] = np.array(keys + [0] * (len(batch) - len(chunk)), np.int32)
        try:
            out = model.generate(batch, return_attention=attend, **job.search, **extra)
        except ValueError as e:
            if attend and "return_attention" in str(e):
                raise ValueError(f"{type(model).__name__} has no source attention to align with") from None
            raise
        tokens = np.asarray(out["tokens"])[: len(chunk)]  # (B, n, L)
        if attend:  # the best hypothesis and its attention (B, n, L, Tx)
            for row, (i, _) in enumerate(chunk):
                text = vocab.target.decode(tokens[row, :1])[0]
                weights = np.asarray(out["attention"])[row, 0]
                results[i] = (
                    (text, _alignment(vocab, ids[i], tokens[row, 0], weights))
                    if job.alignments
                    else (text, _word_alignment(vocab, ids[i], tokens[row, 0], weights, job.word_alignment))
                )
            bar.update(len(chunk))
            continue
        n = tokens.shape[1]
        ended = (tokens == EOS_ID).any(axis=-1)  # (B, n)
        texts = vocab.target.decode(tokens.reshape(len(chunk) * n, -1))
        normalized, log_prob = score_kinds(
            tokens, np.asarray(out["scores"])[: len(chunk)], beam, settings.length_penalty, settings.alpha
        )
        for row, (i, _) in enumerate(chunk):
            candidates[i] += [
                Hypothesis(texts[row * n + k], float(normalized[row, k]), float(log_prob[row, k]), bool(ended[row, k]))
                for k in range(n)
            ]
        bar.update(sum(1 for _, j in chunk if j == copies - 1))  # sentences whose rows are all done
    if attend:
        return results
    for i, found in candidates.items():
        chosen = mode.choose(found, settings)
        if listed:
            results[i] = [
                (h.text, h.score) + ((h.log_prob, h.finished) if job.log_probs else ())
                for h in chosen[: settings.n_best]
            ]
        elif many:
            results[i] = [h.text for h in chosen]
        else:
            results[i] = chosen[0].text
    return results


def hypothesis_lengths(tokens: np.ndarray) -> np.ndarray:
    """``|Y|`` of each hypothesis of ``tokens`` ``(..., L)``: its tokens up to and including
    eos (all its non-pad tokens when it has no eos)."""
    is_eos = tokens == EOS_ID
    ended = is_eos.any(axis=-1)
    through_eos = np.argmax(is_eos, axis=-1) + 1
    return np.where(ended, through_eos, (tokens != PAD_ID).sum(axis=-1))


def score_kinds(
    tokens: np.ndarray, scores: np.ndarray, beam_size: int, length_penalty: str = "gnmt", alpha: float = 0.6
) -> tuple[np.ndarray, np.ndarray]:
    """``(normalized, log_prob)`` of hypotheses ``tokens`` ``(B, n, L)`` whose search gave
    ``scores`` ``(B, n)``: the two kinds of score a translation has.

    * ``log_prob``: the model's ``log P(Y | X)``, eos included (what ``memnmt score``
      computes for the same subwords); for a hypothesis that the length bound cut before
      eos, the log-probability of its subwords alone;
    * ``normalized``: ``log_prob / lp(|Y|)`` with the search's length penalty
      (``decoding.common.length_penalty``): what beam search ranks by.

    A beam search returns ``normalized`` and a greedy one (``beam_size`` 1, sampling
    included) ``log_prob``; the other is derived from ``|Y|`` here, so every front end
    reports both under their own names whatever the beam.
    """
    from keras_memnmt.decoding.common import length_penalty as divisor

    lp = np.asarray(divisor(hypothesis_lengths(tokens), length_penalty, alpha), np.float64)
    scores = np.asarray(scores, np.float64)
    if beam_size == 1:
        return scores / lp, scores
    return scores, scores * lp


def padded_rows(rows: list[list[int]], height: int | None, pad_multiple: int, filler: int) -> np.ndarray:
    """``rows`` as an int32 array, its width padded up to a multiple of ``pad_multiple``
    (at least one column) and, with ``height``, filled up to that many rows of one
    ``filler`` token (a short last batch keeps the compiled batch size)."""
    width = max(1, -(-max(len(r) for r in rows) // pad_multiple) * pad_multiple)
    batch = np.full((height or len(rows), width), PAD_ID, np.int32)
    batch[len(rows) :, 0] = filler
    for row, ids in enumerate(rows):
        batch[row, : len(ids)] = ids
    return batch


# What one sentence may ask of the search, checked before any search runs. The source is
# cut at MAX_INPUT_TOKENS (a cut source is still a sentence to translate); a prefix or a
# constraint over its bound is refused instead, since a cut one asks for another output.
MAX_PREFIX_TOKENS = MAX_INPUT_TOKENS
MAX_CONSTRAINT_TOKENS = 100  # subwords of all the phrases of one sentence
# The constrained search ranks each sentence's beam x (constraint tokens + 1) candidates
# against each other at every step (keras_memnmt.decoding.constrained), so its time grows
# with the square of that count: one sentence at beam 16 with 64 constraint tokens (1,040
# candidates) took 1.1 s on a tiny model, at beam 32 5.8 s, at beam 64 59 s (TensorFlow,
# 2 CPU threads).
MAX_CONSTRAINT_CANDIDATES = 1024


def prefix_ids(vocab: SubwordVocab, prefixes: Sequence[str], todo: list[int], first_line: int) -> dict:
    """The target ids of each non-empty prefix of the sentences ``todo``; a piece the
    vocabulary lacks (SentencePiece's unknown id), or more than ``MAX_PREFIX_TOKENS``
    subwords, is a ``ValueError`` naming its line."""
    from keras_memnmt.data.vocab import UNK_ID

    given = [i for i in todo if prefixes[i].strip()]
    out = {}
    for i, ids in zip(given, vocab.target.encode([prefixes[i].strip() for i in given])):
        if UNK_ID in ids:
            raise ValueError(
                f"prefix line {first_line + i + 1} ({_shown(prefixes[i])}) has a piece the target "
                "vocabulary cannot spell"
            )
        if len(ids) > MAX_PREFIX_TOKENS:
            raise ValueError(
                f"prefix line {first_line + i + 1} has {len(ids)} subwords, more than the "
                f"{MAX_PREFIX_TOKENS} a prefix may have"
            )
        out[i] = ids
    return out


def constraint_ids(
    vocab: SubwordVocab, constraints: Sequence[str], todo: list[int], first_line: int, beam_size: int
) -> dict:
    """The constraint row of each sentence of ``todo`` with constraints: its phrases' target
    ids, separated by ``SEPARATOR``. A phrase the vocabulary cannot spell, more phrases
    than ``beam_size``, more than ``MAX_CONSTRAINT_TOKENS`` subwords, or a search of more
    than ``MAX_CONSTRAINT_CANDIDATES`` candidates (``beam_size`` x (subwords + 1)) is a
    ``ValueError`` naming its line."""
    from keras_memnmt.data.vocab import UNK_ID
    from keras_memnmt.decoding.constrained import SEPARATOR

    out = {}
    for i in todo:
        phrases = [p.strip() for p in constraints[i].split("\t") if p.strip()]
        if not phrases:
            continue
        line = first_line + i + 1
        if len(phrases) > beam_size:
            raise ValueError(
                f"constraints line {line} has {len(phrases)} phrases, more than the beam "
                f"({beam_size}): a beam cannot keep a place for each"
            )
        row: list[int] = []
        for phrase, ids in zip(phrases, vocab.target.encode(phrases), strict=True):
            if UNK_ID in ids or not ids:
                raise ValueError(
                    f"constraints line {line}: {_shown(phrase)} has a piece the target vocabulary cannot spell"
                )
            row += ([SEPARATOR] if row else []) + list(ids)
        tokens = len(row) - len(phrases) + 1
        if tokens > MAX_CONSTRAINT_TOKENS:
            raise ValueError(
                f"constraints line {line} has {tokens} subwords, more than the "
                f"{MAX_CONSTRAINT_TOKENS} the phrases of a sentence may have"
            )
        if beam_size * (tokens + 1) > MAX_CONSTRAINT_CANDIDATES:
            raise ValueError(
                f"constraints line {line}: beam {beam_size} x ({tokens} subwords + 1) = "
                f"{beam_size * (tokens + 1)} candidates per step, more than the "
                f"{MAX_CONSTRAINT_CANDIDATES} a constrained search weighs; use a smaller beam "
                f"(at most {MAX_CONSTRAINT_CANDIDATES // (tokens + 1)}) or fewer constraints"
            )
        out[i] = row
    return out


def check_search_inputs(
    vocab: SubwordVocab,
    beam_size: int,
    prefixes: Sequence[str] | None = None,
    constraints: Sequence[str] | None = None,
    first_line: int = 0,
) -> None:
    """Every prefix and constraint line checked as :func:`translate_chunks` would check it
    (:func:`prefix_ids`, :func:`constraint_ids`), all at once: a caller learns of a bad line
    before anything is translated, not when its chunk comes."""
    for given, check in ((prefixes, prefix_ids), (constraints, constraint_ids)):
        if given:
            todo = list(range(len(given)))
            check(vocab, given, todo, first_line, *((beam_size,) if check is constraint_ids else ()))


def _shown(text: str, limit: int = 40) -> str:
    """``text`` quoted for an error message, cut to ``limit`` characters."""
    text = text.strip()
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def draw_key(seed: int, line: int, sample: int) -> int:
    """The sampling key of draw ``sample`` of input line ``line`` (from 0) under ``seed``:
    a non-negative int32 (a hash of the three, so no two draws share one in practice)
    that the search's noise mixes with the step and the token (``decoding.common.gumbel_noise``)."""
    import hashlib

    digest = hashlib.blake2b(f"{seed}:{line}:{sample}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF


def _alignment(
    vocab: SubwordVocab, source_ids: list[int], tokens: np.ndarray, weights: np.ndarray
) -> list[tuple[str, str, float]]:
    """``(target piece, source piece, weight)`` per target subword before eos, from the
    ``(L, Tx)`` attention: the source position with the largest weight."""
    pairs = []
    for step, token in enumerate(tokens.tolist()):
        if token in (EOS_ID, PAD_ID):
            break
        row = weights[step, : len(source_ids)]
        j = int(np.argmax(row))
        pairs.append((vocab.target.id_to_piece(token), vocab.source.id_to_piece(source_ids[j]), float(row[j])))
    return pairs


def _word_alignment(
    vocab: SubwordVocab, source_ids: list[int], tokens: np.ndarray, weights: np.ndarray, kind: str
) -> str:
    """The word alignment line of one translation (``tokens``, eos and pad left out) of
    ``source_ids`` (eos last, left out) from its ``(L, Tx)`` attention."""
    target = []
    for token in tokens.tolist():
        if token in (EOS_ID, PAD_ID):
            break
        target.append(vocab.target.id_to_piece(token))
    source = [vocab.source.id_to_piece(i) for i in source_ids[:-1]]
    return format_alignment(source, target, weights, kind)


def reference_alignments(
    model, vocab, sources: Sequence[str], references: Sequence[str], kind: str = "hard", batch_size: int | None = None
) -> list[str]:
    """The word alignment the model's attention gives each ``(source, reference)`` pair:
    the reference is forced as a target prefix (greedy search; what the model would
    attend to while writing that very translation), and the links of the words after it
    are left out. One line per pair (``format_alignment``)."""
    lines = []
    for chunk in translate_chunks(
        model,
        vocab,
        sources,
        beam_size=1,
        batch_size=batch_size,
        progress=False,
        prefixes=references,
        word_alignment=kind,
    ):
        lines += [links for _, links in chunk]
    out = []
    for line, reference in zip(lines, references, strict=True):
        words = len(reference.split())
        if kind == "hard":
            out.append(" ".join(f"{i}-{j}" for i, j in parse_pharaoh(line) if j < words))
        else:
            out.append(" ".join(line.split()[:words]))
    return out


def score(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """sacreBLEU corpus BLEU, lowercased 13a BLEU, chrF and TER, each with its signature."""
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    bleu = sacrebleu.metrics.BLEU()
    bleu_lc = sacrebleu.metrics.BLEU(lowercase=True, tokenize="13a")
    chrf = sacrebleu.metrics.CHRF()
    ter = sacrebleu.metrics.TER()
    refs = [list(references)]
    b = bleu.corpus_score(hypotheses, refs)
    b_lc = bleu_lc.corpus_score(hypotheses, refs)
    return {
        "bleu": round(b.score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "bleu_lowercase": round(b_lc.score, 2),
        "bleu_lowercase_signature": str(bleu_lc.get_signature()),
        "chrf": round(chrf.corpus_score(hypotheses, refs).score, 2),
        "chrf_signature": str(chrf.get_signature()),
        "ter": round(ter.corpus_score(hypotheses, refs).score, 2),
        "ter_signature": str(ter.get_signature()),
        "sentences": len(hypotheses),
    }
