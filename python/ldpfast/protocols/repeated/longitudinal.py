"""Longitudinal frequency oracles with k-ary randomized responses and memoization: L-GRR
and L-OLH (the unary ones are in :mod:`ldpfast.protocols.repeated.longitudinal_unary`).

Arcolezi, Couchot, Al Bouna, Xiao, "Improving the Utility of Locally Differentially
Private Protocols for Longitudinal and Multidimensional Frequency Estimates" (Digital
Communications and Networks, 2022) and "Frequency Estimation of Evolving Data Under Local
Differential Privacy" (EDBT 2023), the protocols of multi-freq-ldpy's ``long_freq_est``.
Each chains two randomizers: a **permanent** one with budget ``eps_inf``, memoized per
``(user secret, value)`` (:mod:`ldpfast.protocols._memo`), and an **instantaneous** one
drawn fresh for every report, tuned so that one report spends exactly ``eps_1``:

* ``l-grr``: k-ary randomized response twice. The composition is a k-ary randomized
  response again, ``P = p1 p2 + (d-1) q1 q2`` on the diagonal and
  ``Q = p1 q2 + q1 p2 + (d-2) q1 q2`` off it, and the second stage is chosen so that
  ``ln(P/Q) = eps_1`` (multi-freq-ldpy solves the two-value equation instead, so for
  ``d > 2`` it spends far less than ``eps_1``: 0.166 at ``d = 100`` for ``eps_1 = 1``);
  a report is then distributed as GRR at ``eps_1``, and so is its estimator's variance;
* ``l-olh``: each user hashes with its own hash, drawn once from its secret, into
  ``[g]`` and memoizes the randomized response of the hashed value; the composition is
  GRR on ``g`` symbols at ``eps_1``, so the OLH rule ``g = round(e^eps_1) + 1`` minimizes
  the per-report variance whatever ``eps_inf`` is.

The first stage's flip threshold is rounded so that it spends at most ``eps_inf``; the
second stage's is the one (integer bisection on the exact composition) that spends the
largest budget not above ``eps_1``. Both budgets are audited (``ldpfast audit --budget
permanent``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar, Optional, Tuple

import numpy as np

from ... import _base, _core
from ..._validate import as_values, check_int, check_values, rr_effective_epsilon, rr_threshold
from ...audit import value_inputs
from ...errors import ReportError
from ...estimates import PLUG_IN
from ...kernels.field import PRIME
from ...theory import ocms as _ocms_theory
from ..._base import WireField, bits_for
from ..frequency import grr as _grr
from ..frequency import olh as _olh
from ..frequency import unary as _unary
from .._local_hashing import debias_matches, default_g, match_channel
from .._memo import (Budgets, MemoClient, MemoServer, audit_hooks, new_secrets, own_variance, rr_epsilon_exact,
                    simulations, solve_threshold, two_stage_rr)
from ..._validate import MAX_EPSILON, MIN_EPSILON
from .._registration import edges, olh_plan, zipf_values

__all__ = ["new_secrets", "LGRRParams", "LGRRReports", "LGRRClient", "LGRRServer", "LOLHParams", "LOLHReports",
           "LOLHClient", "LOLHServer"]

_TWO64 = 2**64
_ocms_variance: Any = _ocms_theory.ocms_variance   # OLH's variance is OCMS's with m = g
_HASH_PURPOSE = 0   # memo_draws purpose of L-OLH's per-user hash


@functools.lru_cache(maxsize=256)  # the bisection costs ~10 ms; Params are rebuilt often (loads, merges)
def _rr_stages(eps_inf: float, eps_1: float, m: int) -> Tuple[int, int]:
    """Flip thresholds ``(t1, t2)`` of the two randomized responses on ``m`` symbols."""
    t1 = rr_threshold(eps_inf, m, "eps_inf (the epsilon of the permanent response)")
    # The second stage flips to a uniform other symbol; at t2 = (m-1)/m 2^64 the report is
    # uniform (eps 0), at 0 it is the first stage (eps_inf).
    high = (m - 1) * _TWO64 // m

    def spent(t2: int) -> float:
        return rr_epsilon_exact(*two_stage_rr(t1, t2, m))
    return t1, solve_threshold(spent, eps_1, 0, high)


def _rr_composite(t1: int, t2: int, m: int) -> Tuple[float, float]:
    big_p, big_q = two_stage_rr(t1, t2, m)
    return float(big_p), float(big_q)


@dataclasses.dataclass(frozen=True)
class LGRRParams(Budgets, _base.Params):
    """L-GRR: memoized k-ary randomized response on ``[0, d)`` at ``eps_inf``, then a fresh
    one such that a report spends ``eps_1`` (module docstring).

    Attributes:
        eps_inf: budget of the permanent response (unboundedly many reports of one value).
        eps_1: budget of one report, ``<= eps_inf``.
        d: dictionary size, ``2 <= d <= 2^40``.
    """

    protocol: ClassVar[str] = "l-grr"
    eps_inf: float
    eps_1: float
    d: int

    def __post_init__(self) -> None:
        self.check_budgets()
        object.__setattr__(self, "d", check_int("d", self.d, 2, 2**40))
        _ = self.thresholds

    @property
    def thresholds(self) -> Tuple[int, int]:
        """Flip thresholds of the permanent and the instantaneous response."""
        return _rr_stages(self.eps_inf, self.eps_1, self.d)

    @property
    def keep_probability(self) -> float:
        """``P``: probability that a report is the user's value."""
        return _rr_composite(*self.thresholds, self.d)[0]

    @property
    def other_probability(self) -> float:
        """``Q``: probability that a report is one given other value."""
        return _rr_composite(*self.thresholds, self.d)[1]

    @property
    def effective_eps_1(self) -> float:
        return rr_epsilon_exact(*two_stage_rr(*self.thresholds, self.d))

    @property
    def effective_eps_inf(self) -> float:
        return rr_effective_epsilon(self.thresholds[0], self.d)

    def variance(self, n: int, f: Any) -> Any:
        """``Var(fhat) = [f P (1 - P) + (1 - f) Q (1 - Q)]/(n (P - Q)^2)`` (GRR at ``eps_1``)."""
        big_p, big_q = _rr_composite(*self.thresholds, self.d)
        return _unary.unary_variance(big_p, big_q, n, f)


@dataclasses.dataclass(eq=False)
class LGRRReports(_grr.GRRReports):
    """A batch of L-GRR reports: ``y`` in ``[0, d)``."""

    protocol: ClassVar[str] = "l-grr"


class LGRRClient(MemoClient):
    """L-GRR client: ``perturb(values, secrets=None)`` reports, ``permanent(values,
    secrets=None)`` the memoized responses (see :class:`ldpfast.protocols._memo.MemoClient`)."""

    def _draw(self, values: Any, secrets: Any, instantaneous: bool) -> LGRRReports:
        p = self.params
        x = check_values(values, p.d)
        t1, t2 = p.thresholds
        y = _core.memo_grr(self._keys.key(), self._secrets(secrets, x.size), x, p.d, t1, instantaneous, t2,
                           self.threads)
        return LGRRReports(y=y)

    def perturb(self, values: Any, secrets: Any = None) -> LGRRReports:
        """One report per value (integers in ``[0, d)``); ``secrets``: one per value."""
        return self._draw(values, secrets, True)

    def permanent(self, values: Any, secrets: Any = None) -> LGRRReports:
        """The permanent responses of the values (never sent)."""
        return self._draw(values, secrets, False)


class LGRRServer(MemoServer, _grr.GRRServer):
    """L-GRR aggregator: the histogram of reported symbols; ``fhat = (C/n - Q)/(P - Q)``."""

    protocol: ClassVar[str] = "l-grr"
    params_type: ClassVar[type] = LGRRParams
    reports_type: ClassVar[type] = LGRRReports
    params: LGRRParams

    def estimate(self, candidates: Any = None, counts: bool = False, *, clip: bool = False) -> np.ndarray:
        """``fhat(v) = (C(v)/n - Q)/(P - Q)`` for the candidates (default: all of ``[0, d)``);
        ``counts=True`` gives ``n fhat``; ``clip`` clips the fractions to ``[0, 1]``."""
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        histogram = self._counts if candidates is None else self._counts[
            check_values(candidates, self.params.d, "candidates", "values in")]
        big_p, big_q = _rr_composite(*self.params.thresholds, self.params.d)
        est = (np.asarray(histogram, dtype=np.float64) / n - big_q) / (big_p - big_q)
        if clip:
            est = np.clip(est, 0.0, 1.0)
        return est * n if counts else est


# -- L-OLH ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class LOLHParams(Budgets, _base.Params):
    """L-OLH: a per-user hash into ``[g]`` drawn once from the user's secret, memoized k-ary
    randomized response of the hashed value at ``eps_inf``, then a fresh one so that a
    report spends ``eps_1``.

    Attributes:
        eps_inf, eps_1: the two budgets (``eps_1 <= eps_inf``).
        d: domain size, ``2 <= d <= PRIME - 1`` (the server's OCMS field holds ``d + 1`` elements).
        g: hash range; default ``round(e^eps_1) + 1`` (the composition is GRR_g at ``eps_1``).
    """

    protocol: ClassVar[str] = "l-olh"
    eps_inf: float
    eps_1: float
    d: int
    g: Optional[int] = None

    def __post_init__(self) -> None:
        self.check_budgets()
        object.__setattr__(self, "d", check_int("d", self.d, 2, PRIME - 1))
        g = default_g(self.eps_1, rule="g = round(e^eps_1) + 1") if self.g is None else self.g
        object.__setattr__(self, "g", check_int("g", g, 2, 2**62))
        _ = self.thresholds
        # the reports are kept by OLH's server, an OCMS one at eps_1 over g symbols: its range
        rr_threshold(self.eps_1, g, "eps_1 (OLH's report server: randomized response over g symbols)")

    @property
    def thresholds(self) -> Tuple[int, int]:
        """Flip thresholds of the permanent and the instantaneous response (on ``g`` symbols)."""
        return _rr_stages(self.eps_inf, self.eps_1, int(self.g or 2))

    @property
    def effective_eps_1(self) -> float:
        return rr_epsilon_exact(*two_stage_rr(*self.thresholds, int(self.g or 2)))

    @property
    def effective_eps_inf(self) -> float:
        return rr_effective_epsilon(self.thresholds[0], int(self.g or 2))


@dataclasses.dataclass(eq=False)
class LOLHReports(_olh.OLHReports):
    """L-OLH reports: the reported hash ``z < g`` and the user's hash ``(a0, a1)``."""

    protocol: ClassVar[str] = "l-olh"


class LOLHClient(MemoClient):
    """L-OLH client (see :class:`ldpfast.protocols._memo.MemoClient` for ``secrets``)."""

    def _draw(self, values: Any, secrets: Any, instantaneous: bool) -> LOLHReports:
        p = self.params
        g = int(p.g or 2)
        x = as_values(values, p.d)
        keys = self._secrets(secrets, x.size)
        hashes = _core.memo_draws(keys, _HASH_PURPOSE, PRIME, 2, self.threads)
        a0, a1 = np.ascontiguousarray(hashes[:, 0]), np.ascontiguousarray(hashes[:, 1])
        hashed = _core.ocms_hash(_core.Field.prime(PRIME), a0, a1, x, g, self.threads)
        t1, t2 = p.thresholds
        z = _core.memo_grr(self._keys.key(), keys, hashed, g, t1, instantaneous, t2, self.threads)
        return LOLHReports(z=z, a0=a0, a1=a1)

    def perturb(self, values: Any, secrets: Any = None) -> LOLHReports:
        """One report ``(z, a0, a1)`` per value in ``[0, d)``; ``secrets``: one per value."""
        return self._draw(values, secrets, True)

    def permanent(self, values: Any, secrets: Any = None) -> LOLHReports:
        """The permanent responses (with the users' hashes; never sent)."""
        return self._draw(values, secrets, False)


class LOLHServer(MemoServer, _olh.OLHServer):
    """L-OLH aggregator: keeps the reports (each user has its own hash), as OLH's server,
    and debiases with the composite randomized response."""

    protocol = "l-olh"
    params_type = LOLHParams
    reports_type = LOLHReports
    params: LOLHParams

    def __init__(self, params: LOLHParams, threads: int = 0):
        super().__init__(params, threads)  # type: ignore[arg-type]

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (default: all
        of ``[0, d)``)."""
        if self.n == 0:
            raise ReportError("no reports have been aggregated yet")
        p = self.params
        xs = None if candidates is None else as_values(candidates, p.d, "candidates")
        est = debias_matches(self._reports.match_counts(xs), self.n, p.effective_eps_1, int(p.g or 2))
        return np.asarray(est * self.n if counts else est)


# -- registration ----------------------------------------------------------------------------------
def _lolh_variance(server: Any, candidates: Any) -> Tuple[Any, str]:
    p, n = server.params, server.n
    return ((lambda f: _ocms_variance(p.effective_eps_1, p.g, n, f)),
            f"{PLUG_IN} (theory.ocms_variance with m = g at the composite eps_1: OLH)")


def _lgrr_channel(server: Any, candidates: Any) -> Any:
    """GRR's channel with the composite ``P``, ``Q`` of the two responses (one report per
    user is GRR at ``eps_1``; the histogram is sufficient: full likelihood)."""
    from ...estimation import symbol_channel

    p = server.params
    counts = server._counts
    if candidates is not None:
        counts = counts[check_values(candidates, p.d, "candidates", "values in", distinct=True)]
    return symbol_channel(counts, server.n, p.keep_probability, p.other_probability, p.d)


def _lolh_channel(server: Any, candidates: Any, likelihood: str = "composite") -> Any:
    """OLH's hash-match channel at the composite ``eps_1`` (one report is GRR on ``g``
    symbols of the user's hashed value)."""
    p = server.params
    g = int(p.g or 2)
    return match_channel(server._reports, candidates, p.effective_eps_1, g, float(g), likelihood)


def _grr_plan(params: Any) -> Any:
    from ...audit import Plan

    return Plan(value_inputs(0, 1), lambda r: (r.y == 0, r.y == 1), ("y = x0", "y = x1"))


_base.register_protocol(_base.Protocol(
    "l-grr", LGRRParams, LGRRReports, LGRRServer, LGRRClient,
    example=lambda: (LGRRParams(eps_inf=3.0, eps_1=1.0, d=64), zipf_values(64)),
    extremes=edges(eps_inf=(MIN_EPSILON, MAX_EPSILON), eps_1=(MIN_EPSILON, MAX_EPSILON), d=(2, 2**20)),
    wire_fields=lambda p: [WireField("y", bits_for(p.d))], variance=own_variance, channel=_lgrr_channel,
    simulations=simulations("l-grr", "L-GRR", "protocols.repeated.longitudinal",
                            lambda eps, data, gen: LGRRParams(2 * eps, eps, data.d),
                             lambda params, data, f: params.variance(data.n, f),
                             "longitudinal GRR: memoized GRR at 2 eps, then GRR so a report spends eps"),
    audit=audit_hooks(lambda e, **kw: LGRRParams(**{"eps_inf": 2 * e, "eps_1": e, "d": 4, **kw}), _grr_plan),
    rounds=LGRRParams))

_base.register_protocol(_base.Protocol(
    "l-olh", LOLHParams, LOLHReports, LOLHServer, LOLHClient,
    example=lambda: (LOLHParams(eps_inf=3.0, eps_1=1.0, d=300), zipf_values(300, n=1500)),
    extremes=edges(eps_inf=(MIN_EPSILON, MAX_EPSILON), eps_1=(MIN_EPSILON, MAX_EPSILON), d=(2, 2**64),
                   g=(2, 2**62)),
    wire_fields=lambda p: [WireField("z", bits_for(p.g)), WireField("a0", 64), WireField("a1", 64)],
    variance=_lolh_variance, channel=_lolh_channel,
    simulations=simulations("l-olh", "L-OLH", "protocols.repeated.longitudinal",
                            lambda eps, data, gen: LOLHParams(2 * eps, eps, data.d),
                             lambda params, data, f: _ocms_variance(params.effective_eps_1, params.g,
                                                                                data.n, f),
                             "longitudinal OLH: per-user hash, memoized GRR_g at 2 eps, then GRR_g to eps"),
    audit=audit_hooks(lambda e, **kw: LOLHParams(**{"eps_inf": 2 * e, "eps_1": e, "d": 16, **kw}),
                 lambda p: olh_plan(_core.Field.prime(PRIME), p.g, [0], [1], value_inputs(0, 1),
                                    ("H(x0) = z != H(x1)", "H(x1) = z != H(x0)"))),
    rounds=lambda eps_inf, eps_1, d: LOLHParams(eps_inf, eps_1, d)))
