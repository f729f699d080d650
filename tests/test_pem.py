"""PEM heavy hitters (ldpfast.protocols.heavy.pem): the full-value estimate's mean and variance
against Params.variance (tests/_moments.py, each assertion fails with probability 5e-9 when
the closed form holds), and the search's guarantee on planted heavy hitters."""

import numpy as np
import pytest

from _moments import check_mean, check_variance
from ldpfast import _core
from ldpfast.errors import ParameterError, ReportError
from ldpfast.kernels.field import PRIME
from ldpfast.protocols.heavy import pem


def per_user_moments(levels, a, po, pi):
    """Mean, variance and fourth cumulant of X = a B (M - po), B ~ Bern(1/levels), M ~ Bern(pi)."""
    values = np.array([0.0, a * (1 - po), -a * po])
    probs = np.array([1 - 1 / levels, pi / levels, (1 - pi) / levels])
    mean = probs @ values
    m2, m4 = probs @ (values - mean) ** 2, probs @ (values - mean) ** 4
    return mean, m2, m4 - 3 * m2**2


def test_unbiased_with_the_closed_form_variance():
    # fhat(x) = sum_i X_i / n over independent users (a random group each, OLH in the last
    # group): its variance is Params.variance and its excess kurtosis sum(kappa4)/(sum var)^2.
    params = pem.PEMParams(epsilon=2.0, d=64, k=2, eta=2, delta=1.0, tau=2.0)
    assert params.levels == 3 and [params.bits(j) for j in range(4)] == [0, 3, 5, 6]
    n, runs = 300, 2000
    values = np.concatenate([np.full(150, 5), np.full(60, 63), np.arange(90) % 64]).astype(np.int64)
    reports = pem.PEMClient(params, rng=23).perturb(np.tile(values, runs))
    p, po = params.probabilities
    last = reports.groups == params.levels - 1
    first = pem.PEMServer(params).update(pem.PEMReports(**{k: v[:n] for k, v in reports.columns().items()}))
    for x in (5, 63, 17):
        hits = _core.ocms_hash(_core.Field.prime(PRIME), reports.a0, reports.a1, np.full(n * runs, x, np.uint64),
                               params.g) == reports.z
        terms = (params.levels * last * (hits - po) / (p - po)).reshape(runs, n)
        fhat = terms.sum(axis=1) / n
        assert fhat[0] == pytest.approx(first.estimate([x])[0], rel=1e-9, abs=1e-12)   # the server's estimator
        f = float(np.mean(values == x))
        moments = [per_user_moments(params.levels, params.levels / (p - po), po, p if v == x else po) for v in values]
        means, variances, kappa4 = (np.array(m) for m in zip(*moments))
        assert means.sum() / n == pytest.approx(f, abs=1e-12)
        assert params.variance(n, f) == pytest.approx(variances.sum() / n**2, rel=1e-9)
        check_mean(fhat, f, params.variance(n, f))
        check_variance(fhat, params.variance(n, f), float(kappa4.sum() / variances.sum() ** 2))


def planted(n, d, shares, seed):
    rng = np.random.default_rng(seed)
    items = rng.choice(d, size=len(shares), replace=False)
    counts = [int(n * s) for s in shares]
    tail = rng.integers(0, d, n - sum(counts))
    return rng.permutation(np.concatenate([np.repeat(items, counts), tail])), items, counts


def test_search_finds_every_heavy_hitter_and_nothing_light():
    # With beta = 1e-6 every examined estimate is within delta except with probability 1e-6
    # (Bernstein, Params.error_radius), so every value of count >= tau is output (there
    # are fewer than k of them) and every output has count >= tau - 2 delta.
    n, d = 200_000, 2**24
    params = pem.PEMParams.create(3.0, d, n, beta=1e-6, k=16, eta=4)
    values, items, counts = planted(n, d, [0.2, 0.12, 0.08, 0.05, 0.001], seed=4)
    server = pem.PEMServer(params).update(pem.PEMClient(params, rng=8).perturb(values))
    hh = server.heavy_hitters()
    truth = dict(zip(items.tolist(), counts))
    heavy = {x for x, c in truth.items() if c >= params.tau}
    assert len(heavy) == 4 and heavy <= set(hh.items.tolist())
    assert all(truth.get(x, 0) >= params.tau - 2 * params.delta for x in hh.items.tolist())
    assert np.all(np.abs(hh.counts - [truth.get(x, 0) for x in hh.items.tolist()]) <= params.delta)
    assert np.all(np.diff(hh.counts) <= 0) and hh.n == n
    top = server.top_k(3)
    assert set(top.items.tolist()) == set(items[:3].tolist())


def test_groups_can_be_assigned_and_bad_input_is_refused():
    params = pem.PEMParams.create(1.0, 1000, 2000, k=4, eta=2)
    values = np.arange(2000) % 1000
    groups = np.arange(2000) % params.levels
    reports = pem.PEMClient(params, rng=1).perturb(values, groups=groups)
    assert np.array_equal(reports.groups, groups)
    server = pem.PEMServer(params).update(reports)
    before = server.to_bytes()
    bad = pem.PEMReports(**{k: v.copy() for k, v in reports.columns().items()})
    bad.groups[7] = params.levels
    with pytest.raises(ReportError, match="groups"):
        server.update(bad)
    assert server.to_bytes() == before
    with pytest.raises(ParameterError, match="groups"):
        pem.PEMClient(params).perturb(values, groups=groups + params.levels)
    with pytest.raises(ParameterError, match="k \\* 2\\^eta"):
        pem.PEMParams.create(1.0, 1000, 2000, k=2**16, eta=8)
    with pytest.raises(ParameterError, match="tau must exceed delta"):
        pem.PEMParams(1.0, 1000, k=4, eta=2, delta=5.0, tau=5.0)
