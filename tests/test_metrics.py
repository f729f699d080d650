"""ldpfast.metrics: MSE, [PS] Var and NCR (SPEC 4.7), R2's rounded variants; ties by item id."""

import numpy as np
import pytest

from ldpfast import metrics
from ldpfast.datasets import zipf_sets
from ldpfast.errors import ParameterError


def test_top_k_breaks_ties_by_id():
    assert metrics.top_k([0.1, 0.5, 0.5, 0.2, 0.5], 3).tolist() == [1, 2, 4]
    assert metrics.top_k([3, 1, 2], 1).tolist() == [0]


def test_mse():
    assert metrics.mse([0.1, 0.2, 0.4], [0.1, 0.0, 0.1]) == pytest.approx((0.04 + 0.09) / 3)


def test_var_topk_counts_over_the_intersection():
    truth = np.array([0.5, 0.4, 0.3, 0.1, 0.0])
    est = np.array([0.52, 0.1, 0.33, 0.35, 0.0])       # C_e = {0, 3, 2}, C_t = {0, 1, 2}
    n = 1000
    expected = ((20.0) ** 2 + (30.0) ** 2) / 2
    assert metrics.var_topk(est, truth, n, 3) == pytest.approx(expected)
    assert np.isnan(metrics.var_topk([0, 0, 1.0], [1.0, 0, 0], 10, 1))


def test_ncr():
    truth = np.array([0.5, 0.4, 0.3, 0.1, 0.0])
    assert metrics.ncr(truth, truth, 3) == 1.0
    # C_e = {0, 3, 2}: q = 3 (rank 1) + 0 + 1 (rank 3) over 6.
    assert metrics.ncr([0.52, 0.1, 0.33, 0.35, 0.0], truth, 3) == pytest.approx(4 / 6)
    assert metrics.ncr([0, 0, 0, 1.0, 0.9], truth, 2) == 0.0


def test_r2_variants_round_counts():
    truth = np.array([0.5, 0.25, 0.0, 0.0])
    est = np.array([0.5004, 0.2496, 0.0004, -0.0004])
    n = 1000                                            # counts round back to the truth
    assert metrics.mse_rounded_r2(est, truth, n) == 0.0
    assert metrics.mse(est, truth) > 0
    assert metrics.k_mse_r2([0.6, 0.25, 0.9, 0.0], truth, 100, 2) == pytest.approx(0.1 ** 2 / 2)


def test_validation():
    with pytest.raises(ParameterError, match="equal length"):
        metrics.mse([1.0], [1.0, 2.0])
    with pytest.raises(ParameterError, match="k must"):
        metrics.ncr([1.0, 2.0], [1.0, 2.0], 3)
    with pytest.raises(ParameterError, match="k must"):
        metrics.top_k([1.0], 0)


def test_zipf_sets_generator():
    a = zipf_sets(2000, 500, length=20, seed=4)
    b = zipf_sets(2000, 500, length=20, seed=4)
    assert np.array_equal(a.items, b.items) and np.array_equal(a.offsets, b.offsets)
    sizes = a.sizes()
    assert a.n == 2000 and sizes.min() >= 1 and a.items.max() < 500
    for i in range(0, 2000, 97):
        user = a.user(i)
        assert np.all(np.diff(user) > 0)                # sorted, de-duplicated
    freq = a.frequencies()
    assert freq[0] == freq.max()                        # label 0 is the most common value
    with pytest.raises(ParameterError, match="n must"):
        zipf_sets(0, 10)
