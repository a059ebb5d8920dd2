"""`common.top_k`: the two-stage search must give `ops.top_k`'s values on every backend."""

import numpy as np
import pytest
from keras import ops

from keras_memnmt.decoding.common import _group_count, top_k


def wide_rows(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(9, 8000)).astype("float32")
    x[0] = -np.inf  # a dead beam
    x[1, 5:] = -np.inf  # fewer finite entries than k
    x[2] = np.round(x[2])  # many ties
    x[3, 7990:] = 9.0  # the best all in one group's tail
    x[4, ::320] = 9.0  # the best all in one strided group
    return x


@pytest.mark.parametrize("k", [1, 10, 12])
def test_top_k_equals_ops_top_k(k):
    x = wide_rows()
    assert _group_count(x.shape[1], k)  # the two-stage path, not the fallback
    values, index = (np.asarray(a) for a in top_k(ops.convert_to_tensor(x), k))
    expected_values, expected_index = (np.asarray(a) for a in ops.top_k(ops.convert_to_tensor(x), k))
    np.testing.assert_array_equal(values, expected_values)
    assert index.dtype == np.int32
    np.testing.assert_array_equal(np.take_along_axis(x, index, axis=1), values)  # indices match
    for row in range(len(x)):  # distinct entries: distinct indices
        assert len(set(index[row])) == k
    distinct = [r for r in range(len(x)) if len(np.unique(x[r])) == x.shape[1]]
    assert distinct  # without ties the indices are ops.top_k's
    np.testing.assert_array_equal(index[distinct], expected_index[distinct])


def test_top_k_short_rows_fall_back():
    assert _group_count(7, 6) == 0
    x = np.random.default_rng(1).normal(size=(3, 7)).astype("float32")
    values, index = top_k(ops.convert_to_tensor(x), 6)
    np.testing.assert_array_equal(np.asarray(index), np.argsort(-x, axis=1)[:, :6])
    np.testing.assert_allclose(np.asarray(values), -np.sort(-x, axis=1)[:, :6])
