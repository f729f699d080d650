"""Longitudinal unary encodings with memoization: L-OUE, L-OSUE, L-SUE (Arcolezi et al.
2022/2023, as :mod:`ldpfast.protocols.repeated.longitudinal` for the k-ary ones).

A permanent unary encoding with budget ``eps_inf``, memoized per ``(user secret, value)``,
then each bit's instantaneous response, tuned so that one report spends exactly ``eps_1``:

* ``l-oue``: optimized unary encoding (``p1 = 1/2``, ``q1 = 1/(e^eps_inf + 1)``), then
  ``p2 = 1/2`` and ``q2`` solving ``eps_1`` (with ``p2 = 1/2`` a report spends at most
  ``ln((2 - q1)/(3 q1))``, at ``q2 = 0``: 0.76 at ``eps_inf = 1``; a larger ``eps_1`` is
  refused);
* ``l-osue``: OUE, then a symmetric ``p2 = 1 - q2`` solving ``eps_1``;
* ``l-sue``: symmetric unary encoding at ``eps_inf`` (basic RAPPOR's PRR), then a
  symmetric ``p2`` solving ``eps_1``.

A bit that is 1 in the value's encoding is reported 1 with ``P1 = p1 p2 + (1 - p1) q2``,
any other with ``P0 = q1 p2 + (1 - q1) q2``; one report is
``ln(P1 (1 - P0)/(P0 (1 - P1)))``-LDP, and ``fhat = (C/n - P0)/(P1 - P0)`` with the
bit-packed per-bit counts of :mod:`ldpfast.protocols._bitvec`. All probabilities are the
samplers' integer thresholds ``t / 2^64``; the second stage's is found by integer bisection
on the exact composition (the largest budget not above ``eps_1``).
"""

from __future__ import annotations

import dataclasses
import functools
from decimal import Decimal
from typing import Any, ClassVar, Optional, Sequence, Tuple

from ... import _base, _core
from ..._memory import check_allocation
from ..._validate import check_int, check_values
from ...errors import ParameterError
from ..._base import WireField
from ..frequency import unary as _unary
from .._bitvec import row_bytes
from .._memo import (Budgets, MemoClient, MemoServer, audit_hooks, check_bit_budget, exp, new_secrets, own_variance,
                    probability, simulations, solve_threshold, threshold, unary_epsilon)
from ..._validate import MAX_EPSILON, MIN_EPSILON
from .._registration import edges, zipf_values

__all__ = ["new_secrets", "LOUEParams", "LOSUEParams", "LSUEParams", "LOUEReports", "LOSUEReports", "LSUEReports",
           "LOUEClient", "LOSUEClient", "LSUEClient", "LOUEServer", "LOSUEServer", "LSUEServer"]

_TWO64 = 2**64


@dataclasses.dataclass(frozen=True)
class _LUEParams(Budgets, _base.Params):
    """Two unary encodings of ``[0, d)`` (module docstring).

    Attributes:
        eps_inf: budget of the permanent response.
        eps_1: budget of one report, ``<= eps_inf``.
        d: dictionary size (bits per report), ``2 <= d <= 2^26``.
    """

    eps_inf: float
    eps_1: float
    d: int

    #: second stage: "half" (p2 = 1/2, solve q2) or "symmetric" (p2 = 1 - q2)
    _second: ClassVar[str] = "half"

    def __post_init__(self) -> None:
        self.check_budgets()
        object.__setattr__(self, "d", check_int("d", self.d, 2, 2**26))
        _ = self.thresholds

    def _first(self) -> Tuple[int, int]:
        raise NotImplementedError

    @property
    def thresholds(self) -> Tuple[int, int, int, int]:
        """``(t1_hot, t1_cold, t2_one, t2_zero)``: the permanent encoding's probabilities for
        the value's bit and the others, then the instantaneous response's for a permanent
        bit 1 and 0."""
        return _ue_stages(self._first(), self._second, self.eps_1)

    @property
    def p(self) -> float:
        """``P1``: probability that the value's own bit is reported 1."""
        return float(self._composite()[0])

    @property
    def q(self) -> float:
        """``P0``: probability that any other bit is reported 1."""
        return float(self._composite()[1])

    def _composite(self) -> Tuple[Decimal, Decimal]:
        t1_hot, t1_cold, t2_one, t2_zero = self.thresholds
        return _composite(probability(t1_hot), probability(t1_cold), probability(t2_one), probability(t2_zero))

    @property
    def effective_eps_1(self) -> float:
        return unary_epsilon(*self._composite())

    @property
    def effective_eps_inf(self) -> float:
        t1_hot, t1_cold = self.thresholds[:2]
        return unary_epsilon(probability(t1_hot), probability(t1_cold))

    def variance(self, n: int, f: Any) -> Any:
        """``Var(fhat) = [f P1 (1-P1) + (1-f) P0 (1-P0)] / (n (P1 - P0)^2)``."""
        return _unary.unary_variance(self.p, self.q, n, f)


@functools.lru_cache(maxsize=256)
def _ue_stages(first: Tuple[int, int], kind: str, eps_1: float) -> Tuple[int, int, int, int]:
    """The four thresholds of two unary encodings: the first stage's, then the second's
    (``kind`` "half": ``p2 = 1/2``; "symmetric": ``p2 = 1 - q2``) spending at most ``eps_1``."""
    t1_hot, t1_cold = first
    p1, q1 = probability(t1_hot), probability(t1_cold)

    def second(t: int) -> Tuple[int, int]:
        return (_TWO64 // 2, t) if kind == "half" else (_TWO64 - t, t)

    def spent(t: int) -> float:
        one, zero = second(t)
        return unary_epsilon(*_composite(p1, q1, probability(one), probability(zero)))
    # t: the second stage's probability of a 1 from a permanent 0 (q2), up to 1/2
    low = 0 if kind == "half" else 1
    # Refused only when eps_1 is out of reach by more than the 64-bit samplers' resolution:
    # each probability is at least 2^-32 and moves by at most 2^-64 in the thresholds, so
    # the first stage's loss and the least second stage (q2 = 2^-64) fall short of eps_inf by
    # less than 2^-29 (eps_1 = eps_inf then spends the permanent response's budget).
    if spent(low) < eps_1 - 2.0**-29:
        raise ParameterError(f"eps_1={eps_1!r} is more than this second stage can spend after the permanent "
                             f"response (at most {spent(low):.6g}, with p2 = 1/2): lower eps_1, raise eps_inf or "
                             "use l-osue")
    t2 = solve_threshold(spent, eps_1, low, _TWO64 // 2) if spent(low) > eps_1 else low
    return (t1_hot, t1_cold, *second(t2))


def _composite(p1: Decimal, q1: Decimal, p2: Decimal, q2: Decimal) -> Tuple[Decimal, Decimal]:
    """``(P1, P0)``: a bit 1 (0) of the encoding is reported 1 with ``p1 p2 + (1-p1) q2``
    (``q1 p2 + (1-q1) q2``)."""
    return p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2


@dataclasses.dataclass(frozen=True)
class LOUEParams(_LUEParams):
    """L-OUE: OUE at ``eps_inf``, then ``p2 = 1/2`` and ``q2`` solving ``eps_1``."""

    protocol: ClassVar[str] = "l-oue"
    _second: ClassVar[str] = "half"

    def _first(self) -> Tuple[int, int]:
        check_bit_budget("eps_inf", self.eps_inf)
        return _TWO64 // 2, threshold(1 / (exp(self.eps_inf) + 1), up=True)


@dataclasses.dataclass(frozen=True)
class LOSUEParams(_LUEParams):
    """L-OSUE: OUE at ``eps_inf``, then a symmetric ``p2 = 1 - q2`` solving ``eps_1``."""

    protocol: ClassVar[str] = "l-osue"
    _second: ClassVar[str] = "symmetric"

    def _first(self) -> Tuple[int, int]:
        check_bit_budget("eps_inf", self.eps_inf)
        return _TWO64 // 2, threshold(1 / (exp(self.eps_inf) + 1), up=True)


@dataclasses.dataclass(frozen=True)
class LSUEParams(_LUEParams):
    """L-SUE (basic RAPPOR): SUE at ``eps_inf``, then a symmetric ``p2`` solving ``eps_1``."""

    protocol: ClassVar[str] = "l-sue"
    _second: ClassVar[str] = "symmetric"

    def _first(self) -> Tuple[int, int]:
        check_bit_budget("eps_inf", self.eps_inf, halves=True)
        half = exp(self.eps_inf / 2)
        return threshold(half / (half + 1), up=False), threshold(1 / (half + 1), up=True)


@dataclasses.dataclass(eq=False)
class LUEReports(_unary.UnaryReports):
    """Reports of the longitudinal unary encodings: ``bits``, rows of ``d`` bits."""


@dataclasses.dataclass(eq=False)
class LOUEReports(LUEReports):
    protocol: ClassVar[str] = "l-oue"


@dataclasses.dataclass(eq=False)
class LOSUEReports(LUEReports):
    protocol: ClassVar[str] = "l-osue"


@dataclasses.dataclass(eq=False)
class LSUEReports(LUEReports):
    protocol: ClassVar[str] = "l-sue"


_LUE_REPORTS = {"l-oue": LOUEReports, "l-osue": LOSUEReports, "l-sue": LSUEReports}


class LUEClient(MemoClient):
    """Client of the longitudinal unary encodings (see
    :class:`ldpfast.protocols._memo.MemoClient` for ``secrets``)."""

    def _draw(self, values: Any, secrets: Any, instantaneous: bool) -> LUEReports:
        p = self.params
        x = check_values(values, p.d)
        check_allocation(x.size * row_bytes(p.d), f"{x.size} reports of {p.d} bits")
        t1_hot, t1_cold, t2_one, t2_zero = p.thresholds
        rows = _core.memo_unary_perturb(self._keys.key(), self._secrets(secrets, x.size), x, p.d, t1_hot, t1_cold,
                                        instantaneous, t2_one, t2_zero, self.threads)
        reports: LUEReports = _LUE_REPORTS[p.protocol](bits=rows)
        return reports

    def perturb(self, values: Any, secrets: Any = None) -> LUEReports:
        """One row of ``d`` bits per value; ``secrets``: one per value."""
        return self._draw(values, secrets, True)

    def permanent(self, values: Any, secrets: Any = None) -> LUEReports:
        """The permanent rows (never sent)."""
        return self._draw(values, secrets, False)


class LOUEClient(LUEClient):
    params_type: ClassVar[Optional[type]] = LOUEParams


class LOSUEClient(LUEClient):
    params_type: ClassVar[Optional[type]] = LOSUEParams


class LSUEClient(LUEClient):
    params_type: ClassVar[Optional[type]] = LSUEParams


class LUEServer(MemoServer, _unary.UnaryServer):
    """Aggregator of the longitudinal unary encodings: per-bit counts (bit-packed C++
    kernel); ``fhat = (C/n - P0)/(P1 - P0)``."""


class LOUEServer(LUEServer):
    protocol: ClassVar[str] = "l-oue"
    params_type: ClassVar[type] = LOUEParams
    reports_type: ClassVar[Optional[type]] = LOUEReports


class LOSUEServer(LUEServer):
    protocol: ClassVar[str] = "l-osue"
    params_type: ClassVar[type] = LOSUEParams
    reports_type: ClassVar[Optional[type]] = LOSUEReports


class LSUEServer(LUEServer):
    protocol: ClassVar[str] = "l-sue"
    params_type: ClassVar[type] = LSUEParams
    reports_type: ClassVar[Optional[type]] = LSUEReports


# -- registration ----------------------------------------------------------------------------------
def _wire_ue(params: Any) -> Sequence[WireField]:
    return [WireField("bits", 8, None, "uint8", (row_bytes(params.d),))]


def _ue_example(params: Any) -> Any:
    return lambda: (params(eps_inf=3.0, eps_1=1.0, d=60), zipf_values(60))   # d % 8: padding bits to reject


def _ue_simulation_params(params: Any) -> Any:
    return lambda eps, data, gen: params(2 * eps, eps, data.d)   # eps: one report's budget


def _ue_audit_params(params: Any) -> Any:
    return lambda e, **kw: params(**{"eps_inf": 2 * e, "eps_1": e, "d": 4, **kw})


for _pid, _params, _reports, _server, _client, _label, _summary in (
        ("l-oue", LOUEParams, LOUEReports, LOUEServer, LOUEClient, "L-OUE",
         "longitudinal OUE: memoized OUE at 2 eps, then p2 = 1/2 so a report spends eps"),
        ("l-osue", LOSUEParams, LOSUEReports, LOSUEServer, LOSUEClient, "L-OSUE",
         "longitudinal OUE then SUE: memoized OUE at 2 eps, then symmetric RR to eps"),
        ("l-sue", LSUEParams, LSUEReports, LSUEServer, LSUEClient, "L-SUE",
         "longitudinal SUE (basic RAPPOR): memoized SUE at 2 eps, then symmetric RR to eps")):
    _base.register_protocol(_base.Protocol(
        _pid, _params, _reports, _server, _client,
        extremes=edges(eps_inf=(MIN_EPSILON, MAX_EPSILON), eps_1=(MIN_EPSILON, MAX_EPSILON), d=(2, 2**16)),
        example=_ue_example(_params), wire_fields=_wire_ue, variance=own_variance, channel=_unary.unary_channel,
        simulations=simulations(_pid, _label, "protocols.repeated.longitudinal_unary", _ue_simulation_params(_params),
                                 lambda params, data, f: params.variance(data.n, f), _summary),
        audit=audit_hooks(_ue_audit_params(_params), _unary._audit_plan), rounds=_params))
