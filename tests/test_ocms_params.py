"""OCMS+RR parameter selection and validation ([PAN] Algorithm 1; SPEC 2.2, 2.4, 5.5, 6)."""

import math
from fractions import Fraction

import numpy as np
import pytest

from ldpfast.protocols.frequency import ocms
from ldpfast._validate import rr_effective_epsilon
from ldpfast.errors import ParameterError
from ldpfast.kernels.field import PRIME
from ldpfast.theory import ocms_optimal_m

EPS = [1, 2, 3, 4, 5]


@pytest.mark.parametrize("eps,m", [(0.5, 2), (1, 3), (2, 4), (3, 5), (4, 8), (5, 13), (math.log(4), 3)])
def test_hash_range_mse_f_star_one(eps, m):
    assert ocms.hash_range(eps, mode="mse", f_star=1.0) == m
    assert ocms.hash_range(eps, mode="mse", f_star=0.5) == m  # any f* >= 1/2


@pytest.mark.parametrize("eps,m", [(0.5, 3), (1, 4), (2, 8), (3, 21), (4, 56), (5, 149), (math.log(4), 5)])
def test_hash_range_mse_f_star_zero(eps, m):
    assert ocms.hash_range(eps, mode="mse", f_star=0.0) == m


@pytest.mark.parametrize("f_star,ms", [(0.01, [4, 8, 19, 45, 95]), (0.1, [3, 7, 12, 22, 37]),
                                       (0.25, [3, 5, 8, 13, 22]), (0.49, [3, 4, 6, 9, 13])])
def test_hash_range_mse_priors(f_star, ms):
    assert [ocms.hash_range(e, mode="mse", f_star=f_star) for e in EPS] == ms


@pytest.mark.parametrize("d,ms", [
    (2, [2, 3, 4, 5, 8, 13]), (10, [3, 3, 7, 12, 22, 37]), (100, [3, 4, 8, 19, 45, 95]),
    (1000, [3, 4, 8, 21, 54, 139]), (10000, [3, 4, 8, 21, 55, 148]),
    (26000, [3, 4, 8, 21, 56, 149]), (10**5, [3, 4, 8, 21, 56, 149]), (10**6, [3, 4, 8, 21, 56, 149])])
def test_hash_range_l_mode(d, ms):
    assert [ocms.hash_range(e, d, mode="l") for e in [0.5, 1, 2, 3, 4, 5]] == ms


@pytest.mark.parametrize("d", [2, 3, 10, 100, 1000, 26000, 10**6, 2**40])
@pytest.mark.parametrize("eps", [0.1, 0.5, 1, 2, 3, 5, 8, 12])
def test_l_mode_equals_mse_with_prior_one_over_d(eps, d):
    real_l = ocms_optimal_m(eps, "l", d)
    real_mse = ocms_optimal_m(eps, "mse", f_star=1 / d)
    assert real_l == pytest.approx(real_mse, rel=1e-12)
    if abs(real_l % 1 - 0.5) > 1e-9:  # away from a rounding tie the integers agree
        assert ocms.hash_range(eps, d, "l") == ocms.hash_range(eps, mode="mse", f_star=1 / d)


def test_mse_branches_meet_at_one_half():
    for eps in [0.3, 1, 4, 9]:
        assert ocms_optimal_m(eps, "mse", f_star=0.5 - 1e-13) == pytest.approx(1 + math.exp(eps / 2), rel=1e-9)


@pytest.mark.parametrize("eps,python_round,ours", [
    (2 * math.log(1.5), 2, 3),   # 1 + e_h = 2.5 exactly in double
    (2 * math.log(2.5), 4, 4),   # 3.5
    (2 * math.log(3.5), 4, 5),   # 4.5
])
def test_rounding_ties_go_up(eps, python_round, ours):
    real = ocms_optimal_m(eps, "mse", f_star=1.0)
    assert real % 1 == 0.5  # an exact tie
    assert round(real) == python_round  # R1's half-to-even rule would differ
    assert ocms.hash_range(eps, mode="mse") == ours
    assert ocms_optimal_m(eps, "mse", rounded=True) == ours


def test_hash_range_rejects_bad_arguments():
    with pytest.raises(ParameterError, match="mode must be 'mse' or 'l', got 'l2'"):
        ocms.hash_range(1.0, 10, mode="l2")
    with pytest.raises(ParameterError, match=r"f_star must be in \[0, 1\], got 1.5"):
        ocms.hash_range(1.0, f_star=1.5)
    with pytest.raises(ParameterError, match="d must be an integer, got None"):
        ocms.hash_range(1.0, None, mode="l")


def test_finite_field_size():
    assert ocms.finite_field_size(100_000, 5) == PRIME
    assert ocms.finite_field_size(100_000, 5, compact=True) == 100_003
    assert ocms.finite_field_size(10, 21, compact=True) == 107  # 5m dominates: smallest prime >= 105
    assert ocms.finite_field_size(PRIME, 5) == 2**64  # v > PRIME: GF(2^ceil(log2 v))
    assert ocms.finite_field_size(2**64, 5) == 2**65  # returned, but Params cannot use it


@pytest.mark.parametrize("d,eps,m,compact_bits,paper_bits", [
    (10**5, 3, 5, 37, 131), (10**6, 1, 3, 42, 130), (2**32, 5, 13, 70, 132)])
def test_communication_bits(d, eps, m, compact_bits, paper_bits):
    paper = ocms.OCMSParams.optimal(eps, d)
    compact = ocms.OCMSParams.optimal(eps, d, field="compact")
    assert paper.m == compact.m == m
    assert paper.communication_bits == paper_bits
    assert compact.communication_bits == compact_bits


def test_optimal_fields():
    p = ocms.OCMSParams.optimal(2.0, 100_000, mode="l")
    assert (p.m, p.field_size, p.field_kind, p.poly) == (8, PRIME, "prime", ())
    b = ocms.OCMSParams.optimal(2.0, 1000, field="binary")
    assert (b.field_size, b.field_kind, b.poly) == (1024, "binary", (10, 3, 0))
    huge = ocms.OCMSParams.optimal(1.0, PRIME)
    assert (huge.field_size, huge.field_kind, huge.poly) == (2**64, "binary", (64, 4, 3, 1, 0))
    with pytest.raises(ParameterError, match="field must be 'paper', 'compact' or 'binary'"):
        ocms.OCMSParams.optimal(1.0, 10, field="tiny")
    # m = 5.9e9 at eps = 45: flip probability (m-1)/(e^45 + m - 1) < 2^-32, not representable.
    with pytest.raises(ParameterError, match=r"epsilon must be in \[1.32237, 44.6807\] for randomized response"):
        ocms.OCMSParams.optimal(45.0, 10)


def test_explicit_params_defaults_and_normalisation():
    p = ocms.OCMSParams(epsilon=2, d=np.int64(1000), m=np.uint8(4))
    assert p.field_size == PRIME and p.field_kind == "prime" and p.poly == ()
    assert type(p.epsilon) is float and type(p.d) is int and type(p.m) is int
    assert p.a_range == "full" and p.use_m_prime is True
    assert p == ocms.OCMSParams(2.0, 1000, 4, PRIME) and hash(p) == hash(ocms.OCMSParams(2.0, 1000, 4, PRIME))
    b = ocms.OCMSParams(1.0, 100, 3, 256, "binary")
    assert b.poly == (8, 4, 3, 1, 0)  # filled in by the SPEC 2.3 rule
    assert ocms.OCMSParams(1.0, 100, 3, 256, "binary", poly=(0, 1, 3, 4, 8)).poly == (8, 4, 3, 1, 0)


def test_params_dict_round_trip_and_fingerprint():
    for p in [ocms.OCMSParams.optimal(2.0, 10**5), ocms.OCMSParams(1.0, 100, 3, 256, "binary", a_range="nonzero"),
              ocms.OCMSParams(3.0, 12, 5, 13, use_m_prime=False)]:
        again = ocms.OCMSParams.from_dict(p.to_dict())
        assert again == p and again.fingerprint == p.fingerprint
    assert ocms.OCMSParams(2.0, 10, 3).fingerprint != ocms.OCMSParams(2.0, 10, 4).fingerprint


@pytest.mark.parametrize("kwargs,message", [
    (dict(epsilon=0.0), r"epsilon must be finite and in \[9.53674e-07, 66.5\], got 0.0"),
    (dict(epsilon=-1), r"epsilon must be finite and in \[9.53674e-07, 66.5\], got -1"),
    (dict(epsilon=float("nan")), r"epsilon must be finite and in \[9.53674e-07, 66.5\], got nan"),
    (dict(epsilon=float("inf")), r"epsilon must be finite .* got inf"),
    (dict(epsilon=701.0), r"epsilon must be finite .* got 701.0"),
    (dict(epsilon="2"), r"epsilon must be a real number, got '2'"),
    (dict(epsilon=True), r"epsilon must be a real number, got True"),
    (dict(d=0), r"d must be >= 1, got 0"),
    (dict(d=10.5), r"d must be an integer, got 10.5"),
    (dict(m=1), r"m must be >= 2, got 1"),
    (dict(m=13, field_size=13), r"m must be < field_size = 13, got 13"),
    (dict(field_size=15), r"field_size must be an odd prime < 2\^64 .* got 15"),
    (dict(field_size=256), r"got 256 \(for GF\(2\^l\) pass field_kind='binary'\)"),
    (dict(field_size=2**64 + 13), r"field_size must be an odd prime < 2\^64"),
    (dict(field_size=11), r"field_size must be >= d \+ 1 = 13 \(\[PAN\] Alg. 1\), got 11"),
    (dict(field_size=100, field_kind="binary"), r"field_size must be 2\^l with 1 <= l <= 64 .* got 100"),
    (dict(field_size=2**65, field_kind="binary"), r"field_size must be 2\^l .* got 36893488147419103232"),
    (dict(field_kind="galois"), r"field_kind must be 'prime' or 'binary', got 'galois'"),
    (dict(poly=(4, 1, 0)), r"poly is only used with field_kind='binary'"),
    (dict(field_size=16, field_kind="binary", poly=(4, 2, 0)), r"poly must be an irreducible polynomial of degree 4"),
    (dict(field_size=16, field_kind="binary", poly=(5, 2, 0)), r"poly must be an irreducible polynomial of degree 4"),
    (dict(field_size=16, field_kind="binary", poly=(4, 4, 1, 0)), r"poly exponents must be distinct"),
    (dict(field_size=16, field_kind="binary", poly="4,1,0"), r"poly must be a tuple of exponents"),
    (dict(a_range="positive"), r"a_range must be 'full' or 'nonzero', got 'positive'"),
    (dict(use_m_prime=1), r"use_m_prime must be a bool, got 1"),
])
def test_params_validation_messages(kwargs, message):
    base = dict(epsilon=1.0, d=12, m=3, field_size=PRIME)
    base.update(kwargs)
    with pytest.raises(ParameterError, match=message):
        ocms.OCMSParams(**base)


def test_epsilon_range_edges_are_numerically_safe():
    # Flip probability 2/(e^eps + 2) >= 2^-32 up to eps = log(2 (2^32 - 1)) = 22.87.
    p = ocms.OCMSParams(22.8, 10, 3)
    assert p.rr_flip == pytest.approx(2 / (math.exp(22.8) + 2), rel=1e-12) and p.flip_threshold >= 2**32
    with pytest.raises(ParameterError, match=r"epsilon must be in \[.*, 22.8739\]"):
        ocms.OCMSParams(22.9, 10, 3)
    small = ocms.OCMSParams(1e-6, 10, 3)
    assert small.rr_flip == pytest.approx(2 / 3, rel=1e-6)
    match, other = small.decode_constants
    assert match == pytest.approx(2 / 1e-6, rel=1e-5) and other == pytest.approx(-1e6, rel=1e-5)
    with pytest.raises(ParameterError, match=r"epsilon must be finite and in \[9.53674e-07, 66.5\], got 5e-324"):
        ocms.OCMSParams(5e-324, 10, 3)


def test_rr_probabilities_and_threshold():
    p = ocms.OCMSParams(3.0, 100, 5)
    e = math.exp(3.0)
    assert p.rr_keep == pytest.approx(e / (e + 4), rel=1e-15)
    assert p.rr_flip == pytest.approx(4 / (e + 4), rel=1e-15)
    assert 0 <= p.flip_threshold - p.rr_flip * 2**64 <= 2 + p.rr_flip * 2**64 * 2**-51   # rounded up
    assert rr_effective_epsilon(p.flip_threshold, 5) <= 3.0


@pytest.mark.parametrize("eps,m,match,other", [
    (3.0, 5, 1.2095827860, -0.0523956965), (1.0, 2, 1.5819767069, -0.5819767069),
    (math.log(4), 3, 5 / 3, -1 / 3)])
def test_decode_constants(eps, m, match, other):
    p = ocms.OCMSParams(eps, 10, m)
    got = p.decode_constants
    assert got == pytest.approx((match, other), abs=1e-10)
    e = math.exp(eps)
    matrix = ((e - 1) * np.eye(m) + np.ones((m, m))) / (e + m - 1)  # RR: P[y, z]
    inverse = np.linalg.inv(matrix)
    assert inverse[0, 0] == pytest.approx(got[0], abs=1e-12)
    assert inverse[0, 1] == pytest.approx(got[1], abs=1e-12)


def test_paper_decode_constant_is_biased():
    # [PAN] Alg. 1 prints (e+m-1)/(e-1); with eps = 3, m = 5 its expectation is 1.0437 (SPEC 1.2)
    e, m = math.exp(3.0), 5
    typo = (e + m - 1) / (e - 1)
    assert typo == pytest.approx(1.2619784825, abs=1e-10)
    expectation = e / (e + m - 1) * typo + (m - 1) / (e + m - 1) * (-1 / (e - 1))
    assert expectation == pytest.approx(1.0436940933, abs=1e-10)
    match, other = ocms.OCMSParams(3.0, 10, 5).decode_constants
    assert e / (e + m - 1) * match + (m - 1) / (e + m - 1) * other == pytest.approx(1.0, abs=1e-15)


def test_m_prime_properties():
    small = ocms.OCMSParams(2.0, 12, 3, 13)
    assert small.collision_probability == Fraction(57, 169)
    assert small.m_prime == pytest.approx(169 / 57, rel=1e-15) and small.estimator_m == small.m_prime
    assert ocms.OCMSParams(2.0, 12, 3, 13, use_m_prime=False).estimator_m == 3.0
    assert ocms.OCMSParams.optimal(2.0, 1000).m_prime == 4.0
