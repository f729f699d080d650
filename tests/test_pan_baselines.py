"""CMS + RAPPOR ([PAN] Appendix G) and Subset Selection against their closed forms.

Tolerances are derived as in tests/test_ocms_statistics.py:

* In one run on a fixed data set, the statistic the estimate is affine in (``S(x)``, the
  sum of the reported bits at ``h_i(x)``, or ``C(v)``, the number of reported sets holding
  ``v``) is a sum of independent per-user Bernoulli variables with known probabilities,
  so the exact mean, variance and excess kurtosis of one estimate are known.
* Mean of ``R`` runs: normal with sd ``sqrt(Var/R)``; we assert ``|mean - f| < Z sd``.
* Sample variance of ``R`` runs: ``s^2 nu / sigma^2 ~ chi2(nu)`` with effective degrees of
  freedom ``nu = 2 / (2/(R-1) + kurt/R)``; we assert ``s^2`` is inside the ``ALPHA/2``
  quantiles. The closed-form variance under test comes from ``ldpfast.theory`` (a
  different formula: mixture of decoded bits), the moments from the Bernoulli sums.
* Each assertion has false-failure probability ``ALPHA = 5e-9``; fewer than 100 of them
  here, so a false failure has probability < 1e-6 (Bonferroni). Seeds are fixed.
"""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from ldpfast import _core, theory
from ldpfast.protocols.frequency import rappor_cms, subset_selection
from ldpfast.errors import ParameterError, ReportError
from ldpfast.kernels.field import collision_probability, core_field
from _moments import ALPHA, Z, check_mean, check_variance



def bernoulli_sum_kurtosis(pi):
    terms = pi * (1 - pi)
    return np.sum(terms * (1 - 6 * terms)) / terms.sum() ** 2


def skewed_values(n, d):
    """60% hold 0, 30% hold 1, the rest spread over 2, 3, ... (mod d)."""
    head, second = int(0.6 * n), int(0.3 * n)
    tail = 2 + np.arange(n - head - second) % (d - 2)
    return np.concatenate([np.zeros(head), np.ones(second), tail]).astype(np.int64)


# --- theory --------------------------------------------------------------------------------

@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0, 20.0])
def test_rappor_bits_are_eps_ldp_and_decode_to_the_paper_variances(eps):
    for variant in theory.RAPPOR_VARIANTS:
        p, q = theory.rappor_bit_probabilities(eps, variant)
        # The one-hot vectors of two inputs differ in two bits (a 1 becomes a 0 and a 0 a 1),
        # so the worst likelihood ratio of a report is (p/q) ((1-q)/(1-p)): exactly e^eps.
        assert p > q
        assert (p / q) * ((1 - q) / (1 - p)) == pytest.approx(math.exp(eps), rel=1e-12)
        v_eq, v_ne = theory.rappor_variances(eps, variant)
        assert v_eq == pytest.approx(p * (1 - p) / (p - q) ** 2, rel=1e-9)
        assert v_ne == pytest.approx(q * (1 - q) / (p - q) ** 2, rel=1e-9)


def test_cms_rappor_variance_tends_to_the_appendix_g_limits():
    eps, n = 2.0, 1000
    e, e_h = math.exp(eps), math.exp(eps / 2)
    srp = theory.cms_rappor_variance(eps, "symmetric", 1e-9, n, f=0.7)
    assert srp == pytest.approx(e_h / (n * (e_h - 1) ** 2), rel=1e-6)
    assert theory.cms_rappor_mse_limit(eps, "symmetric", n) == pytest.approx(srp, rel=1e-6)
    for f_star in (0.0, 0.3, 1.0):
        arp = theory.cms_rappor_variance(eps, "asymmetric", 1e-9, n, f=f_star)
        assert arp == pytest.approx((f_star * (e - 1) ** 2 + 4 * e) / (n * (e - 1) ** 2), rel=1e-6)
        assert theory.cms_rappor_mse_limit(eps, "asymmetric", n, f_star) == pytest.approx(arp, rel=1e-6)
    assert theory.cms_rappor_l2_limit(eps, "asymmetric", 100, n) == pytest.approx(400 * e / (n * (e - 1) ** 2))


@pytest.mark.parametrize("eps", [0.5, 2.0, 5.0])
def test_appendix_g_conclusion_rr_is_never_worse(eps):
    """[PAN] Appendix G: OCMS+RR's optimal worst-case MSE is at most both RAPPOR limits
    (equal to sRP's when f* >= 1/2 and to aRP's at f* = 0); its optimal l2 loss and aRP's
    both tend to 4de/(n(e-1)^2) as d grows."""
    for f_star in (0.0, 0.1, 0.49, 0.5, 1.0):
        rr = theory.ocms_worst_case_mse(eps, 1, f_star=f_star)
        best_rappor = min(theory.cms_rappor_mse_limit(eps, v, 1, f_star) for v in theory.RAPPOR_VARIANTS)
        assert rr <= best_rappor * (1 + 1e-12), (f_star, rr, best_rappor)
        if f_star >= 0.5:
            assert rr == pytest.approx(theory.cms_rappor_mse_limit(eps, "symmetric", 1), rel=1e-12)
    assert theory.ocms_worst_case_mse(eps, 1, f_star=0.0) == pytest.approx(
        theory.cms_rappor_mse_limit(eps, "asymmetric", 1, 0.0), rel=1e-12)
    d = 10**7
    assert theory.ocms_l2(eps, d) / theory.cms_rappor_l2_limit(eps, "asymmetric", d) == pytest.approx(1, abs=2e-3)


@pytest.mark.parametrize("variant", ["symmetric", "asymmetric"])
def test_cms_rappor_optimal_m_is_the_smallest_close_enough(variant):
    eps, tau = 1.5, 0.02
    m = theory.cms_rappor_optimal_m(eps, variant, tau)

    def ratio(m):
        return max(theory.cms_rappor_variance(eps, variant, 1 / m, f=f)
                   / theory.cms_rappor_variance(eps, variant, 1e-12, f=f)
                   for f in np.linspace(0, 1, 11))

    assert ratio(m) <= 1 + tau + 1e-12 < ratio(m - 1)


def test_subset_selection_probabilities_and_variance():
    eps, d, k = 1.0, 50, 12
    e = math.exp(eps)
    p, q = theory.subset_selection_probabilities(eps, d, k)
    assert p == pytest.approx(k * e / (k * e + d - k))
    assert q == pytest.approx((p * (k - 1) + (1 - p) * k) / (d - 1))
    # Each value is in the set with probability p or q: k values in expectation.
    assert p + (d - 1) * q == pytest.approx(k)
    var = theory.subset_selection_variance(eps, d, k, n=100, f=0.25)
    assert var == pytest.approx((0.25 * p * (1 - p) + 0.75 * q * (1 - q)) / (100 * (p - q) ** 2))
    with pytest.raises(ParameterError, match="k must be in"):
        theory.subset_selection_variance(eps, d, d)


def test_subset_selection_optimal_k_is_the_exact_minimiser():
    for eps in (0.5, 1.0, 3.0):
        for d in (2, 3, 17, 200):
            ks = np.arange(1, d)
            variances = [theory.subset_selection_variance(eps, d, int(k)) for k in ks]
            assert theory.subset_selection_optimal_k(eps, d) == ks[int(np.argmin(variances))]


def test_pairwise_assignment_bits_theorem_5_2():
    assert theory.pairwise_assignment_bits(10**6, 2048) == 2 * 20
    assert theory.pairwise_assignment_bits(1, 1) == 2


# --- CMS + RAPPOR protocol -------------------------------------------------------------

def rappor_sums(params, reports, x, runs):
    """S(x) per run, computed independently of the server (hash, then look up the bit)."""
    hashed = _core.ocms_hash(core_field(params.field_size), reports.a0, reports.a1,
                             np.full(len(reports), x, dtype=np.uint64), params.m)
    bits = reports.bits[np.arange(len(reports)), hashed.astype(np.intp)]
    return bits.reshape(runs, -1).sum(axis=1).astype(np.float64)


@pytest.mark.parametrize("variant, eps, m, field_size", [
    ("symmetric", 1.0, 8, 23),        # tiny field: cbar = 29/529, not 1/8
    ("asymmetric", 2.0, 16, 23),      # cbar = 37/529
    ("asymmetric", 0.5, 5, 0),        # the default field (2^64 - 59)
])
def test_cms_rappor_is_unbiased_with_the_closed_form_variance(variant, eps, m, field_size):
    d, n, runs = 20, 1000, 400
    params = rappor_cms.CMSRAPPORParams(epsilon=eps, d=d, m=m, variant=variant, field_size=field_size)
    values = skewed_values(n, d)
    reports = rappor_cms.CMSRAPPORClient(params, rng=7).perturb(np.tile(values, runs))
    p, q = params.bit_probabilities
    c = params.collision_probability
    assert c == float(collision_probability(params.field_size, m))
    for x in (0, 1, 5):
        f = float(np.mean(values == x))
        fhat = ((rappor_sums(params, reports, x, runs) / n - q) / (p - q) - c) / (1 - c)
        pi = np.where(values == x, p, c * p + (1 - c) * q)
        variance = params.variance(n=n, f=f)
        assert variance == pytest.approx(np.sum(pi * (1 - pi)) / (n * (p - q) * (1 - c)) ** 2, rel=1e-9)
        check_mean(fhat, f, variance)
        check_variance(fhat, variance, bernoulli_sum_kurtosis(pi))
    # The server's estimate on the first run is the same affine map of the same sums.
    first = rappor_cms.CMSRAPPORReports(a0=reports.a0[:n], a1=reports.a1[:n], bits=reports.bits[:n])
    server = rappor_cms.CMSRAPPORServer(params).update(first)
    direct = ((rappor_sums(params, first, 5, 1) / n - q) / (p - q) - c) / (1 - c)
    np.testing.assert_allclose(server.estimate([5]), direct, rtol=1e-12)


def test_cms_rappor_naive_scaling_would_be_biased():
    """With a small field the plain 1/m scaling is biased by more than 2 Z sd of the pooled
    estimate (computed below), so on the same runs the naive estimate misses f by more
    than Z sd whenever the exact-cbar estimate is within Z sd of it."""
    params = rappor_cms.CMSRAPPORParams(epsilon=5.0, d=20, m=16, variant="asymmetric", field_size=23)
    n, runs = 1000, 800
    values = skewed_values(n, 20)
    reports = rappor_cms.CMSRAPPORClient(params, rng=11).perturb(np.tile(values, runs))
    server = rappor_cms.CMSRAPPORServer(params).update(reports)
    sd = math.sqrt(params.variance(n=n * runs, f=0.0))
    f7 = float(np.mean(values == 7))
    c, m = params.collision_probability, 16
    naive_bias = (f7 + (1 - f7) * c - 1 / m) / (1 - 1 / m) - f7
    assert naive_bias > 2 * Z * sd
    assert abs(server.estimate([7])[0] - f7) < Z * sd
    p, q = params.bit_probabilities
    naive = ((server._sums[7] / (n * runs) - q) / (p - q) - 1 / m) / (1 - 1 / m)
    assert abs(naive - f7) > Z * sd


def test_cms_rappor_bits_follow_p_and_q():
    params = rappor_cms.CMSRAPPORParams(epsilon=1.0, d=10, m=12, variant="symmetric")
    reports = rappor_cms.CMSRAPPORClient(params, rng=3).perturb(np.full(20000, 4))
    hashed = _core.ocms_hash(core_field(params.field_size), reports.a0, reports.a1,
                             np.full(len(reports), 4, dtype=np.uint64), params.m).astype(np.intp)
    true_bits = reports.bits[np.arange(len(reports)), hashed]
    p, q = params.bit_probabilities
    ones_elsewhere = (reports.bits.sum() - true_bits.sum()) / (len(reports) * (params.m - 1))
    for share, prob, count in ((true_bits.mean(), p, len(reports)), (ones_elsewhere, q, len(reports) * 11)):
        assert abs(share - prob) < Z * math.sqrt(prob * (1 - prob) / count)


def test_cms_rappor_rejects_bad_input():
    params = rappor_cms.CMSRAPPORParams(epsilon=1.0, d=10, m=8)
    with pytest.raises(ParameterError, match="variant"):
        rappor_cms.CMSRAPPORParams(epsilon=1.0, d=10, m=8, variant="skew")
    with pytest.raises(ParameterError, match="field_size"):
        rappor_cms.CMSRAPPORParams(epsilon=1.0, d=10, m=8, field_size=9)
    with pytest.raises(ParameterError, match="m must be"):
        rappor_cms.CMSRAPPORParams(epsilon=1.0, d=10, m=1)
    reports = rappor_cms.CMSRAPPORClient(params, rng=1).perturb([1, 2, 3])
    server = rappor_cms.CMSRAPPORServer(params)
    bad = rappor_cms.CMSRAPPORReports(a0=reports.a0, a1=reports.a1, bits=np.ones((3, 9), dtype=np.uint8))
    with pytest.raises(ReportError, match="m = 8 columns"):
        server.update(bad)
    bad = rappor_cms.CMSRAPPORReports(a0=reports.a0, a1=reports.a1, bits=reports.bits * 2)
    with pytest.raises(ReportError, match="0 or 1"):
        server.update(bad)
    assert server.n == 0
    with pytest.raises(ParameterError, match="integers in"):
        rappor_cms.CMSRAPPORClient(params).perturb([10])
    with pytest.raises(ParameterError, match="among the values"):
        rappor_cms.CMSRAPPORServer(params, candidates=[1, 2]).update(reports).estimate([3])


# --- Subset Selection protocol ---------------------------------------------------------

@pytest.mark.parametrize("eps, d, k", [(1.0, 30, 0), (0.5, 12, 5), (3.0, 40, 1)])
def test_subset_selection_is_unbiased_with_the_closed_form_variance(eps, d, k):
    n, runs = 1000, 400
    params = subset_selection.SubsetSelectionParams(epsilon=eps, d=d, k=k)
    values = skewed_values(n, d)
    reports = subset_selection.SubsetSelectionClient(params, rng=5).perturb(np.tile(values, runs))
    assert reports.items.shape == (n * runs, params.k)
    p, q = params.probabilities
    for x in (0, 1, 3):
        f = float(np.mean(values == x))
        counts = (reports.items == x).any(axis=1).reshape(runs, n).sum(axis=1)
        fhat = (counts / n - q) / (p - q)
        pi = np.where(values == x, p, q)
        variance = params.variance(n=n, f=f)
        assert variance == pytest.approx(np.sum(pi * (1 - pi)) / (n * (p - q)) ** 2, rel=1e-9)
        check_mean(fhat, f, variance)
        check_variance(fhat, variance, bernoulli_sum_kurtosis(pi))
    first = subset_selection.SubsetSelectionReports(items=reports.items[:n])
    server = subset_selection.SubsetSelectionServer(params).update(first)
    direct = ((first.items == 3).any(axis=1).sum() / n - q) / (p - q)
    np.testing.assert_allclose(server.estimate([3]), [direct], rtol=1e-12)


def test_subset_selection_output_distribution_is_the_mechanism():
    """For d = 4, k = 2 every one of the 6 subsets has the probability the mechanism
    defines (p/3 if it holds x, (1-p)/3 otherwise: ratio e^eps), checked by a chi-square
    goodness-of-fit test at level ALPHA."""
    eps = 1.0
    params = subset_selection.SubsetSelectionParams(epsilon=eps, d=4, k=2)
    n = 60000
    reports = subset_selection.SubsetSelectionClient(params, rng=9).perturb(np.full(n, 2))
    subsets = list(itertools.combinations(range(4), 2))
    index = {s: i for i, s in enumerate(subsets)}
    observed = np.bincount([index[tuple(r)] for r in reports.items.tolist()], minlength=6)
    p, _ = params.probabilities
    expected = np.array([(p / 3 if 2 in s else (1 - p) / 3) for s in subsets]) * n
    assert expected.max() / expected.min() == pytest.approx(math.exp(eps))
    _, pvalue = stats.chisquare(observed, expected)
    assert pvalue > ALPHA


def test_subset_selection_rejects_bad_input():
    params = subset_selection.SubsetSelectionParams(epsilon=1.0, d=10, k=3)
    with pytest.raises(ParameterError, match="k must be in"):
        subset_selection.SubsetSelectionParams(epsilon=1.0, d=10, k=10)
    server = subset_selection.SubsetSelectionServer(params)
    for items, match in ((np.array([[1, 1, 2]]), "strictly increasing"), (np.array([[1, 2, 10]]), "values in"),
                         (np.array([[1, 2]]), "k = 3 columns")):
        with pytest.raises(ReportError, match=match):
            server.update(subset_selection.SubsetSelectionReports(items=items))
    assert server.n == 0
    with pytest.raises(ReportError, match="2-D"):
        subset_selection.SubsetSelectionReports(items=np.array([1, 2, 3]))


# --- Appendix A: least-squares reconstruction ------------------------------------------

def test_reconstruction_matrix_reproduces_appendix_a():
    P = np.array([[0.133, 0.143, 0.192], [0.031, 0.212, 0.658], [0.287, 0.155, 0.039],
                  [0.161, 0.254, 0.060], [0.389, 0.236, 0.051]])
    P = P / P.sum(axis=0)                                      # printed rounded: column 1 sums to 1.001
    Q = theory.reconstruction_matrix(P)
    printed = np.array([[0.366, -0.088, 2.289, -3.629, 2.267], [0.010, -0.393, -1.928, 6.625, -1.294],
                        [0.332, 1.560, 0.476, -1.996, 0.240]])
    # The paper prints P rounded to 3 decimals (|dP| <= 5e-4 per entry, 15 entries); to first
    # order Q = P^+ moves by at most ||Q||_2^2 ||dP||_F, plus 5e-4 for the printed Q's rounding.
    bound = np.linalg.norm(Q, 2) ** 2 * 5e-4 * math.sqrt(15) + 5e-4
    assert np.abs(Q - printed).max() < bound, (np.abs(Q - printed).max(), bound)
    np.testing.assert_allclose(Q @ P, np.eye(3), atol=1e-12)   # Property 2.1: E[R(v)] is one-hot


@pytest.mark.parametrize("eps, m", [(0.5, 3), (2.0, 7)])
def test_reconstruction_of_rr_gives_the_decode_constants_and_variances(eps, m):
    e = math.exp(eps)
    P = np.full((m, m), 1 / (e + m - 1)) + np.eye(m) * (e - 1) / (e + m - 1)
    Q = theory.reconstruction_matrix(P)
    on, off = theory.rr_decode_constants(eps, m)
    np.testing.assert_allclose(Q, np.full((m, m), off) + np.eye(m) * (on - off), rtol=1e-9)
    V = theory.reconstruction_variances(P)
    v_eq, v_ne = theory.rr_variances(eps, m)
    np.testing.assert_allclose(V, np.full((m, m), v_ne) + np.eye(m) * (v_eq - v_ne), rtol=1e-9)


def test_reconstruction_rejects_bad_mechanisms():
    with pytest.raises(ParameterError, match="distributions"):
        theory.reconstruction_matrix([[0.5, 0.2], [0.6, 0.8]])
    with pytest.raises(ParameterError, match="full column rank"):
        theory.reconstruction_matrix([[0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(ParameterError, match="outputs >= inputs"):
        theory.reconstruction_matrix([[0.5, 0.2, 1.0], [0.5, 0.8, 0.0]])
