"""Closed forms of Projective Geometry Response (PGR; Feldman, Nelson, Nguyen, Talwar, ICML 2022).

The domain is embedded in the projective space PG(t-1, q) (q prime): its
``K = (q^t - 1)/(q - 1)`` points, the lines through the origin of ``F_q^t``. A user holding
``x`` reports a point ``y``: each point of the hyperplane ``{y : <x, y> = 0}`` (``s = (q^(t-1) -
1)/(q - 1)`` points) with weight ``e^eps``, each other point with weight 1. Two distinct
points share ``s2 = (q^(t-2) - 1)/(q - 1)`` hyperplane points (a 2-design), so the number of
reports on the hyperplane of ``x`` is a sum of independent Bernoullis of parameter
``p = e^eps s / Z`` for the users holding ``x`` and ``p' = (e^eps s2 + s - s2) / Z`` for the
others (``Z = e^eps s + K - s``): ``fhat = (C/n - p')/(p - p')`` is unbiased with
``Var = [f p(1-p) + (1-f) p'(1-p')] / (n (p - p')^2)``. With ``q = e^eps + 1`` that is
``4 e^eps / (n (e^eps - 1)^2)`` at ``f = 0`` for large ``K``, the optimum of Subset Selection
and OLH, with ``log2 K`` bits per report.
"""

from __future__ import annotations

import functools
import math
from typing import Any, List, Tuple

import numpy as np

from .._validate import check_epsilon, check_int
from ..errors import ParameterError
from ..kernels import field as _field

__all__ = ["pgr_points", "pgr_dimension", "pgr_probabilities", "pgr_variance", "pgr_decode_work", "pgr_optimal_q",
           "MAX_PGR_POINTS"]

#: Reports are uint32 points: the projective space has fewer than 2^32 points.
MAX_PGR_POINTS = 2**32 - 1


def pgr_points(q: int, m: int) -> int:
    """``(q^m - 1)/(q - 1)``: the points of PG(m-1, q) (0 for ``m = 0``)."""
    power: int = pow(int(q), int(m))
    return (power - 1) // (int(q) - 1)


def pgr_dimension(q: int, d: int) -> int:
    """The smallest ``t >= 2`` with ``(q^t - 1)/(q - 1) >= d``."""
    t = 2
    while pgr_points(q, t) < d:
        t += 1
    return t


def pgr_decode_work(q: int, t: int) -> int:
    """Additions of the decoder's dynamic program: about ``q^t`` per inner level (``t - 2`` of
    them) and ``(q - 1)`` per point at the last."""
    power: int = pow(int(q), int(t))
    return max(t - 2, 0) * power + q * pgr_points(q, t)


def pgr_probabilities(epsilon: float, q: int, t: int) -> Tuple[float, float, float]:
    """``(p, p', p - p')``: the probability that a report lies on the hyperplane of the
    user's own value, of any other given value, and their difference (computed as
    ``(e^eps - 1)(s - s2)/Z`` without cancellation)."""
    e, em1 = math.exp(epsilon), math.expm1(epsilon)
    points, s, s2 = pgr_points(q, t), pgr_points(q, t - 1), pgr_points(q, t - 2)
    z = e * s + (points - s)
    return e * s / z, (e * s2 + (s - s2)) / z, em1 * (s - s2) / z


def pgr_variance(epsilon: float, q: int, t: int, n: float = 1, f: Any = 0.0) -> Any:
    """``Var(fhat)`` of PGR over ``PG(t-1, q)`` at true frequency ``f`` (array or scalar) from
    ``n`` reports: ``[f p(1-p) + (1-f) p'(1-p')] / (n (p - p')^2)`` (module docstring)."""
    p, po, gap = pgr_probabilities(epsilon, q, t)
    f = np.asarray(f, dtype=np.float64)
    out = (f * p * (1.0 - p) + (1.0 - f) * po * (1.0 - po)) / (n * gap * gap)
    return float(out) if out.ndim == 0 else out


def _is_prime(n: int) -> bool:
    return bool(_field.is_prime(n))


def _next_prime(n: int) -> int:
    return int(_field.next_prime(n))


def _previous_prime(n: int) -> int:
    while n > 2 and not _is_prime(n):
        n -= 1
    return max(n, 2)


def _smallest_q(t: int, d: int) -> int:
    """The smallest prime ``q`` with ``(q^t - 1)/(q - 1) >= d``."""
    q = max(2, int(math.floor((max(d - 1, 1)) ** (1.0 / (t - 1)))) - 1)
    while pgr_points(q, t) < d:
        q += 1
    q = _next_prime(q)
    while pgr_points(q, t) < d:
        q = _next_prime(q + 1)
    return q


@functools.lru_cache(maxsize=256)
def pgr_optimal_q(epsilon: float, d: int) -> Tuple[int, int]:
    """``(q, t)`` of the default PGR for ``d`` values: among the primes next to ``e^eps + 1``
    (the optimum of the large-``K`` variance ``(e^eps + q - 1)^2 / ((e^eps - 1)^2 (q - 1))``)
    and, for each ``t``, the smallest prime ``q`` with ``(q^t - 1)/(q - 1) >= d`` (where
    rounding ``K`` up costs the least), the one of least exact variance at ``f = 0``
    (:func:`pgr_variance`; ties: fewer points) whose decoder costs at most
    ``1024 max(d, 2^17)`` additions (:func:`pgr_decode_work`; e.g. ``eps = 8``, ``d = 2^14``
    would otherwise take ``q = 2971``, ``K = 8.8e6`` and ``2.6e10`` additions, where ``q +
    1 >= d`` symbols, k-ary randomized response, cost ``O(d)``). Only primes are used
    (``F_q`` is a prime field); their variance is within a few percent of the prime-power
    optimum.

    Raises:
        ParameterError: no candidate has fewer than 2^32 points.
    """
    epsilon = check_epsilon(epsilon)
    d = check_int("d", d, 2, MAX_PGR_POINTS)
    centre = math.exp(min(epsilon, 40.0)) + 1.0
    candidates: List[int] = []
    if centre < 2**32:
        low, high = _previous_prime(int(centre)), _next_prime(int(math.ceil(centre)))
        candidates += [low, high, _previous_prime(low - 1), _next_prime(high + 1)]
    t = 2
    while True:
        q = _smallest_q(t, d)
        candidates.append(q)
        if q == 2:
            break
        t += 1
    best: Tuple[float, int, int, int] = (math.inf, 0, 0, 0)
    for q in sorted(set(candidates)):
        if q >= 2**32:
            continue
        t = pgr_dimension(q, d)
        points = pgr_points(q, t)
        if points > MAX_PGR_POINTS or (t > 2 and pgr_decode_work(q, t) > 1024 * max(d, 2**17)):
            continue
        key = (pgr_variance(epsilon, q, t), points, q, t)
        if key < best:
            best = key
    if best[2] == 0:
        raise ParameterError(f"no PGR configuration for d = {d} at epsilon = {epsilon} has fewer than 2^32 points")
    return best[2], best[3]
