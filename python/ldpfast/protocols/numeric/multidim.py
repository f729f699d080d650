"""Means of several bounded numbers per user, and the variance of one.

* ``sampled-mean``: Wang et al. (ICDE 2019, Algorithm 4): each user reports ``k`` of its
  ``d`` attributes, drawn uniformly without replacement, each with a one-dimensional
  mechanism (``hm`` by default, or ``pm``, ``duchi``, ``laplace``) at ``eps/k``; the server
  scales by ``d/k``: ``Var_j = ((d/k) E[y^2] - t_j^2)/n``, worst case over ``t``
  ``(d/k)(a + b) - 1`` (:mod:`._grid`'s ``a``, ``b``; HM at eps = 1, d = 10, k = 1: 51.9).
  ``sampled=0`` takes the ``k`` of the smallest worst case (Wang et al.'s
  ``max(1, min(d, floor(eps/2.5)))`` is that rule's approximation).
* ``duchi-md``: Duchi et al.'s multidimensional mechanism (JASA 2018): ``v_j = +-1`` with
  ``P(+1) = (1 + t_j)/2``; with probability ``e^eps/(e^eps + 1)`` the output is uniform on
  ``T+ = {z in {-B, B}^d : <z, v> > 0}``, else on ``T-`` (``< 0``); for even ``d`` the
  outputs with ``<z, v> = 0`` count half in each, so both sets weigh ``2^(d-1)`` and every
  output's probability ratio is at most ``e^eps``. Unbiasedness fixes
  ``B = (e^eps + 1)/(e^eps - 1) * 2^(d-1) / C(d-1, floor(d/2))``; ``Var_j = (B^2 - t_j^2)/n``.
* ``moments``: the mean and the variance of one number: ``u = (x - lo)/(hi - lo)`` and
  ``u^2`` as the two attributes of ``sampled-mean``. Splitting the users (``k = 1``: each
  reports one of them at ``eps``) costs ``2 (V(eps) + 1) - 1`` per attribute in the worst
  case, splitting the budget (``k = 2``: both at ``eps/2``) ``V(eps/2)``; ``V`` grows like
  ``1/eps^2`` for small eps, so the user split wins there (HM at eps = 1: 9.6 against 16.7)
  and the budget split at large eps, where ``V`` falls towards 0. ``sampled=0`` picks the
  smaller worst case. :meth:`MomentsServer.variance` is ``(hi - lo)^2 (m2 - m1^2 + Var m1)``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, ClassVar, Optional, Tuple

import numpy as np

from ... import _base
from ..._base import AuditHooks, WireField, bits_for
from ..._validate import check_array, check_choice, check_epsilon, check_int
from ...audit import Plan
from ...errors import ParameterError, ReportError
from .._registration import edges
from . import _grid
from ._moments import MeanServer, NumericClient, check_bounds, mean_variance, unit_inputs

__all__ = ["SampledMeanParams", "SampledMeanReports", "SampledMeanClient", "SampledMeanServer", "DuchiMdParams",
           "DuchiMdReports", "DuchiMdClient", "DuchiMdServer", "MomentsParams", "MomentsClient", "MomentsServer",
           "duchi_md_bound", "best_sampled"]

MAX_ATTRIBUTES = 1024
MAX_DUCHI_ATTRIBUTES = 64


def worst_case(mechanism: str, epsilon: float, d: int, k: int) -> float:
    """``max_t n Var_j`` of ``sampled-mean`` with ``k`` of ``d`` attributes at ``epsilon``."""
    a, b = _grid.Mechanism(mechanism, epsilon / k).moments(_grid.Mechanism(mechanism, epsilon / k).min_steps())
    share = d / k
    return share * a + max(share * b - 1.0, 0.0)


@functools.lru_cache(maxsize=256)
def best_sampled(mechanism: str, epsilon: float, d: int) -> int:
    """The ``k`` of the smallest :func:`worst_case` (the first of equals)."""
    return min(range(1, d + 1), key=lambda k: (worst_case(mechanism, epsilon, d, k), k))


@dataclasses.dataclass(frozen=True)
class SampledMeanParams(_base.Params):
    """Means of ``attributes`` numbers per user, ``sampled`` of them reported.

    Attributes:
        epsilon: the budget of one report (``epsilon/k`` per reported attribute).
        attributes: ``d``, ``1 <= d <= 1024``.
        mechanism_name: the one-dimensional mechanism: ``hm``, ``pm``, ``duchi`` or ``laplace``.
        sampled: ``k`` attributes per report, ``1 <= k <= d`` (0: the smallest worst case).
        bounds: ``(lo, hi)`` of every attribute; inputs are clipped into it.
        grid: the per-attribute grid's steps (0: automatic, see :mod:`._grid`).
    """

    protocol: ClassVar[str] = "sampled-mean"
    epsilon: float
    attributes: int
    mechanism_name: str = "hm"
    sampled: int = 0
    bounds: Tuple[float, float] = (0.0, 1.0)
    grid: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "attributes", check_int("attributes", self.attributes, 1, self._most()))
        object.__setattr__(self, "mechanism_name", check_choice("mechanism_name", self.mechanism_name,
                                                                _grid.MECHANISMS))
        object.__setattr__(self, "sampled", check_int("sampled", self.sampled, 0, self.attributes))
        object.__setattr__(self, "bounds", check_bounds(self.bounds))
        _grid.check_steps(self.mechanism, self.grid)

    @classmethod
    def _most(cls) -> int:
        return MAX_ATTRIBUTES

    @property
    def k(self) -> int:
        """The attributes each user reports."""
        return self.sampled or best_sampled(self.mechanism_name, self.epsilon, self.attributes)

    @property
    def mechanism(self) -> _grid.Mechanism:
        """The one-dimensional mechanism of one reported attribute, at ``epsilon/k``."""
        return _grid.Mechanism(self.mechanism_name, self.epsilon / self.k)

    @property
    def steps(self) -> int:
        return self.grid or self.mechanism.min_steps()

    @property
    def largest_index(self) -> int:
        return _grid.grid_size(self.mechanism, self.steps)

    @property
    def second_moment(self) -> Tuple[float, float]:
        return self.mechanism.moments(self.steps)

    def value_sums(self, count: int, total: int, squares: int) -> Tuple[float, float]:
        return _grid.value_sums(self.mechanism, self.steps, count, total, squares)

    def worst_variance(self) -> float:
        """``max_t n Var`` of one attribute's mean of ``t``."""
        return worst_case(self.mechanism_name, self.epsilon, self.attributes, self.k)


@dataclasses.dataclass(eq=False)
class SampledMeanReports(_base.Reports):
    """``k`` attribute numbers (ascending) and their grid indices per user (``uint32[n, k]``)."""

    protocol: ClassVar[str] = "sampled-mean"
    column_types: ClassVar = {"attributes": ("uint32", 2), "index": ("uint32", 2)}
    attributes: np.ndarray
    index: np.ndarray

    def __post_init__(self) -> None:
        self.attributes = check_array("attributes", self.attributes, np.uint32, 2, cast=True)
        self.index = check_array("index", self.index, np.uint32, 2, cast=True)
        self._check_lengths()


def _sample_attributes(keys: Any, n: int, d: int, k: int) -> np.ndarray:
    """``k`` distinct attributes of ``d`` per user, uniformly, ascending (``int64[n, k]``)."""
    if k == d:
        return np.tile(np.arange(d), (n, 1))
    if k == 1:
        return np.asarray(np.minimum(np.floor(_grid.uniforms(keys, (n, 1)) * d), d - 1), dtype=np.int64)
    ranks = np.argsort(_grid.uniforms(keys, (n, d)), axis=1)[:, :k]
    return np.sort(ranks, axis=1)


class SampledMeanClient(NumericClient):
    """``perturb(values)``: ``float64[n, d]``, one row per user."""

    def _rows(self, t: np.ndarray) -> SampledMeanReports:
        p = self.params
        chosen = _sample_attributes(self._keys, t.shape[0], p.attributes, p.k)
        picked = np.take_along_axis(t, chosen, axis=1)
        index = _grid.perturb(p.mechanism, p.steps, picked, self._keys)
        return SampledMeanReports(attributes=chosen.astype(np.uint32), index=index)

    def perturb(self, values: Any) -> SampledMeanReports:
        return self._rows(self._unit(values, self.params.attributes))


class SampledMeanServer(MeanServer):
    """The ``sampled-mean`` aggregator (see :mod:`._moments`)."""

    protocol: ClassVar[str] = "sampled-mean"
    params_type: ClassVar[type] = SampledMeanParams
    reports_type: ClassVar[Optional[type]] = SampledMeanReports

    def _validate(self, reports: Any) -> None:
        if reports.index.shape[1:] != (self.params.k,):
            raise ReportError(f"attributes and index must have k={self.params.k} columns, got "
                                 f"{reports.index.shape}")
        super()._validate(reports)

    def _columns(self, reports: Any) -> Tuple[Optional[np.ndarray], np.ndarray]:
        return reports.attributes, reports.index


# -- Duchi et al.'s multidimensional mechanism ----------------------------------------------------
def duchi_md_bound(epsilon: float, d: int) -> float:
    """``B = (e^eps + 1)/(e^eps - 1) * 2^(d-1) / C(d-1, floor(d/2))``."""
    return _grid.duchi_bound(epsilon) * 2.0 ** (d - 1) / math.comb(d - 1, d // 2)


def _agreement_weights(d: int) -> np.ndarray:
    """``P(s)`` of the number ``s`` of output signs that agree with ``v``, given ``T+``:
    ``C(d, s)/2^(d-1)`` for ``s > d/2`` and half of ``C(d, d/2)`` at the tie."""
    weights = np.array([math.comb(d, s) if 2 * s > d else (math.comb(d, s) / 2 if 2 * s == d else 0)
                        for s in range(d + 1)], dtype=np.float64)
    return weights / 2.0 ** (d - 1)


@dataclasses.dataclass(frozen=True)
class DuchiMdParams(_base.Params):
    """Duchi et al.'s mechanism on ``[-1, 1]^d`` (the bounds mapped to it).

    Attributes:
        epsilon: the budget of one report.
        attributes: ``d``, ``1 <= d <= 64``.
        bounds: ``(lo, hi)`` of every attribute; inputs are clipped into it.
    """

    protocol: ClassVar[str] = "duchi-md"
    epsilon: float
    attributes: int
    bounds: Tuple[float, float] = (0.0, 1.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "attributes", check_int("attributes", self.attributes, 1, MAX_DUCHI_ATTRIBUTES))
        object.__setattr__(self, "bounds", check_bounds(self.bounds))

    largest_index: ClassVar[int] = 1

    @property
    def k(self) -> int:
        """Every attribute is reported."""
        return self.attributes

    @property
    def bound(self) -> float:
        return duchi_md_bound(self.epsilon, self.attributes)

    @property
    def second_moment(self) -> Tuple[float, float]:
        return self.bound**2, 0.0

    def value_sums(self, count: int, total: int, squares: int) -> Tuple[float, float]:
        # y = B (2 i - 1) for the sign bit i
        return self.bound * float(2 * total - count), self.bound**2 * float(count)


@dataclasses.dataclass(eq=False)
class DuchiMdReports(_base.Reports):
    """One sign bit per attribute and user (``uint8[n, d]``: 1 is ``+B``, 0 is ``-B``)."""

    protocol: ClassVar[str] = "duchi-md"
    column_types: ClassVar = {"signs": ("uint8", 2)}
    signs: np.ndarray

    def __post_init__(self) -> None:
        self.signs = check_array("signs", self.signs, np.uint8, 2, cast=True)


class DuchiMdClient(NumericClient):
    """``perturb(values)``: ``float64[n, d]``, one row per user."""

    def perturb(self, values: Any) -> DuchiMdReports:
        p = self.params
        d = p.attributes
        t = self._unit(values, d)
        n = t.shape[0]
        u = _grid.uniforms(self._keys, (n, d + 2))
        v = np.where(u[:, :d] < (1.0 + t) / 2.0, 1, -1)
        weights = _agreement_weights(d)
        agree = np.searchsorted(np.cumsum(weights)[:-1], u[:, d], side="right")   # s given T+
        plus = np.floor(u[:, d + 1] * 2.0**53) < _grid.duchi_threshold(p.epsilon)
        agree = np.where(plus, agree, d - agree)                                     # T-: mirror s
        order = np.argsort(_grid.uniforms(self._keys, (n, d)), axis=1)      # a random permutation per user
        ranks = np.empty_like(order)
        np.put_along_axis(ranks, order, np.broadcast_to(np.arange(d), (n, d)), axis=1)
        signs = np.where(ranks < agree[:, None], v, -v)
        return DuchiMdReports(signs=(signs > 0).astype(np.uint8))


class DuchiMdServer(MeanServer):
    """The ``duchi-md`` aggregator (see :mod:`._moments`)."""

    protocol: ClassVar[str] = "duchi-md"
    params_type: ClassVar[type] = DuchiMdParams
    reports_type: ClassVar[Optional[type]] = DuchiMdReports

    def _validate(self, reports: Any) -> None:
        if reports.signs.shape[1:] != (self.params.attributes,):
            raise ReportError(f"signs must have {self.params.attributes} columns, got {reports.signs.shape}")
        super()._validate(reports)

    def _columns(self, reports: Any) -> Tuple[Optional[np.ndarray], np.ndarray]:
        return None, reports.signs


# -- mean and variance of one number --------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MomentsParams(SampledMeanParams):
    """The mean and variance of one number in ``bounds`` per user: ``sampled-mean`` of
    ``(u, u^2)``, ``u = (x - lo)/(hi - lo)`` (``attributes`` is always 2)."""

    protocol: ClassVar[str] = "moments"
    attributes: int = 2

    def __post_init__(self) -> None:
        if self.attributes != 2:
            raise ParameterError(f"attributes must be 2 for moments (x and x^2), got {self.attributes!r}")
        super().__post_init__()

    @classmethod
    def _most(cls) -> int:
        return 2


@dataclasses.dataclass(eq=False)
class MomentsReports(SampledMeanReports):
    protocol: ClassVar[str] = "moments"


class MomentsClient(SampledMeanClient):
    """``perturb(values)``: ``float64[n]``, one number per user."""

    def perturb(self, values: Any) -> MomentsReports:
        t = self._unit(values)
        u = (t + 1.0) / 2.0
        rows = self._rows(np.column_stack([t, 2.0 * u * u - 1.0]))
        return MomentsReports(attributes=rows.attributes, index=rows.index)


class MomentsServer(SampledMeanServer):
    """``estimate()``: ``[E u, E u^2]``; :meth:`mean` and :meth:`variance` in the user's units."""

    protocol: ClassVar[str] = "moments"
    params_type: ClassVar[type] = MomentsParams
    reports_type: ClassVar[Optional[type]] = MomentsReports

    def mean(self) -> Any:
        lo, hi = self.params.bounds
        return float(lo + (hi - lo) * self.estimate([0])[0])

    def variance(self) -> float:
        """``(hi - lo)^2 (E u^2 - (E u)^2 + Var(E u))``: unbiased up to the standard error's estimate."""
        lo, hi = self.params.bounds
        first, second = self.estimate()
        spread = self.t_variances([0])[0][0] / 4.0
        return float((hi - lo) ** 2 * (second - first * first + spread))


# -- registration ------------------------------------------------------------------------------
def _rows_plan(params: Any) -> Plan:
    """Every attribute at ``hi`` against every one at ``lo``; events: every reported value
    above 1 (below -1), a ratio ``e^(eps/k)`` per reported attribute, ``e^eps`` in all; for
    ``duchi-md`` (odd ``d``) most signs ``+`` (``-``): ``T+`` of the one input, ``T-`` of the other."""
    d = params.attributes

    def make(i: int, n: int) -> np.ndarray:
        row = unit_inputs(*params.bounds)(i, n)
        return row if params.protocol == "moments" else np.repeat(row[:, None], d, axis=1)

    def events(reports: Any) -> Tuple[np.ndarray, np.ndarray]:
        if params.protocol == "duchi-md":
            total = reports.signs.astype(np.int64).sum(axis=1) * 2 - d
            return total > 0, total < 0
        y = _grid.values_of(params.mechanism, params.steps, reports.index)
        return (y > 1.0).all(axis=1), (y < -1.0).all(axis=1)
    if params.protocol == "duchi-md":
        return Plan(make, events, ("most signs +", "most signs -"))
    return Plan(make, events, ("every value > 1", "every value < -1"))


def _sampled_epsilon(params: Any) -> float:
    """``k`` reported attributes, each at the effective epsilon of its mechanism at ``eps/k``."""
    return min(_grid.effective_epsilon(params.mechanism, params.k), float(params.epsilon))


def _rows_example(cls: Any, d: int, **fields: Any) -> Any:
    def make() -> Tuple[Any, np.ndarray]:
        gen = np.random.default_rng(7)
        values = gen.beta(5.0, 2.0, size=(2000, d)) * 40.0 - 10.0
        return cls(epsilon=2.0, attributes=d, bounds=(-10.0, 30.0), **fields), values
    return make


def _moments_example() -> Tuple[MomentsParams, np.ndarray]:
    values = np.random.default_rng(9).beta(5.0, 2.0, size=3000) * 80.0 + 10.0
    return MomentsParams(epsilon=1.0, bounds=(10.0, 90.0)), values


def _sampled_maker(mechanism: str) -> Callable[[float, Tuple[float, float]], SampledMeanParams]:
    return lambda epsilon, bounds: SampledMeanParams(epsilon=epsilon, attributes=1, mechanism_name=mechanism,
                                                     bounds=bounds)


def _simulations(pid: str) -> Any:
    def entries() -> Tuple[Any, ...]:
        from ...experiments.numeric import MeanAlgorithm
        if pid == "sampled-mean":
            return tuple(MeanAlgorithm(f"sampled-{m}", f"{m.upper()} (sampled-mean, d = 1)", _sampled_maker(m),
                                       summary="sampled-mean with one attribute", matrix=True)
                         for m in ("hm", "pm"))
        return ()
    return entries


_ROWS_WIRE = {
    "sampled-mean": lambda p: [WireField("attributes", bits_for(p.attributes), None, "uint32", (p.k,)),
                               WireField("index", bits_for(p.largest_index + 1), None, "uint32", (p.k,))],
    "duchi-md": lambda p: [WireField("signs", 1, None, "uint8", (p.attributes,))]}
_ROWS_WIRE["moments"] = _ROWS_WIRE["sampled-mean"]

_base.register_protocol(_base.Protocol(
    "sampled-mean", SampledMeanParams, SampledMeanReports, SampledMeanServer, SampledMeanClient,
    example=_rows_example(SampledMeanParams, 5), inputs="numbers", wire_fields=_ROWS_WIRE["sampled-mean"],
    variance=mean_variance, default_candidates=lambda server: np.arange(server.params.attributes),
    extremes=edges(attributes=(1, MAX_ATTRIBUTES)), simulations=_simulations("sampled-mean"),
    audit=AuditHooks(lambda e, **kw: SampledMeanParams(**{"epsilon": e, "attributes": 2, **kw}), _rows_plan,
                     _sampled_epsilon)))

_base.register_protocol(_base.Protocol(
    "duchi-md", DuchiMdParams, DuchiMdReports, DuchiMdServer, DuchiMdClient,
    example=_rows_example(DuchiMdParams, 4), inputs="numbers", wire_fields=_ROWS_WIRE["duchi-md"],
    variance=mean_variance, default_candidates=lambda server: np.arange(server.params.attributes),
    extremes=edges(attributes=(1, MAX_DUCHI_ATTRIBUTES)),
    audit=AuditHooks(lambda e, **kw: DuchiMdParams(**{"epsilon": e, "attributes": 3, **kw}), _rows_plan,
                     lambda p: float(p.epsilon))))

_base.register_protocol(_base.Protocol(
    "moments", MomentsParams, MomentsReports, MomentsServer, MomentsClient,
    example=_moments_example, inputs="numbers", wire_fields=_ROWS_WIRE["moments"],
    variance=mean_variance, default_candidates=lambda server: np.arange(2),
    extremes=edges(), audit=AuditHooks(lambda e, **kw: MomentsParams(**{"epsilon": e, **kw}), _rows_plan,
                                       _sampled_epsilon)))
