"""Finite fields for the pairwise-independent hash ``h(x) = ((a0 + a1 x) in F) mod m``.

OCMS+RR ([PAN] Pan, CSF 2025, Algorithm 1 lines 7-13 and 27-30) hashes with a degree-one
polynomial over a finite field ``F`` of size ``pH``: the prime field ``F_p`` (the paper's
default is :data:`PRIME` ``= 2^64 - 59``) or the binary field ``GF(2^l)``. This module
holds the number theory the parameter objects need (primality, irreducible polynomials),
exact collision probabilities ([PAN] Lemma 3.2) and a validated wrapper around the C++
hashing kernel.

The arithmetic itself runs in C++ (``ldpfast._core``): Montgomery multiplication with
128-bit products for ``F_p`` and carry-less multiplication for ``GF(2^l)``, ``l <= 64``.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Iterable, List, Optional, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike

from .. import _core
from ..errors import ParameterError

__all__ = ["PRIME", "is_prime", "next_prime", "irreducible_polynomial", "is_irreducible",
           "poly_low_bits", "prime_field", "binary_field", "core_field", "field_hash",
           "collision_probability", "m_prime", "ceil_log2"]

#: The largest prime below 2^64; [PAN] Algorithm 1 uses it as the default field size.
PRIME = 2**64 - 59
#: GF(2^64) with z^64 + z^4 + z^3 + z + 1 (the standard pentanomial): the low bits of a1*x
#: XOR a0 are an exactly pairwise-independent hash into a power-of-two range (the Hadamard
#: family's hash field).
GF64_POLY_LOW = 0x1B

# Miller-Rabin with the first 13 prime bases is deterministic for n < 3.3e24
# (Sorenson and Webster 2015); that covers every field size that fits in 64 bits.
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
_MR_LIMIT = 3_317_044_064_679_887_385_961_981


def _check_int(value: object, name: str, minimum: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    number = int(value)
    if minimum is not None and number < minimum:
        raise ParameterError(f"{name} must be >= {minimum}, got {number}")
    return number


def is_prime(n: int) -> bool:
    """Deterministic primality test (Miller-Rabin with the first 13 prime bases) for
    ``n < 3.3e24``, which covers every 64-bit field size.

    Raises:
        ParameterError: ``n`` is not an integer or is too large for a deterministic answer.
    """
    n = _check_int(n, "n")
    if n < 2:
        return False
    for small in _MR_BASES:
        if n % small == 0:
            return n == small
    if n >= _MR_LIMIT:
        raise ParameterError(f"n must be < {_MR_LIMIT} for a deterministic primality test, got {n}")
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for base in _MR_BASES:
        x = pow(base, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def next_prime(v: int) -> int:
    """The smallest prime ``>= v`` ([PAN] "compact field" choice, see ``ocms``)."""
    v = _check_int(v, "v")
    candidate = max(v, 2)
    while not is_prime(candidate):
        candidate += 1
    return candidate


# --- GF(2)[z] polynomials as Python ints (bit i = coefficient of z^i) -----------------

def _clmul(a: int, b: int) -> int:
    result = 0
    while b:
        low = b & -b
        result ^= a << (low.bit_length() - 1)
        b ^= low
    return result


def _polymod(a: int, f: int) -> int:
    deg_f = f.bit_length() - 1
    while a and a.bit_length() - 1 >= deg_f:
        a ^= f << (a.bit_length() - 1 - deg_f)
    return a


def _polygcd(a: int, b: int) -> int:
    while b:
        a, b = b, _polymod(a, b)
    return a


def _frobenius_power(f: int, k: int) -> int:
    """z^(2^k) mod f (k squarings of z)."""
    x = 0b10
    for _ in range(k):
        x = _polymod(_clmul(x, x), f)
    return x


def _prime_factors(n: int) -> List[int]:
    factors, p = [], 2
    while p * p <= n:
        if n % p == 0:
            factors.append(p)
            while n % p == 0:
                n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return factors


@functools.lru_cache(maxsize=1024)
def _rabin_irreducible(f: int) -> bool:
    """Rabin's test: f of degree l is irreducible over GF(2) iff z^(2^l) = z mod f and
    gcd(z^(2^(l/q)) - z, f) = 1 for every prime q dividing l."""
    l = f.bit_length() - 1
    if l < 1:
        return False
    if _frobenius_power(f, l) != _polymod(0b10, f):
        return False
    for q in _prime_factors(l):
        if _polygcd(f, _frobenius_power(f, l // q) ^ 0b10) != 1:
            return False
    return True


def _poly_from_exponents(exponents: Iterable[int]) -> int:
    value = 0
    for e in exponents:
        value ^= 1 << int(e)
    return value


def is_irreducible(exponents: Iterable[int]) -> bool:
    """True when ``sum z^e`` (``e`` in ``exponents``) is irreducible over GF(2) (Rabin's test)."""
    exps = tuple(int(e) for e in exponents)
    if len(set(exps)) != len(exps) or any(e < 0 for e in exps):
        raise ParameterError(f"poly exponents must be distinct non-negative integers, got {exponents!r}")
    return _rabin_irreducible(_poly_from_exponents(exps))


@functools.lru_cache(maxsize=None)
def irreducible_polynomial(l: int) -> Tuple[int, ...]:
    """The irreducible polynomial defining ``GF(2^l)`` (our rule; [PAN]
    does not fix one): the trinomial ``z^l + z^k + 1`` with the smallest ``k``, or if there
    is none the pentanomial ``z^l + z^a + z^b + z^c + 1`` (``a > b > c >= 1``) smallest in
    lexicographic order of ``(a, b, c)``. Irreducibility by Rabin's test.

    Returns the exponents in decreasing order, e.g. ``(8, 4, 3, 1, 0)`` (the AES polynomial)
    for ``l = 8`` and ``(64, 4, 3, 1, 0)`` for ``l = 64``.
    """
    l = _check_int(l, "l", minimum=1)
    if l == 1:
        return (1, 0)
    for k in range(1, l):
        if _rabin_irreducible((1 << l) | (1 << k) | 1):
            return (l, k, 0)
    for a in range(3, l):
        for b in range(2, a):
            for c in range(1, b):
                if _rabin_irreducible((1 << l) | (1 << a) | (1 << b) | (1 << c) | 1):
                    return (l, a, b, c, 0)
    raise ParameterError(f"no irreducible trinomial or pentanomial of degree {l}")  # pragma: no cover


def poly_low_bits(exponents: Iterable[int]) -> int:
    """The polynomial without its leading term, as the bit mask the C++ core expects."""
    exps = sorted((int(e) for e in exponents), reverse=True)
    return _poly_from_exponents(exps[1:])


def prime_field(p: int) -> "_core.Field":
    """The C++ field ``F_p`` for an odd prime ``p < 2^64`` (checked with :func:`is_prime`)."""
    p = _check_int(p, "p")
    if not 3 <= p < 2**64 or not is_prime(p):
        raise ParameterError(f"p must be an odd prime < 2^64, got {p}")
    return _core_prime(p)


def binary_field(l: int, poly: Optional[Tuple[int, ...]] = None) -> "_core.Field":
    """The C++ field ``GF(2^l)``, ``1 <= l <= 64``, modulo ``poly`` (exponent tuple; default
    :func:`irreducible_polynomial`). A given ``poly`` must have degree ``l`` and be irreducible."""
    l = _check_int(l, "l")
    if not 1 <= l <= 64:
        raise ParameterError(f"l must be in [1, 64] for GF(2^l), got {l}")
    poly = irreducible_polynomial(l) if poly is None or len(poly) == 0 else tuple(int(e) for e in poly)
    return _core_binary(l, poly)


def gf64_field() -> "_core.Field":
    """The C++ field ``GF(2^64)`` modulo the pentanomial of :data:`GF64_POLY_LOW`."""
    return _core.Field.binary(64, GF64_POLY_LOW)


@functools.lru_cache(maxsize=64)
def _core_prime(p: int) -> _core.Field:
    return _core.Field.prime(p)


@functools.lru_cache(maxsize=64)
def _core_binary(l: int, poly: Tuple[int, ...]) -> _core.Field:
    if max(poly) != l:
        raise ParameterError(f"poly must have degree l = {l}, got exponents {poly}")
    if not is_irreducible(poly):
        raise ParameterError(f"poly {poly} is not irreducible over GF(2)")
    return _core.Field.binary(l, poly_low_bits(poly))


@functools.lru_cache(maxsize=64)
def core_field(field_size: int, poly: Optional[Tuple[int, ...]] = None) -> "_core.Field":
    """The C++ field of size ``field_size``: ``F_p`` for an odd prime, ``GF(2^l)`` for a
    power of two (with ``poly``, default :func:`irreducible_polynomial`)."""
    size = _check_int(field_size, "field_size", minimum=2)
    if size & (size - 1) == 0:
        return binary_field(size.bit_length() - 1, poly)
    if poly:
        raise ParameterError(f"poly is only meaningful for GF(2^l) fields, got field_size={size}")
    return prime_field(size)


def _field_column(value: ArrayLike, name: str, field_size: int) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind not in "iu":
        raise ParameterError(f"{name} must hold integers (field elements), got dtype {arr.dtype}")
    if arr.dtype.kind == "i" and arr.size and arr.min() < 0:
        raise ParameterError(f"{name} must be field elements in [0, {field_size}), got {arr.min()}")
    arr = np.ascontiguousarray(arr.astype(np.uint64, copy=False).reshape(-1))
    if arr.size and int(arr.max()) >= field_size:
        raise ParameterError(f"{name} must be field elements in [0, {field_size}), got {int(arr.max())}")
    return arr


def field_hash(a0: ArrayLike, a1: ArrayLike, x: ArrayLike, m: int, field: Union[int, _core.Field],
               poly: Optional[Tuple[int, ...]] = None,
               threads: int = 0) -> np.ndarray:
    """``h(x) = ((a0 + a1 x) in F) mod m`` elementwise ([PAN] Algorithm 1 ``Hash``).

    Args:
        a0, a1, x: integers or integer arrays, broadcast to a common length; each must be a
            field element in ``[0, field size)`` (never reduced silently).
        m: hash range, ``>= 1``.
        field: the field size (an odd prime for ``F_p``, ``2^l`` for ``GF(2^l)``) or a
            ``_core.Field`` (then the inputs are only checked by the kernel's dtype rules).
        poly: irreducible polynomial exponents for ``GF(2^l)`` (default: the rule of
            :func:`irreducible_polynomial`).
    Returns:
        uint64 array of hash values in ``[0, m)``.
    Raises:
        ParameterError: a non-integer input, an input outside the field, or a bad field.
    """
    m = _check_int(m, "m", minimum=1)
    if isinstance(field, _core.Field):
        core, size = field, 2**64
    else:
        size = _check_int(field, "field", minimum=2)
        core = core_field(size, tuple(int(e) for e in poly) if poly else None)
    cols = [_field_column(v, name, size) for v, name in ((a0, "a0"), (a1, "a1"), (x, "x"))]
    try:
        a0c, a1c, xc = (np.ascontiguousarray(c) for c in np.broadcast_arrays(*cols))
    except ValueError as exc:
        raise ParameterError(f"a0, a1 and x must have broadcastable lengths: {exc}") from None
    return _core.ocms_hash(core, a0c, a1c, xc, m, threads)


def collision_probability(field_size: int, m: int) -> Fraction:
    """Exact ``Pr[h(x1) = h(x2)]`` for ``x1 != x2`` and ``(a0, a1)`` uniform on ``F x F``
    ([PAN] Lemma 3.2): with ``pH = q m + r``, ``cbar = ((2q+1) r + m q^2) / pH^2``
    ``= 1/m + r(m-r)/(m pH^2)``. Holds for ``F_p`` and ``GF(2^l)`` alike (the field value
    is uniform on ``[0, pH)`` before the ``mod m``)."""
    p = _check_int(field_size, "field_size", minimum=2)
    m = _check_int(m, "m", minimum=1)
    q, r = divmod(p, m)
    return Fraction((2 * q + 1) * r + m * q * q, p * p)


def m_prime(field_size: int, m: int) -> float:
    """``m' = 1/cbar`` ([PAN] Eq. 8, Algorithm 2), the hash range the estimator uses for an
    approximately pairwise-independent family. Equal to the stable form
    ``m / (1 + r(m-r)/pH^2)``; computed as an exact rational and rounded once, so it never
    overflows and is correctly rounded (``m' == m`` in double for ``PRIME`` and every
    practical ``m``)."""
    return float(1 / collision_probability(field_size, m))


def ceil_log2(v: int) -> int:
    """``ceil(log2 v)`` for a positive integer, exactly (no floating point)."""
    v = _check_int(v, "v", minimum=1)
    return (v - 1).bit_length()
