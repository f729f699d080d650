"""TreeHist with Count-Sketch (Hashtogram) level oracles (ldpfast.protocols.heavy.treehist_cs)."""

import math

import numpy as np
import pytest
from scipy import stats

from ldpfast import theory
from ldpfast.protocols.heavy import treehist_cs as tc
from ldpfast.errors import ParameterError, ReportError

ALPHA = 5e-9
Z = stats.norm.isf(ALPHA / 2)


def parity(v):
    """popcount(v) mod 2 for uint64 values, by unpacking bits (independent of the library)."""
    v = np.ascontiguousarray(v, dtype=np.uint64)
    return (np.unpackbits(v.view(np.uint8)).reshape(-1, 64).sum(axis=1) & 1).astype(np.int64)


def test_level_estimates_are_the_median_of_the_group_sketches():
    params = tc.TreeHistCSParams(epsilon=2.0, d=1000, R=3, T=16, delta=1.0, tau=2.0, hash_seed=5)
    assert params.L == 10 and not params.hashed(4) and params.hashed(5)   # 16 vs 32 prefixes
    rng = np.random.default_rng(1)
    values = rng.integers(0, 1000, 5000).astype(np.uint64)
    reports = tc.TreeHistCSClient(params, rng=2).perturb(values)
    server = tc.TreeHistCSServer(params).update(reports)
    c = theory.c_eps(2.0)
    for level, prefixes in ((3, [0, 1, 7]), (8, [3, 100, 249])):
        groups = reports.groups.astype(np.int64)
        mine = groups // params.R + 1 == level
        want = []
        for s in prefixes:
            per_group = []
            for g in range((level - 1) * params.R, level * params.R):
                sel = mine & (groups == g)
                bucket, sign = params.hashes(np.full(sel.sum(), g), np.full(sel.sum(), s, dtype=np.uint64))
                h = 1 - 2 * (parity(reports.rows[sel].astype(np.uint64) & bucket)).astype(np.int64)
                per_group.append(params.L * params.R * c * np.sum(reports.bits[sel] * sign * h))
            want.append(np.median(per_group))
        np.testing.assert_allclose(server.level_estimates(level, prefixes), want, rtol=1e-9)


def test_finds_planted_heavy_hitters():
    """Each group estimate is L R times a sum of about n/(L R) independent terms bounded by
    c_eps (plus signed collisions, zero on average), so it is close to normal with sd at most
    sigma = c_eps sqrt(n L R). The threshold tau - delta sits 6 sigma above zero and every
    planted count at least 7 sigma above the threshold: a prefix is misjudged only if a
    majority (3 of 5) of its group estimates are more than 6 sigma off."""
    n, d, eps = 400_000, 2**16, 4.0
    L, R = 16, 5
    sigma = theory.c_eps(eps) * math.sqrt(n * L * R)
    delta = 2.0 * sigma
    tau = 8.0 * sigma                                      # threshold tau - delta = 6 sigma
    rng = np.random.default_rng(3)
    heavy = np.array([40_000, 9_999, 777], dtype=np.uint64)
    counts = [120_000, 100_000, 80_000]
    assert min(counts) - (tau - delta) > 7 * sigma
    values = np.concatenate([np.repeat(heavy, counts), rng.integers(0, d, n - sum(counts)).astype(np.uint64)])
    params = tc.TreeHistCSParams.create(epsilon=eps, d=d, n=n, R=R, delta=delta, tau=tau, hash_seed=11)
    assert (params.L, params.R, params.T) == (L, R, 256)
    server = tc.TreeHistCSServer(params).update(tc.TreeHistCSClient(params, rng=4).perturb(values))
    hh = server.heavy_hitters()
    assert sorted(hh.items.tolist()) == sorted(heavy.tolist())
    truth = dict(zip(heavy.tolist(), counts))
    for item, est in zip(hh.items.tolist(), hh.counts):
        assert abs(est - truth[item]) < 6 * sigma


def test_treehist_cs_bad_input():
    with pytest.raises(ParameterError, match="power of two"):
        tc.TreeHistCSParams(epsilon=1.0, d=100, R=3, T=12, delta=1.0, tau=2.0)
    params = tc.TreeHistCSParams(epsilon=1.0, d=100, R=3, T=16, delta=1.0, tau=2.0, hash_seed=1)
    server = tc.TreeHistCSServer(params)
    with pytest.raises(ReportError, match="group 21"):
        server.update(tc.TreeHistCSReports(groups=np.array([21], np.uint32), rows=np.array([0], np.uint32),
                                 bits=np.array([1], np.int8)))
    assert server.n == 0
    with pytest.raises(ParameterError, match="groups must be in"):
        tc.TreeHistCSClient(params).perturb([1], groups=[21])
