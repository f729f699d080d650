"""AHEAD: adaptive hierarchical decomposition for range queries (Du, Hu, Ye, Lin, Wang, Zhou,
CCS 2021), as rounds over disjoint groups of users.

The tree grows a level per round. Round ``t`` has a partition of ``[0, d)`` into intervals
(the nodes of level ``t``; round 1: the root's ``B`` children); each user of round ``t``'s
group reports the interval holding its value with the partition's frequency oracle (GRR
or OLH by its size, :mod:`._levels`). The server then splits each interval whose estimate
exceeds ``theta`` into its ``B`` children and carries the others down unchanged: that is
round ``t + 1``'s partition (:meth:`AHEADServer.next_params`), which the next group's clients
need, so rounds are separate protocol instances: ``AHEADParams.starts`` is the round's partition.
Low-frequency regions stop being refined, so a range query sums fewer noisy nodes there,
at the cost of assuming the users spread uniformly inside an unsplit interval (a bias the
standard errors do not include). ``theta = sqrt((B + 1) V)`` with ``V`` the variance of a node
estimate at frequency 0 (our reading of the paper's rule); ``threshold=`` overrides it.

:func:`combine` puts the rounds' servers together: constrained inference over the tree of
their partitions (an unsplit interval is its own single child), then range answers,
frequencies and quantiles with standard errors as for :mod:`.hierarchy`::

    from ldpfast.protocols.numeric import ahead

    params = ahead.AHEADParams(epsilon=1.0, d=1024)                  # round 1
    servers = []
    for group in groups:                                        # disjoint random groups of users
        server = ahead.AHEADServer(params).update(ahead.AHEADClient(params).perturb(group))
        servers.append(server)
        params = server.next_params()
    answers = ahead.combine(servers).query(100, 611)

:func:`simulate` runs all rounds on one array of values (seeded: simulation only).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..._base import AuditHooks, ClientBase, Params as _ParamsBase, Protocol, Reports as _ReportsBase, WireField
from ..._base import bits_for, register_protocol
from ..._random import KeySource, RngLike
from ..._validate import as_values, check_array, check_epsilon, check_int, check_real
from ...errors import IncompatibleError, ParameterError, ReportError
from ...estimates import PLUG_IN
from ...uncertainty import PlugIn
from .._registration import edges
from ._levels import LevelOracle, LevelServer, level_support
from ._ranges import RangeEstimator
from ._tree import Tree, complete_height, split_starts
from .hierarchy import MAX_D, gaussian_values

__all__ = ["AHEADParams", "AHEADReports", "AHEADClient", "AHEADServer", "combine", "simulate"]

PROTOCOL_ID = "ahead"


def _node_widths(starts: np.ndarray, d: int, branching: int) -> Tuple[np.ndarray, np.ndarray]:
    """Each interval's length and its nominal width ``W``: the smallest power of ``B`` that
    is at least the length."""
    length = np.append(starts[1:], d) - starts
    nominal = np.ones_like(length)
    while np.any(nominal < length):
        nominal = np.where(nominal < length, nominal * branching, nominal)
    return length, nominal


@dataclasses.dataclass(frozen=True)
class AHEADParams(_ParamsBase):
    """One AHEAD round.

    Attributes:
        epsilon: privacy parameter of every report.
        d: size of the ordered domain ``[0, d)``, ``2 <= d <= 2^20``.
        branching: fan-out ``B`` of a split, ``2 <= B <= 64`` (the paper's default is 2).
        starts: the round's partition: the sorted starts of its intervals, the first 0; each
            interval a node of the complete ``B``-ary tree (its length a power of ``B`` that
            divides its start, or cut at ``d``). Empty (default): round 1, the root's children.
    """

    protocol: ClassVar[str] = PROTOCOL_ID
    epsilon: float
    d: int
    branching: int = 2
    starts: Tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "d", check_int("d", self.d, 2, MAX_D))
        object.__setattr__(self, "branching", check_int("branching", self.branching, 2, 64))
        if not isinstance(self.starts, (tuple, list)) or len(self.starts) > self.d:
            raise ParameterError(f"starts must be a tuple of at most d={self.d} integers, got {self.starts!r}"[:300])
        object.__setattr__(self, "starts", tuple(check_int("starts", s, 0, self.d - 1) for s in self.starts))
        if self.starts:
            starts = np.asarray(self.starts, dtype=np.int64)
            if starts[0] != 0 or np.any(np.diff(starts) <= 0):
                raise ParameterError(f"starts must begin at 0 and increase, got {_short(self.starts)}")
            length, nominal = _node_widths(starts, self.d, self.branching)
            bad = np.flatnonzero((starts % nominal != 0) | ((length != nominal) & (starts + length != self.d)))
            if bad.size:
                i = int(bad[0])
                raise ParameterError(f"starts must be nodes of the complete {self.branching}-ary tree, got the "
                                     f"interval [{int(starts[i])}, {int(starts[i] + length[i])})")
        _ = self.oracle.threshold               # refuses a budget the 64-bit sampler cannot represent

    @property
    def partition(self) -> np.ndarray:
        """The starts of the round's intervals (int64)."""
        if self.starts:
            return np.asarray(self.starts, dtype=np.int64)
        return split_starts(np.zeros(1, dtype=np.int64), self.d, self.branching, np.ones(1, dtype=bool))

    @property
    def oracle(self) -> LevelOracle:
        return LevelOracle.choose(self.epsilon, int(self.partition.size))

    def node_of(self, values: np.ndarray) -> np.ndarray:
        """The interval holding each value."""
        return np.searchsorted(self.partition, values.astype(np.int64), side="right") - 1


def _short(starts: Sequence[int]) -> str:
    return repr(tuple(starts[:6])) + (f" ... ({len(starts)} starts)" if len(starts) > 6 else "")


@dataclasses.dataclass
class AHEADReports(_ReportsBase):
    """AHEAD reports of one round: ``(z, a0, a1)`` (uint64) of the round's oracle (:mod:`._levels`)."""

    protocol: ClassVar[str] = PROTOCOL_ID
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"z": ("uint64", 1), "a0": ("uint64", 1),
                                                              "a1": ("uint64", 1)}
    z: np.ndarray
    a0: np.ndarray
    a1: np.ndarray

    def __post_init__(self) -> None:
        self.z = check_array("z", self.z, np.uint64)
        self.a0 = check_array("a0", self.a0, np.uint64)
        self.a1 = check_array("a1", self.a1, np.uint64)
        self._check_lengths()


class AHEADClient(ClientBase):
    """AHEAD client of one round: the round's oracle on the interval holding the value.
    ``rng=None`` (default) keys each batch from OS entropy; a seed is for simulation only."""

    params: AHEADParams

    def perturb(self, values: Any) -> AHEADReports:
        """Privatize ``values`` in ``[0, d)``."""
        p = self.params
        x = as_values(values, p.d)
        nodes = np.ascontiguousarray(p.node_of(x), dtype=np.uint64)
        z, a0, a1 = p.oracle.perturb(self._keys.key(), nodes, self.threads)
        return AHEADReports(z=z, a0=a0, a1=a1)


class AHEADServer(LevelServer):
    """AHEAD server of one round: keeps the reports (canonical order, exact merges), estimates
    the round's intervals and makes the next round's parameters."""

    protocol: ClassVar[str] = PROTOCOL_ID
    params_type: ClassVar[type] = AHEADParams
    reports_type: ClassVar[type] = AHEADReports
    params: AHEADParams

    def _oracles(self) -> List[LevelOracle]:
        return [self.params.oracle]

    def _columns_of(self, reports: AHEADReports) -> Tuple[np.ndarray, ...]:
        return np.zeros(len(reports), dtype=np.uint32), reports.z, reports.a0, reports.a1

    def interval_estimates(self) -> np.ndarray:
        """The unbiased frequencies of the round's intervals."""
        if self.n == 0:
            raise ReportError("cannot estimate from zero reports")
        return self.level_estimates()[0][0]

    def threshold(self) -> float:
        """``theta = sqrt((B + 1) V)``, ``V`` a node estimate's variance at frequency 0."""
        return math.sqrt((self.params.branching + 1) * self.params.oracle.noise_variance(self.n))

    def next_params(self, threshold: Optional[float] = None) -> AHEADParams:
        """The next round: each interval wider than one value whose estimate exceeds
        ``threshold`` (default :meth:`threshold`) split into its children."""
        theta = self.threshold() if threshold is None else check_real("threshold", threshold, -math.inf)
        p = self.params
        split = self.interval_estimates() > theta
        starts = split_starts(p.partition, p.d, p.branching, split)
        return dataclasses.replace(p, starts=tuple(starts.tolist()))

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Frequencies of single values ``candidates`` (default: all of ``[0, d)``): their
        interval's estimate spread uniformly over it; counts with ``counts=True``."""
        p = self.params
        xs = np.arange(p.d) if candidates is None else as_values(candidates, p.d, "candidates")
        nodes = p.node_of(np.asarray(xs))
        est = np.asarray(self.interval_estimates()[nodes] / _lengths(p)[nodes])
        return est * self.n if counts else est

    def _repr_extra(self) -> str:
        return f"intervals={self.params.partition.size}"


def _lengths(params: AHEADParams) -> np.ndarray:
    return np.asarray(np.append(params.partition[1:], params.d) - params.partition)


def combine(servers: Sequence[AHEADServer], consistent: bool = True) -> RangeEstimator:
    """The range estimator of an AHEAD run from its rounds' servers, in round order: each
    round's partition must refine the previous one (as :meth:`AHEADServer.next_params` makes them)
    and the rounds must share epsilon, d and B. Users must be split at random into the rounds'
    groups (the standard errors include the variance of that split)."""
    servers = list(servers)
    if not servers or not all(isinstance(s, AHEADServer) for s in servers):
        raise ParameterError("servers must be a non-empty sequence of AHEAD servers, in round order")
    first = servers[0].params
    for s in servers[1:]:
        if (s.params.epsilon, s.params.d, s.params.branching) != (first.epsilon, first.d, first.branching):
            raise IncompatibleError(f"the rounds must share epsilon, d and branching, got {first} and {s.params}")
    tree = Tree(first.d, [np.zeros(1, dtype=np.int64)] + [s.params.partition for s in servers])
    x, var, counts = [], [], []
    for s in servers:
        level_x, level_var, level_counts = s.level_estimates()
        x += level_x
        var += level_var
        counts += level_counts
    return RangeEstimator(tree, [s.params.oracle for s in servers], x, var, counts, consistent)


def simulate(values: Any, epsilon: float, d: int, branching: int = 2, rounds: Optional[int] = None,
             rng: RngLike = None, threshold: Optional[float] = None) -> List[AHEADServer]:
    """Every round of AHEAD on ``values`` in ``[0, d)``: the users split uniformly at random into
    ``rounds`` groups (default ``ceil(log_B d)``), each round's parameters made by the
    previous round's server. A seeded ``rng`` is for simulation only."""
    params = AHEADParams(epsilon=epsilon, d=d, branching=branching)
    rounds = complete_height(d, branching) if rounds is None else check_int("rounds", rounds, 1, 64)
    x = as_values(values, d)
    keys = KeySource(rng)
    order = keys.generator().permutation(x.size)
    servers: List[AHEADServer] = []
    for group in np.array_split(order, rounds):
        server = AHEADServer(params).update(AHEADClient(params, rng=keys.generator()).perturb(x[np.sort(group)]))
        servers.append(server)
        params = server.next_params(threshold)
    return servers


def _variance(server: AHEADServer, candidates: Any) -> PlugIn:
    p, n = server.params, server.n
    width = _lengths(p)[p.node_of(np.asarray(candidates, dtype=np.int64))].astype(np.float64)
    return PlugIn(lambda f: p.oracle.node_variance(np.asarray(f) * width, n) / width ** 2, len(width),
                  f"{PLUG_IN}: the interval's oracle variance at f times its length, over the length squared",
                  "f spread uniformly over its interval: the interval's frequency over its length")


def _audit_plan(params: AHEADParams) -> Any:
    from ...audit import Plan, support_events, value_inputs

    def node_of(_: int, w: int) -> int:
        return int(params.node_of(np.array([w]))[0])
    support = level_support([params.oracle], node_of)
    return Plan(value_inputs(0, params.d - 1), support_events(support, 0, params.d - 1),
                ("report supports x0's interval, not x1's", "report supports x1's interval, not x0's"))


def _wire(params: AHEADParams) -> List[WireField]:
    return [WireField("z", bits_for(params.oracle.symbols)), WireField("a0", 64), WireField("a1", 64)]


def _example() -> Tuple[AHEADParams, np.ndarray]:
    # a second round on [0, 64): [0, 32) left unsplit, [32, 64) cut into 16 intervals (OLH at eps 1)
    return AHEADParams(epsilon=1.0, d=64, branching=2, starts=(0,) + tuple(range(32, 64, 2))), gaussian_values(64)


def _extremes(params: AHEADParams) -> List[_ParamsBase]:
    return list(edges(d=(2, MAX_D), branching=(2, 64))(dataclasses.replace(params, starts=())))


register_protocol(Protocol(
    PROTOCOL_ID, AHEADParams, AHEADReports, AHEADServer, AHEADClient, example=_example, wire_fields=_wire,
    variance=_variance, extremes=_extremes,
    audit=AuditHooks(lambda e, **kw: AHEADParams(**{"epsilon": e, "d": 16, "branching": 2, **kw}), _audit_plan,
                     lambda p: p.oracle.effective_epsilon)))
