"""Closed forms for the Hadamard family: HRR, HE, CMS+HE, RHR, OLH, HadaOracle, HadaHeavy.

Conventions: HRR/HadaOracle/HadaHeavy quantities are
counts (``c = n f``) unless a function says otherwise; the [PAN] comparison algorithms
(HE, CMS+HE, RHR, OLH) use fractions. ``c_eps = (e^eps + 1)/(e^eps - 1)`` is evaluated
with ``expm1`` so it stays accurate for small eps.

The HadaOracle/HadaHeavy constants (``k``, ``m``, ``B``, ``Delta``, ``tau``,
``beta'``) are our reconstructions: [WW] fixes them only up to constant factors, so the defaults
here are our (conservative) choices, exposed so callers can override them.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .. import _core
from .._validate import MAX_EPSILON, check_epsilon, check_real
from ..errors import ParameterError
from ..kernels.field import gf64_field
from ._types import RealLike


__all__ = [
    "c_eps", "hrr_variance", "hrr_error_bound", "he_variance", "cmshe_variance", "rhr_parameters",
    "rhr_variance", "olh_g", "olh_variance", "hadaoracle_k", "hadaoracle_defaults",
    "hadaoracle_group_mse", "hadaoracle_collision_moments", "hadaoracle_error_bound", "hadaheavy_defaults",
    "KL_HALF_EIGHTH",
]

#: KL(1/2 || 1/8): the Chernoff exponent of "half of k groups are bad" when each group is
#: bad with probability 1/8 (the median argument of [WW] Thm 3.1).
KL_HALF_EIGHTH = 0.5 * math.log(0.5 / 0.125) + 0.5 * math.log(0.5 / 0.875)


def c_eps(epsilon: float) -> float:
    """Binary-RR debias constant ``(e^eps + 1)/(e^eps - 1)``, for any budget in
    ``(0, MAX_EPSILON]``: a per-bit share of a protocol's epsilon may lie below MIN_EPSILON."""
    epsilon = check_real("epsilon", epsilon, 0.0, MAX_EPSILON, high_closed=True)
    return (math.expm1(epsilon) + 2.0) / math.expm1(epsilon)


def hrr_variance(epsilon: float, n: float, f: float = 0.0, counts: bool = False) -> float:
    """Variance of the HRR estimate (derived from [WW] Fact 2.1): ``(c_eps^2 - f)/n`` for
    fractions, or ``n c_eps^2 - c(x)`` for counts (``counts=True``; ``f`` is still the
    fraction)."""
    c = c_eps(epsilon)
    n = check_real("n", n)
    var = (c * c - f) / n
    return var * n * n if counts else var


def hrr_error_bound(epsilon: float, n: float, beta: float) -> float:
    """Hoeffding bound (counts; [WW] Fact 7.9 has this form up to its constant): with
    probability at least ``1 - beta``, ``|chat(x) - c(x)| <= c_eps sqrt(2 n
    log(2/beta))``."""
    return c_eps(epsilon) * math.sqrt(2.0 * check_real("n", n) * math.log(2.0 / check_real("beta", beta, 0.0, 1.0)))


def he_variance(epsilon: float, n: float = 1, f: Any = 0.0) -> Any:
    """HE (Hadamard Encoding = CMS+RR with ``m = 2``) variance, fractions:
    ``(c_eps^2 - f)/n`` ([PAN] section 4.1), equal to ``ocms_variance(epsilon, 2, n, f)``;
    ``f`` may be an array. Also exported by :mod:`ldpfast.theory.ocms`."""
    return hrr_variance(epsilon, n, f)


def cmshe_variance(epsilon: float, n: float, f: float = 0.0, m: int = 1024,
                   k: Optional[int] = None, sum_sq_other: float = 0.0) -> float:
    """CMS+HE mean squared error (fractions) with a pairwise-independent outer hash to
    ``[m]`` and the CMS estimator ``fhat = m/(m-1) mean_i(yhat_i) - 1/(m-1)``.

    Each user's inner HE estimate ``Y`` has ``E[Y^2] = c_eps^2`` and mean 1 (own value)
    or ``1/m`` (any other value), so
    ``Var = m^2/((m-1)^2 n) [f (c_eps^2 - 1) + (1-f)(c_eps^2 - 1/m^2)]``.
    With a family of ``k`` functions drawn once, [PAN] Thm 3.10 adds the variance of the
    family bias ``sum_{x'!=x} f(x')^2 / ((m-1) k)`` (pass ``k`` and ``sum_sq_other``).
    At ``m = 1024`` this is within 0.2% of HE's variance ([PAN] section 6.1, Table I)."""
    c = c_eps(epsilon)
    n = check_real("n", n)
    var = m * m / ((m - 1.0) ** 2 * n) * (f * (c * c - 1.0) + (1.0 - f) * (c * c - 1.0 / (m * m)))
    if k is not None:
        var += sum_sq_other / ((m - 1.0) * k)
    return var


def rhr_parameters(epsilon: float, d: int) -> Tuple[int, int, int, int]:
    """The Recursive Hadamard Response layout of [PAN]'s reference code R1: ``(b, base, m,
    hsize)`` with ``b = ceil(eps log2 e)``, ``base = 2^(b-1)``, RR size ``m = 2^b`` and
    ``hsize`` = the smallest power of two above the largest column ``(d-1) // base + 1``
    (R1's ``2^ceil(log2(d // base + 1))`` wherever that one is large enough)."""
    epsilon = check_epsilon(epsilon)
    b = max(1, math.ceil(epsilon * math.log2(math.e)))
    base = 1 << (b - 1)
    # smallest power of two above the largest column (d-1)//base + 1; equals R1's
    # 2^ceil(log2(d // base + 1)) except where R1's would leave that column out of range
    hsize = 1 << ((d - 1) // base + 1).bit_length()
    return b, base, 1 << b, hsize


def rhr_variance(epsilon: float, n: float, f: float = 0.0, residue_fraction: float = 1.0) -> float:
    """Variance (fractions) of R1's RHR estimate of ``x`` (derived here): with
    ``C = (e + m - 1)/(e - 1)``, ``m = 2^b`` and ``F`` = fraction of users whose value
    shares ``x mod base`` (``residue_fraction``, including ``x`` itself),
    ``Var = [C^2 (F (e+1) + 2 (1-F)) / (e + m - 1) - f] / n``. With ``b = 1`` this is HE's
    ``(c_eps^2 - f)/n``; the adversarial data set of [PAN] section 6 has ``F = 1``."""
    epsilon = check_epsilon(epsilon)
    n = check_real("n", n)
    b = max(1, math.ceil(epsilon * math.log2(math.e)))
    m = float(1 << b)
    em1 = math.expm1(epsilon)
    e = em1 + 1.0
    big_c = (em1 + m) / em1
    second = big_c * big_c * (residue_fraction * (e + 1.0) + 2.0 * (1.0 - residue_fraction)) / (em1 + m)
    return (second - f) / n


def olh_g(epsilon: float) -> int:
    """OLH's hash range ``g = round(e^eps) + 1`` (Wang et al. 2017), an exact ``.5`` tie
    rounded upward (eps = ln 2.5 gives g = 4). The one rule of every OLH-style protocol:
    OLH, PS-OLH (of eps' with ``amplify=True``) and SVIM's OLH phases use it by default."""
    return int(math.floor(math.exp(check_epsilon(epsilon)) + 0.5)) + 1


def olh_variance(epsilon: float, n: float, f: float = 0.0, g: Optional[int] = None) -> float:
    """OLH variance (fractions): the CMS+RR variance with ``m = g`` and a
    pairwise-independent hash ([PAN] Eq. 20):
    ``(1-f)/(n(g-1)) + g[(1-f)(e-1)(2-g) + g e] / (n (g-1) (e-1)^2)``."""
    epsilon = check_epsilon(epsilon)
    n = check_real("n", n)
    g = olh_g(epsilon) if g is None else g
    em1 = math.expm1(epsilon)
    e = em1 + 1.0
    return (1 - f) / (n * (g - 1)) + g * ((1 - f) * em1 * (2 - g) + g * e) / (n * (g - 1) * em1 * em1)


def hadaoracle_k(beta: float, factor: float = 2.5) -> int:
    """Number of hash functions/user subsets: the smallest odd integer ``>= factor *
    log(1/beta)`` and at least 1 (our constant for [WW]'s ``k = Theta(log(1/beta))``;
    Chernoff needs ``factor >= 1/KL(1/2||1/8) = 2.42``)."""
    beta = check_real("beta", beta, 0.0, 1.0)
    k = max(1, math.ceil(factor * math.log(1.0 / beta) - 1e-12))
    return k if k % 2 else k + 1


def hadaoracle_defaults(epsilon: float, n: float, beta: float, d: Optional[int] = None) -> Tuple[int, float, int]:
    """HadaOracle defaults ``(k, m_raw, m)`` (our constants: [WW] Alg. 1 fixes them only up
    to constant factors; ``m`` balances collision and HRR errors):
    ``m_raw = sqrt(n/k)/c_eps`` and ``m = 2^ceil(log2 m_raw)`` clamped to
    ``[2, 2^ceil(log2 d)]`` (``d`` optional)."""
    k = hadaoracle_k(beta)
    n = check_real("n", n)
    m_raw = math.sqrt(n / k) / c_eps(epsilon)
    m = 1 << max(1, math.ceil(math.log2(m_raw)) if m_raw > 0 else 1)
    if d is not None:
        m = min(m, 1 << max(1, (int(d) - 1).bit_length()))
    return k, m_raw, m


def hadaoracle_group_mse(epsilon: float, n: float, k: int, m: int, c_x: float = 0.0,
                         sum_sq_other: float = 0.0, collision_variance: Optional[float] = None) -> Tuple[float, float]:
    """Bias and variance (counts) of one subset's scaled estimate ``k chat_j(h_j(x))``
    under independent partitioning (derived here; [WW] section 3 error decomposition).

    Given the hash ``h_j``, each user contributes ``k 1{i in U_j} c_eps b_i H[r_i, h_j(x)]``
    with second moment ``k c_eps^2`` and mean ``1{h_j(x_i) = h_j(x)}``; over the hash the
    colliding mass ``sum_{x'!=x} c(x') 1{h(x') = h(x)}`` has mean ``(n - c_x)/m`` (pairwise
    independence suffices) and variance ``collision_variance``. Returns ``(bias, variance)``
    with ``bias = (n - c_x)/m`` and ``variance = n k c_eps^2 - c_x - (n - c_x)/m +
    collision_variance``.

    ``collision_variance`` defaults to ``sum_sq_other (1/m)(1 - 1/m)``, which is exact only
    if the events ``h(x') = h(x)`` are pairwise uncorrelated across ``x'`` (3-wise independent
    hashing). HadaOracle's GF(2^64) low-bits hash is pairwise but not 3-wise independent:
    for structured heavy values (small consecutive integers) collisions come together and the
    default understates the variance (3.2x for the hash term, 0..10 at m = 16). Pass
    :func:`hadaoracle_collision_moments` ``(...)[1]`` for the exact value."""
    c = c_eps(epsilon)
    coll_mean = (n - c_x) / m
    if collision_variance is None:
        collision_variance = sum_sq_other * (1.0 / m) * (1.0 - 1.0 / m)
    var = n * k * c * c - c_x - coll_mean + float(collision_variance)
    return coll_mean, var


def _gf64_low_bits_map(u: int, bits: int) -> List[int]:
    """The GF(2)-linear map ``a1 -> low ``bits`` bits of a1 * u`` in GF(2^64) (the library's
    hash field), as its 64 column images (one per bit of ``a1``)."""
    basis = np.array([1 << j for j in range(64)], dtype=np.uint64)
    products = _core.field_mul(gf64_field(), basis, np.full(64, u, dtype=np.uint64))
    return [int(v) & ((1 << bits) - 1) for v in products]


def _gf2_rank(vectors: Any) -> int:
    basis: List[int] = []
    for v in vectors:
        for b in basis:
            v = min(v, v ^ b)
        if v:
            basis.append(v)
    return len(basis)


def hadaoracle_collision_moments(x: int, values: RealLike, counts: RealLike, m: int) -> Tuple[float, float]:
    """Exact mean and variance, over HadaOracle's hash ``h(v) = low log2(m) bits of
    (a1 * v + a0)`` in GF(2^64) with uniform ``a0, a1``, of the mass colliding with ``x``:
    ``sum_i counts[i] 1{h(values[i]) = h(x)}`` (entries equal to ``x`` are left out).

    ``h(v) = h(x)`` iff the linear map ``a1 -> low(a1 * (v xor x))`` sends ``a1`` to 0, so
    ``P = 2^-rank = 1/m`` for one value and ``2^-rank(both maps)`` for two, which is
    ``1/m^2`` only when the two maps are independent; for values sharing low-bit structure
    it is larger. ``m`` must be a power of two (as HadaOracle's). Cost: O(len(values)^2)
    ranks of 64 vectors."""
    if m < 2 or m & (m - 1):
        raise ParameterError(f"m must be a power of two >= 2, got {m}")
    bits = m.bit_length() - 1
    pairs = [(int(v) ^ int(x), float(c)) for v, c in zip(np.asarray(values).tolist(), np.asarray(counts).tolist())
             if int(v) != int(x)]
    maps = [_gf64_low_bits_map(u, bits) for u, _ in pairs]
    mean = sum(c for _, c in pairs) / m
    var = sum(c * c for _, c in pairs) * (1.0 / m) * (1.0 - 1.0 / m)
    for i in range(len(pairs)):
        for j in range(i + 1, len(pairs)):
            joint = 2.0 ** -_gf2_rank([a | (b << bits) for a, b in zip(maps[i], maps[j])])
            var += 2.0 * pairs[i][1] * pairs[j][1] * (joint - 1.0 / (m * m))
    return mean, var


def hadaoracle_error_bound(epsilon: float, n: float, k: int, m: int) -> Tuple[float, float]:
    """An explicit (conservative) error bound for the median estimator, counts:
    returns ``(bound, beta)`` with ``bound = 4 c_eps sqrt(n k) + 16 n/m``.

    Per subset, Chebyshev bounds the HRR-plus-sampling error by ``4 c_eps sqrt(n k)``
    except with probability 1/16 and Markov bounds the (non-negative) collision error by
    ``16 n/m`` except with probability 1/16, so a subset is bad with probability at most
    1/8. The median fails only if half the subsets are bad:
    ``beta = exp(-k KL(1/2||1/8))`` (Chernoff), treating subsets as independent (exact
    for the hash and HRR noise; the paper's martingale argument covers the sampling).
    [WW] Cor 3.2 states the order ``O((1/eps) sqrt(n log(1/beta)))``."""
    c = c_eps(epsilon)
    return 4.0 * c * math.sqrt(n * k) + 16.0 * n / m, math.exp(-k * KL_HALF_EIGHTH)


def hadaheavy_defaults(epsilon: float, n: float, beta: float, d: int, b: Optional[int] = None,
                       delta: Optional[float] = None, tau: Optional[float] = None) -> Dict[str, float]:
    """HadaHeavy defaults (our constants: [WW] section 4 fixes them only up to
    constant factors) for ``n`` users, domain size ``d``:

    * ``b = max(1, ceil(log2 sqrt(n)))``, ``B = 2^b``, ``L = ceil(log2 d)``, ``t = ceil(L/b)``;
    * ``Delta = 2 c_eps sqrt(n t log(t B n / beta))`` (uniform error over the candidates);
    * ``tau = 3 Delta``; prefixes are kept when ``fhat >= tau - Delta`` (the report
      threshold), every ``x`` with ``c(x) >= tau`` is found, at most ``n/Delta`` outputs;
    * per level: ``beta' = beta/(t B n)``, HadaOracle ``k, m`` for ``n/t`` users.

    ``b``, ``delta`` and ``tau`` override the defaults. Returns a dict with keys ``b, B, t,
    L, delta, tau, report_threshold, max_outputs, beta_level, k, m``."""
    epsilon = check_epsilon(epsilon)
    n = check_real("n", n)
    beta = check_real("beta", beta, 0.0, 1.0)
    if b is None:
        b = max(1, math.ceil(math.log2(math.sqrt(n))))
    big_b = 1 << b
    L = max(1, (int(d) - 1).bit_length())
    t = math.ceil(L / b)
    c = c_eps(epsilon)
    if delta is None:
        delta = 2.0 * c * math.sqrt(n * t * math.log(t * big_b * n / beta))
    if tau is None:
        tau = 3.0 * delta
    beta_level = beta / (t * big_b * n)
    k, _, m = hadaoracle_defaults(epsilon, n / t, beta_level, 1 << min(b * t, 64))
    return {"b": b, "B": big_b, "t": t, "L": L, "delta": delta, "tau": tau,
            "report_threshold": tau - delta, "max_outputs": int(n // delta), "beta_level": beta_level,
            "k": k, "m": m}
