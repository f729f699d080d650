"""Seeded simulations of OCMS+RR against its theory ([PAN] Cor 3.1-3.3, Eq. 8, Alg. 2).

Tolerances are derived, not guessed:

* The match count ``C(x)`` of one run is a sum of independent Bernoulli variables (one per
  user: ``pi = e/(e+m-1)`` if the user holds ``x``, else ``cbar e/(e+m-1) + (1-cbar)/(e+m-1)``),
  and ``fhat`` is affine in ``C``. So the exact mean, variance and excess kurtosis of one
  estimate are known in closed form.
* Mean of ``R`` runs: normal with sd ``sqrt(Var/R)``; we assert ``|mean - E| < Z sd``.
* Sample variance of ``R`` runs: ``s^2 nu / sigma^2 ~ chi2(nu)`` with ``nu`` the effective
  degrees of freedom ``2 / (2/(R-1) + kurt/R)`` (exact for normal data, corrected for the
  known excess kurtosis of ``C``); we assert ``s^2`` lies between the ``ALPHA/2`` quantiles.
* Every assertion has false-failure probability ``ALPHA = 5e-9``; this module makes fewer
  than 200 such assertions, so a false failure has probability < 1e-6 overall (Bonferroni).
  Seeds are fixed, so the outcome is reproducible anyway.
"""

import math

import numpy as np
import pytest

from ldpfast import _core, theory
from ldpfast.protocols.frequency import ocms
from ldpfast.kernels.field import PRIME
from _moments import Z, check_mean, check_variance



def simulate_matches(params, values, candidates, runs, seed):
    """Match counts, shape (runs, len(candidates)): ``runs`` independent runs of the
    clients on the fixed data set ``values``, batched through one perturb call."""
    n = values.size
    reports = ocms.OCMSClient(params, rng=seed).perturb(np.tile(values, runs))
    matches = np.empty((runs, len(candidates)), dtype=np.int64)
    for j, x in enumerate(candidates):
        hashed = _core.ocms_hash(params.field, reports.a0, reports.a1,
                                 np.full(len(reports), x, dtype=np.uint64), params.m)
        matches[:, j] = (hashed == reports.z).reshape(runs, n).sum(axis=1)
    return matches


def exact_moments(params, values, x):
    """(E C, Var C, excess kurtosis of C) for candidate x, from the per-user Bernoullis."""
    e = math.exp(params.epsilon)
    keep, each = e / (e + params.m - 1), 1 / (e + params.m - 1)
    cbar = float(params.collision_probability)
    pi = np.where(values == x, keep, cbar * keep + (1 - cbar) * each)
    var_terms = pi * (1 - pi)
    var = var_terms.sum()
    kurt = np.sum(var_terms * (1 - 6 * var_terms)) / var**2
    return pi.sum(), var, kurt


def skewed_values(n, d):
    """A fixed data set: 60% hold 0, 30% hold 1, the rest one user each on 2, 3, ..."""
    head, second = int(0.6 * n), int(0.3 * n)
    tail = np.arange(2, 2 + n - head - second) % d
    return np.concatenate([np.zeros(head), np.ones(second), tail]).astype(np.int64)


GRID = [  # (epsilon, m, field_size, field_kind)
    (0.5, 3, PRIME, "prime"),
    (2.0, 2, PRIME, "prime"),
    (2.0, 4, PRIME, "prime"),
    (4.0, 56, PRIME, "prime"),
    (2.0, 4, 2**16, "binary"),
    (3.0, 5, 100_003, "prime"),  # a compact prime (m' = m to 1e-9)
]


@pytest.mark.parametrize("eps,m,size,kind", GRID)
def test_unbiased_with_theoretical_variance(eps, m, size, kind):
    d, n, runs = 1000, 250, 4000
    params = ocms.OCMSParams(eps, d, m, size, kind)
    values = skewed_values(n, d)
    candidates = [0, 1, 2, d - 1]  # f = 0.6, 0.3, 0.004, 0
    matches = simulate_matches(params, values, candidates, runs, seed=11)
    fhat = ocms.decode_matches(params, matches, n)
    for j, x in enumerate(candidates):
        f = np.mean(values == x)
        mean_c, var_c, kurt = exact_moments(params, values, x)
        variance = theory.ocms_variance(params, n=n, f=f)
        # the closed form (Eq. 6 / Eq. 8) agrees with the exact Bernoulli-sum variance
        slope = float(ocms.decode_matches(params, 1, n) - ocms.decode_matches(params, 0, n))
        assert variance == pytest.approx(slope**2 * var_c, rel=1e-9)
        assert float(ocms.decode_matches(params, mean_c, n)) == pytest.approx(f, abs=1e-12)
        check_mean(fhat[:, j], f, variance)
        check_variance(fhat[:, j], variance, kurt)
        # negative control: the same counts decoded with [PAN] Alg. 1's erratum constant
        # (e+m-1)/(e-1) are biased by mu/(mu-1) E[C]/(n(e-1)); wherever that bias exceeds
        # 2 Z sd the mean check must reject them (it has the power to catch the erratum)
        mu, em1 = params.estimator_m, math.expm1(eps)
        typo = fhat[:, j] + mu / (mu - 1) * matches[:, j] / (n * em1)
        bias = mu / (mu - 1) * mean_c / (n * em1)
        sd = math.sqrt(variance / runs)
        if bias > 2 * Z * sd:
            assert abs(typo.mean() - f) > Z * sd


SMALL_FIELDS = [  # (field_size, field_kind, m, d): m' differs visibly from m
    (13, "prime", 3, 12),
    (7, "prime", 3, 6),
    (8, "binary", 3, 7),
]


@pytest.mark.parametrize("size,kind,m,d", SMALL_FIELDS)
def test_m_prime_removes_the_small_field_bias(size, kind, m, d):
    """Algorithm 2's m' makes the estimator unbiased on a small field, where the plain-m
    estimator (R1) has the bias predicted by [PAN] Thm 3.2 with cbar from Lemma 3.2."""
    eps, n, runs = 4.0, 300, 10_000
    with_m_prime = ocms.OCMSParams(eps, d, m, size, kind)
    plain = ocms.OCMSParams(eps, d, m, size, kind, use_m_prime=False)
    assert with_m_prime.m_prime < m
    values = np.concatenate([np.zeros(n // 2), np.arange(n - n // 2) % (d - 2) + 1]).astype(np.int64)
    candidates = [0, 1, d - 1]  # f = 0.5, about 0.5/(d-2), 0
    matches = simulate_matches(with_m_prime, values, candidates, runs, seed=23)
    good = ocms.decode_matches(with_m_prime, matches, n)
    biased = ocms.decode_matches(plain, matches, n)
    cbar = float(with_m_prime.collision_probability)
    for j, x in enumerate(candidates):
        f = np.mean(values == x)
        _, var_c, kurt = exact_moments(with_m_prime, values, x)
        variance = theory.ocms_variance(with_m_prime, n=n, f=f)
        check_mean(good[:, j], f, variance)
        check_variance(good[:, j], variance, kurt)
        # the plain-m estimator converges to Thm 3.2's expectation, not to f
        expected_plain = theory.ocms_expectation_general(m, f, [1 - f], [cbar])
        plain_variance = theory.ocms_variance(plain, n=n, f=f)
        check_mean(biased[:, j], expected_plain, plain_variance)
        if f < 0.5:  # and the test can tell the two apart: the bias exceeds 2 Z sd
            assert expected_plain - f > 2 * Z * math.sqrt(plain_variance / runs)


def test_server_modes_agree_and_are_unbiased():
    """End to end through Client and both Server modes: identical estimates, mean over runs
    within Z sd of the truth."""
    eps, d, n, runs = 1.0, 1000, 2000, 150
    params = ocms.OCMSParams.optimal(eps, d)
    values = skewed_values(n, d)
    candidates = np.array([0, 1, 2, 500])
    client = ocms.OCMSClient(params, rng=np.random.default_rng(5))
    estimates = np.empty((runs, candidates.size))
    for r in range(runs):
        reports = client.perturb(values)
        keep = ocms.OCMSServer(params).update(reports)
        stream = ocms.OCMSServer(params, candidates=candidates).update(reports)
        estimates[r] = keep.estimate(candidates)
        np.testing.assert_array_equal(stream.estimate(), estimates[r])
    for j, x in enumerate(candidates):
        f = np.mean(values == x)
        check_mean(estimates[:, j], f, theory.ocms_variance(params, n=n, f=f))


def test_estimates_sum_to_about_one_over_the_dictionary():
    """Whole-dictionary estimates (estimate() with no candidates) are unbiased, so their sum
    over [0, d) has mean 1. The d estimates are dependent; sd(sum) <= sum of the sds
    (Minkowski) <= d * max sd, a conservative bound for one run."""
    eps, d, n = 2.0, 64, 20_000
    params = ocms.OCMSParams.optimal(eps, d)
    values = skewed_values(n, d)
    server = ocms.OCMSServer(params).update(ocms.OCMSClient(params, rng=3).perturb(values))
    est = server.estimate()
    assert est.shape == (d,)
    worst_sd = math.sqrt(theory.ocms_variance(params, n=n, f=np.array([0.0, 1.0])).max())
    assert abs(est.sum() - 1.0) < Z * d * worst_sd
    np.testing.assert_array_equal(est[[0, 5]], server.estimate([0, 5]))
