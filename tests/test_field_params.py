"""Finite-field number theory and hashing for OCMS ([PAN] Lemma 3.2; SPEC 2.3 and 6)."""

from fractions import Fraction
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ldpfast import _core
from ldpfast.errors import ParameterError
from ldpfast.kernels import field as F

R1_PRIME = 18361375334787046697  # the prime of [PAN]'s reference code R1 (SPEC 5.2)


def _sieve(limit):
    flags = np.ones(limit, dtype=bool)
    flags[:2] = False
    for i in range(2, int(limit**0.5) + 1):
        if flags[i]:
            flags[i * i::i] = False
    return flags


def test_prime_constant():
    assert F.PRIME == 18446744073709551557 == 2**64 - 59
    assert F.is_prime(F.PRIME)
    assert not any(F.is_prime(v) for v in range(F.PRIME + 1, 2**64))  # the largest below 2^64


def test_is_prime_matches_sieve():
    flags = _sieve(5000)
    assert [F.is_prime(v) for v in range(5000)] == list(flags)


@pytest.mark.parametrize("n", [561, 1105, 2047, 1373653, 25326001, 3215031751, 2152302898747,
                               3474749660383, 341550071728321, 3825123056546413051,
                               318665857834031151167461, 2**64 - 1, 2**61 - 3])
def test_is_prime_rejects_strong_pseudoprimes(n):
    # Carmichael numbers and the smallest strong pseudoprimes to the first k prime bases
    assert not F.is_prime(n)


@pytest.mark.parametrize("n", [R1_PRIME, 2**61 - 1, 2**31 - 1, 2**32 + 15, 1000003, 100003])
def test_is_prime_accepts_primes(n):
    assert F.is_prime(n)


def test_is_prime_bad_input():
    with pytest.raises(ParameterError, match="n must be an integer"):
        F.is_prime(7.0)
    with pytest.raises(ParameterError, match="deterministic"):
        F.is_prime(2**89 - 1)


def test_next_prime():
    assert F.next_prime(100001) == 100003
    assert F.next_prime(1000001) == 1000003
    assert F.next_prime(2**32 + 1) == 2**32 + 15
    assert F.next_prime(F.PRIME) == F.PRIME
    assert F.next_prime(0) == 2 and F.next_prime(13) == 13


# SPEC section 6: the irreducible polynomial of GF(2^l) by the SPEC 2.3 rule.
SPEC_POLYNOMIALS = {
    2: (2, 1, 0), 3: (3, 1, 0), 4: (4, 1, 0), 5: (5, 2, 0), 7: (7, 1, 0), 8: (8, 4, 3, 1, 0),
    16: (16, 5, 3, 1, 0), 17: (17, 3, 0), 20: (20, 3, 0), 31: (31, 3, 0), 32: (32, 7, 3, 2, 0),
    63: (63, 1, 0), 64: (64, 4, 3, 1, 0), 65: (65, 18, 0), 66: (66, 3, 0), 67: (67, 5, 2, 1, 0),
    68: (68, 9, 0), 72: (72, 10, 9, 3, 0), 80: (80, 9, 4, 2, 0), 96: (96, 10, 9, 6, 0),
    128: (128, 7, 2, 1, 0),
}


@pytest.mark.parametrize("l", sorted(SPEC_POLYNOMIALS))
def test_irreducible_polynomial_table(l):
    assert F.irreducible_polynomial(l) == SPEC_POLYNOMIALS[l]


def _reducible_by_trial_division(poly: int) -> bool:
    """Independent check: poly has a factor of degree 1..deg/2 (all candidates tried)."""
    deg = poly.bit_length() - 1
    for g in range(2, 1 << (deg // 2 + 1)):
        if g.bit_length() - 1 > deg // 2:
            break
        if F._polymod(poly, g) == 0:
            return True
    return False


@pytest.mark.parametrize("l", range(2, 15))
def test_irreducible_polynomial_is_smallest_by_the_rule(l):
    exps = F.irreducible_polynomial(l)
    poly = sum(1 << e for e in exps)
    assert not _reducible_by_trial_division(poly)
    if len(exps) == 3:
        smaller = [(1 << l) | (1 << k) | 1 for k in range(1, exps[1])]
    else:  # no trinomial at all, and no lexicographically smaller pentanomial
        smaller = [(1 << l) | (1 << k) | 1 for k in range(1, l)]
        smaller += [(1 << l) | (1 << a) | (1 << b) | (1 << c) | 1
                    for a in range(3, l) for b in range(2, a) for c in range(1, b)
                    if (a, b, c) < exps[1:4]]
    assert all(_reducible_by_trial_division(s) for s in smaller)


def test_is_irreducible_and_poly_bits():
    assert F.is_irreducible((8, 4, 3, 1, 0))
    assert not F.is_irreducible((8, 3, 2, 1, 0))  # z^8+z^3+z^2+z+1 = (z^2+z+1)(z^6+...)
    assert F.poly_low_bits((8, 4, 3, 1, 0)) == 0x1B
    with pytest.raises(ParameterError, match="distinct"):
        F.is_irreducible((3, 3, 0))


def test_gf256_aes_product():
    field = F.binary_field(8)
    a = np.array([0x57], dtype=np.uint64)
    b = np.array([0x83], dtype=np.uint64)
    assert int(_core.field_mul(field, a, b)[0]) == 0xC1
    assert int(F.field_hash(0, 0x57, 0x83, 256, 256)[0]) == 0xC1  # a0 + a1 x with m = 2^8


def test_field_constructors_reject_bad_input():
    with pytest.raises(ParameterError, match="odd prime"):
        F.prime_field(15)
    with pytest.raises(ParameterError, match="odd prime"):
        F.prime_field(2**64 + 13)
    with pytest.raises(ParameterError, match="l must be in"):
        F.binary_field(65)
    with pytest.raises(ParameterError, match="not irreducible"):
        F.binary_field(8, (8, 3, 2, 1, 0))
    with pytest.raises(ParameterError, match="degree"):
        F.binary_field(8, (7, 1, 0))
    with pytest.raises(ParameterError, match="poly is only"):
        F.core_field(13, (4, 1, 0))


def test_field_hash_matches_python_reference_and_validates():
    rng = np.random.default_rng(5)
    p = F.PRIME
    a0 = rng.integers(0, p, 1000, dtype=np.uint64, endpoint=False)
    a1 = rng.integers(0, p, 1000, dtype=np.uint64, endpoint=False)
    x = rng.integers(0, 10**6, 1000, dtype=np.uint64)
    got = F.field_hash(a0, a1, x, 7, p)
    want = [((int(u) + int(v) * int(w)) % p) % 7 for u, v, w in zip(a0, a1, x)]
    assert got.tolist() == want
    with pytest.raises(ParameterError, match=r"x must be field elements in \[0, 13\), got 13"):
        F.field_hash(1, 2, [3, 13], 3, 13)
    with pytest.raises(ParameterError, match="a0 must be field elements"):
        F.field_hash(-1, 2, 3, 3, 13)
    with pytest.raises(ParameterError, match="must hold integers"):
        F.field_hash(1, 2, 3.0, 3, 13)
    with pytest.raises(ParameterError, match="m must be >= 1"):
        F.field_hash(1, 2, 3, 0, 13)


# --- collision probability and m' (SPEC section 6) ---------------------------------------

def test_collision_probability_values():
    assert F.collision_probability(13, 3) == Fraction(57, 169)
    assert F.m_prime(13, 3) == pytest.approx(169 / 57, rel=1e-15)
    assert float(F.collision_probability(31, 5)) == pytest.approx(0.2008325, abs=5e-8)
    assert float(F.collision_probability(101, 20)) == pytest.approx(0.0500931, abs=5e-8)
    assert F.m_prime(101, 20) == pytest.approx(19.962818, abs=5e-7)
    assert F.m_prime(256, 5) == pytest.approx(65536 / 13108, rel=1e-15)
    assert F.m_prime(256, 5) == pytest.approx(4.999695, abs=5e-7)
    assert F.m_prime(1024, 21) == pytest.approx(20.998398, abs=5e-7)


@pytest.mark.parametrize("m", [3, 5, 149, 10**9 + 7])
def test_m_prime_equals_m_for_the_paper_prime(m):
    assert F.m_prime(F.PRIME, m) == float(m)
    if m == 3:
        assert divmod(F.PRIME, 3) == (6148914691236517185, 2)


@settings(max_examples=200, deadline=None)
@given(p=st.integers(3, 2**64), m=st.integers(2, 10**6))
def test_m_prime_stable_form_is_exact(p, m):
    q, r = divmod(p, m)
    cbar = F.collision_probability(p, m)
    assert cbar == Fraction(1, m) + Fraction(r * (m - r), m * p * p)
    stable = Fraction(m) / (1 + Fraction(r * (m - r), p * p))
    assert stable == 1 / cbar
    assert F.m_prime(p, m) == float(stable)


def _exhaustive_collisions(field, size, m, x1, x2, values):
    """Number of (a0, a1) in values^2 with h(x1) == h(x2), using the C++ hash."""
    a0, a1 = (np.array(c, dtype=np.uint64) for c in zip(*product(values, repeat=2)))
    h1 = _core.ocms_hash(field, a0, a1, np.full(a0.size, x1, dtype=np.uint64), m)
    h2 = _core.ocms_hash(field, a0, a1, np.full(a0.size, x2, dtype=np.uint64), m)
    return int(np.count_nonzero(h1 == h2)), a0.size


@pytest.mark.parametrize("p,m", [(13, 3), (31, 5), (101, 20)])
def test_collision_rate_exhaustive_prime_fields(backend, p, m):
    field = F.prime_field(p)
    pairs = [(1, 2), (0, p - 1), (3, 7)] if p > 13 else [(x1, x2) for x1 in range(p) for x2 in range(x1 + 1, p)]
    for x1, x2 in pairs:
        hits, total = _exhaustive_collisions(field, p, m, x1, x2, range(p))
        assert Fraction(hits, total) == F.collision_probability(p, m)


@pytest.mark.parametrize("l,m", [(3, 3), (4, 3), (5, 5), (6, 7), (4, 5)])
def test_collision_rate_exhaustive_binary_fields(backend, l, m):
    size = 1 << l
    field = F.binary_field(l)
    for x1, x2 in [(0, 1), (1, 2), (3, size - 1)]:
        hits, total = _exhaustive_collisions(field, size, m, x1, x2, range(size))
        assert Fraction(hits, total) == F.collision_probability(size, m)


def test_nonzero_coefficients_break_lemma_3_2():
    # R1 draws a0, a1 from [1, p-1]: 40/144 instead of 57/169 for p = 13, m = 3 (SPEC 5.2)
    hits, total = _exhaustive_collisions(F.prime_field(13), 13, 3, 1, 2, range(1, 13))
    assert Fraction(hits, total) == Fraction(40, 144)


def test_ceil_log2():
    assert [F.ceil_log2(v) for v in (1, 2, 3, 4, 5, 2**64, 2**64 + 1)] == [0, 1, 2, 2, 3, 64, 65]
