"""Minimum Bayes risk (MBR) selection among candidate translations, at the text level.

Eikema & Aziz (2020) and Freitag et al. (2022): from N candidates for one source
sentence (samples of the model, or an n-best list), choose the one with the highest
expected utility, the expectation taken over the candidates themselves used as
pseudo-references. The utility is sacreBLEU's sentence-level chrF or BLEU.

Notation: `N` candidates `c_0 .. c_{N-1}`, weights `w_0 .. w_{N-1}` (uniform by default),
`u(h, r)` the utility of hypothesis `h` against the single reference `r`.

1. Each distinct candidate string is analysed once: its n-gram counts (chrF: character
   1- to 6-grams with whitespace removed; BLEU: word 1- to 4-grams of its 13a
   tokenization) and their totals per order, as sacreBLEU extracts them.
2. For every unordered pair of distinct strings the clipped matches per order,
   `sum_g min(count_h(g), count_r(g))`, are counted once: the count is symmetric, so it
   serves both `u(h, r)` and `u(r, h)`. A string that occurs more than once is also
   paired with itself.
3. Those statistics go through sacreBLEU's own final step (`CHRF._compute_f_score`,
   `BLEU._compute_score_from_stats`), so that each `u(c_i, c_j)` equals
   `sentence_score(c_i, [c_j]).score` exactly.
4. `E_i = sum_{j != i} w_j u(c_i, c_j) / sum_{j != i} w_j`; the chosen index is the
   first `i` with the largest `E_i`.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from functools import cache

UTILITIES = ("chrf", "bleu")

# One candidate's analysis: its n-gram counts per order (as `_as_keys` sets), the totals
# of those counts per order, and its length in tokens (BLEU's sys_len / ref_len; 0 for chrF).
_Analysis = tuple[list[frozenset[str]], list[int], int]


def mbr_select(
    candidates: Sequence[str],
    utility: str = "chrf",
    weights: Sequence[float] | None = None,
) -> tuple[int, list[float]]:
    """Choose the candidate with the highest expected utility against the others.

    Every candidate is a hypothesis and, for every other candidate, a pseudo-reference
    (the same set plays both parts, as in Freitag et al., 2022). A candidate is not its
    own pseudo-reference: `E_i` averages `u(c_i, c_j)` over `j != i` only. Both readings
    exist (Eikema & Aziz, 2020, exclude nothing); excluding it is chosen because
    `u(c, c)` is the metric's maximum (100) for any non-empty `c` and says nothing about
    the other candidates: with uniform weights it adds the same amount to every
    non-empty candidate (the choice is unchanged), but with weights it adds `100 w_i`,
    which favours the most probable candidate whatever the others say. With `N` samples
    of the model, the average over the `N - 1` others is an unbiased estimate of
    `E_{y ~ p}[u(c_i, y)]`, since the other samples are independent of `c_i`.

    Duplicates are separate candidates: a string drawn `k` times is `k` pseudo-references
    for every other candidate (including its own other copies), as in sampling-based MBR
    (Eikema & Aziz, 2020), where repetition is evidence of probability mass.

    Args:
        candidates: the `N >= 1` candidate translations of one sentence (detokenized
            text, as sacreBLEU scores it).
        utility: `"chrf"` (sacreBLEU's `CHRF()`, chrF2 with character 6-grams) or
            `"bleu"` (`BLEU(effective_order=True)`: 13a tokenization, exponential
            smoothing); each `u(h, r)` equals `sentence_score(h, [r]).score`.
        weights: `N` non-negative finite numbers (for example the probabilities of
            n-best entries, normalized or not): then `E_i` is the weighted average
            `sum_{j != i} w_j u(c_i, c_j) / sum_{j != i} w_j`, the expectation under the
            weights given that the reference is not `c_i` itself. With `N >= 2`, at least
            two weights must be positive, so that every candidate has a pseudo-reference
            of positive weight. None: uniform.

    Returns:
        `(index, expected)`: the chosen candidate's index, and `E_i` for every candidate
        (a list of `N` floats on sacreBLEU's 0-100 scale). Ties go to the lowest index,
        so the result is deterministic. An empty (or whitespace-only) candidate scores 0
        against every pseudo-reference and gives 0 to every hypothesis, as sacreBLEU
        does; it stays a candidate, chosen only when every candidate's `E_i` is 0 and
        none comes before it.
        With `N = 1` there is no pseudo-reference: the index is 0 and its expected
        utility is `nan`.

    Example:

    >>> mbr_select(["a man rides a horse", "a man is riding a horse", "two dogs play"])[0]
    1
    """
    return _select(candidates, _check_utility(utility), weights)


def mbr_select_batch(
    candidate_lists: Sequence[Sequence[str]],
    utility: str = "chrf",
    weights: Sequence[Sequence[float] | None] | None = None,
    progress: bool | None = None,
) -> tuple[list[str], list[int]]:
    """:func:`mbr_select` for every sentence of a corpus.

    Args:
        candidate_lists: one list of candidates per sentence (their numbers may differ).
        utility: `"chrf"` or `"bleu"`, as in :func:`mbr_select`.
        weights: None (uniform everywhere), or one entry per sentence: its weights, or
            None for uniform.
        progress: a progress bar on stderr: True drawn, False not, None (default) only
            when stderr is a terminal.

    Returns:
        `(chosen, indices)`: the chosen string of every sentence and its index in that
        sentence's candidates.
    """
    utility = _check_utility(utility)
    if weights is not None and len(weights) != len(candidate_lists):
        raise ValueError(
            f"`weights` has {len(weights)} entries for {len(candidate_lists)} sentences: "
            "give one per sentence (None for uniform)"
        )
    from tqdm import tqdm

    chosen, indices = [], []
    total = len(candidate_lists)
    # evaluation.translation.progress_disabled's rule, written here: decoding/ sits below
    # evaluation/ (which imports it), so it cannot import from there.
    disable = True if progress is False or total == 0 else (None if progress is None else False)
    with tqdm(total=total, desc="mbr", unit="sent", disable=disable, file=sys.stderr) as bar:
        for k, candidates in enumerate(candidate_lists):
            index, _ = _select(candidates, utility, None if weights is None else weights[k])
            chosen.append(candidates[index])
            indices.append(index)
            bar.update(1)
    return chosen, indices


def utility_matrix(candidates: Sequence[str], utility: str = "chrf") -> list[list[float]]:
    """The pairwise utilities `u[i][j] = u(c_i, c_j)` (hypothesis `c_i`, reference `c_j`).

    Each off-diagonal entry equals sacreBLEU's `sentence_score(c_i, [c_j]).score`; the
    diagonal is `nan` (not computed: a candidate is not its own pseudo-reference).
    """
    return _matrix(_as_candidates(candidates), _check_utility(utility))


def _check_utility(utility: str) -> str:
    if utility not in UTILITIES:
        raise ValueError(f"`utility` must be one of {UTILITIES}, got {utility!r}")
    return utility


def _as_candidates(candidates: Sequence[str]) -> list[str]:
    if isinstance(candidates, str):
        raise ValueError("`candidates` must be a sequence of strings, got a single string")
    candidates = list(candidates)
    if not candidates:
        raise ValueError("`candidates` is empty: give at least one candidate")
    for c in candidates:
        if not isinstance(c, str):
            raise ValueError(f"`candidates` must hold strings, got {type(c).__name__}: {c!r}")
    return candidates


def _check_weights(weights: Sequence[float] | None, n: int) -> list[float] | None:
    if weights is None:
        return None
    weights = [float(w) for w in weights]
    if len(weights) != n:
        raise ValueError(f"`weights` has {len(weights)} entries for {n} candidates: give one each")
    if any(not math.isfinite(w) or w < 0 for w in weights):
        raise ValueError(f"`weights` must be finite and non-negative, got {weights}")
    if n >= 2 and sum(w > 0 for w in weights) < 2:
        raise ValueError(
            f"`weights` needs at least two positive entries (every candidate needs a "
            f"pseudo-reference of positive weight besides itself), got {weights}"
        )
    return weights


def _select(candidates: Sequence[str], utility: str, weights: Sequence[float] | None) -> tuple[int, list[float]]:
    candidates = _as_candidates(candidates)
    n = len(candidates)
    weights = _check_weights(weights, n)
    if n == 1:
        return 0, [math.nan]
    u = _matrix(candidates, utility)
    expected = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        if weights is None:
            expected.append(sum(u[i][j] for j in others) / (n - 1))
        else:
            expected.append(sum(weights[j] * u[i][j] for j in others) / sum(weights[j] for j in others))
    best = max(range(n), key=lambda i: (expected[i], -i))
    return best, expected


# N=16 distinct 19-word candidates, 2 busy cores: chrF 4.5-9 ms/sentence (240 sentence_score: 48 ms), BLEU 2.2-3.3 ms (12-14 ms).
def _matrix(candidates: list[str], utility: str) -> list[list[float]]:
    """Steps 1-3 of the module docstring, over the distinct strings."""
    distinct = list(dict.fromkeys(candidates))
    where = {s: k for k, s in enumerate(distinct)}
    ids = [where[c] for c in candidates]
    repeated = {k for k, count in Counter(ids).items() if count > 1}
    analyse, score = _chrf() if utility == "chrf" else _bleu()
    info = [analyse(s) for s in distinct]
    m = len(distinct)
    pair: list[list[float]] = [[math.nan] * m for _ in range(m)]
    for a in range(m):
        for b in range(a, m):
            if a == b and a not in repeated:
                continue
            matches = _matches(info[a][0], info[b][0])
            pair[a][b] = score(info[a], info[b], matches)
            pair[b][a] = score(info[b], info[a], matches)
    n = len(candidates)
    return [[pair[ids[i]][ids[j]] if i != j else math.nan for j in range(n)] for i in range(n)]


def _matches(h: list[frozenset[str]], r: list[frozenset[str]]) -> list[int]:
    """The clipped matches per order, `sum_g min(h(g), r(g))`: the same for (h, r) and (r, h).

    Each order's counts are held as a set of keys, one per occurrence (`_as_keys`), so
    that `min(h(g), r(g))` is the number of keys of `g` in both sets and the sum is the
    size of one set intersection.
    """
    return [len(hs & rs) for hs, rs in zip(h, r)]


def _as_keys(counts: Counter) -> frozenset[str]:
    """The n-grams of one order as one key per occurrence: the k-th occurrence of `g` is
    `g` for k = 1 and `f"{g} {k}"` after. The n-grams hold no whitespace (chrF removes it;
    BLEU's are tokens joined by one space, a fixed number per order), so a key names one
    `(g, k)` only."""
    keys = set(counts)
    for g, count in counts.items():
        if count > 1:
            keys.update(f"{g} {k}" for k in range(2, count + 1))
    return frozenset(keys)


@cache
def _chrf() -> tuple[Callable[[str], _Analysis], Callable[..., float]]:
    """chrF's analysis and score, as `sacrebleu.metrics.CHRF()` computes `sentence_score`.

    With the default settings (no lowercasing, no word n-grams), a segment's statistics
    are `[hyp total, ref total, matches]` per character order, the hypothesis total
    counted as 0 where the reference has no n-gram of that order.
    """
    from sacrebleu.metrics import CHRF
    from sacrebleu.metrics.helpers import extract_all_char_ngrams

    metric = CHRF()
    order = metric.char_order

    def analyse(text: str) -> _Analysis:
        counts = extract_all_char_ngrams(metric._preprocess_segment(text), order, metric.whitespace)
        return [_as_keys(c) for c in counts], [sum(c.values()) for c in counts], 0

    def score(hyp: _Analysis, ref: _Analysis, matches: list[int]) -> float:
        stats = []
        for n in range(order):
            stats += [hyp[1][n] if ref[1][n] else 0, ref[1][n], matches[n]]
        return metric._compute_f_score(stats)

    return analyse, score


@cache
def _bleu() -> tuple[Callable[[str], _Analysis], Callable[..., float]]:
    """BLEU's analysis and score, as `sacrebleu.metrics.BLEU(effective_order=True)`
    computes `sentence_score` with one reference: statistics
    `[hyp_len, ref_len, matches per order..., hyp totals per order...]`."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.metrics.helpers import extract_all_word_ngrams

    metric = BLEU(effective_order=True)
    order = metric.max_ngram_order

    def analyse(text: str) -> _Analysis:
        all_ngrams, length = extract_all_word_ngrams(metric._preprocess_segment(text), 1, order)
        counts = [Counter() for _ in range(order)]
        for g, count in all_ngrams.items():
            counts[len(g) - 1][" ".join(g)] = count
        return [_as_keys(c) for c in counts], [sum(c.values()) for c in counts], length

    def score(hyp: _Analysis, ref: _Analysis, matches: list[int]) -> float:
        stats = [hyp[2], ref[2], *matches, *hyp[1]]
        return metric._compute_score_from_stats(stats).score

    return analyse, score
