"""Argument checks shared by every protocol: each error names the parameter, the
constraint and the value received."""

from __future__ import annotations

import decimal
import functools
import math
from typing import Any, Optional, Tuple

import numpy as np

from .errors import ParameterError

#: Smallest accepted epsilon, 2^-20 (about 9.5e-7). Closed forms such as ``e^eps - 1`` keep
#: at least 32 significant bits in double precision above it, and no estimate overflows.
MIN_EPSILON = 2.0**-20
#: Largest accepted epsilon, ``log(2^64 (2^32 - 1))`` rounded down: the largest budget any
#: 64-bit randomized-response sampler can represent (see :func:`rr_threshold`); each
#: mechanism's own limit is lower (binary RR: 22.18) and its Params say so.
MAX_EPSILON = 66.5
#: The C++ samplers flip iff a uniform 64-bit word is below an integer threshold ``t``.
_TWO64 = 2**64
#: Fidelity bound of :func:`rr_threshold`: flip and keep probabilities >= 2^-32 and
#: ``p - q >= 2^-31``, so rounding ``t`` moves each probability and ``p - q`` by a relative
#: 2^-32 at most.
_MIN_PROBABILITY = 2.0**-32
_RANGE = f"[{MIN_EPSILON:.6g}, {MAX_EPSILON:g}]"


def check_epsilon(epsilon: Any) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer, np.floating)):
        raise ParameterError(f"epsilon must be a real number, got {epsilon!r}")
    value = float(epsilon)
    if not math.isfinite(value) or not MIN_EPSILON <= value <= MAX_EPSILON:
        raise ParameterError(f"epsilon must be finite and in {_RANGE}, got {epsilon!r}")
    return value


def check_binary_epsilon(epsilon: Any) -> float:
    """:func:`check_epsilon`, then the binary-RR range of :func:`rr_threshold` (at most
    ``log(2^32 - 1) = 22.18``)."""
    value = check_epsilon(epsilon)
    rr_threshold(value, 2)
    return value


def check_derived_range(epsilon: float, g: int, rule: str, high: int = 2**62) -> int:
    """``g`` derived from epsilon by ``rule`` (a hash range such as ``round(e^eps) + 1``)
    must be at most ``high``: refuse the epsilon, naming the largest usable one."""
    if g > high:
        raise ParameterError(f"epsilon must be <= {math.log(high - 1):.6g} so that {rule} <= 2^62, got {epsilon!r}")
    return g


def rr_epsilon_range(m: int) -> Tuple[float, float]:
    """The budgets ``[low, high]`` :func:`rr_threshold` accepts for RR over ``m`` symbols:
    ``high = log((m-1)(2^32-1))`` (flip probability >= 2^-32), ``low`` the larger of
    ``log((m-1)/(2^32-1))`` (keep probability >= 2^-32) and ``log((2^31+m-1)/(2^31-1))``
    (``p - q >= 2^-31``)."""
    high = math.log(m - 1) + math.log(2.0**32 - 1)
    low = max(math.log(m - 1) - math.log(2.0**32 - 1), math.log1p(m / (2.0**31 - 1)))
    return low, high


@functools.lru_cache(maxsize=4096)
def _exact_threshold(budget: float, m: int) -> int:
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        e = decimal.Decimal(budget).exp()             # correctly rounded to 80 digits
        exact = decimal.Decimal(_TWO64 * (m - 1)) / (e + (m - 1))
        return int(exact.to_integral_value(rounding=decimal.ROUND_CEILING))


def rr_threshold(budget: float, m: int, name: str = "epsilon") -> int:
    """The integer threshold ``t`` for k-ary randomized response over ``m`` symbols with
    budget ``budget`` (``m = 2``: a binary flip): the C++ sampler flips (moves to a uniform
    other symbol) iff a uniform 64-bit word is ``< t``, so the flip probability is exactly
    ``f = t / 2^64`` and the mechanism is ``log((1 - f)(m - 1)/f)``-LDP.

    ``t = ceil(2^64 (m - 1)/(e^budget + m - 1))``, computed with 80 significant digits, so
    ``f`` is at least the exact flip probability and the effective epsilon is **at most**
    ``budget`` (never above it), and below it by at most ``2^-64 (1/f + 1/(1-f))``.

    Refused (ParameterError naming ``name``, the value and the usable range of
    :func:`rr_epsilon_range`): budgets whose flip or keep probability is below 2^-32 or
    whose ``p - q = (e^budget - 1)/(e^budget + m - 1)`` is below 2^-31. Inside, the
    2^-64 resolution changes ``f``, ``1 - f``, ``q = f/(m-1)`` and ``p - q`` by a relative
    2^-32 at most, so the effective epsilon is within 2^-31 of ``budget`` and an estimator
    debiased with the exact probabilities is biased by at most 2^-32 of the expected
    matching count: below 2^-32 sqrt(n) standard deviations, under 1/4000 of one for up to
    2^40 reports. (Above the range the sampler could not flip at all for large budgets:
    eps >= 44.4 was deterministic binary RR.)
    """
    low, high = rr_epsilon_range(m)
    if not (math.isfinite(budget) and budget > 0):
        raise ParameterError(f"{name} must be finite and > 0, got {budget!r}")
    t = _exact_threshold(float(budget), int(m))
    min_count = int(_MIN_PROBABILITY * _TWO64)
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        e = decimal.Decimal(float(budget)).exp()
        gap_ok = (e - 1) / (e + (m - 1)) >= decimal.Decimal(2 * _MIN_PROBABILITY)
    if not (min_count <= t <= _TWO64 - min_count and gap_ok):
        raise ParameterError(
            f"{name} must be in [{low:.6g}, {high:.6g}] for randomized response over {m} symbols "
            f"(the 64-bit sampler represents its flip probability to 2^-32 relative there), got {budget!r}")
    return t


def rr_effective_epsilon(threshold: int, m: int) -> float:
    """The epsilon randomized response over ``m`` symbols really satisfies with flip
    threshold ``threshold`` (flip probability ``threshold / 2^64``):
    ``log((2^64 - t)(m - 1)/t)`` (inf for ``t = 0``)."""
    if threshold <= 0:
        return math.inf
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        ratio = decimal.Decimal((_TWO64 - threshold) * (m - 1)) / decimal.Decimal(threshold)
        return float(ratio.ln())


def check_int(name: str, value: Any, low: int, high: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{name} must be an int, got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ParameterError(f"{name} must be {bound}, got {value}")
    return value


def check_choice(name: str, value: Any, choices: Tuple[str, ...]) -> str:
    if value not in choices:
        raise ParameterError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_threads(threads: Any) -> int:
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 0:
        raise ParameterError(f"threads must be a non-negative int (0 = default), got {threads!r}")
    return int(threads)


def probability_threshold(prob: float) -> int:
    """``P = threshold / 2^64`` for the C++ Bernoulli draw, rounded up (more flipping).
    Only as exact as the double ``prob``: privacy-relevant flips use :func:`rr_threshold`,
    which rounds from the exact probability."""
    return min(math.ceil(prob * 2**64), 2**64 - 1)
