"""HadaOracle's per-subset variance: the hash term of theory.hadaoracle_group_mse.

HadaOracle hashes with h(v) = low bits of (a1 v + a0) in GF(2^64): pairwise independent, so
the colliding mass has the right mean (n - c_x)/m, but not 3-wise independent, so its
variance is not sum c^2 (1/m)(1 - 1/m) when heavy values share low-bit structure (small
consecutive integers). hadaoracle_collision_moments computes it exactly from GF(2) ranks."""

import numpy as np
import pytest

from ldpfast import _core
from ldpfast.protocols.frequency import hadaoracle as O
from ldpfast.kernels.field import gf64_field
from ldpfast.theory import hadamard as th

M = 16
COUNT = 1000
CASES = {"structured": list(range(1, 11)),
         "spread": [int(v) for v in np.random.default_rng(5).integers(1, 2**40, 10)]}


def _hash_mc(others, draws, seed):
    """The colliding mass with x = 0 for ``draws`` uniform hash functions."""
    gen = np.random.default_rng(seed)
    a0, a1 = (gen.integers(0, 2**64 - 1, draws, dtype=np.uint64, endpoint=True) for _ in range(2))
    field = gf64_field()
    h0 = _core.ocms_hash(field, a0, a1, np.zeros(draws, dtype=np.uint64), M)
    mass = np.zeros(draws)
    for v in others:
        mass += COUNT * (_core.ocms_hash(field, a0, a1, np.full(draws, v, dtype=np.uint64), M) == h0)
    return mass


def _variance_with_tolerance(samples):
    """Sample variance and 6 standard errors of it, sqrt((mu4 - s^4)/R) (large-R normal
    approximation of the sample variance): a chance failure has probability ~2e-9."""
    centred = samples - samples.mean()
    s2 = float(np.mean(centred**2))
    return s2, 6.0 * np.sqrt((np.mean(centred**4) - s2 * s2) / samples.size)


@pytest.mark.parametrize("case", sorted(CASES))
def test_collision_variance_is_exact_for_the_gf64_hash(case):
    others = CASES[case]
    mean, var = th.hadaoracle_collision_moments(0, others, [COUNT] * len(others), M)
    mass = _hash_mc(others, 1_000_000, seed=1)
    s2, tol = _variance_with_tolerance(mass)
    assert abs(s2 - var) < tol and tol < 0.05 * var            # hence within 5% (and well within 10%)
    assert abs(mass.mean() - mean) < 6 * np.sqrt(s2 / mass.size)
    pairwise = len(others) * COUNT**2 * (1 / M) * (1 - 1 / M)   # the 3-wise-independent formula
    if case == "structured":
        assert var > 3 * pairwise                               # what hadaoracle_group_mse used to assume
    else:
        assert var == pytest.approx(pairwise, rel=0.02)


@pytest.mark.parametrize("case", sorted(CASES))
def test_subset_estimate_variance_matches_the_corrected_closed_form(case):
    # n = 11,000 users: 1,000 hold x = 0 and 1,000 each heavy value; k = 3 subsets, subset 0's
    # k-scaled estimate; eps = 8 keeps the noise (n k c_eps^2 ~ 33,000) small next to the hash term.
    others = CASES[case]
    values = np.repeat(np.array([0] + others, dtype=np.uint64), COUNT)
    n, runs, eps = values.size, 1500, 8.0
    keys = np.random.default_rng(3)
    est = np.empty(runs)
    for r in range(runs):
        params = O.HadaOracleParams(epsilon=eps, d=2**40, k=3, m=M, hash_seed=100 + r)   # a fresh hash per run
        server = O.HadaOracleServer(params).update(O.HadaOracleClient(params, rng=keys).perturb(values))
        est[r] = server.group_estimates(np.array([0], dtype=np.uint64))[0, 0]
    _, coll_var = th.hadaoracle_collision_moments(0, others, [COUNT] * len(others), M)
    bias, var = th.hadaoracle_group_mse(eps, n, 3, M, c_x=COUNT, collision_variance=coll_var)
    s2, tol = _variance_with_tolerance(est)
    assert abs(s2 - var) < tol, (s2 / var, tol / var)
    if case == "structured":   # the 3-wise formula is outside the band: the test can tell them apart
        _, old = th.hadaoracle_group_mse(eps, n, 3, M, c_x=COUNT, sum_sq_other=len(others) * COUNT**2)
        assert s2 - old > tol
    assert abs(est.mean() - (COUNT + bias)) < 6 * np.sqrt(s2 / runs)
