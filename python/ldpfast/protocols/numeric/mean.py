"""The mean of one bounded number per user, four mechanisms on a declared output grid.

* ``duchi``: Duchi, Jordan, Wainwright, "Minimax optimal procedures for locally private
  estimation" (JASA 2018): ``+-B``, ``B = (e^eps + 1)/(e^eps - 1)``,
  ``P(+B) = 1/2 + t/(2B)``; ``Var = B^2 - t^2``. Stochastic rounding of ``t`` to one bit
  followed by binary randomized response has exactly this output distribution, so it is
  this protocol (``ldpfast simulate --protocol sr`` names it).
* ``pm``: Wang et al.'s Piecewise Mechanism (ICDE 2019), ``Var = t^2/(e^(eps/2) - 1) +
  (e^(eps/2) + 3)/(3 (e^(eps/2) - 1)^2)``.
* ``hm``: their Hybrid Mechanism: PM with probability ``1 - e^(-eps/2)``, else Duchi
  (Duchi alone for eps <= 0.61); for eps > 0.61 its variance does not depend on ``t``.
* ``laplace``: the baseline, a discrete Laplace (two-sided geometric) on a grid of step
  ``1/K``, ``Var = 8/eps^2`` within 0.1%.

At eps = 1 the worst cases over ``t in [-1, 1]`` of ``n Var`` are 4.683 (Duchi), 5.224 (PM)
and 4.289 (HM). The client clips into ``bounds`` (:mod:`._moments`), sends one grid index
(:mod:`._grid`: ``grid`` steps, default the coarsest that moves the variance by < 0.1%).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Dict, Optional, Tuple

import numpy as np

from ... import _base
from ..._base import AuditHooks, WireField, bits_for
from ..._validate import check_array, check_epsilon
from ...audit import Plan
from .._registration import edges
from . import _grid
from ._moments import MeanServer, NumericClient, check_bounds, mean_variance, unit_inputs

__all__ = ["MeanParams", "MeanReports", "MeanClient", "DuchiParams", "PiecewiseParams", "HybridParams",
           "LaplaceParams", "DuchiReports", "PiecewiseReports", "HybridReports", "LaplaceReports", "DuchiClient",
           "PiecewiseClient", "HybridClient", "LaplaceClient", "DuchiServer", "PiecewiseServer", "HybridServer",
           "LaplaceServer", "params_for"]


@dataclasses.dataclass(frozen=True)
class MeanParams(_base.Params):
    """The mean of one number in ``bounds`` per user.

    Attributes:
        epsilon: the budget of one report.
        bounds: ``(lo, hi)``, ``lo < hi``: inputs are clipped into it on the client.
        grid: steps of the output grid (0: the coarsest whose rounding moves the variance by
            less than 0.1%; :func:`ldpfast.protocols.numeric._grid.min_steps`); the report is
            a uint32 index, so at most ``2^32 - 1`` grid points.
    """

    mechanism_name: ClassVar[str] = ""
    epsilon: float
    bounds: Tuple[float, float] = (0.0, 1.0)
    grid: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "bounds", check_bounds(self.bounds))
        _grid.check_steps(self.mechanism, self.grid)

    attributes: ClassVar[int] = 1
    k: ClassVar[int] = 1

    @property
    def mechanism(self) -> _grid.Mechanism:
        return _grid.Mechanism(self.mechanism_name, self.epsilon)

    @property
    def steps(self) -> int:
        """The grid's steps (``grid``, or the automatic choice)."""
        return self.grid or self.mechanism.min_steps()

    @property
    def largest_index(self) -> int:
        return _grid.grid_size(self.mechanism, self.steps)

    @property
    def second_moment(self) -> Tuple[float, float]:
        """``(a, b)``: ``E[y^2 | t] = a + b t^2``."""
        return self.mechanism.moments(self.steps)

    def value_sums(self, count: int, total: int, squares: int) -> Tuple[float, float]:
        return _grid.value_sums(self.mechanism, self.steps, count, total, squares)

    def variance(self, n: int, t: Any) -> Any:
        """``Var`` of the mean of ``t`` when every user's value maps to ``t``: ``Var(y|t)/n``."""
        return self.mechanism.variance(t, self.steps) / n


@dataclasses.dataclass(frozen=True)
class DuchiParams(MeanParams):
    protocol: ClassVar[str] = "duchi"
    mechanism_name: ClassVar[str] = "duchi"


@dataclasses.dataclass(frozen=True)
class PiecewiseParams(MeanParams):
    protocol: ClassVar[str] = "pm"
    mechanism_name: ClassVar[str] = "pm"


@dataclasses.dataclass(frozen=True)
class HybridParams(MeanParams):
    protocol: ClassVar[str] = "hm"
    mechanism_name: ClassVar[str] = "hm"


@dataclasses.dataclass(frozen=True)
class LaplaceParams(MeanParams):
    protocol: ClassVar[str] = "laplace"
    mechanism_name: ClassVar[str] = "laplace"


_PARAMS: Dict[str, type] = {"duchi": DuchiParams, "pm": PiecewiseParams, "hm": HybridParams,
                            "laplace": LaplaceParams}


def params_for(mechanism: str, epsilon: float, **fields: Any) -> MeanParams:
    """The Params of a one-dimensional mechanism by name (``duchi``, ``pm``, ``hm``, ``laplace``)."""
    return _PARAMS[mechanism](epsilon=epsilon, **fields)  # type: ignore[no-any-return]


@dataclasses.dataclass(eq=False)
class MeanReports(_base.Reports):
    """One grid index per user (``uint32``)."""

    column_types: ClassVar = {"index": ("uint32", 1)}
    index: np.ndarray

    def __post_init__(self) -> None:
        self.index = check_array("index", self.index, np.uint32, 1, cast=True)


class MeanClient(NumericClient):
    """``perturb(values)``: one report per real number (float64[n]); see :mod:`._moments`
    for clipping and refused inputs."""

    reports_type: ClassVar[type] = MeanReports

    def perturb(self, values: Any) -> MeanReports:
        p = self.params
        t = self._unit(values)
        reports: MeanReports = self.reports_type(index=_grid.perturb(p.mechanism, p.steps, t, self._keys))
        return reports


class _MeanServerBase(MeanServer):
    """The mean aggregator of one number per user (see :mod:`._moments`)."""

    def _columns(self, reports: Any) -> Tuple[Optional[np.ndarray], np.ndarray]:
        return None, reports.index


class DuchiReports(MeanReports):
    protocol: ClassVar[str] = "duchi"


class PiecewiseReports(MeanReports):
    protocol: ClassVar[str] = "pm"


class HybridReports(MeanReports):
    protocol: ClassVar[str] = "hm"


class LaplaceReports(MeanReports):
    protocol: ClassVar[str] = "laplace"


class DuchiClient(MeanClient):
    reports_type: ClassVar[type] = DuchiReports


class PiecewiseClient(MeanClient):
    reports_type: ClassVar[type] = PiecewiseReports


class HybridClient(MeanClient):
    reports_type: ClassVar[type] = HybridReports


class LaplaceClient(MeanClient):
    reports_type: ClassVar[type] = LaplaceReports


class DuchiServer(_MeanServerBase):
    protocol: ClassVar[str] = "duchi"
    params_type: ClassVar[type] = DuchiParams
    reports_type: ClassVar[Optional[type]] = DuchiReports


class PiecewiseServer(_MeanServerBase):
    protocol: ClassVar[str] = "pm"
    params_type: ClassVar[type] = PiecewiseParams
    reports_type: ClassVar[Optional[type]] = PiecewiseReports


class HybridServer(_MeanServerBase):
    protocol: ClassVar[str] = "hm"
    params_type: ClassVar[type] = HybridParams
    reports_type: ClassVar[Optional[type]] = HybridReports


class LaplaceServer(_MeanServerBase):
    protocol: ClassVar[str] = "laplace"
    params_type: ClassVar[type] = LaplaceParams
    reports_type: ClassVar[Optional[type]] = LaplaceReports


# -- registration ------------------------------------------------------------------------------
def _plan(params: MeanParams) -> Plan:
    """Inputs ``hi`` and ``lo``; events: the reported value above 1 (below -1), which PM puts
    in its high-probability piece for ``t = 1``, Duchi at ``+B`` and Laplace above ``t``."""
    mechanism, steps = params.mechanism, params.steps

    def events(reports: Any) -> Tuple[np.ndarray, np.ndarray]:
        y = _grid.values_of(mechanism, steps, reports.index)
        return y > 1.0, y < -1.0
    return Plan(unit_inputs(*params.bounds), events, ("value > 1", "value < -1"))


def effective_epsilon(params: Any) -> float:
    """See :func:`ldpfast.protocols.numeric._grid.effective_epsilon`."""
    return _grid.effective_epsilon(params.mechanism)


def _example(pid: str) -> Any:
    def make() -> Tuple[MeanParams, np.ndarray]:
        values = np.random.default_rng(5).beta(5.0, 2.0, size=3000) * 80.0 + 10.0
        return _PARAMS[pid](epsilon=1.0, bounds=(10.0, 90.0)), values
    return make


def _maker(pid: str) -> Callable[[float, Tuple[float, float]], MeanParams]:
    return lambda epsilon, bounds: params_for(pid, epsilon, bounds=bounds)


def _simulations(pid: str) -> Callable[[], Tuple[Any, ...]]:
    def entries() -> Tuple[Any, ...]:
        from ...experiments.numeric import MeanAlgorithm
        label = {"duchi": "Duchi", "pm": "PM", "hm": "HM", "laplace": "Laplace"}[pid]
        found = [MeanAlgorithm(pid, label, _maker(pid), summary=f"{label}: the mean of one bounded number")]
        if pid == "duchi":
            found.append(MeanAlgorithm("sr", "SR", _maker("duchi"),
                                       summary="stochastic rounding to one bit + RR (the same output law as Duchi)"))
        return tuple(found)
    return entries


def _audit_params(pid: str) -> Callable[..., MeanParams]:
    return lambda epsilon, **changes: _PARAMS[pid](**{"epsilon": epsilon, "bounds": (0.0, 1.0), **changes})


_CLASSES = {"duchi": (DuchiReports, DuchiServer, DuchiClient),
            "pm": (PiecewiseReports, PiecewiseServer, PiecewiseClient),
            "hm": (HybridReports, HybridServer, HybridClient),
            "laplace": (LaplaceReports, LaplaceServer, LaplaceClient)}

for _pid, (_reports, _server, _client) in _CLASSES.items():
    _base.register_protocol(_base.Protocol(
        _pid, _PARAMS[_pid], _reports, _server, _client, example=_example(_pid), inputs="numbers",
        wire_fields=lambda p: [WireField("index", bits_for(p.largest_index + 1), None, "uint32")],
        variance=mean_variance, default_candidates=lambda server: np.arange(1), simulations=_simulations(_pid),
        extremes=edges(grid=(0, 2**32 - 1)), audit=AuditHooks(_audit_params(_pid), _plan, effective_epsilon)))
