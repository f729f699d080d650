"""Hierarchical histograms (HH) for range queries and quantiles over an ordered domain
``[0, d)``: the complete ``B``-ary tree of intervals over the domain, users split uniformly
at random over its ``L = ceil(log_B d)`` levels below the root (user partition, not budget
split), each user reporting the node of its level that holds its value with the level's
frequency oracle (GRR on small levels, OLH on the others: :mod:`._levels`).

The server answers a range ``[lo, hi]`` in two ways:

* ``consistent=True`` (default; Hay et al., VLDB 2010, with the unequal-variance weights of
  Cormode, Kulkarni, Srivastava, VLDB 2019): constrained inference makes every node the sum
  of its children and the root 1, then sums the leaves in the range. Unbiased, and the
  lowest variance of any linear unbiased answer from these estimates.
* ``consistent=False``: the sum of the fewest whole nodes covering the range (at most
  ``2 (B - 1)`` per level), each its level's raw estimate. This is the one-dimensional case
  of HIO (Wang et al., SIGMOD 2019), which is the same client (users split over the levels,
  one oracle per level) and this estimator; unbiased too.

Standard errors are closed forms (:mod:`._ranges`): each answer is linear in the levels'
estimates, whose exact variances given the nodes' frequencies are known, plus the variance
of the random split of users into levels; both are evaluated at the consistent estimates.

    from ldpfast.protocols.numeric import hierarchy

    params = hierarchy.HHParams(epsilon=1.0, d=1024, branching=4)
    server = hierarchy.HHServer(params).update(hierarchy.HHClient(params).perturb(values))
    answers = server.range_query(100, 611)      # answers.values, answers.std, answers.interval()
    median = server.quantile(0.5)
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar, List, Mapping, Tuple

import numpy as np

from ..._base import AuditHooks, ClientBase, Params as _ParamsBase, Protocol, Reports as _ReportsBase, WireField
from ..._base import bits_for, register_protocol
from ..._validate import as_values, check_array, check_below, check_epsilon, check_int, optional_index_array
from ...errors import ParameterError, ReportError
from ...estimates import PLUG_IN
from ...uncertainty import PlugIn
from .._registration import edges
from ._levels import LevelOracle, LevelServer, level_support, perturb_levels, uniform_levels
from ._ranges import RangeAnswers, RangeEstimator
from ._tree import Tree, complete_height

__all__ = ["HHParams", "HHReports", "HHClient", "HHServer", "bucketize"]

PROTOCOL_ID = "hh"
MAX_D = 2**20


@functools.lru_cache(maxsize=8)
def complete_tree(d: int, branching: int) -> Tree:
    """The complete ``B``-ary tree over ``[0, d)``: level k's nodes have width ``B^(L-k)``."""
    height = complete_height(d, branching)
    return Tree(d, [np.arange(0, d, branching ** (height - k), dtype=np.int64) for k in range(height + 1)])


@dataclasses.dataclass(frozen=True)
class HHParams(_ParamsBase):
    """Hierarchical histogram parameters.

    Attributes:
        epsilon: privacy parameter of every report.
        d: size of the ordered domain ``[0, d)``, ``2 <= d <= 2^20``.
        branching: the tree's fan-out ``B``, ``2 <= B <= 64`` (4 minimizes the variance of
            range answers at most domain sizes; Cormode et al. 2019).
    """

    protocol: ClassVar[str] = PROTOCOL_ID
    epsilon: float
    d: int
    branching: int = 4

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "d", check_int("d", self.d, 2, MAX_D))
        object.__setattr__(self, "branching", check_int("branching", self.branching, 2, 64))
        for oracle in self.oracles:
            _ = oracle.threshold                # refuses a budget the 64-bit sampler cannot represent

    @property
    def height(self) -> int:
        """Levels below the root, ``ceil(log_B d)``: the groups users are split into."""
        return complete_height(self.d, self.branching)

    @property
    def tree(self) -> Tree:
        return complete_tree(self.d, self.branching)

    def width(self, level: int) -> int:
        """Width of the nodes of tree level ``level`` (1 at the leaves)."""
        return int(self.branching ** (self.height - level))

    @property
    def oracles(self) -> List[LevelOracle]:
        """The frequency oracle of each level below the root."""
        return [LevelOracle.choose(self.epsilon, -(-self.d // self.width(k))) for k in range(1, self.height + 1)]


@dataclasses.dataclass
class HHReports(_ReportsBase):
    """Hierarchical histogram reports: the user's ``level`` (uint32, ``< height``: tree level
    ``level + 1``) and its level's report ``(z, a0, a1)`` (uint64; :mod:`._levels`)."""

    protocol: ClassVar[str] = PROTOCOL_ID
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"level": ("uint32", 1), "z": ("uint64", 1),
                                                              "a0": ("uint64", 1), "a1": ("uint64", 1)}
    level: np.ndarray
    z: np.ndarray
    a0: np.ndarray
    a1: np.ndarray

    def __post_init__(self) -> None:
        self.level = check_array("level", self.level, np.uint32)
        self.z = check_array("z", self.z, np.uint64)
        self.a0 = check_array("a0", self.a0, np.uint64)
        self.a1 = check_array("a1", self.a1, np.uint64)
        self._check_lengths()


class HHClient(ClientBase):
    """Hierarchical histogram client: a uniform level (unless assigned, ``levels=``), then the
    level's oracle on the node holding the value. ``rng=None`` (default) keys each batch from
    OS entropy; a seed is for simulation only."""

    params: HHParams

    def perturb(self, values: Any, levels: Any = None) -> HHReports:
        """Privatize ``values`` in ``[0, d)``; ``levels`` (optional, ``< height``) assigns the
        users' levels, which must not depend on the values."""
        p = self.params
        x = as_values(values, p.d)
        assigned = optional_index_array("levels", levels, x.size)
        if assigned is None:
            level = uniform_levels(self._keys.key(), x.size, p.height, self.threads)
        else:
            level = assigned
            check_below(level, p.height, "levels", "in", ParameterError)
        z, a0, a1 = perturb_levels(p.oracles, self._keys, lambda k, rows: x[rows] // np.uint64(p.width(k + 1)),
                                   level, self.threads)
        return HHReports(level=level, z=z, a0=a0, a1=a1)


class HHServer(LevelServer):
    """Hierarchical histogram server: keeps the reports (canonical order, exact merges) and
    answers range queries, frequencies and quantiles from the levels' estimates."""

    protocol: ClassVar[str] = PROTOCOL_ID
    params_type: ClassVar[type] = HHParams
    reports_type: ClassVar[type] = HHReports
    params: HHParams

    def _oracles(self) -> List[LevelOracle]:
        return self.params.oracles

    def _columns_of(self, reports: HHReports) -> Tuple[np.ndarray, ...]:
        return reports.level, reports.z, reports.a0, reports.a1

    def ranges(self, consistent: bool = True) -> RangeEstimator:
        """The estimator of every answer (built once per call: reuse it for many queries)."""
        if self.n == 0:
            raise ReportError("cannot estimate from zero reports")
        x, var, counts = self.level_estimates()
        return RangeEstimator(self.params.tree, self.params.oracles, x, var, counts, consistent)

    def range_query(self, lo: Any, hi: Any, consistent: bool = True) -> RangeAnswers:
        """The shares of users with values in ``[lo, hi]`` (ends included; scalars or arrays)
        with standard errors; ``consistent=False`` sums raw nodes (HIO)."""
        return self.ranges(consistent).query(lo, hi)

    def quantile(self, q: Any, consistent: bool = True) -> np.ndarray:
        """The smallest values whose estimated CDF reaches ``q`` (monotone in ``q``)."""
        return self.ranges(consistent).quantiles(q)

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """The consistent frequencies of single values ``candidates`` (default: all of ``[0, d)``);
        counts with ``counts=True``."""
        xs = np.arange(self.params.d) if candidates is None else as_values(candidates, self.params.d,
                                                                           "candidates").astype(np.int64)
        est = self.ranges().leaves[xs]
        return est * self.n if counts else est

    def _repr_extra(self) -> str:
        return f"levels={self.params.height}"


def bucketize(numbers: Any, bounds: Tuple[float, float], d: int) -> Tuple[np.ndarray, int]:
    """Real numbers onto ``[0, d)`` for a client of ``hh`` or ``ahead``: ``[lo, hi]`` cut into
    ``d`` equal buckets (bucket ``v`` is ``[lo + v w, lo + (v + 1) w)``, ``w = (hi - lo)/d``, the
    last one closed), numbers outside clipped to the nearest end. Returns the bucket values
    and how many numbers were clipped (known to the client only: it is not private).

    Raises:
        ParameterError: ``bounds`` not finite with ``lo < hi``, ``d`` out of range, or a number
            that is NaN or infinite (named with its index).
    """
    d = check_int("d", d, 2, MAX_D)
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ParameterError(f"bounds must be two numbers (lo, hi), got {bounds!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ParameterError(f"bounds must be finite with lo < hi, got {bounds!r}")
    x = np.atleast_1d(np.asarray(numbers, dtype=np.float64))
    bad = np.flatnonzero(~np.isfinite(x))
    if x.ndim != 1 or bad.size:
        raise ParameterError(f"numbers must be a 1-D array of finite numbers, got {x[bad[0]] if bad.size else x.shape}"
                             + (f" at index {int(bad[0])}" if bad.size else ""))
    clipped = int(np.count_nonzero((x < lo) | (x > hi)))
    buckets = np.floor((np.clip(x, lo, hi) - lo) / (hi - lo) * d)
    return np.minimum(buckets, d - 1).astype(np.uint64), clipped


def _variance(server: HHServer, candidates: Any) -> PlugIn:
    xs = np.asarray(candidates, dtype=np.int64)
    ranges = server.ranges()
    ranges.check_cost(xs.size)
    variance = ranges.query(xs, xs).std ** 2
    return PlugIn(lambda f: variance, xs.size,
                  f"{PLUG_IN}: the consistent estimates' exact linear variance with the oracles' closed forms and "
                  "the random split of users into levels, at the consistent frequencies (not at f)")


def _audit_plan(params: HHParams) -> Any:
    from ...audit import Plan, support_events, value_inputs

    support = level_support(params.oracles, lambda k, w: w // params.width(k + 1))
    return Plan(value_inputs(0, params.d - 1), support_events(support, 0, params.d - 1),
                ("report supports x0's node, not x1's", "report supports x1's node, not x0's"))


def _wire(params: HHParams) -> List[WireField]:
    symbols = max(oracle.symbols for oracle in params.oracles)
    return [WireField("level", bits_for(params.height), dtype="uint32"), WireField("z", bits_for(symbols)),
            WireField("a0", 64), WireField("a1", 64)]


def gaussian_values(d: int, n: int = 4000, seed: int = 3) -> np.ndarray:
    """Values of a discretized normal around ``d/3`` with standard deviation ``d/8``."""
    rng = np.random.default_rng(seed)
    return np.clip(np.round(rng.normal(d / 3, d / 8, n)), 0, d - 1).astype(np.uint64)


def _simulations() -> Tuple[Any, ...]:
    from ...experiments import Algorithm

    return (Algorithm(PROTOCOL_ID, "HH", "protocols.numeric.hierarchy",
                      lambda eps, data, gen: HHParams(epsilon=eps, d=data.d),
                      summary="hierarchical histogram, B = 4: per-value frequencies of the consistent leaves"),)


def _example() -> Tuple[HHParams, np.ndarray]:
    return HHParams(epsilon=2.0, d=64, branching=4), gaussian_values(64)


register_protocol(Protocol(
    PROTOCOL_ID, HHParams, HHReports, HHServer, HHClient, example=_example, wire_fields=_wire, variance=_variance,
    extremes=edges(d=(2, MAX_D), branching=(2, 64)), simulations=_simulations,
    audit=AuditHooks(lambda e, **kw: HHParams(**{"epsilon": e, "d": 16, "branching": 4, **kw}), _audit_plan,
                     lambda p: max(oracle.effective_epsilon for oracle in p.oracles))))
