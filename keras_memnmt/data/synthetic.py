"""A deterministic, seeded synthetic parallel corpus for tests and the offline demo.

The "translation" is built so that a model must both reorder and carry
information across a distance:

* source (English-like, SVO, adjectives before the noun)::

      the big red cat that sleeps sees a small dog

* target (verb-final, adjectives after the noun in reverse order, every word
  mapped through a fixed lexicon, and the final verb carrying an agreement
  suffix chosen by the number of the *subject* that opened the sentence)::

      le kat rodo grando ke dormi hundo smala un vidi-as

Plural subjects take ``-as``, singular ``-a``; the relative clause and the
object phrase sit between the subject and the verb, so agreement is long
distance. The same seed always gives the same corpus.
"""

from __future__ import annotations

import random

from keras_memnmt.data.corpus import ParallelCorpus

_NOUNS = {
    "cat": "kat",
    "dog": "hundo",
    "bird": "fogel",
    "man": "viro",
    "woman": "frau",
    "child": "infa",
    "horse": "caval",
    "fish": "pesko",
    "tree": "arbo",
    "car": "auto",
    "house": "domo",
    "boat": "navo",
    "girl": "knabina",
    "boy": "knabo",
    "ball": "balo",
}
_ADJS = {
    "big": "grando",
    "small": "smala",
    "red": "rodo",
    "blue": "blua",
    "old": "malnova",
    "young": "juna",
    "happy": "felica",
    "sad": "trista",
    "fast": "rapida",
    "green": "verda",
}
# singular source form: (plural source form, target stem)
_VERBS = {
    "sees": ("see", "vidi"),
    "likes": ("like", "ami"),
    "follows": ("follow", "sekvi"),
    "finds": ("find", "trovi"),
    "pushes": ("push", "pusi"),
    "watches": ("watch", "rigardi"),
    "holds": ("hold", "teni"),
    "carries": ("carry", "porti"),
}
_INTRANSITIVE = {
    "sleeps": ("sleep", "dormi"),
    "runs": ("run", "kuri"),
    "sings": ("sing", "kanti"),
    "waits": ("wait", "atendi"),
}
_DETS = {"the": "le", "a": "un"}


def _noun_phrase(rng: random.Random, plural: bool) -> tuple[list[str], list[str], list[tuple[int, int]]]:
    det = rng.choice(list(_DETS))
    noun = rng.choice(list(_NOUNS))
    adjs = rng.sample(list(_ADJS), rng.randint(0, 3))
    src = ["the" if plural else det, *adjs, noun + ("s" if plural else "")]
    tgt = [_DETS["the" if plural else det], _NOUNS[noun] + ("j" if plural else "")]
    tgt += [_ADJS[a] for a in reversed(adjs)]
    # determiner, noun, and each adjective to its translation (the adjectives reversed)
    links = [(0, 0), (len(adjs) + 1, 1)] + [(1 + k, 1 + len(adjs) - k) for k in range(len(adjs))]
    return src, tgt, links


def synthetic_pair(rng: random.Random) -> tuple[str, str]:
    """One (source, target) pair drawn from ``rng``."""
    return aligned_synthetic_pair(rng)[:2]


def aligned_synthetic_pair(rng: random.Random) -> tuple[str, str, list[tuple[int, int]]]:
    """One (source, target, word alignment) triple drawn from ``rng`` (the same draws as
    :func:`synthetic_pair`): the alignment links each target word to the source word it
    translates, as ``(source word index, target word index)`` pairs from 0; every word
    of both sides has exactly one link."""
    plural = rng.random() < 0.5
    subj_src, subj_tgt, subj_links = _noun_phrase(rng, plural)
    rel_src, rel_tgt = [], []
    if rng.random() < 0.5:
        iv = rng.choice(list(_INTRANSITIVE))
        rel_src = ["that", _INTRANSITIVE[iv][0] if plural else iv]
        rel_tgt = ["ke", _INTRANSITIVE[iv][1]]
    verb = rng.choice(list(_VERBS))
    obj_src, obj_tgt, obj_links = _noun_phrase(rng, rng.random() < 0.3)
    verb_src = _VERBS[verb][0] if plural else verb
    src = [*subj_src, *rel_src, verb_src, *obj_src]
    tgt = [*subj_tgt, *rel_tgt, *obj_tgt, _VERBS[verb][1] + ("-as" if plural else "-a")]
    n_subj, n_rel = len(subj_src), len(rel_src)  # the two noun phrases have equal lengths on both sides
    links = list(subj_links) + [(n_subj + k, n_subj + k) for k in range(n_rel)]
    links += [(n_subj + n_rel + 1 + i, n_subj + n_rel + j) for i, j in obj_links]
    links.append((n_subj + n_rel, len(tgt) - 1))  # the verb, last in the target
    return " ".join(src), " ".join(tgt), sorted(links)


def synthetic_alignments(size: int = 10000, seed: int = 0) -> list[list[tuple[int, int]]]:
    """The word alignment of each pair of ``synthetic_corpus(size, seed)`` (see
    :func:`aligned_synthetic_pair`): a gold standard to measure a model's alignments by."""
    rng = random.Random(seed)
    return [aligned_synthetic_pair(rng)[2] for _ in range(size)]


def synthetic_corpus(size: int = 10000, seed: int = 0) -> ParallelCorpus:
    """``size`` synthetic pairs; the same ``(size, seed)`` always gives the same corpus.

    Example:
        >>> c = synthetic_corpus(3, seed=1)
        >>> len(c), c.source[0] == synthetic_corpus(3, seed=1).source[0]
        (3, True)
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    rng = random.Random(seed)
    pairs = [synthetic_pair(rng) for _ in range(size)]
    return ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs], name=f"synthetic(seed={seed})")


def synthetic_splits(train_size: int = 10000, seed: int = 0) -> tuple[ParallelCorpus, ...]:
    """``(train, val, test)`` synthetic corpora: ``train_size`` pairs, then 500 and 500,
    drawn with seeds ``seed``, ``seed + 1`` and ``seed + 2`` (a run's test set can be
    drawn again from its seed alone)."""
    return (
        synthetic_corpus(train_size, seed=seed),
        synthetic_corpus(500, seed=seed + 1),
        synthetic_corpus(500, seed=seed + 2),
    )
