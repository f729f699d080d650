"""The numerical pieces of the shuffle-model accountant (:mod:`ldpfast.theory.shuffle`):
the pair of distributions of the variation-ratio / clones reduction, exact binomial tails,
the delta of a pair and of shuffled binary randomized response at a given epsilon, and the
searches that turn deltas into epsilons. :mod:`ldpfast.theory._pld` composes them over
rounds; :mod:`ldpfast.theory.shuffle` is the public face."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Optional, Tuple

import numpy as np

from .._optional import require
from ..errors import ParameterError

#: ``shuffle_epsilon(analysis=...)``: Wang et al.'s variation-ratio reduction (default) or
#: Feldman, McMillan and Talwar's clones (FOCS 2021; looser).
ANALYSES = ("variation-ratio", "clones")

_Z_TAIL = 1e-30          # probability of C left outside the summed range (added in full)
_EXACT_RANGE = 4096      # sum every c when the range of C is this short
_BLOCKS = 512


def _special() -> Any:
    return require("scipy.special", "the shuffle accountant (binomial tails)")


def _check(eps0: float, n: int, delta: float) -> Tuple[float, int, float]:
    eps0, n = _check_local(eps0, n)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0.0 < delta < 1.0:
        raise ParameterError(f"delta must be in (0, 1), got {delta!r}")
    return eps0, n, float(delta)


def _check_local(eps0: float, n: int) -> Tuple[float, int]:
    if isinstance(eps0, bool) or not isinstance(eps0, (int, float)) or not 0.0 < eps0 <= 30.0:
        raise ParameterError(f"eps0 must be in (0, 30], got {eps0!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 2 <= n <= 10**12:
        raise ParameterError(f"n must be an integer in [2, 10^12], got {n!r}")
    return float(eps0), int(n)


def _check_eps(eps: float, eps0: float) -> float:
    """The central ``eps`` a delta is asked at: finite and >= 0 (NaN compares false with
    every threshold, so it would come back as a NaN delta), taken at most ``eps0``: no
    privacy loss of the pairs exceeds ``eps0``, so delta is 0 from there on (and ``e^eps``
    would overflow past 709)."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0.0 <= eps < math.inf:
        raise ParameterError(f"eps must be a finite number >= 0, got {eps!r}")
    return min(float(eps), eps0)


def shuffle_closed_form(eps0: float, n: int, delta: float) -> float:
    """Feldman, McMillan and Talwar's closed form (FOCS 2021, Thm 3.1); ``eps0`` where its
    condition ``eps0 <= log(n / (16 log(2/delta)))`` fails."""
    eps0, n, delta = _check(eps0, n, delta)
    if eps0 > math.log(n / (16.0 * math.log(2.0 / delta))):
        return eps0
    e0 = math.exp(eps0)
    spread = 8.0 * math.sqrt(e0 * math.log(4.0 / delta)) / math.sqrt(n) + 8.0 * e0 / n
    return min(eps0, math.log1p((e0 - 1.0) / (e0 + 1.0) * spread))


# -- the dominating pair --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Pair:
    """Victim probabilities ``(e^eps0 alpha, alpha, w)`` and clone probability ``rho``."""

    p: float                # e^eps0
    alpha: float
    w: float
    rho: float
    n: int


def _pair(eps0: float, n: int, analysis: str, k: Optional[int]) -> _Pair:
    p = math.exp(eps0)
    if k is not None:
        alpha = 1.0 / (p + k - 1.0)
        return _Pair(p, alpha, (k - 2.0) * alpha, 2.0 * alpha, n)
    if analysis == "clones":
        return _Pair(p, 1.0 / (p + 1.0), 0.0, math.exp(-eps0), n)
    return _Pair(p, 1.0 / (p + 1.0), 0.0, 2.0 / (p + 1.0), n)


def _tail(special: Any, c: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``P(Bin(c, 1/2) >= m)`` elementwise (1 for ``m <= 0``, 0 for ``m > c``)."""
    c = np.asarray(c, dtype=np.float64)
    m = np.asarray(m, dtype=np.float64)
    out = np.where(m <= 0, 1.0, 0.0)
    inside = (m > 0) & (m <= c)
    if inside.any():
        cc, mm = np.broadcast_to(c, m.shape)[inside], m[inside]
        out[inside] = special.betainc(mm, cc - mm + 1.0, 0.5)
    return out


def _cdf(special: Any, k: Any, trials: int, rho: float) -> np.ndarray:
    """``P(Bin(trials, rho) <= k)`` elementwise, from the regularized incomplete beta function
    (scipy's ``bdtr`` loses accuracy near the centre of very large binomials; ``betainc`` does not)."""
    k = np.floor(np.asarray(k, dtype=np.float64))
    inner = np.clip(k, 0.0, trials - 1.0)
    value = special.betainc(trials - inner, inner + 1.0, 1.0 - rho)
    return np.asarray(np.where(k < 0, 0.0, np.where(k >= trials, 1.0, value)))


def _at_least(special: Any, k: Any, trials: int, rho: float) -> np.ndarray:
    """``P(Bin(trials, rho) >= k)`` elementwise."""
    k = np.ceil(np.asarray(k, dtype=np.float64))
    inner = np.clip(k, 1.0, float(trials))
    value = special.betainc(inner, trials - inner + 1.0, rho)
    return np.asarray(np.where(k <= 0, 1.0, np.where(k > trials, 0.0, value)))


def _conditional_delta(special: Any, pair: _Pair, c: np.ndarray, eps: float) -> np.ndarray:
    """``delta_c(eps)`` of the pair given ``C = c`` and the victim not ``w`` (normalized):
    ``P`` puts ``a' = A + D`` ones with ``D ~ Bern(p/(p+1))``, ``Q`` with ``Bern(1/(p+1))``."""
    p, e = pair.p, math.exp(eps)
    threshold = (c + 1.0) * (e * p - 1.0) / ((p - 1.0) * (e + 1.0))
    m = np.floor(threshold) + 1.0          # the smallest a' whose loss exceeds eps
    s_prev, s_here = _tail(special, c, m - 1.0), _tail(special, c, m)
    keep = p / (p + 1.0)
    flip = 1.0 / (p + 1.0)
    return np.maximum(keep * s_prev + flip * s_here - e * (flip * s_prev + keep * s_here), 0.0)


def _c_range(special: Any, pair: _Pair) -> Tuple[int, int, float, float]:
    """``[lo, hi]`` holding all but ``_Z_TAIL`` of ``C ~ Bin(n - 1, rho)``, and the masses below / above."""
    trials, rho = pair.n - 1, pair.rho
    mean = trials * rho
    sd = math.sqrt(max(trials * rho * (1.0 - rho), 1e-300))
    lo = max(0, int(mean - 14.0 * sd - 2))
    hi = min(trials, int(mean + 14.0 * sd + 2))
    below = float(_cdf(special, lo - 1, trials, rho))
    above = float(_at_least(special, hi + 1, trials, rho))
    return lo, hi, below, above


def _c_blocks(special: Any, pair: _Pair, blocks: int = _BLOCKS
              ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """At most ``blocks`` blocks ``[first, last]`` of the values of ``C`` (every value alone
    when there are at most ``_EXACT_RANGE`` and ``blocks`` is the default), with their
    probabilities and the probabilities below and above them."""
    lo, hi, below, above = _c_range(special, pair)
    trials, rho = pair.n - 1, pair.rho
    if hi - lo + 1 <= (_EXACT_RANGE if blocks == _BLOCKS else blocks):
        first = np.arange(lo, hi + 1, dtype=np.float64)
        last = first
    else:
        edges = np.unique(np.linspace(lo, hi + 1, blocks + 1).astype(np.int64))
        first, last = edges[:-1].astype(np.float64), edges[1:].astype(np.float64) - 1.0
    mass = np.maximum(_cdf(special, last, trials, rho) - _cdf(special, first - 1.0, trials, rho), 0.0)
    return first, last, mass, below, above


def pair_delta(eps0: float, n: int, eps: float, analysis: str = "variation-ratio",
               k: Optional[int] = None) -> Tuple[float, float]:
    """``(upper, lower)`` bounds on the dominating pair's ``delta`` at ``eps`` (equal when
    every value of ``C`` is summed); see the module docstring.

    Raises:
        ParameterError: ``eps0``, ``n``, ``eps`` (finite, >= 0), ``analysis`` or ``k`` out of range.
    """
    eps0, n = _check_local(eps0, n)
    eps = _check_eps(eps, eps0)
    if analysis not in ANALYSES:
        raise ParameterError(f"analysis must be one of {ANALYSES}, got {analysis!r}")
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2):
        raise ParameterError(f"k must be an integer >= 2 or None, got {k!r}")
    special = _special()
    pair = _pair(eps0, n, analysis, None if k is None else int(k))
    if pair.w > 0:
        return _hidden_c_delta(special, pair, eps)
    first, last, mass, below, above = _c_blocks(special, pair)
    upper = float(np.dot(mass, _conditional_delta(special, pair, first, eps))) + below
    lower = float(np.dot(mass, _conditional_delta(special, pair, last, eps)))
    upper += above * float(_conditional_delta(special, pair, last[-1:], eps)[0])
    return min(upper, 1.0), lower


def _hidden_c_delta(special: Any, pair: _Pair, eps: float) -> Tuple[float, float]:
    """The pair with ``w > 0`` summed over the observed total ``t = N0 + N1`` (``C`` hidden):
    ``P(a, t) = B(t-1) [p alpha bin(t-1, a-1) + alpha bin(t-1, a)] + w B(t) bin(t, a)``."""
    p, alpha, w, rho, trials = pair.p, pair.alpha, pair.w, pair.rho, pair.n - 1
    e = math.exp(eps)
    lo, hi, below, above = _c_range(special, pair)
    t = np.arange(max(lo, 1), hi + 2, dtype=np.float64)
    # B(t)/B(t-1) = (trials - t + 1)/t * rho/(1 - rho); t B(t)/B(t-1) = (trials - t + 1) rho/(1 - rho)
    t_ratio = np.maximum(trials - t + 1.0, 0.0) * rho / (1.0 - rho)
    threshold = ((e - 1.0) * w * t_ratio / (2.0 * alpha) + t * (e * p - 1.0)) / ((p - 1.0) * (e + 1.0))
    m = np.floor(threshold) + 1.0
    b_prev = _binom_pmf(special, t - 1.0, trials, rho)
    b_here = np.where(t <= trials, _binom_pmf(special, np.minimum(t, trials), trials, rho), 0.0)
    s_prev, s_here = _tail(special, t - 1.0, m - 1.0), _tail(special, t - 1.0, m)
    s_w = 0.5 * (s_prev + s_here)           # P(Bin(t, 1/2) >= m), one more fair coin
    p_tail = b_prev * (p * alpha * s_prev + alpha * s_here) + w * b_here * s_w
    q_tail = b_prev * (alpha * s_prev + p * alpha * s_here) + w * b_here * s_w
    inside = float(np.maximum(p_tail - e * q_tail, 0.0).sum())
    return min(inside + below + above, 1.0), inside


def _binom_pmf(special: Any, c: np.ndarray, trials: int, rho: float) -> np.ndarray:
    c = np.asarray(c, dtype=np.float64)
    inside = (c >= 0) & (c <= trials)
    cc = np.clip(c, 0.0, float(trials))
    log_pmf = (special.gammaln(trials + 1.0) - special.gammaln(cc + 1.0) - special.gammaln(trials - cc + 1.0)
               + special.xlogy(cc, rho) + special.xlog1py(trials - cc, -rho))
    return np.asarray(np.where(inside, np.exp(log_pmf), 0.0))


# -- the exact lower bound: shuffled binary randomized response ---------------------------------
def binary_rr_shuffle_delta(eps0: float, n: int, eps: float) -> float:
    """The exact ``delta(eps)`` of shuffling ``n`` binary-RR reports (each ``eps0``-LDP) on
    neighbouring datasets ``(0, 0, ..., 0)`` and ``(1, 0, ..., 0)``, both directions.

    Raises:
        ParameterError: ``eps0``, ``n`` or ``eps`` (finite, >= 0) out of range.
    """
    eps0, n = _check_local(eps0, n)
    eps = _check_eps(eps, eps0)
    special = _special()
    q = 1.0 / (math.exp(eps0) + 1.0)
    e = math.exp(eps)
    others = n - 1

    def at_least(k: float) -> float:        # P(Bin(n - 1, q) >= k)
        return float(_at_least(special, k, others, q))

    def at_most(k: float) -> float:
        return float(_cdf(special, k, others, q))

    # ones K: under D0, K = B + Bern(q); under D1, K = B + Bern(1 - q), B ~ Bin(n - 1, q).
    # P1(k)/P0(k) = ((1-q)^2 u + q^2) / (q (1-q)(u + 1)) with u = k/(n - k), increasing in k.
    out = 0.0
    if (1.0 - q) > e * q:
        # D1 over D0: k with u > q (e (1-q) - q) / ((1-q)(1-q - e q))
        u = q * (e * (1.0 - q) - q) / ((1.0 - q) * (1.0 - q - e * q))
        k0 = math.floor(n * u / (1.0 + u)) + 1
        p1 = (1.0 - q) * at_least(k0 - 1) + q * at_least(k0)
        p0 = q * at_least(k0 - 1) + (1.0 - q) * at_least(k0)
        out = max(out, p1 - e * p0)
        # D0 over D1: P0/P1 > e  <=>  u < q ((1-q) - e q) / ((1-q)(e (1-q) - q))
        u = q * ((1.0 - q) - e * q) / ((1.0 - q) * (e * (1.0 - q) - q))
        k1 = math.ceil(n * u / (1.0 + u)) - 1
        p0 = q * at_most(k1 - 1) + (1.0 - q) * at_most(k1)
        p1 = (1.0 - q) * at_most(k1 - 1) + q * at_most(k1)
        out = max(out, p0 - e * p1)
    return max(out, 0.0)


# -- bisection ---------------------------------------------------------------------------------------
def _smallest_eps(delta_at: Callable[[float], float], delta: float, high: float, steps: int = 48) -> float:
    """The smallest ``eps`` in ``[0, high]`` (to ``high 2^-steps``) with ``delta_at(eps) <= delta``;
    ``delta_at`` does not increase with ``eps``."""
    if delta_at(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, high
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if delta_at(mid) <= delta:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-7 * hi:
            break
    return hi


def _largest_eps(delta_at: Callable[[float], float], delta: float, high: float, steps: int = 48) -> float:
    """The largest ``eps`` in ``[0, high]`` (to ``high 2^-steps``) with ``delta_at(eps) > delta``."""
    if delta_at(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, high
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if delta_at(mid) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-7 * hi:
            break
    return lo


def _both_bounds(delta_pair: Callable[[float], Tuple[float, float]], delta: float, high: float) -> Tuple[float, float]:
    """``(lower, upper)`` epsilons from one function giving ``(upper, lower)`` bounds on delta:
    one bisection on the upper delta; its last ``eps`` above the target is the lower epsilon
    when the lower delta there still exceeds the target (else a second bisection)."""
    lo, hi = 0.0, high
    if delta_pair(0.0)[0] <= delta:
        return 0.0, 0.0
    for _ in range(48):
        mid = 0.5 * (lo + hi)
        if delta_pair(mid)[0] <= delta:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-7 * hi:
            break
    if lo > 0.0 and delta_pair(lo)[1] <= delta:
        lo = _largest_eps(lambda e: delta_pair(e)[1], delta, lo)
    return lo, hi
