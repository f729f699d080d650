"""nPCMS (R2's n x CMS baseline, ldpfast.protocols.sets.npcms) against its exact moments.

Given the public hashes, every slot draws its row uniformly and flips its entries
independently, so each slot contributes an independent two-point term
``T = (c/2) v + 1/2 in {(1+c)/2, (1-c)/2}`` to the count of ``x``, with mean
``mu = (1/K) sum_k 1[H_k(item) = H_k(x)]`` (0 for an empty slot). The estimate of one run is
``sum T / n``: exact mean, variance and kurtosis follow, and are checked over ``R`` runs at
``Z`` sd and chi-square quantiles (false-failure probability ``ALPHA = 5e-9`` per check).
"""

import math

import numpy as np
import pytest
from scipy import stats

from ldpfast.protocols.sets import npcms
from ldpfast.errors import ReportError

ALPHA = 5e-9
Z = stats.norm.isf(ALPHA / 2)


def test_npcms_matches_the_exact_moments():
    params = npcms.NPCMSParams.create(epsilon=6.0, d=40, K=4, M=16, seed=3, L=3)
    n, runs = 1500, 240
    rng = np.random.default_rng(4)
    sets = [[0, 1] if i % 4 == 0 else [0] if i % 4 == 1 else rng.choice(40, 3, replace=False).tolist()
            for i in range(n)]
    client = npcms.NPCMSClient(params, rng=5)
    c = params.c
    cells = params.hash(np.arange(40, dtype=np.uint64))                         # (d, K)
    for x in (0, 1, 7):
        mu_item = (cells == cells[x]).mean(axis=1)                              # mu per item value
        mus = np.concatenate([mu_item[np.array(s, dtype=np.int64)] for s in sets] +
                             [np.zeros(params.L * n - sum(len(s) for s in sets))])
        plus = 0.5 + (mus - 0.5) / c
        pq = plus * (1 - plus)
        expected = mus.sum() / n
        variance = np.sum(c * c / 4 - (mus - 0.5) ** 2) / n**2
        assert variance == pytest.approx(np.sum(c * c * pq) / n**2, rel=1e-9)
        kurt = np.sum(c**4 * pq * (1 - 6 * pq)) / np.sum(c * c * pq) ** 2
        if x == 0:
            runs_est = np.array([npcms.NPCMSServer(params).update(client.perturb(sets)).estimate([0, 1, 7])
                                 for _ in range(runs)])
        fhat = runs_est[:, (0, 1, 7).index(x)]
        assert abs(fhat.mean() - expected) < Z * math.sqrt(variance / runs), (fhat.mean(), expected)
        nu = 2 / (2 / (runs - 1) + kurt / runs)
        lo, hi = stats.chi2.ppf(ALPHA / 2, nu) / nu, stats.chi2.isf(ALPHA / 2, nu) / nu
        assert lo * variance < fhat.var(ddof=1) < hi * variance


def test_npcms_large_sets_send_a_uniform_subset():
    """Sets of 5 items and L = 2 slots: every item is sent with probability 2/5 (binomial
    check at level ALPHA on the noiseless slots, read back through a huge budget)."""
    params = npcms.NPCMSParams.create(epsilon=2000.0 / 100, d=5, K=1, M=8, seed=1, L=2)
    client = npcms.NPCMSClient(params, rng=6)
    sent = client._slots(np.arange(0, 5 * 4001, 5), np.tile(np.arange(5, dtype=np.uint64), 4000))
    assert sent.shape == (4000, 2) and np.all(sent[:, 0] != sent[:, 1])
    share = np.bincount(sent.ravel(), minlength=5) / 4000
    assert np.all(np.abs(share - 0.4) < Z * math.sqrt(0.4 * 0.6 / 4000))


def test_npcms_rejects_bad_reports():
    params = npcms.NPCMSParams.create(epsilon=2.0, d=60, K=2, M=8, seed=1, L=3)
    server = npcms.NPCMSServer(params)
    good = npcms.NPCMSClient(params, rng=1).perturb([[1, 2], [3]])
    with pytest.raises(ReportError, match="shape"):
        server.update(npcms.NPCMSReports(rows=good.rows[:, :2], bits=good.bits[:, :2]))
    with pytest.raises(ReportError, match="< K"):
        server.update(npcms.NPCMSReports(rows=good.rows + 2, bits=good.bits))
    with pytest.raises(ReportError, match="-1 or \\+1"):
        server.update(npcms.NPCMSReports(rows=good.rows, bits=np.zeros_like(good.bits)))
    assert server.n == 0
