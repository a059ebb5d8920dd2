import pytest

from keras_memnmt.data import synthetic_corpus

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent


def test_deterministic_and_seeded():
    a, b = synthetic_corpus(200, seed=3), synthetic_corpus(200, seed=3)
    assert a.source == b.source and a.target == b.target
    assert synthetic_corpus(200, seed=4).source != a.source


def test_reordering_and_long_distance_agreement():
    c = synthetic_corpus(500, seed=0)
    plural_seen = singular_seen = 0
    for src, tgt in zip(c.source, c.target):
        s, t = src.split(), tgt.split()
        # the target is verb-final and the verb agrees with the subject (first noun phrase)
        plural = s[0] == "the" and next(w for w in s[1:] if w not in _ADJ_WORDS).endswith("s")
        assert t[-1].endswith("-as" if plural else "-a"), (src, tgt)
        plural_seen += plural
        singular_seen += not plural
        assert len(s) == len(t)  # one target word per source word, reordered
    assert plural_seen > 100 and singular_seen > 100


_ADJ_WORDS = {"big", "small", "red", "blue", "old", "young", "happy", "sad", "fast", "green"}
