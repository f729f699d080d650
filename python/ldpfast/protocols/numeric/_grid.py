"""The one-dimensional mean mechanisms on a declared finite output grid, shared by the mean
protocols (``mean``, ``multidim``).

Inputs are first mapped to ``t in [-1, 1]``. Each mechanism draws an output ``y`` with
``E[y | t] = t`` on a range ``[-R, R]`` and sends the index of a point of the grid
``y_i = -R + 2 R i / G``, ``i = 0..G`` (Duchi's two outputs are the grid ``G = 1``; the
Piecewise and Hybrid mechanisms' continuous draws are rounded to a neighbouring point at
random, unbiased, ``P(upper) = `` the fraction of the step; the discrete Laplace mechanism
adds two-sided geometric noise to a grid index). A float never leaves the client, so the
bits of a double cannot leak the input (Mironov, CCS 2012). Randomized rounding is
post-processing of an eps-LDP output, so it keeps eps-LDP and unbiasedness; it adds at most
``h^2/4`` (``h = 2R/G``) to the variance, and :func:`min_steps` picks ``G`` so that this is at
most 0.1% of the mechanism's smallest variance.

Every mechanism has ``E[y^2 | t] = a + b t^2`` (:class:`Mechanism`): the server estimates the
users' mean of ``t^2`` from the reports' mean of ``y^2`` (when ``b > 0``) and so the
variance of the mean estimate, without a closed form that needs the unknown ``t``.

Randomness: uniforms from the operating system's CSPRNG (``secrets``) for real clients, or
from the client's seeded generator (simulation only).
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import secrets
from typing import Any, Tuple

import numpy as np

from ..._random import KeySource
from ...audit import log_ratio
from ...errors import ParameterError

#: Largest number of grid steps: the index of a report is a uint32.
MAX_STEPS = 2**32 - 1
#: The rounding may move a mechanism's smallest variance by at most this fraction.
GRID_TOLERANCE = 1e-3
#: Wang et al.'s switch of the Hybrid Mechanism: below this epsilon it is Duchi's mechanism.
HM_SWITCH = 0.61
#: A discrete Laplace report's noise is clamped where its tail holds less than 2^-60.
LAPLACE_TAIL_BITS = 60
MECHANISMS = ("duchi", "pm", "hm", "laplace")


def uniforms(keys: KeySource, shape: Any) -> np.ndarray:
    """Uniform doubles on ``[0, 1)`` (53 bits): OS entropy, or the seeded generator."""
    size = int(np.prod(shape))
    if keys.seeded:
        return keys.generator().random(size).reshape(shape)
    words = np.frombuffer(secrets.token_bytes(8 * size), dtype=np.uint64)
    return ((words >> np.uint64(11)).astype(np.float64) * 2.0**-53).reshape(shape)


def duchi_bound(epsilon: float) -> float:
    """Duchi et al.'s output ``B = (e^eps + 1)/(e^eps - 1)``."""
    return 1.0 / math.tanh(epsilon / 2.0)


@dataclasses.dataclass(frozen=True)
class Mechanism:
    """One mechanism at one epsilon: its range ``[-R, R]``, ``E[y^2 | t] = a + b t^2`` and
    its grid rule (``continuous``: it rounds a continuous draw, so the grid is free)."""

    name: str
    epsilon: float

    @property
    def pm_share(self) -> float:
        """The Hybrid Mechanism's probability of using PM (1 for PM, 0 for Duchi)."""
        if self.name == "pm":
            return 1.0
        if self.name == "hm" and self.epsilon > HM_SWITCH:
            return 1.0 - math.exp(-self.epsilon / 2.0)
        return 0.0

    @property
    def continuous(self) -> bool:
        return self.pm_share > 0.0

    @property
    def pm_bound(self) -> float:
        """PM's ``C = (e^(eps/2) + 1)/(e^(eps/2) - 1)``."""
        return 1.0 / math.tanh(self.epsilon / 4.0)

    @property
    def half_range(self) -> float:
        """``R``: the grid spans ``[-R, R]`` (Laplace: 1, its noise is counted in steps)."""
        if self.name == "laplace":
            return 1.0
        return self.pm_bound if self.continuous else duchi_bound(self.epsilon)

    def moments(self, steps: int) -> Tuple[float, float]:
        """``(a, b)`` with ``E[y^2 | t] = a + b t^2`` (the rounding's at most ``h^2/4`` left out)."""
        if self.name == "laplace":
            return laplace_noise_variance(self.epsilon, steps), 1.0
        s, share = math.exp(self.epsilon / 2.0), self.pm_share
        pm_a, pm_b = (s + 3.0) / (3.0 * (s - 1.0) ** 2), s / (s - 1.0)
        return share * pm_a + (1.0 - share) * duchi_bound(self.epsilon) ** 2, share * pm_b

    def variance(self, t: Any, steps: int = 0) -> Any:
        """Closed-form ``Var(y | t) = a + (b - 1) t^2`` (Wang et al.: Duchi
        ``B^2 - t^2``, PM ``t^2/(e^(eps/2)-1) + (e^(eps/2)+3)/(3 (e^(eps/2)-1)^2)``, HM their mix)."""
        a, b = self.moments(steps or self.min_steps())
        return a + (b - 1.0) * np.asarray(t, dtype=np.float64) ** 2

    def worst_variance(self, steps: int = 0) -> float:
        """``max over t in [-1, 1]`` of :meth:`variance`."""
        a, b = self.moments(steps or self.min_steps())
        return a + max(b - 1.0, 0.0)

    def min_steps(self) -> int:
        """The coarsest grid whose rounding adds at most ``GRID_TOLERANCE`` of the smallest
        variance: ``(h/2)^2 <= tol * Var_min`` with ``h = 2R/G``, so ``G >= R/sqrt(tol Var_min)``.
        Laplace: steps per unit ``K`` with ``eps/K <= 0.17``, which keeps both the rounding
        (``h^2/4 = 1/(4K^2)``) and the discrete noise's shortfall against ``8/eps^2``
        (``(eps h)^2/48``, ``h = 1/K``) below 0.1%."""
        if self.name == "laplace":
            return max(1, math.ceil(self.epsilon / 0.17))
        if not self.continuous:
            return 1
        a, b = self.moments(1)
        smallest = min(a, a + b - 1.0)
        return max(1, math.ceil(self.half_range / math.sqrt(GRID_TOLERANCE * smallest)))


def laplace_noise_variance(epsilon: float, steps: int) -> float:
    """The variance, in ``t`` units, of two-sided geometric noise ``P(z) ~ beta^|z|`` with
    ``beta = exp(-eps/(2K))`` on the grid of step ``1/K``: ``2 beta/(1 - beta)^2 / K^2``."""
    beta = math.exp(-epsilon / (2.0 * steps))
    return 2.0 * beta / (-math.expm1(-epsilon / (2.0 * steps))) ** 2 / steps**2


def laplace_clamp(epsilon: float, steps: int) -> int:
    """``L``: the noise is clamped to ``[-L, L]`` steps, where ``P(|z| > L) < 2^-60``."""
    return math.ceil(LAPLACE_TAIL_BITS * math.log(2.0) * 2.0 * steps / epsilon)


def grid_size(mechanism: Mechanism, steps: int) -> int:
    """Grid points minus one: the largest report index."""
    if mechanism.name == "laplace":
        return 2 * (steps + laplace_clamp(mechanism.epsilon, steps))
    return steps


def check_steps(mechanism: Mechanism, grid: Any) -> int:
    """The grid's steps: ``grid`` (0: the coarsest that the 0.1% rule allows), refused when
    coarser than that rule or finer than a uint32 report index carries."""
    if isinstance(grid, bool) or not isinstance(grid, (int, np.integer)):
        raise ParameterError(f"grid must be an integer (0: automatic), got {grid!r}")
    least = mechanism.min_steps()
    steps = int(grid) or least
    if steps < least:
        raise ParameterError(f"grid must be 0 or >= {least} steps for {mechanism.name} at epsilon="
                             f"{mechanism.epsilon} (the rounding moves the variance by < 0.1%), got {grid!r}")
    if mechanism.name == "duchi" and steps != 1:
        raise ParameterError(f"grid must be 0 or 1 for duchi (two outputs), got {grid!r}")
    if grid_size(mechanism, steps) > MAX_STEPS:
        raise ParameterError(f"grid must give at most {MAX_STEPS} steps (a uint32 report index), got {grid!r} "
                             f"({grid_size(mechanism, steps)} steps)")
    return steps


def duchi_threshold(epsilon: float) -> int:
    """``T``: Duchi's ``+`` has probability ``T/2^53`` at ``t = 1`` and ``1 - T/2^53`` at -1,
    rounded down so that ``T/(2^53 - T) <= e^eps`` exactly (80-digit arithmetic)."""
    top = min(int(math.floor(2.0**53 / (1.0 + math.exp(-epsilon)))), 2**53 - 1)
    with decimal.localcontext() as ctx:   # exact: against a rational lower bound of e^eps
        ctx.prec = 80
        e_lower = decimal.Decimal(epsilon).exp() * (1 - decimal.Decimal(10) ** -78)
        while top > (2**53 - top) * e_lower:
            top -= 1
    return top


def effective_epsilon(mechanism: Mechanism, reported: int = 1) -> float:
    """The epsilon of ``reported`` attributes each sent with ``mechanism``: Duchi's bit (and
    HM below its switch) ``log(T/(2^53 - T))`` of its integer threshold, exactly; PM, HM and
    Laplace the mechanism's epsilon, which the rounding to the grid keeps (their continuous
    draws are in doubles, each probability within about 2^-50 of the exact one)."""
    claimed = reported * mechanism.epsilon
    if mechanism.name in ("duchi", "hm") and not mechanism.continuous:
        top = duchi_threshold(mechanism.epsilon)
        return min(reported * log_ratio(top, 2**53 - top), claimed)
    return claimed


def perturb(mechanism: Mechanism, steps: int, t: np.ndarray, keys: KeySource) -> np.ndarray:
    """Grid indices (uint32, ``t``'s shape) of the mechanism's outputs for ``t in [-1, 1]``."""
    shape = t.shape
    t = t.ravel()
    u = uniforms(keys, (4, t.size))
    if mechanism.name == "laplace":
        return _laplace(mechanism.epsilon, steps, t, u).reshape(shape)
    big = 2**53
    top = duchi_threshold(mechanism.epsilon)
    # P(+B) = 1/2 + t/(2B) between the thresholds at -1 and 1 (integer comparisons)
    plus = np.clip(np.floor((big - top) + (t + 1.0) / 2.0 * (2 * top - big)), big - top, top)
    y = np.where(np.floor(u[0] * big) < plus, 1.0, -1.0) * duchi_bound(mechanism.epsilon)
    share = mechanism.pm_share
    if share > 0.0:
        y = np.where(u[1] < share, _piecewise(mechanism, t, u[2], u[3]), y)
    half = mechanism.half_range
    position = np.minimum(np.maximum((y + half) / (2.0 * half) * steps, 0.0), float(steps))
    low = np.floor(position)
    index = low + (uniforms(keys, t.shape) < position - low)
    return np.asarray(np.minimum(index, steps), dtype=np.uint32).reshape(shape)


def _piecewise(mechanism: Mechanism, t: np.ndarray, u_region: np.ndarray, u_point: np.ndarray) -> np.ndarray:
    """Wang et al.'s Piecewise Mechanism: uniform on ``[l(t), r(t)]`` (length ``C - 1``) with
    probability ``e^(eps/2)/(e^(eps/2) + 1)``, else uniform on the rest of ``[-C, C]``."""
    c = mechanism.pm_bound
    s = math.exp(mechanism.epsilon / 2.0)
    left = (c + 1.0) / 2.0 * t - (c - 1.0) / 2.0
    right = left + c - 1.0
    inside = left + u_point * (c - 1.0)
    rest = u_point * (c + 1.0)                  # a point of [-C, l) joined to (r, C]
    outside = np.where(rest < left + c, rest - c, right + (rest - (left + c)))
    return np.where(u_region < s / (s + 1.0), inside, outside)


def _laplace(epsilon: float, steps: int, t: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``t`` rounded at random to the grid of step ``1/K``, plus two-sided geometric noise
    ``P(z) ~ exp(-eps |z| / (2K))``: inputs at most ``2K`` steps apart, so eps-LDP. The
    noise is clamped to ``[-L, L]`` (post-processing), the index offset by ``K + L``."""
    clamp = laplace_clamp(epsilon, steps)
    position = (t + 1.0) * steps
    low = np.floor(position)
    point = low + (u[0] < position - low) - steps
    log_beta = -epsilon / (2.0 * steps)
    # Geometric on {0, 1, ...} with ratio beta: floor(log(U)/log(beta)), U in (0, 1]
    first = np.floor(np.log1p(-u[1]) / log_beta)
    second = np.floor(np.log1p(-u[2]) / log_beta)
    noise = np.clip(first - second, -clamp, clamp)
    return np.asarray(point + noise + steps + clamp, dtype=np.uint32)


def affine(mechanism: Mechanism, steps: int) -> Tuple[float, int, int]:
    """``(scale, m, o)`` with the grid value of index ``i`` equal to ``scale (m i - o)`` (``m``
    and ``o`` integers, so sums of values and squares come exactly from integer sums)."""
    if mechanism.name == "laplace":
        return 1.0 / steps, 1, steps + laplace_clamp(mechanism.epsilon, steps)
    return mechanism.half_range / steps, 2, steps


def values_of(mechanism: Mechanism, steps: int, index: Any) -> Any:
    """The grid values (in ``t`` units) of report indices."""
    scale, m, o = affine(mechanism, steps)
    return scale * (m * np.asarray(index, dtype=np.float64) - o)


def value_sums(mechanism: Mechanism, steps: int, count: int, total: int, squares: int) -> Tuple[float, float]:
    """``(sum y, sum y^2)`` of ``count`` reports whose indices sum to ``total`` and their
    squares to ``squares`` (exact integers until the last multiplication: no cancellation)."""
    scale, m, o = affine(mechanism, steps)
    centred = m * total - o * count
    centred_sq = m * m * squares - 2 * m * o * total + o * o * count
    return scale * float(centred), scale * scale * float(centred_sq)
