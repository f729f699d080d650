"""Hashtogram (Bassily et al.'s Count-Sketch frequency oracle) against its closed forms.

* Given the hash functions and the users' groups, each user's term is ``+-c_eps`` with
  ``P(+c_eps) = (1 + mu_i/c_eps)/2``, ``mu_i = g(x_i) g(x) 1[h(x_i) = h(x)]``: the mean-combined
  estimate of one run is a sum of independent two-point variables, so its mean, variance
  and kurtosis are exact; checked over ``R`` runs at ``Z`` sd and chi-square quantiles
  (false-failure probability ``ALPHA = 5e-9`` per check, as in tests/test_pan_baselines.py).
* Over the hash draw, :func:`ldpfast.theory.hashtogram_variance` is
  ``E[conditional variance] + Var[conditional mean]``; both are computed exactly for each of
  ``F`` independent hash draws (no client simulation), and their averages must match the
  formula within ``Z`` standard errors of the mean over draws (CLT over ``F`` i.i.d. draws).
"""

import math

import numpy as np
import pytest
from scipy import stats

from ldpfast import theory
from ldpfast.protocols.frequency import hashtogram as ht
from ldpfast.errors import ParameterError, ReportError

ALPHA = 5e-9
Z = stats.norm.isf(ALPHA / 2)


def parity(v):
    """popcount(v) mod 2 for uint64 values, by unpacking bits (independent of the library)."""
    v = np.ascontiguousarray(v, dtype=np.uint64)
    return (np.unpackbits(v.view(np.uint8)).reshape(-1, 64).sum(axis=1) & 1).astype(np.int64)


def data(n, d, seed=3):
    rng = np.random.default_rng(seed)
    tail = rng.integers(2, d, n - n // 2 - n // 5)
    return np.concatenate([np.zeros(n // 2), np.ones(n // 5), tail]).astype(np.uint64)


def conditional(params, values, groups, x):
    """Exact (mean, variance) of one run's mean-combined estimate given hashes and groups."""
    c = theory.c_eps(params.epsilon)
    bucket, sign = params.hashes(groups, values)
    bx, sx = params.hashes(groups, np.full(values.size, x, dtype=np.uint64))
    mu = sign * sx * (bucket == bx)
    n = values.size
    return mu.mean(), np.sum(c * c - mu * mu) / n**2, mu


@pytest.mark.parametrize("eps, R, T", [(1.0, 5, 16), (3.0, 3, 64)])
def test_hashtogram_given_the_hashes_matches_the_exact_moments(eps, R, T):
    params = ht.HashtogramParams(epsilon=eps, d=500, R=R, T=T, combine="mean", hash_seed=4)
    n, runs = 1000, 400
    values = data(n, 500)
    groups = np.random.default_rng(5).integers(0, R, n).astype(np.uint32)
    reports = ht.HashtogramClient(params, rng=6).perturb(np.tile(values, runs), groups=np.tile(groups, runs))
    c = theory.c_eps(eps)
    for x in (0, 1, 9):
        mean, variance, mu = conditional(params, values, groups, x)
        plus = (1 + mu / c) / 2
        bucket, sign = params.hashes(np.tile(groups, runs), np.full(n * runs, x, dtype=np.uint64))
        h = 1 - 2 * (parity(reports.rows.astype(np.uint64) & bucket)).astype(np.int64)
        fhat = (c * reports.bits * sign * h).reshape(runs, n).mean(axis=1)
        pq = plus * (1 - plus)
        terms = 4 * c * c * pq                     # variance of the two-point term +-c
        kurt = np.sum(16 * c**4 * pq * (1 - 6 * pq)) / np.sum(terms) ** 2
        assert np.sum(terms) / n**2 == pytest.approx(variance, rel=1e-9)
        sd = math.sqrt(variance / runs)
        assert abs(fhat.mean() - mean) < Z * sd
        nu = 2 / (2 / (runs - 1) + kurt / runs)
        lo, hi = stats.chi2.ppf(ALPHA / 2, nu) / nu, stats.chi2.isf(ALPHA / 2, nu) / nu
        assert lo * variance < fhat.var(ddof=1) < hi * variance
    first = ht.HashtogramReports(groups=reports.groups[:n], rows=reports.rows[:n], bits=reports.bits[:n])
    server = ht.HashtogramServer(params).update(first)
    bucket, sign = params.hashes(groups, np.full(n, 9, dtype=np.uint64))
    h = 1 - 2 * (parity(first.rows.astype(np.uint64) & bucket)).astype(np.int64)
    per_group = np.array([np.sum((c * first.bits * sign * h)[groups == r]) * R / n for r in range(R)])
    np.testing.assert_allclose(server.group_estimates([9])[:, 0], per_group, rtol=1e-9)
    np.testing.assert_allclose(server.estimate([9]), [per_group.mean()], rtol=1e-9)
    median = ht.HashtogramServer(ht.HashtogramParams(epsilon=eps, d=500, R=R, T=T, hash_seed=4)).update(first)
    np.testing.assert_allclose(median.estimate([9]), [np.median(per_group)], rtol=1e-9)


def test_hashtogram_variance_over_the_hash_draw():
    eps, R, T, n, d, x = 1.0, 3, 8, 600, 40, 0
    values = data(n, d)
    freqs = np.bincount(values.astype(np.int64), minlength=d) / n
    draws = 4000
    rng = np.random.default_rng(7)
    means, cond_vars = np.empty(draws), np.empty(draws)
    for t in range(draws):
        params = ht.HashtogramParams(epsilon=eps, d=d, R=R, T=T, combine="mean", hash_seed=t)
        groups = rng.integers(0, R, n).astype(np.uint32)
        means[t], cond_vars[t], _ = conditional(params, values, groups, x)
    f = freqs[x]
    sum_sq_other = float(np.sum(freqs**2) - f * f)
    formula = theory.hashtogram_variance(eps, R, T, n, f, sum_sq_other)
    assert formula == pytest.approx(ht.HashtogramParams(epsilon=eps, d=d, R=R, T=T, combine="mean", hash_seed=0)
                                    .variance(n, f, sum_sq_other))
    # Unbiased over the draw; E[cond var] + E[(cond mean - f)^2] is the total variance.
    assert abs(means.mean() - f) < Z * means.std(ddof=1) / math.sqrt(draws)
    total = cond_vars + (means - f) ** 2
    assert abs(total.mean() - formula) < Z * total.std(ddof=1) / math.sqrt(draws), (total.mean(), formula)
    # The collision term is what the hash draw adds to HRR's (c^2 - f)/n: it must matter here.
    assert formula - theory.hrr_variance(eps, n, f) > 10 * total.std(ddof=1) / math.sqrt(draws)


def test_hashtogram_defaults_and_bad_input():
    params = ht.HashtogramParams.create(epsilon=1.0, d=10**6, n=10**6, beta=0.05)
    assert params.R == theory.hadaoracle_k(0.05) and params.T == 1024
    assert ht.HashtogramParams.create(epsilon=1.0, d=100, n=10**6).T == 128
    with pytest.raises(ParameterError, match="power of two"):
        ht.HashtogramParams(epsilon=1.0, d=100, R=3, T=12)
    server = ht.HashtogramServer(ht.HashtogramParams(epsilon=1.0, d=100, R=3, T=16, hash_seed=1))
    with pytest.raises(ReportError, match="group 3"):
        server.update(ht.HashtogramReports(groups=np.array([3], np.uint32), rows=np.array([0], np.uint32),
                                 bits=np.array([1], np.int8)))
    with pytest.raises(ReportError, match="-1 or \\+1"):
        server.update(ht.HashtogramReports(groups=np.array([0], np.uint32), rows=np.array([0], np.uint32),
                                 bits=np.array([0], np.int8)))
    assert server.n == 0
