"""Translating a corpus and scoring it.

- :mod:`~keras_memnmt.evaluation.translation`: text in, text out with any model or ensemble
  (``translate``, ``translate_chunks``) and sacreBLEU's scores (``score``);
- :mod:`~keras_memnmt.evaluation.splits`: the test sets of a run and the one function that
  translates a split for a run and keeps the translations in it (``translate_split``);
- :mod:`~keras_memnmt.evaluation.significance`: systems tested against a baseline (paired
  bootstrap and approximate randomization), and their scores by source length;
- :mod:`~keras_memnmt.evaluation.length_plot`: the picture of BLEU by source length.
"""

from keras_memnmt.evaluation.significance import compare, paired_tests
from keras_memnmt.evaluation.splits import available_test_sets, translate_split
from keras_memnmt.evaluation.translation import score, translate, translate_chunks

__all__ = [
    "available_test_sets",
    "compare",
    "paired_tests",
    "score",
    "translate",
    "translate_chunks",
    "translate_split",
]
