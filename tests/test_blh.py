"""Binary Local Hashing (ldpfast.protocols.frequency.blh): OLH with g = 2. The match count of one value
over a run is a sum of independent Bernoullis (p = e^eps/(e^eps + 1) for its holders, 1/2
for everyone else: a fresh pairwise-independent hash per user), so the estimate's mean and
variance are checked against ldpfast.theory.olh_variance(g=2) with tests/_moments.py
(each assertion fails with probability 5e-9 when the closed form holds)."""

import math

import numpy as np
import pytest

from _moments import check_mean, check_variance
from ldpfast import _core, theory
from ldpfast.kernels.field import PRIME
from ldpfast.protocols.frequency import blh, olh


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_unbiased_with_the_olh_variance_at_g_2(eps):
    d, n, runs = 50, 200, 1500
    params = blh.BLHParams(epsilon=eps, d=d)
    values = np.concatenate([np.zeros(120), np.ones(40), np.arange(40) % d]).astype(np.int64)
    reports = blh.BLHClient(params, rng=3).perturb(np.tile(values, runs))
    p = math.exp(eps) / (math.exp(eps) + 1)
    first = blh.BLHServer(params).update(blh.BLHReports(**{k: v[:n] for k, v in reports.columns().items()}))
    for x in (0, 1, d - 1):
        hits = _core.ocms_hash(_core.Field.prime(PRIME), reports.a0, reports.a1, np.full(n * runs, x, np.uint64), 2)
        fhat = ((hits == reports.z).reshape(runs, n).mean(axis=1) - 0.5) / (p - 0.5)
        assert fhat[0] == pytest.approx(first.estimate([x])[0], rel=1e-12, abs=1e-12)   # the server's estimator
        f = float(np.mean(values == x))
        variance = params.variance(n, f)
        pi = np.where(values == x, p, 0.5)
        terms = pi * (1 - pi)
        assert variance == pytest.approx(terms.sum() / (n * (p - 0.5)) ** 2, rel=1e-6)
        check_mean(fhat, f, variance)
        check_variance(fhat, variance, float(np.sum(terms * (1 - 6 * terms)) / terms.sum() ** 2))


def test_blh_is_olh_with_g_2():
    params = blh.BLHParams(epsilon=1.0, d=300)
    same = olh.OLHParams(epsilon=1.0, d=300, g=2)
    assert params.flip_threshold == same.flip_threshold
    assert theory.olh_variance(1.0, 10, 0.2, g=2) == params.variance(10, 0.2)
    values = np.arange(300)
    ours, theirs = blh.BLHClient(params, rng=9).perturb(values), olh.OLHClient(same, rng=9).perturb(values)
    assert all(np.array_equal(getattr(ours, k), getattr(theirs, k)) for k in ("z", "a0", "a1"))
    server = blh.BLHServer(params).update(ours)
    assert np.array_equal(server.estimate(), olh.OLHServer(same).update(theirs).estimate())
    assert server.n == 300 and blh.BLHReports in (type(ours),)
