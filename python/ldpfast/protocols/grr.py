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
from typing import ClassVar, Dict

import numpy as np

from .. import _base, _core
from .._validate import (check_below, check_epsilon, check_int, check_values, rr_threshold,
                         uint64_column)
from ..errors import FormatError, ParameterError, ReportError
from .._base import AuditHooks, ComparisonRow
from ..audit import Plan, value_inputs
from ..estimates import PLUG_IN
from ..uncertainty import BinomialCounts, PlugIn
from .._base import WireField, bits_for
from ._registration import counter_cost, rr_epsilon, theory, zipf_values

__all__ = ["Params", "Reports", "Client", "Server", "decode_counts"]

_U64 = 2**64


@dataclasses.dataclass(frozen=True)
class Params(_base.Params):
    """GRR parameters.

    Attributes:
        epsilon: privacy parameter, in [2^-20, log(d-1) + 22.18] (the 64-bit sampler; ``_validate.rr_threshold``).
        d: dictionary size (number of RR symbols), ``2 <= d < 2^63``; the server holds a
            histogram of ``d`` counters.
    """

    protocol: ClassVar[str] = "grr"

    epsilon: float
    d: int

    def __post_init__(self):
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
class Reports(_base.Reports):
    """A batch of GRR reports: ``y`` in ``[0, d)`` (checked by :meth:`Server.update`)."""

    protocol: ClassVar[str] = "grr"

    column_types: ClassVar = {"y": ("uint64", 1)}

    y: np.ndarray

    def __post_init__(self):
        self.y = uint64_column(self.y, "y", ReportError)


class Client(_base.ClientBase):
    """GRR client. ``rng=None`` (default) draws keys from the OS; a seed is for simulation
    only (see :mod:`ldpfast._random`)."""

    def perturb(self, values) -> Reports:
        """One report per value (values: integers in ``[0, d)``)."""
        x = check_values(values, self.params.d)
        y = _core.randomized_response(self._keys.key(), x, self.params.d, self.params.flip_threshold,
                                      self.threads)
        return Reports(y=y)


def decode_counts(params: Params, counts, n: int, clip: bool = False) -> np.ndarray:
    """``fhat = (C/n - q)/(p - q) = ((e+d-1) C/n - 1)/(e-1)`` for report counts ``C`` (any
    array shape) among ``n`` reports. ``clip`` clips to ``[0, 1]``."""
    n = int(n)
    if n <= 0:
        raise ReportError("cannot estimate frequencies from zero reports")
    em1 = math.expm1(params.epsilon)
    fhat = ((em1 + params.d) * (np.asarray(counts, dtype=np.float64) / n) - 1.0) / em1
    return np.clip(fhat, 0.0, 1.0) if clip else fhat


class Server(_base.Aggregator):
    """GRR aggregator: the histogram of reported symbols. Thread-safe (see
    :class:`ldpfast._base.Aggregator`)."""

    protocol: ClassVar[str] = "grr"
    params_type: ClassVar[type] = Params
    reports_type: ClassVar[type] = Reports

    def __init__(self, params: Params):
        super().__init__(params)
        self._st = _base._State(counts=np.zeros(params.d, dtype=np.uint64))

    @classmethod
    def _state_layout(cls, params: Params):
        return {"counts": ((params.d,), "uint64")}

    @property
    def _counts(self) -> np.ndarray:
        return self._st["counts"]

    @property
    def n(self) -> int:
        return int(self._counts.sum(dtype=np.uint64))

    @property
    def counts(self) -> np.ndarray:
        """The report histogram (a copy)."""
        return self._counts.copy()

    def _validate(self, reports: Reports) -> None:
        check_below(reports.y, self.params.d, "y", "symbols in", ReportError)

    def _ingest(self, reports: Reports) -> Dict[str, np.ndarray]:
        counts = self._counts.copy()
        symbols = reports.y.astype(np.intp)  # < d, and bincount refuses uint64 before numpy 2.2
        if 8 * symbols.size < counts.size:  # few reports: no temporary histogram of size d
            values, hits = np.unique(symbols, return_counts=True)
            counts[values] += hits.astype(np.uint64)
        else:
            counts += np.bincount(symbols, minlength=self.params.d).astype(np.uint64)
        return {"counts": counts}

    def estimate(self, candidates=None, counts: bool = False, *, clip: bool = False) -> np.ndarray:
        """``fhat(v) = (C(v)/n - q)/(p - q) = ((e+d-1) C(v)/n - 1)/(e-1)`` for the
        candidates (default: the whole dictionary); ``counts=True`` gives ``n fhat``;
        ``clip`` clips the fractions to ``[0, 1]``."""
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        if candidates is None:
            histogram = self._counts
        else:
            xs = check_values(candidates, self.params.d, "candidates", "values in")
            histogram = self._counts[xs]
        est = decode_counts(self.params, histogram, n, clip)
        return est * n if counts else est

    def estimate_counts(self, candidates=None, clip: bool = False) -> np.ndarray:
        """Alias of ``estimate(candidates, counts=True, clip=clip)`` (kept for compatibility)."""
        return self.estimate(candidates, counts=True, clip=clip)

    def _set_state(self, state: Dict[str, np.ndarray]) -> None:
        self._st = _base._State(counts=np.array(state["counts"], dtype=np.uint64))

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        counts = state["counts"]
        if counts.size and float(counts.sum(dtype=np.float64)) >= 2.0**63:
            raise FormatError("stored counts sum to 2^63 or more (the report count would wrap)")


def _example():
    return Params(epsilon=1.5, d=64), zipf_values(64)


def _variance(server, candidates):
    p, n = server.params, server.n
    em1 = math.expm1(p.epsilon)                    # decode_counts: C/n = (1 + em1 fhat)/(em1 + d)
    flip = p.flip_threshold / _U64                 # the sampler's exact probabilities
    exact = BinomialCounts(n, 1.0 - flip, flip / (p.d - 1), (1.0 / (em1 + p.d), em1 / (em1 + p.d)))
    return PlugIn(lambda f: theory().grr_variance(p.epsilon, p.d, n, f), len(candidates),
                  f"{PLUG_IN} (theory.grr_variance); exact binomial tests of the report counts", counts=exact)


def _channel(server, candidates):
    from ..estimation import symbol_channel

    p = server.params
    counts = server._counts
    if candidates is not None:
        counts = counts[check_values(candidates, p.d, "candidates", "values in", distinct=True)]
    return symbol_channel(counts, server.n, p.keep_probability, p.other_probability, p.d)


def _compare(epsilon, d, n, f_star, **_):
    from ..theory import ocms as to

    def var(f):
        return to.grr_variance(epsilon, d, n, f)
    return [ComparisonRow("GRR", d, bits_for(d), var, (d - 1) * var(0.0) + var(1.0), "k-ary RR on [d]",
                          **counter_cost(d))]


def _simulations():
    from ..experiments import Algorithm
    from ..theory import ocms as to

    def l2(params, n, size):
        worst = to.grr_variance(params.epsilon, params.d, n, np.array([0.0, 1.0]))
        return float((size - 1) * worst[0] + worst[1])
    return (Algorithm("grr", "GRR", "protocols.grr", lambda eps, data, gen: Params(epsilon=eps, d=data.d),
                      lambda params, data, f: to.grr_variance(params.epsilon, params.d, data.n, f), l2,
                      "k-ary randomized response on the whole dictionary (d counters)"),)


_base.register_protocol(_base.Protocol(
    "grr", Params, Reports, Server, Client, example=_example,
    wire_fields=lambda p: [WireField("y", bits_for(p.d))],  # ceil(log2 d)
    variance=_variance, compare=_compare, simulations=_simulations, channel=_channel,
    audit=AuditHooks(lambda e, **kw: Params(e, 4, **kw),
                     lambda params: Plan(value_inputs(0, 1), lambda r: (r.y == 0, r.y == 1), ("y = x0", "y = x1")),
                     rr_epsilon("d"))))
