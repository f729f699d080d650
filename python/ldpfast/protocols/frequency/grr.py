"""k-ary randomized response (GRR, "RR" in [PAN]) over the whole dictionary, as a protocol.

Each user reports one symbol of ``[0, d)``: the true value with probability
``p = e/(e+d-1)``, otherwise a uniformly chosen other value (total flip probability
``(d-1)/(e+d-1)``, computed directly). The server keeps the histogram ``C`` of reports
and estimates ``fhat(v) = (C(v)/n - q)/(p - q)`` with ``q = 1/(e+d-1)``
([PAN] section 2.1). Its variance ``[q(1-q) + f(p-q)(1-p-q)]/(n(p-q)^2)`` grows linearly
with ``d``, which is why [PAN] hashes to a small range first (OCMS+RR); GRR is the
accuracy baseline (``ldpfast.theory.grr_variance``).

State is the integer histogram (``d`` uint64 counters), so merges are exact.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar, List, Mapping, Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike

from ... import _base, _core
from ..._validate import (check_epsilon, check_int, check_values, rr_threshold,
                         uint64_column)
from ...errors import ParameterError, ReportError
from ..._base import AuditHooks, ComparisonRow
from ...audit import Plan, value_inputs
from ...estimates import PLUG_IN
from ...uncertainty import BinomialCounts, PlugIn
from ..._base import WireField, bits_for
from .._aliases import deprecated_names
from .._histogram import HistogramServer
from .._registration import edges, counter_cost, rr_epsilon, theory, zipf_values

if TYPE_CHECKING:
    from ...datasets import ValueData
    from ...estimation import Channel
    from ...experiments import Algorithm
    from ...theory._types import Real, RealLike

__all__ = ["GRRParams", "GRRReports", "GRRClient", "GRRServer", "decode_counts"]

_U64 = 2**64


@dataclasses.dataclass(frozen=True)
class GRRParams(_base.Params):
    """GRR parameters.

    Attributes:
        epsilon: privacy parameter, in [2^-20, log(d-1) + 22.18] (the 64-bit sampler; ``_validate.rr_threshold``).
        d: dictionary size (number of RR symbols), ``2 <= d < 2^63``; the server holds a
            histogram of ``d`` counters.
    """

    protocol: ClassVar[str] = "grr"

    epsilon: float
    d: int

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        d = check_int("d", self.d, 2)
        if d >= 2**63:
            raise ParameterError(f"d must be < 2^63, got {d}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "d", d)
        _ = self.flip_threshold                 # refuses a budget the 64-bit sampler cannot represent

    @property
    def keep_probability(self) -> float:
        """``p = e/(e+d-1)``."""
        return math.exp(self.epsilon) / (math.expm1(self.epsilon) + self.d)

    @property
    def other_probability(self) -> float:
        """``q = 1/(e+d-1)``: probability of each particular other symbol."""
        return 1.0 / (math.expm1(self.epsilon) + self.d)

    @property
    def flip_probability(self) -> float:
        """``(d-1)/(e+d-1)`` (computed directly, never as ``1 - p``)."""
        return (self.d - 1) / (math.expm1(self.epsilon) + self.d)

    @property
    def flip_threshold(self) -> int:
        """The 64-bit flip threshold, rounded up from the exact probability (effective
        epsilon <= epsilon; :func:`ldpfast._validate.rr_threshold`)."""
        return rr_threshold(self.epsilon, self.d)

    @property
    def communication_bits(self) -> int:
        return (self.d - 1).bit_length()


@dataclasses.dataclass(eq=False)
class GRRReports(_base.Reports):
    """A batch of GRR reports: ``y`` in ``[0, d)`` (checked by :meth:`GRRServer.update`)."""

    protocol: ClassVar[str] = "grr"

    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"y": ("uint64", 1)}

    y: np.ndarray

    def __post_init__(self) -> None:
        self.y = uint64_column(self.y, "y", ReportError)


class GRRClient(_base.ClientBase):
    """GRR client. ``rng=None`` (default) draws keys from the OS; a seed is for simulation
    only (see :mod:`ldpfast._random`)."""

    params: GRRParams

    def perturb(self, values: ArrayLike) -> GRRReports:
        """One report per value (values: integers in ``[0, d)``)."""
        x = check_values(values, self.params.d)
        y = _core.randomized_response(self._keys.key(), x, self.params.d, self.params.flip_threshold,
                                      self.threads)
        return GRRReports(y=y)


def decode_counts(params: GRRParams, counts: ArrayLike, n: int, clip: bool = False) -> np.ndarray:
    """``fhat = (C/n - q)/(p - q) = ((e+d-1) C/n - 1)/(e-1)`` for report counts ``C`` (any
    array shape) among ``n`` reports. ``clip`` clips to ``[0, 1]``."""
    n = int(n)
    if n <= 0:
        raise ReportError("cannot estimate frequencies from zero reports")
    em1 = math.expm1(params.epsilon)
    scale, offset = (em1 + params.d) / (n * em1), -1.0 / em1  # fhat = C (e+d-1)/(n(e-1)) - 1/(e-1)
    counts = np.asarray(counts)
    if counts.dtype == np.uint64 and counts.flags.c_contiguous and counts.flags.aligned:  # a histogram: one pass
        fhat = _core.histogram_affine(counts, scale, offset)
    else:
        fhat = np.asarray(counts * scale + offset, dtype=np.float64)
    if clip:
        np.clip(fhat, 0.0, 1.0, out=fhat)
    return fhat


class GRRServer(HistogramServer):
    """GRR aggregator: the histogram of reported symbols. Thread-safe (see
    :class:`ldpfast._base.Aggregator`)."""

    protocol: ClassVar[str] = "grr"
    params_type: ClassVar[type] = GRRParams
    reports_type: ClassVar[type] = GRRReports
    values_are: ClassVar[str] = "symbols in"
    reports_name: ClassVar[str] = "GRR"
    # grr's GRRParams, or longitudinal's LGRRParams (LGRRServer reuses this histogram; the
    # methods it inherits read only params.d): not one class below the base GRRParams
    params: Any

    def estimate(self, candidates: Optional[ArrayLike] = None, counts: bool = False, *,
                 clip: bool = False) -> np.ndarray:
        """``fhat(v) = (C(v)/n - q)/(p - q) = ((e+d-1) C(v)/n - 1)/(e-1)`` for the
        candidates (default: the whole dictionary); ``counts=True`` gives ``n fhat``;
        ``clip`` clips the fractions to ``[0, 1]``."""
        self._check_query(candidates, 32, self.params.d, "a GRR query")
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        if candidates is None:
            histogram = self._counts
        else:
            xs = check_values(candidates, self.params.d, "candidates", "values in")
            histogram = self._counts[xs]
        est = decode_counts(self.params, histogram, n, clip)
        if counts:
            est *= n
        return est

    def estimate_counts(self, candidates: Optional[ArrayLike] = None, clip: bool = False) -> np.ndarray:
        """Alias of ``estimate(candidates, counts=True, clip=clip)`` (kept for compatibility)."""
        return self.estimate(candidates, counts=True, clip=clip)


def _example() -> Tuple[GRRParams, np.ndarray]:
    return GRRParams(epsilon=1.5, d=64), zipf_values(64)


def _variance(server: GRRServer, candidates: np.ndarray) -> PlugIn:
    p: GRRParams = server.params
    n = server.n
    em1 = math.expm1(p.epsilon)                    # decode_counts: C/n = (1 + em1 fhat)/(em1 + d)
    flip = p.flip_threshold / _U64                 # the sampler's exact probabilities
    exact = BinomialCounts(n, 1.0 - flip, flip / (p.d - 1), (1.0 / (em1 + p.d), em1 / (em1 + p.d)))
    return PlugIn(lambda f: theory().grr_variance(p.epsilon, p.d, n, f), len(candidates),
                  f"{PLUG_IN} (theory.grr_variance); exact binomial tests of the report counts", counts=exact)


def _channel(server: GRRServer, candidates: Optional[ArrayLike]) -> Channel:
    from ...estimation import symbol_channel

    p: GRRParams = server.params
    counts = server._counts
    if candidates is not None:
        counts = counts[check_values(candidates, p.d, "candidates", "values in", distinct=True)]
    return symbol_channel(counts, server.n, p.keep_probability, p.other_probability, p.d)


def _compare(epsilon: float, d: int, n: int, f_star: float, **_: Any) -> List[ComparisonRow]:
    from ...theory import ocms as to

    def var(f: RealLike) -> Real:
        return to.grr_variance(epsilon, d, n, f)
    return [ComparisonRow("GRR", d, bits_for(d), var, float((d - 1) * var(0.0) + var(1.0)), "k-ary RR on [d]",
                          **counter_cost(d), build=lambda: GRRParams(epsilon=epsilon, d=d))]


def _simulations() -> Tuple[Algorithm]:
    from ...experiments import Algorithm
    from ...theory import ocms as to

    def variance(params: Any, data: ValueData, f: np.ndarray) -> np.ndarray:
        return np.asarray(to.grr_variance(params.epsilon, params.d, data.n, f))

    def l2(params: Any, n: int, size: int) -> float:
        worst = np.asarray(to.grr_variance(params.epsilon, params.d, n, np.array([0.0, 1.0])))
        return float((size - 1) * worst[0] + worst[1])
    return (Algorithm("grr", "GRR", "protocols.frequency.grr", lambda eps, data, gen: GRRParams(epsilon=eps, d=data.d),
                      variance, l2,
                      "k-ary randomized response on the whole dictionary (d counters)"),)


_base.register_protocol(_base.Protocol(
    "grr", GRRParams, GRRReports, GRRServer, GRRClient, extremes=edges(d=(2, 2**20)), example=_example,
    wire_fields=lambda p: [WireField("y", bits_for(p.d))],  # ceil(log2 d)
    variance=_variance, compare=_compare, simulations=_simulations, channel=_channel,
    audit=AuditHooks(lambda e, **kw: GRRParams(e, 4, **kw),
                     lambda params: Plan(value_inputs(0, 1), lambda r: (r.y == 0, r.y == 1), ("y = x0", "y = x1")),
                     rr_epsilon("d"))))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "grr", {"Params": GRRParams, "Client": GRRClient,
                                                      "Server": GRRServer, "Reports": GRRReports})
