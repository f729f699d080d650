"""Closed forms of [PAN] against SPEC section 6 and against each other."""

import math

import numpy as np
import pytest

from ldpfast import theory as T
from ldpfast.protocols.frequency import ocms
from ldpfast.errors import ParameterError

EPS = [1, 2, 3, 4, 5]


def r1_zipf_frequencies():
    """R1's deterministic Zipf data (SPEC 2.8): counts max(1, round(10000 p_r)), p_r ~ 1/r^2,
    r = 1..100, filled in order and truncated to a total of 10,000."""
    weights = np.array([1 / r**2 for r in range(1, 101)])
    probs = weights / weights.sum()
    counts, total = [], 0
    for p in probs:
        c = min(max(1, round(10000 * p)), 10000 - total)
        counts.append(c)
        total += c
    return np.array(counts)


def test_rr_variances_by_exact_enumeration():
    for eps, m in [(3.0, 5), (1.0, 2), (0.3, 9)]:
        e = math.exp(eps)
        match, other = T.rr_decode_constants(eps, m)
        keep, each = e / (e + m - 1), 1 / (e + m - 1)
        # queried symbol = true symbol: value `match` w.p. keep, `other` otherwise
        var_eq = keep * match**2 + (1 - keep) * other**2 - 1.0
        # queried symbol != true symbol: `match` w.p. each, `other` otherwise; mean 0
        var_ne = each * match**2 + (1 - each) * other**2
        v_eq, v_ne = T.rr_variances(eps, m)
        assert v_eq == pytest.approx(var_eq, rel=1e-12)
        assert v_ne == pytest.approx(var_ne, rel=1e-12)


def test_variance_eq6_spec_values_and_eq20():
    got = T.ocms_variance(3.0, 5, 10_000, np.array([0.0, 1.0, 0.3]))
    assert got == pytest.approx([3.981474e-5, 3.446313e-5, 3.820926e-5], rel=2e-7)
    assert T.ocms_variance_rr(3.0, 5, 10_000, np.array([0.0, 1.0, 0.3])) == pytest.approx(got, rel=1e-12)
    f = np.linspace(0, 1, 11)
    for eps in [0.1, 1, 4, 9]:
        for m in [2, 3, 7.5, 1000]:
            assert T.ocms_variance_rr(eps, m, 7, f) == pytest.approx(T.ocms_variance(eps, m, 7, f), rel=1e-9)


def test_variance_at_one_plus_e_h():
    want = [3.917698, 0.920674, 0.369710, 0.181015, 0.0974224]
    for eps, w in zip(EPS, want):
        m = 1 + math.exp(eps / 2)
        assert T.ocms_variance(eps, m, 1, 0.0) == pytest.approx(w, rel=5e-6)  # SPEC prints 6 digits
        assert T.ocms_variance(eps, m, 1, 1.0) == pytest.approx(w, rel=5e-6)
        assert T.ocms_worst_case_mse(eps, 1, f_star=1.0) == pytest.approx(w, rel=5e-6)
        assert T.ocms_mse_asymptote(eps) == T.ocms_worst_case_mse(eps, 1, 1.0)


@pytest.mark.parametrize("f_star,eps,want", [(0.0, 1, 3.682694), (0.0, 3, 0.220564), (0.1, 1, 3.770596),
                                             (0.1, 3, 0.289203), (0.3, 1, 3.881917), (0.3, 3, 0.352110)])
def test_worst_case_mse_thm_3_6(f_star, eps, want):
    got = T.ocms_worst_case_mse(eps, 1, f_star)
    assert got == pytest.approx(want, rel=2e-6)
    # Thm 3.6 is Eq. 6 at the real-valued optimal m, worst over f in [0, f*]: f = f*
    m = T.ocms_optimal_m(eps, "mse", f_star=f_star)
    assert T.ocms_variance(eps, m, 1, f_star) == pytest.approx(got, rel=1e-12)
    assert T.ocms_variance(eps, m, 1, 0.0) <= got * (1 + 1e-12)
    if f_star == 0.0:
        e = math.exp(eps)
        assert got == pytest.approx(4 * e / (e - 1) ** 2, rel=1e-12)


def test_worst_case_mse_is_optimal_over_m():
    for eps in [0.5, 2, 4]:
        for f_star in [0.0, 0.1, 0.4, 0.8]:
            best = T.ocms_worst_case_mse(eps, 1, f_star)
            m_opt = T.ocms_optimal_m(eps, "mse", f_star=f_star)
            grid = np.concatenate([np.linspace(1.01, 200, 20000), m_opt + np.linspace(-1e-3, 1e-3, 2001)])
            worst = np.maximum(T.ocms_variance(eps, grid, 1, 0.0), T.ocms_variance(eps, grid, 1, f_star))
            assert worst.min() >= best * (1 - 1e-9)
            assert worst.min() == pytest.approx(best, rel=1e-7)


def test_wrong_prior_thm_3_7():
    # equality: the m chosen for f* evaluated at the true max f
    for eps in [1, 3]:
        for f_star, max_f in [(0.0, 0.0105), (0.1, 0.3), (0.3, 0.9)]:
            m = T.ocms_optimal_m(eps, "mse", f_star=f_star)
            got = T.ocms_worst_case_mse(eps, 1, f_star, max_f=max_f)
            assert got == pytest.approx(T.ocms_variance(eps, m, 1, max_f), rel=1e-12)
            assert got <= T.ocms_worst_case_mse(eps, 1, f_star) + (max_f - f_star) * (1 - 2 * f_star) + 1e-15
    # the Gaussian experiment's theory curve (SPEC 6, R1 seed 317: max f = 0.0105)
    want = [3.69319e-4, 7.34562e-5, 2.31064e-5, 8.65218e-6, 3.78187e-6]
    assert [T.ocms_worst_case_mse(e, 10_000, 0.0, max_f=0.0105) for e in EPS] == pytest.approx(want, rel=2e-6)


def test_l2_thm_3_8_eq_22_and_asymptotes():
    assert T.ocms_l2(1, 100) == pytest.approx(369.2567905, rel=1e-9)
    assert T.ocms_l2(3, 10**5) == pytest.approx(22057.40215, rel=1e-9)
    assert T.ocms_l2_asymptote(3, 10**5) == pytest.approx(22056.40220, rel=1e-9)
    assert T.ocms_l2(5, 1000) == pytest.approx(28.28361, rel=2e-7)
    for eps, d in [(1, 100), (3, 10**5), (5, 1000), (0.2, 7)]:
        m_opt = T.ocms_optimal_m(eps, "l", d)
        assert T.ocms_l2(eps, d, 3, m_opt) == pytest.approx(T.ocms_l2(eps, d, 3), rel=1e-12)
        assert T.ocms_l1_bound(eps, d, 3) == pytest.approx(math.sqrt(d * T.ocms_l2(eps, d, 3)), rel=1e-15)
        grid = np.linspace(1.01, 400, 40000)
        assert T.ocms_l2(eps, d, 1, grid).min() >= T.ocms_l2(eps, d) * (1 - 1e-9)
    # Cor 3.4: d >> e gives l2 -> 4de/(n(e-1)^2), l1 -> 2 d e_h/(sqrt(n)(e-1)), m -> 1 + e
    for eps in [1, 2, 3]:
        d = 10**12
        assert T.ocms_l2(eps, d, 10) == pytest.approx(T.ocms_l2_asymptote(eps, d, 10), rel=1e-5)
        assert T.ocms_l1_bound(eps, d, 10) == pytest.approx(T.ocms_l1_asymptote(eps, d, 10), rel=1e-5)
        assert T.ocms_optimal_m(eps, "l", d) == pytest.approx(1 + math.exp(eps), rel=1e-5)


def test_eq22_is_the_sum_of_eq6_over_any_dataset():
    rng = np.random.default_rng(3)
    for eps, d, m in [(2.0, 50, 6), (0.5, 9, 2), (4.0, 300, 56)]:
        for _ in range(3):
            f = rng.dirichlet(np.ones(d))
            assert T.ocms_variance(eps, m, 11, f).sum() == pytest.approx(T.ocms_l2(eps, d, 11, m), rel=1e-10)


def test_he_variance():
    want = [4.6827e-4, 1.7241e-4, 1.2206e-4, 1.0760e-4, 1.0273e-4]
    assert [T.he_variance(e, 10_000) for e in EPS] == pytest.approx(want, rel=1e-4)
    ocms_opt = [3.9177e-4, 9.2067e-5, 3.6971e-5, 1.8102e-5, 9.7422e-6]
    assert [T.ocms_worst_case_mse(e, 10_000) for e in EPS] == pytest.approx(ocms_opt, rel=1e-4)


def test_r1_zipf_worst_case_and_l_ocms_losses():
    counts = r1_zipf_frequencies()
    assert counts[:10].tolist() == [6116, 1529, 680, 382, 245, 170, 125, 96, 76, 61]
    assert np.count_nonzero(counts) == 96 and counts.sum() == 10_000
    f = counts / 10_000
    mse = [T.ocms_worst_case_variance(e, ocms.hash_range(e), 10_000, f) for e in EPS]
    assert mse == pytest.approx([3.99817e-4, 9.32772e-5, 3.98147e-5, 1.88685e-5, 9.86793e-6], rel=2e-6)
    ms = [ocms.hash_range(e, 10**6, "l") for e in EPS]
    assert ms == [4, 8, 21, 56, 149]
    l2 = [T.ocms_l2(e, 100, 10_000, m) for e, m in zip(EPS, ms)]
    assert l2 == pytest.approx([0.0370384, 0.0073390, 0.0023052, 0.00086099, 0.00037291], rel=2e-5)
    l1 = [T.ocms_l1_bound(e, 100, 10_000, m) for e, m in zip(EPS, ms)]
    assert l1 == pytest.approx([1.92454, 0.85668, 0.48012, 0.29343, 0.19311], rel=2e-5)  # 5 digits


def test_appendix_k_factor():
    assert T.worst_case_mse_upper_factor(100, 100) == pytest.approx(1.7034127, abs=1e-7)
    assert T.worst_case_mse_upper_factor(1000, 100) == pytest.approx(1.8274659, abs=1e-7)
    assert T.worst_case_mse_upper_factor(10000, 100) == pytest.approx(1.9428653, abs=1e-7)


def test_imperfect_hashing_eq8_and_cor_3_5():
    # r = 0: the family is perfectly pairwise independent and Eq. 8 is Eq. 6
    assert T.ocms_variance_imperfect(2.0, 5, 15, 10, 0.3) == pytest.approx(T.ocms_variance(2.0, 5, 10, 0.3), rel=1e-14)
    assert T.ocms_min_field_quotient(0.01) == 5 and T.ocms_min_field_quotient(0.04) == 3
    # Cor 3.5 is about the optimal m: worst-case MSE (MSE-OCMS, f in [0, 1]) and l2 (l-OCMS)
    both = np.array([0.0, 1.0])
    for eps in [0.01, 0.5, 1, 2, 3, 4, 6, 8]:
        for mode in ["mse", "l"]:
            m = ocms.hash_range(eps, 10**6, mode)
            if m == 2:
                continue  # see the m = 2 counterexample below
            for r in range(1, m):  # q = 5: within 1%
                p = 5 * m + r
                if mode == "mse":
                    ratio = T.ocms_variance_imperfect(eps, m, p, 1, both).max() / T.ocms_variance(eps, m, 1, both).max()
                else:
                    ratio = T.ocms_imperfect_variance_ratio(eps, m, p, 0.0)  # l2 ~ d Var(f=0) for d >> 1
                assert ratio < 1.01
    assert T.ocms_imperfect_variance_ratio(0.01, 8, 8 + 4, 0.0) > 1.01  # q = 1 is not enough
    # Cor 3.5 is first order in 1/(2q+1)^2: for m = 2 and pH = 11 (q = 5) the exact ratio is
    # about ((m'/(m'-1)) / (m/(m-1)))^2 = (121/120)^2 = 1.0167, slightly above 1 + tau.
    for eps in [0.01, 0.5, 1.0]:
        for f in [0.0, 0.5, 1.0]:
            assert 1.0166 < T.ocms_imperfect_variance_ratio(eps, 2, 11, f) < 1.0168


def test_params_form_of_ocms_variance():
    paper = ocms.OCMSParams.optimal(3.0, 1000)
    assert T.ocms_variance(paper, n=100, f=0.2) == pytest.approx(T.ocms_variance(3.0, paper.m, 100, 0.2), rel=1e-14)
    small = ocms.OCMSParams(2.0, 12, 3, 13)
    imperfect = T.ocms_variance_imperfect(2.0, 3, 13, 10, 0.4)
    assert T.ocms_variance(small, n=10, f=0.4) == pytest.approx(imperfect, rel=1e-14)
    with pytest.raises(ParameterError, match="a_range='full'"):
        T.ocms_variance(ocms.OCMSParams(2.0, 12, 3, 13, a_range="nonzero"), n=10)
    with pytest.raises(ParameterError, match="not both"):
        T.ocms_variance(small, 3, n=10)


def test_general_family_thm_3_2_and_3_3():
    eps, m = 1.5, 4
    f_others = np.array([0.2, 0.3, 0.1])
    fair = np.full(3, 1 / m)
    assert T.ocms_variance_general(eps, m, 7, 0.4, f_others, fair) == pytest.approx(
        T.ocms_variance(eps, m, 7, 0.4), rel=1e-12)
    assert T.ocms_expectation_general(m, 0.4, f_others, fair) == pytest.approx(0.4, abs=1e-15)
    # a family that collides more often is biased upward for absent values (Cor 3.1)
    assert T.ocms_expectation_general(m, 0.0, np.array([1.0]), np.array([0.3])) == pytest.approx(4 / 3 * 0.3 - 1 / 3)
    # the m' estimator removes the bias of a constant cbar (Eq. 8 / Thm 3.4)
    cbar = 57 / 169
    assert T.ocms_expectation_general(1 / cbar, 0.25, np.array([0.75]), np.array([cbar])) == pytest.approx(0.25)


def test_concentration_thm_3_5():
    eps, m, n = 2.0, 4, 1000
    e = math.exp(eps)
    alpha = np.array([0.0, 1.0, 5.0])
    want = np.minimum(1, 2 * np.exp(-(alpha**2 / 3) * (m - 1) / (e + m - 1)))
    assert T.ocms_concentration_bound(eps, m, n, alpha) == pytest.approx(want, rel=1e-14)
    with pytest.raises(ParameterError, match="alpha must be in"):
        T.ocms_concentration_bound(eps, m, n, math.sqrt(e * n / (m - 1)) * 1.01)


def test_grr_variance():
    eps, d, n = 1.3, 40, 500
    e = math.exp(eps)
    p, q = e / (e + d - 1), 1 / (e + d - 1)
    for f in [0.0, 0.25, 1.0]:
        want = (q * (1 - q) + f * (p - q) * (1 - p - q)) / (n * (p - q) ** 2)
        assert T.grr_variance(eps, d, n, f) == pytest.approx(want, rel=1e-12)
    # with d = 2 GRR is binary RR, i.e. CMS+RR with m = 2 and an injective hash
    assert T.grr_variance(eps, 2, n, 0.0) == pytest.approx(e / (n * (e - 1) ** 2), rel=1e-12)


@pytest.mark.parametrize("call,message", [
    (lambda: T.ocms_variance(0.0, 3), r"epsilon must be finite and in \[9.53674e-07, 66.5\], got 0.0"),
    (lambda: T.ocms_variance(1.0, 1), r"m must be finite and > 1"),
    (lambda: T.ocms_variance(1.0, 3, n=0), r"n must be a positive number of reports, got 0"),
    (lambda: T.ocms_variance(1.0, 3, f=1.5), r"f must be frequencies in \[0, 1\]"),
    (lambda: T.ocms_variance(1.0), r"m is required"),
    (lambda: T.ocms_l2(1.0, 0), r"d must be >= 1, got 0"),
    (lambda: T.ocms_worst_case_mse(1.0, 1, f_star=-0.1), r"f_star must be in \[0, 1\]"),
    (lambda: T.grr_variance(1.0, 1), r"d must be >= 2, got 1"),
])
def test_theory_validation(call, message):
    with pytest.raises(ParameterError, match=message):
        call()


def test_all_exports_exist():
    from ldpfast.theory import ocms as module
    for name in module.__all__:
        assert hasattr(T, name), name
