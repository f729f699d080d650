"""The distribution of a number in ``[lo, hi]``, one entry point: :func:`distribution_plan`.

It picks the mechanism for ``n`` users at ``epsilon`` (``method="auto"``): Square Wave with
EMS over ``d`` buckets (:mod:`~ldpfast.protocols.numeric.square_wave`) or a frequency oracle
over ``B`` bins (:mod:`~ldpfast.protocols.numeric.binned`), by the W1 error each reaches,
measured in ``bench/numeric_distribution.py`` (the table in ``docs/numeric.md``). The plan
maps numbers to buckets on the client side (values outside ``[lo, hi]`` are clipped to the
nearest end and counted; NaN and infinities are refused), gives the client and server of the
chosen protocol, and turns a server into a :class:`DistributionEstimate`: histogram, CDF,
quantiles, range frequencies and mean, and its W1 and KS distances to a known truth.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike

from ..._registry import protocol
from ..._validate import check_epsilon, check_int
from ...errors import ParameterError
from ...metrics import kolmogorov_smirnov, wasserstein1
from . import binned, square_wave

__all__ = ["METHODS", "SQUARE_WAVE_BUCKETS", "GRID", "DistributionPlan", "DistributionClient",
           "DistributionEstimate", "distribution_plan", "auto_method", "bucketize"]

METHODS = ("auto", "square-wave") + binned.ORACLES
#: Square Wave's input buckets by default (the EMS estimate's resolution; ``auto_method`` adapts them).
SQUARE_WAVE_BUCKETS = 512
#: Cells of the grid the W1 and KS distances are measured on ([SW]'s 1,024).
GRID = 1024


def _check_bounds(bounds: Any) -> Tuple[float, float]:
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ParameterError(f"bounds must be two numbers (lo, hi), got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ParameterError(f"bounds must be finite with lo < hi, got {bounds!r}")
    return lo, hi


def bucketize(values: ArrayLike, bounds: Tuple[float, float], buckets: int) -> Tuple[np.ndarray, int]:
    """``(bucket of each value, count clipped)``: the ``buckets`` equal cells of ``bounds``,
    values outside clipped to the nearest end. NaN and infinities raise ParameterError with
    the first one's index."""
    lo, hi = _check_bounds(bounds)
    buckets = check_int("buckets", buckets, 2)
    try:
        x = np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise ParameterError(f"values must be real numbers, got {type(values).__name__}") from None
    bad = ~np.isfinite(x)
    if bad.any():
        index = int(np.argmax(bad))
        raise ParameterError(f"values must be finite numbers, got {float(x[index])} at index {index}")
    clipped = int(np.count_nonzero((x < lo) | (x > hi)))
    scaled = (np.clip(x, lo, hi) - lo) / (hi - lo) * buckets
    return np.minimum(scaled.astype(np.int64), buckets - 1).astype(np.uint64), clipped


def auto_method(epsilon: float, n: int) -> Tuple[str, int]:
    """``(method, buckets)`` of ``method="auto"``: Square Wave + EMS, which had the smaller W1
    than OUE over any bin count in every configuration of ``bench/numeric_distribution.py``
    (Beta(5, 2), eps in {0.5, 1, 2, 4}, n in {1e5, 1e6}), over the bucket count that did best
    there: more buckets for more users (1,024 from n = 5e5 at eps <= 1), fewer at large
    epsilon with fewer users (256 below n = 5e5 at eps >= 2), else 512."""
    eps = check_epsilon(epsilon)
    users = check_int("n", n, 1)
    if users >= 500_000 and eps <= 1.0:
        return "square-wave", 1024
    if users < 500_000 and eps >= 2.0:
        return "square-wave", 256
    return "square-wave", SQUARE_WAVE_BUCKETS


@dataclasses.dataclass(frozen=True)
class DistributionEstimate:
    """An estimated distribution on ``bounds``: ``probabilities`` of its equal buckets (sum 1,
    non-negative), spread uniformly inside each bucket (a piecewise-linear CDF)."""

    probabilities: np.ndarray
    bounds: Tuple[float, float]
    method: str
    n: int

    @property
    def edges(self) -> np.ndarray:
        """The ``B + 1`` bucket edges."""
        lo, hi = self.bounds
        return np.linspace(lo, hi, self.probabilities.size + 1)

    @property
    def histogram(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(probabilities, edges)``, as ``numpy.histogram(..., density=False)`` normalized."""
        return self.probabilities.copy(), self.edges

    def cdf(self, x: ArrayLike) -> np.ndarray:
        """``P(X <= x)``: 0 below ``lo``, 1 above ``hi``, linear inside each bucket."""
        return np.asarray(np.interp(np.asarray(x, dtype=np.float64), self.edges,
                                    np.r_[0.0, np.cumsum(self.probabilities)]))

    def quantile(self, q: ArrayLike) -> np.ndarray:
        """``inf {x : cdf(x) >= q}`` for ``q`` in ``[0, 1]`` (so ``cdf(quantile(q)) == q``)."""
        qs = np.asarray(q, dtype=np.float64)
        if not np.all((qs >= 0) & (qs <= 1)):
            raise ParameterError(f"q must be in [0, 1], got {q!r}")
        cum = np.r_[0.0, np.cumsum(self.probabilities)]
        cum[-1] = max(cum[-1], 1.0)
        k = np.clip(np.searchsorted(cum, qs, side="left"), 1, self.probabilities.size)
        mass = self.probabilities[k - 1]
        inside = np.where(mass > 0, (qs - cum[k - 1]) / np.where(mass > 0, mass, 1.0), 0.0)
        edges = self.edges
        return np.asarray(edges[k - 1] + np.clip(inside, 0.0, 1.0) * (edges[1] - edges[0]))

    def range(self, a: ArrayLike, b: ArrayLike) -> np.ndarray:
        """``P(a < X <= b)``."""
        return np.asarray(self.cdf(b) - self.cdf(a))

    def mean(self) -> float:
        """``sum_k p_k`` times the bucket's midpoint."""
        edges = self.edges
        return float(np.dot(self.probabilities, (edges[:-1] + edges[1:]) / 2))

    def distances(self, values: ArrayLike) -> Tuple[float, float]:
        """``(W1, KS)`` to the empirical distribution of ``values`` (clipped to the bounds), with
        both CDFs on the grid of :data:`GRID` equal cells (:func:`ldpfast.metrics.wasserstein1`)."""
        buckets, _ = bucketize(values, self.bounds, GRID)
        if not buckets.size:
            raise ParameterError("values must not be empty")
        truth = np.cumsum(np.bincount(buckets.astype(np.int64), minlength=GRID)) / buckets.size
        ends = np.linspace(*self.bounds, GRID + 1)[1:]
        mine = self.cdf(ends)
        step = (self.bounds[1] - self.bounds[0]) / GRID
        return wasserstein1(mine, truth, step), kolmogorov_smirnov(mine, truth)


class DistributionClient:
    """A plan's client: numbers in, the chosen protocol's reports out. ``clipped`` counts the
    values clipped to the bounds so far (known on the client side only, never sent)."""

    def __init__(self, plan: "DistributionPlan", rng: Any = None, threads: int = 0):
        self.plan = plan
        self.clipped = 0
        self._client = protocol(plan.method).client(plan.params, rng=rng, threads=threads)

    def perturb(self, values: ArrayLike) -> Any:
        buckets, clipped = bucketize(values, self.plan.bounds, self.plan.buckets)
        reports = self._client.perturb(buckets)
        self.clipped += clipped
        return reports


@dataclasses.dataclass(frozen=True)
class DistributionPlan:
    """The protocol ``params`` (Square Wave's, or a binned oracle's over ``params.d`` bins)
    for numbers in ``bounds``; see :func:`distribution_plan`."""

    params: Any
    bounds: Tuple[float, float]

    @property
    def method(self) -> str:
        return str(self.params.protocol)

    @property
    def buckets(self) -> int:
        return int(self.params.d)

    def client(self, rng: Any = None, threads: int = 0) -> DistributionClient:
        """The client (``rng=None``: OS entropy; a seed is for simulation only)."""
        return DistributionClient(self, rng, threads)

    def server(self) -> Any:
        """An empty server of the plan's protocol."""
        return protocol(self.method).aggregator(self.params)

    def estimate(self, server: Any) -> DistributionEstimate:
        """The distribution from a server of this plan: EMS for Square Wave, Norm-Sub of the
        debiased bin estimates for an oracle."""
        if server.params != self.params:
            raise ParameterError(f"server must hold reports of this plan's parameters {self.params!r}, "
                                 f"got {server.params!r}")
        if self.method == "square-wave":
            probabilities = server.fit_distribution(smooth=True).probabilities
        else:
            probabilities = binned.binned_distribution(server)
        return DistributionEstimate(np.asarray(probabilities, dtype=np.float64), self.bounds, self.method,
                                    int(server.n))

    def simulate(self, values: ArrayLike, rng: Any) -> DistributionEstimate:
        """One simulated collection of ``values`` (a seeded client: simulation only)."""
        return self.estimate(self.server().update(self.client(rng=rng).perturb(values)))


def distribution_plan(epsilon: float, bounds: Tuple[float, float], n: int, method: str = "auto",
                      buckets: Optional[int] = None) -> DistributionPlan:
    """The plan for the distribution of numbers in ``bounds`` held by about ``n`` users, each
    reporting once at ``epsilon``. ``method``: ``"auto"`` (:func:`auto_method`),
    ``"square-wave"`` (EMS over ``buckets``, default :data:`SQUARE_WAVE_BUCKETS`) or an oracle of
    :data:`binned.ORACLES` (over ``buckets`` bins, default :func:`binned.bin_count`)."""
    eps = check_epsilon(epsilon)
    lo_hi = _check_bounds(bounds)
    users = check_int("n", n, 1)
    if method not in METHODS:
        raise ParameterError(f"method must be one of {METHODS}, got {method!r}")
    chosen = method
    if method == "auto":
        chosen, auto_buckets = auto_method(eps, users)
        buckets = auto_buckets if buckets is None else buckets
    if chosen == "square-wave":
        d = SQUARE_WAVE_BUCKETS if buckets is None else check_int("buckets", buckets, 2, square_wave.MAX_D)
        return DistributionPlan(square_wave.SquareWaveParams(epsilon=eps, d=d), lo_hi)
    bins = binned.bin_count(eps, users, chosen) if buckets is None else buckets
    return DistributionPlan(binned.oracle_params(chosen, eps, bins), lo_hi)
