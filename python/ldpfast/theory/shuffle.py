"""Privacy amplification by shuffling: the central ``(eps, delta)`` of ``n`` users' reports,
each from an ``eps0``-LDP randomizer, after a uniformly random shuffle.

**Upper bound (generic eps0-LDP randomizer).** The variation-ratio reduction of Wang et
al. (VLDB 2024, "Privacy Amplification via Shuffling: Unified, Simplified, and
Tightened"), which refines the clone reduction of Feldman, McMillan and Talwar (FOCS 2021,
"Hiding among the clones"): an ``eps0``-LDP randomizer's output on any input contains,
with probability ``2 alpha``, a "clone" of the two inputs' difference parts (each with
probability ``alpha``), ``alpha = beta/(e^eps0 - 1)`` with ``beta`` the randomizer's total
variation bound. The shuffled output is then a post-processing of the pair

    C ~ Bin(n - 1, 2 alpha),  A ~ Bin(C, 1/2),
    P = (A + D, C - A + 1 - D),  Q = (A + 1 - D, C - A + D),  D ~ Bern(e^eps0 alpha / (1 - w))

(plus, with probability ``w = 1 - (e^eps0 + 1) alpha``, the victim's report is neither).
For a generic randomizer ``beta = (e^eps0 - 1)/(e^eps0 + 1)``, so ``alpha = 1/(e^eps0 + 1)``
and ``w = 0``; with FMT's original clones (``analysis="clones"``) each other report is a
clone with probability ``e^-eps0`` instead. We evaluate the pair's hockey-stick
divergence exactly: given ``C = c`` the privacy loss is monotone in ``A``, so
``delta_c(eps)`` is a difference of two binomial tails; adding a clone is a randomized
post-processing, so ``delta_c`` does not increase with ``c`` and summing it over blocks of
``c`` with each block's first (largest) value bounds the total from above. The
probability outside the summed range of ``C`` is added in full. Bisection on ``eps``
returns the smallest grid point whose ``delta`` is certified below the target.

**k-RR.** For k-ary randomized response (``k >= 3``), ``alpha = 1/(e^eps0 + k - 1)`` and
``w = (k - 2) alpha``; the pair is then exactly the shuffled histogram of k-RR on the two
inputs when every other user holds a third value, so upper and lower bounds coincide
(``delta`` summed over the hidden ``C``, without blocking).

**Lower bound.** No valid bound for all ``eps0``-LDP randomizers can be below the exact
central epsilon of one of them: shuffled binary randomized response with every other user
holding 0, whose count of ones is ``Bin(n, q)`` against ``Bin(n - 1, q) + Bern(1 - q)``,
``q = 1/(e^eps0 + 1)``, computed exactly (binomial tails; both directions).

**T rounds.** Composition over ``T`` shuffled collections (each user reports once per
round, fresh randomness) composes the privacy-loss distributions of the dominating pair
(upper; losses rounded up onto a grid, blocks of ``c`` represented by their first value)
and of binary RR (lower; rounded down) by FFT (Koskela, Heikkila and Honkela 2021).

**Closed form.** Feldman, McMillan and Talwar (FOCS 2021), Theorem 3.1:
``eps <= log(1 + (e^eps0 - 1)/(e^eps0 + 1) (8 sqrt(e^eps0 log(4/delta)) / sqrt(n) + 8 e^eps0 / n))``
for ``eps0 <= log(n / (16 log(2/delta)))`` (else ``eps0``).

Binomial tails come from :mod:`scipy.special` (``pip install 'ldpfast[shuffle]'``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np

from ..errors import ParameterError
from ._pld import composed_bounds
from ._shuffle_math import (ANALYSES, _both_bounds, _check, _largest_eps, _smallest_eps, binary_rr_shuffle_delta,
                            pair_delta, shuffle_closed_form)

__all__ = ["ShuffleBound", "shuffle_epsilon", "shuffle_closed_form", "binary_rr_shuffle_delta",
           "pair_delta", "ANALYSES"]


@dataclasses.dataclass(frozen=True)
class ShuffleBound:
    """The central privacy of ``rounds`` shuffled collections of ``n`` ``eps0``-LDP reports.

    Attributes:
        upper: a certified upper bound on the central epsilon at ``delta``.
        lower: no bound valid for the randomizer class can be smaller (the exact central
            epsilon of one member: binary RR, or k-RR for ``k``).
        closed_form: Feldman-McMillan-Talwar's closed form (one round; composed by the
            advanced composition theorem over ``rounds``), or ``eps0 rounds`` where it does not apply.
        eps0, n, delta, rounds, k, analysis: the inputs.
    """

    upper: float
    lower: float
    closed_form: float
    eps0: float
    n: int
    delta: float
    rounds: int = 1
    k: Optional[int] = None
    analysis: str = "variation-ratio"


def shuffle_epsilon(eps0: float, n: int, delta: float, rounds: int = 1, k: Optional[int] = None,
                    analysis: str = "variation-ratio") -> ShuffleBound:
    """Upper and lower bounds on the central epsilon of shuffling ``n`` reports of an
    ``eps0``-LDP randomizer, at ``delta`` (see the module docstring).

    Args:
        eps0: the local epsilon, in ``(0, 30]``.
        n: the number of users, in ``[2, 10^12]``.
        delta: the central delta, in ``(0, 1)``.
        rounds: independent shuffled collections composed (each user reports once per round).
        k: the randomizer is k-ary randomized response on ``k >= 2`` values (tighter bounds
            for ``k >= 3``); None: any ``eps0``-LDP randomizer.
        analysis: ``"variation-ratio"`` (Wang et al. 2024; default) or ``"clones"`` (Feldman,
            McMillan and Talwar 2021, looser).

    Raises:
        ParameterError: a value out of range. MissingDependencyError (an ImportError): scipy is
            not installed.
    """
    eps0, n, delta = _check(eps0, n, delta)
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or not 1 <= rounds <= 10**5:
        raise ParameterError(f"rounds must be an integer in [1, 10^5], got {rounds!r}")
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2):
        raise ParameterError(f"k must be an integer >= 2 or None, got {k!r}")
    if analysis not in ANALYSES:
        raise ParameterError(f"analysis must be one of {ANALYSES}, got {analysis!r}")
    kk = None if k is None or k == 2 else int(k)
    closed = shuffle_closed_form(eps0, n, delta)
    generic = _smallest_eps(lambda e: pair_delta(eps0, n, e, analysis)[0], delta, eps0)
    if kk is not None:          # k-RR's own pair: exact for k-RR (upper and lower)
        lower, upper = _both_bounds(lambda e: pair_delta(eps0, n, e, analysis, kk), delta, eps0)
    else:                       # any randomizer: binary RR's exact epsilon is the lower bound
        lower = _largest_eps(lambda e: binary_rr_shuffle_delta(eps0, n, e), delta, eps0)
        upper = generic
    if rounds == 1:
        upper = min(upper, generic)
        return ShuffleBound(upper, min(lower, upper), closed, eps0, n, delta, 1, k, analysis)
    upper, lower_t = composed_bounds(eps0, n, delta, int(rounds), analysis, kk)
    lower = max(lower, lower_t)                 # T rounds leak at least what one does
    closed_t = _advanced_composition(closed, int(rounds), delta)
    return ShuffleBound(upper, min(lower, upper), closed_t, eps0, n, delta, int(rounds), k, analysis)


def _advanced_composition(eps: float, rounds: int, delta: float) -> float:
    """``rounds`` compositions of an ``(eps, delta / (2 rounds))`` mechanism at total
    ``delta`` (half for the composition): Dwork, Rothblum and Vadhan's bound, or
    ``rounds eps`` when smaller."""
    slack = delta / 2.0
    advanced = math.sqrt(2.0 * rounds * math.log(1.0 / slack)) * eps + rounds * eps * math.expm1(eps)
    return min(rounds * eps, advanced)
