"""The Square Wave mechanism on a grid (``square-wave``): the distribution of a numeric value.
Li, Wang, Lopuhaä-Zwakenberg, Li, Škorić, "Estimating Numerical Distributions under Local
Differential Privacy", SIGMOD 2020 ([SW]).

The value is a bucket ``x`` of ``[0, d)`` (a number in ``[lo, hi]`` mapped to ``d`` equal
buckets: :mod:`ldpfast.protocols.numeric.distribution` does that). A report is an output
bucket ``y`` of ``[0, d + 2 band)``: inside the band ``[x, x + 2 band]`` of ``2 band + 1``
outputs each with probability ``near``, outside it each with probability ``far``, and
``near = e^eps far`` exactly as sampled. This is [SW]'s wave (half width ``b = band/d`` on
the unit interval, output domain ``[-b, 1 + b]``) with the output on a declared finite grid,
so the privacy holds for exactly what is sent (no floating-point output). The client is
randomized response over ``[0, d)`` with budget ``eps + ln(2 band + 1)`` (the symbol kept
with probability ``(2 band + 1) near``), a kept value then moved uniformly into its band and
another symbol placed outside it; the flip threshold is rounded up, so the effective
epsilon is at most ``eps``. ``band`` defaults to [SW]'s optimum
``b = (eps e^eps - e^eps + 1)/(2 e^eps (e^eps - 1 - eps))`` times ``d``.

The server holds the report histogram (``d + 2 band`` counters: exact merges). Two
estimates:

* :meth:`SquareWaveServer.fit_distribution`: [SW]'s EM (or EMS, with a ``[1, 2, 1]/4`` smoothing after
  each step) maximum-likelihood estimate of the bucket distribution, in C++ on the
  channel's structure (a constant plus a band: O(d + band) per step with prefix sums);
  stopped as [SW]'s code does (log-likelihood change below ``1e-3``, or an L1 move of at
  most ``1/n``, or 10,000 steps). Biased by design (smoothing); no closed-form error.
* ``estimate()``: the unbiased linear estimate, per bucket ``i``, of the share of users within
  ``band`` buckets of it (``|x - i| <= band``), read off the count of the output ``i + band``
  whose band holds exactly those inputs: ``(C/n - far)/(near - far)``, with the binomial
  variance and exact tests of GRR's form. This is what ``frequencies()`` reports and tests.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from typing import Any, ClassVar, Mapping, NamedTuple, Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike

from ... import _base, _budget, _core
from ..._base import AuditHooks, WireField, bits_for
from ..._validate import check_epsilon, check_int, check_real, check_values, rr_threshold, uint64_column
from ...audit import Plan, value_inputs
from ...errors import ReportError
from ...estimates import PLUG_IN
from ...uncertainty import BinomialCounts, PlugIn
from .._histogram import HistogramServer
from .._registration import edges

__all__ = ["SquareWaveParams", "SquareWaveReports", "SquareWaveClient", "SquareWaveServer", "DistributionFit",
           "optimal_band",
           "wave_half_width"]

_TWO64 = 2**64
#: [SW]'s EM stopping rule (their published code): a log-likelihood change below this.
LIKELIHOOD_TOL = 1e-3
MAX_ITERATIONS = 10_000
#: Largest input domain: the server's EM works on d + 2 band <= 2^21 + 1 doubles per step.
MAX_D = 2**20
TARGET = "the share of users within band buckets of the value (|x - value| <= band)"


def wave_half_width(epsilon: float) -> float:
    """[SW]'s optimal half width ``b = (eps e^eps - e^eps + 1)/(2 e^eps (e^eps - 1 - eps))`` on
    the unit interval (tends to 1/2 as eps -> 0, to 0 as eps grows)."""
    eps = check_epsilon(epsilon)
    if eps < 1e-3:  # the closed form cancels; its Taylor series: 1/2 - eps/3 + O(eps^2)
        return 0.5 - eps / 3.0
    e = math.exp(eps)
    return (eps * e - e + 1.0) / (2.0 * e * (math.expm1(eps) - eps))


def optimal_band(epsilon: float, d: int) -> int:
    """The band half width in buckets: ``round(b d)`` (:func:`wave_half_width`)."""
    return int(round(wave_half_width(epsilon) * check_int("d", d, 2, MAX_D)))


@dataclasses.dataclass(frozen=True)
class SquareWaveParams(_base.Params):
    """Square Wave parameters.

    Attributes:
        epsilon: privacy parameter (the ratio of ``near`` to ``far``), with
            ``eps + ln(2 band + 1)`` within randomized response's range over ``d`` symbols.
        d: input buckets, ``2 <= d <= 2^20``.
        band: the band's half width in buckets, ``0 <= band <= d`` (None: :func:`optimal_band`;
            0 is GRR over ``[0, d)``).
    """

    protocol: ClassVar[str] = "square-wave"

    epsilon: float
    d: int
    band: Optional[int] = None

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        d = check_int("d", self.d, 2, MAX_D)
        band = optimal_band(eps, d) if self.band is None else check_int("band", self.band, 0, d)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "d", d)
        object.__setattr__(self, "band", band)
        _ = self.flip_threshold             # refuses a budget the 64-bit sampler cannot represent

    @property
    def width(self) -> int:
        """Outputs in a band: ``2 band + 1``."""
        return 2 * int(self.band or 0) + 1

    @property
    def outputs(self) -> int:
        """Output buckets: ``d + 2 band``."""
        return self.d + self.width - 1

    @property
    def flip_threshold(self) -> int:
        """The 64-bit threshold of the randomized response over ``[0, d)`` with budget
        ``eps + ln(2 band + 1)`` (two ulps below, so that its rounding cannot add to eps)."""
        budget = math.nextafter(math.nextafter(self.epsilon + math.log(self.width), 0.0), 0.0)
        return rr_threshold(budget, self.d)

    @property
    def near(self) -> float:
        """The sampler's probability of each output in the band: ``(1 - F)/(2 band + 1)``."""
        return (_TWO64 - self.flip_threshold) / _TWO64 / self.width

    @property
    def far(self) -> float:
        """The sampler's probability of each output outside the band: ``F/(d - 1)``."""
        return self.flip_threshold / _TWO64 / (self.d - 1)

    @property
    def effective_epsilon(self) -> float:
        """``ln(near/far)`` of the integer threshold, exactly, rounded up (at most ``epsilon``)."""
        loss = _budget.rr_loss(self.flip_threshold, self.d) - decimal.Decimal(self.width).ln()
        return _budget.effective(loss)

    @property
    def communication_bits(self) -> int:
        return bits_for(self.outputs)


@dataclasses.dataclass(eq=False)
class SquareWaveReports(_base.Reports):
    """A batch of Square Wave reports: ``y`` in ``[0, d + 2 band)`` (checked by :meth:`SquareWaveServer.update`)."""

    protocol: ClassVar[str] = "square-wave"
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"y": ("uint64", 1)}

    y: np.ndarray

    def __post_init__(self) -> None:
        self.y = uint64_column(self.y, "y", ReportError)


class SquareWaveClient(_base.ClientBase):
    """Square Wave client. ``rng=None`` (default) draws keys from the OS; a seed is for
    simulation only (see :mod:`ldpfast._random`)."""

    params: SquareWaveParams

    def perturb(self, values: ArrayLike) -> SquareWaveReports:
        """One report per value (values: buckets in ``[0, d)``)."""
        p = self.params
        x = check_values(values, p.d)
        y = _core.square_wave_perturb(self._keys.key(), x, p.d, int(p.band or 0), p.flip_threshold, self.threads)
        return SquareWaveReports(y=y)


class DistributionFit(NamedTuple):
    """An EM/EMS estimate: ``probabilities`` of the ``d`` buckets (sum 1), the ``iterations``
    run and the report ``log_likelihood`` at them."""

    probabilities: np.ndarray
    iterations: int
    log_likelihood: float


class SquareWaveServer(HistogramServer):
    """Square Wave aggregator: the histogram of reported output buckets (``counts``, over the
    ``d + 2 band`` outputs). Thread-safe (see :class:`ldpfast._base.Aggregator`)."""

    protocol: ClassVar[str] = "square-wave"
    params_type: ClassVar[type] = SquareWaveParams
    reports_type: ClassVar[type] = SquareWaveReports
    values_are: ClassVar[str] = "output buckets in"
    reports_name: ClassVar[str] = "Square Wave"
    params: SquareWaveParams

    @staticmethod
    def histogram_size(params: Any) -> int:
        return int(params.outputs)

    def estimate(self, candidates: Optional[ArrayLike] = None, counts: bool = False) -> np.ndarray:
        """Per bucket (default: all of ``[0, d)``), the unbiased estimate of the share of users
        within ``band`` buckets of it: ``(C_{i + band}/n - far)/(near - far)``; ``counts=True``
        gives ``n`` times it."""
        p = self.params
        self._check_query(candidates, 32, p.d, "a Square Wave query")
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate from zero reports")
        buckets = np.arange(p.d) if candidates is None else check_values(candidates, p.d, "candidates", "values in")
        centre = self._counts[buckets.astype(np.intp) + int(p.band or 0)].astype(np.float64)
        share = (centre / n - p.far) / (p.near - p.far)
        return np.asarray(share * n if counts else share, dtype=np.float64)

    def fit_distribution(self, smooth: bool = True, max_iterations: int = MAX_ITERATIONS,
                         likelihood_tol: float = LIKELIHOOD_TOL) -> DistributionFit:
        """[SW]'s EMS (``smooth=False``: EM) estimate of the distribution over the ``d`` buckets,
        from a uniform start; stops at ``max_iterations``, a log-likelihood change below
        ``likelihood_tol``, or an L1 move of at most ``1/n``."""
        p = self.params
        iterations = check_int("max_iterations", max_iterations, 1)
        tol = check_real("likelihood_tol", likelihood_tol) if likelihood_tol else 0.0
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate a distribution from zero reports")
        self._check_call(8 * (3 * p.d + 3 * p.outputs + 1), "the Square Wave EM")
        with self._lock:
            counts = self._counts.copy()
        theta, steps, likelihood = _core.square_wave_em(counts, p.d, int(p.band or 0), p.near, p.far, bool(smooth),
                                                        iterations, tol, 1.0 / n)
        return DistributionFit(theta, int(steps), float(likelihood))


def _variance(server: SquareWaveServer, candidates: np.ndarray) -> PlugIn:
    p, n = server.params, server.n
    near, far = p.near, p.far
    gap = near - far

    def variance(g: Any) -> Any:                 # the band output's count: Binomial sums, pi = far + gap g
        pi = far + gap * np.asarray(g, dtype=np.float64)
        return pi * (1.0 - pi) / (n * gap * gap)
    return PlugIn(variance, len(candidates), f"{PLUG_IN} (binomial count of the band's centre output)", target=TARGET,
                  counts=BinomialCounts(n, near, far, (far, gap)))


def _plan(params: SquareWaveParams) -> Plan:
    # inputs 0 and 1: output 0 is in the band of 0 only, output 2 band + 1 in that of 1 only
    top = params.width
    return Plan(value_inputs(0, 1), lambda r: (r.y == 0, r.y == top), ("y = 0 (band of x0 only)",
                                                                        "y = 2 band + 1 (band of x1 only)"))


def _example() -> Tuple[SquareWaveParams, np.ndarray]:
    rng = np.random.default_rng(5)
    return SquareWaveParams(epsilon=1.5, d=64), np.minimum((rng.beta(5.0, 2.0, size=4000) * 64).astype(np.int64), 63)


_base.register_protocol(_base.Protocol(
    "square-wave", SquareWaveParams, SquareWaveReports, SquareWaveServer, SquareWaveClient, example=_example,
    extremes=edges(d=(2, MAX_D), band=(0, 64)),
    wire_fields=lambda p: [WireField("y", bits_for(p.outputs))], variance=_variance,
    audit=AuditHooks(lambda e, **kw: SquareWaveParams(**{"epsilon": e, "d": 4, "band": 1, **kw}), _plan,
                     lambda p: float(p.effective_epsilon))))
