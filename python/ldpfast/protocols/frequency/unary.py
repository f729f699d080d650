"""Unary encoding: optimized (OUE) and symmetric (SUE) unary encoding, as protocols.

Wang, Blocki, Li, Jha, "Locally Differentially Private Protocols for Frequency
Estimation", USENIX Security 2017, section 4.3. A user holding ``x in [0, d)`` sends ``d``
bits: bit ``x`` is 1 with probability ``p``, every other bit with probability ``q``
independently. Two inputs change one 1-bit's position, so the report is
``ln(p (1 - q) / (q (1 - p)))``-LDP:

* ``oue``: ``p = 1/2``, ``q = 1/(e^eps + 1)``, the choice minimizing the variance:
  ``Var(fhat) = 4 e^eps / (n (e^eps - 1)^2)`` at ``f = 0`` (as OLH, with d-bit reports);
* ``sue`` (basic one-time RAPPOR): ``p = e^(eps/2)/(e^(eps/2) + 1)``, ``q = 1 - p``.

The server counts, for every bit, the reports that set it (``C``), with the bit-packed
column-count kernel of :mod:`ldpfast.protocols._bitvec`, and estimates
``fhat(x) = (C(x)/n - q)/(p - q)``, whose variance is
``[f p (1-p) + (1-f) q (1-q)] / (n (p - q)^2)`` (:meth:`Params.variance`).

The client does not draw ``d`` uniform words per user: it draws each 64-bit word of the row
with an exact bit-sliced comparison (:file:`cpp/include/ldpfast/bernoulli.hpp`, about 8
random words per 64 bits whatever ``q``), and ``p``, ``q`` are the integer thresholds'
probabilities ``t / 2^64`` (``p`` rounded down, ``q`` up from the exact values), so the
effective epsilon is at most ``eps``; the estimator uses those exact probabilities.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Dict, Optional, Sequence, Tuple

import numpy as np

from ... import _base, _core
from ..._base import AuditHooks, ComparisonRow
from ..._memory import check_allocation
from ..._validate import check_epsilon, check_int, check_values
from ...errors import ReportError
from ...estimates import PLUG_IN
from ..._base import WireField
from .._bitvec import BitCountServer, bit_rows, row_bytes
from .._memo import check_bit_budget, exp, probability, threshold, unary_epsilon
from .._registration import edges, simulated_own_l2, simulated_own_variance, zipf_values

__all__ = ["OUEParams", "SUEParams", "OUEReports", "SUEReports", "OUEClient", "SUEClient", "OUEServer",
           "SUEServer", "unary_variance", "unary_channel"]

_TWO64 = 2**64


def unary_variance(p_one: float, p_zero: float, n: int, f: Any) -> Any:
    """``Var(fhat)`` of the unary-encoding estimator ``(C/n - p_zero)/(p_one - p_zero)`` at
    true frequency ``f`` over ``n`` reports, for bits that are 1 with probability ``p_one``
    (the user's value) and ``p_zero`` (any other value)."""
    f = np.asarray(f, dtype=np.float64)
    spread = f * p_one * (1.0 - p_one) + (1.0 - f) * p_zero * (1.0 - p_zero)
    return spread / (n * (p_one - p_zero) ** 2)


@dataclasses.dataclass(frozen=True)
class _UnaryParams(_base.Params):
    """Unary encoding of ``[0, d)`` at privacy level ``epsilon`` (see the module docstring).

    Attributes:
        epsilon: the budget of one report, in [2^-20, 22.18] (OUE) or [2^-20, 44.36] (SUE): the
            smallest bit probability stays >= 2^-32, the samplers' resolution.
        d: dictionary size (bits per report), ``2 <= d <= 2^26``.
    """

    epsilon: float
    d: int

    def __post_init__(self) -> None:
        epsilon = check_bit_budget("epsilon", check_epsilon(self.epsilon), halves=self.protocol == "sue")
        object.__setattr__(self, "epsilon", epsilon)
        object.__setattr__(self, "d", check_int("d", self.d, 2, 2**26))

    def thresholds(self) -> Tuple[int, int]:
        """``(t_one, t_zero)``: the samplers' integer thresholds of ``p`` and ``q``."""
        raise NotImplementedError

    @property
    def p(self) -> float:
        """Probability that the user's own bit is 1 (the sampler's exact value)."""
        return self.thresholds()[0] / _TWO64

    @property
    def q(self) -> float:
        """Probability that any other bit is 1 (the sampler's exact value)."""
        return self.thresholds()[1] / _TWO64

    @property
    def effective_epsilon(self) -> float:
        """``ln(p (1 - q)/(q (1 - p)))`` of the samplers' thresholds (at most ``epsilon``)."""
        t_one, t_zero = self.thresholds()
        return unary_epsilon(probability(t_one), probability(t_zero))

    @property
    def communication_bits(self) -> int:
        return self.d

    def variance(self, n: int, f: Any) -> Any:
        """``Var(fhat) = [f p (1-p) + (1-f) q (1-q)] / (n (p - q)^2)`` at true frequency ``f``."""
        return unary_variance(self.p, self.q, n, f)


@dataclasses.dataclass(frozen=True)
class OUEParams(_UnaryParams):
    """Optimized unary encoding: ``p = 1/2``, ``q = 1/(e^eps + 1)``."""

    protocol: ClassVar[str] = "oue"

    def thresholds(self) -> Tuple[int, int]:
        return _TWO64 // 2, threshold(1 / (exp(self.epsilon) + 1), up=True)


@dataclasses.dataclass(frozen=True)
class SUEParams(_UnaryParams):
    """Symmetric unary encoding (basic one-time RAPPOR): ``p = e^(eps/2)/(e^(eps/2) + 1) = 1 - q``."""

    protocol: ClassVar[str] = "sue"

    def thresholds(self) -> Tuple[int, int]:
        half = exp(self.epsilon / 2)
        return threshold(half / (half + 1), up=False), threshold(1 / (half + 1), up=True)


@dataclasses.dataclass(eq=False)
class UnaryReports(_base.Reports):
    """A batch of unary-encoding reports: ``bits``, ``uint8[n, ceil(d/8)]`` rows of ``d``
    bits, least significant bit first (see :mod:`ldpfast.protocols._bitvec`)."""

    column_types: ClassVar = {"bits": ("uint8", 2)}
    bits: np.ndarray

    def __post_init__(self) -> None:
        arr = np.asarray(self.bits)
        if arr.ndim != 2:
            raise ReportError(f"bits must be a 2-D uint8 array (one row of bits per report), got shape {arr.shape}")
        self.bits = bit_rows(arr, 8 * arr.shape[1])


@dataclasses.dataclass(eq=False)
class OUEReports(UnaryReports):
    protocol: ClassVar[str] = "oue"


@dataclasses.dataclass(eq=False)
class SUEReports(UnaryReports):
    protocol: ClassVar[str] = "sue"


class UnaryClient(_base.ClientBase):
    """Unary-encoding client (OUE or SUE, by its parameters). ``rng=None`` (default) draws
    keys from the OS; a seed is for simulation only."""

    def perturb(self, values: Any) -> UnaryReports:
        """One row of ``d`` bits per value (integers in ``[0, d)``)."""
        p = self.params
        x = check_values(values, p.d)
        check_allocation(x.size * row_bytes(p.d), f"{x.size} reports of {p.d} bits")
        t_one, t_zero = p.thresholds()
        rows = _core.unary_perturb(self._keys.key(), x, p.d, t_one, t_zero, self.threads)
        reports: UnaryReports = _REPORTS[p.protocol](bits=rows)
        return reports


class OUEClient(UnaryClient):
    params_type: ClassVar[Optional[type]] = OUEParams


class SUEClient(UnaryClient):
    params_type: ClassVar[Optional[type]] = SUEParams


class UnaryServer(BitCountServer):
    """Unary-encoding aggregator: how many reports set each bit. ``threads``: server
    threads (results do not depend on it). Thread-safe (see :class:`ldpfast._base.Aggregator`)."""

    params: _UnaryParams

    @classmethod
    def _shape(cls, params: Any) -> Tuple[int, int]:
        return 1, int(params.d)

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """``fhat(x) = (C(x)/n - q)/(p - q)`` for the candidates (default: all of ``[0, d)``);
        ``counts=True`` gives ``n fhat``."""
        self._check_query(candidates, 40, self.params.d, f"a {self.protocol!r} query")
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        p = self.params
        column = self._st["counts"][0]
        if candidates is not None:
            column = column[check_values(candidates, p.d, "candidates", "values in").astype(np.intp)]
        fhat = (column / n - p.q) / (p.p - p.q)
        return np.asarray(fhat * n if counts else fhat, dtype=np.float64)


class OUEServer(UnaryServer):
    protocol: ClassVar[str] = "oue"
    params_type: ClassVar[type] = OUEParams
    reports_type: ClassVar[Optional[type]] = OUEReports


class SUEServer(UnaryServer):
    protocol: ClassVar[str] = "sue"
    params_type: ClassVar[type] = SUEParams
    reports_type: ClassVar[Optional[type]] = SUEReports


_REPORTS: Dict[str, type] = {"oue": OUEReports, "sue": SUEReports}


def _variance(server: Any, candidates: Any) -> Tuple[Any, str]:
    p, n = server.params, server.n
    return (lambda f: p.variance(n, f)), f"{PLUG_IN} (unary encoding, Params.variance)"


def unary_channel(server: Any, candidates: Any) -> Any:
    """The IBU/MLE channel (:mod:`ldpfast.estimation`) of per-bit counts: bit ``v`` is set by
    a report with probability ``p`` when the user holds ``v`` and ``q`` otherwise (OUE, SUE,
    and the longitudinal encodings with their composite ``P1``, ``P0``). The bits are
    independent given the value, but the counts alone are not sufficient for the mixture
    over values, so the likelihood is the composite one (counts as independent binomials)."""
    from ...estimation import support_channel

    p = server.params
    column = server._st["counts"][0]
    if candidates is not None:
        column = column[check_values(candidates, p.d, "candidates", "values in", distinct=True)]
    return support_channel(column, server.n, p.p, p.q, rest=column.size < p.d, what="bit")


def _wire(params: Any) -> Sequence[WireField]:
    # d bits, sent as whole bytes (the spare bits of the last byte are 0)
    return [WireField("bits", 8, None, "uint8", (row_bytes(params.d),))]


def _audit_plan(params: Any) -> Any:
    from ...audit import Plan, value_inputs

    def events(reports: Any) -> Tuple[np.ndarray, np.ndarray]:
        first = reports.bits[:, 0]
        one, zero = (first & 1) != 0, (first & 2) != 0
        return one & ~zero, zero & ~one
    return Plan(value_inputs(0, 1), events, ("bit x0 = 1, bit x1 = 0", "bit x1 = 1, bit x0 = 0"))


def _compare(kind: str) -> Any:
    def rows(epsilon: float, d: int, n: int, f_star: Any, **_: Any) -> Sequence[ComparisonRow]:
        if d < 2 or d > 2**26:
            return []
        params = (OUEParams if kind == "oue" else SUEParams)(epsilon=epsilon, d=d)

        def var(f: Any) -> Any:
            return params.variance(n, f)
        # the bit-count kernel adds 64 report bits per word: n d / 64 steps, d counters
        return [ComparisonRow(kind.upper(), d, d, var, float((d - 1) * var(0.0) + var(1.0)),
                              f"unary encoding, {'p = 1/2' if kind == 'oue' else 'p + q = 1'}",
                              server_ops=lambda n_, q: n_ * -(-d // 64) + d + q, state_bytes=lambda n_, q: 8.0 * d,
                              build=lambda: params)]
    return rows


def _simulations(kind: str, label: str, summary: str) -> Any:
    def entries() -> Tuple[Any, ...]:
        from ...experiments import Algorithm

        params_type = OUEParams if kind == "oue" else SUEParams
        return (Algorithm(kind, label, "protocols.frequency.unary",
                          lambda eps, data, gen: params_type(epsilon=eps, d=data.d),
                          simulated_own_variance, simulated_own_l2, summary),)
    return entries


def _register(kind: str, params: type, reports: type, server: type, client: type, label: str, summary: str) -> None:
    _base.register_protocol(_base.Protocol(
        kind, params, reports, server, client,
        extremes=edges(d=(2, 2**16)),
        example=lambda: (params(epsilon=1.5, d=60), zipf_values(60)),  # d % 8: padding bits to reject
        wire_fields=_wire, variance=_variance, compare=_compare(kind), channel=unary_channel,
        simulations=_simulations(kind, label, summary),
        audit=AuditHooks(lambda e, **kw: params(e, 4, **kw), _audit_plan,
                         lambda p: float(p.effective_epsilon))))


_register("oue", OUEParams, OUEReports, OUEServer, OUEClient, "OUE",
          "optimized unary encoding (Wang et al. 2017): d bits per report, bit-packed C++ counts")
_register("sue", SUEParams, SUEReports, SUEServer, SUEClient, "SUE",
          "symmetric unary encoding (basic one-time RAPPOR): d bits per report")
