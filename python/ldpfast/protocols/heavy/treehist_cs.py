"""TreeHist with Count-Sketch level oracles: the heavy-hitter algorithm of Bassily, Nissim,
Stemmer and Thakurta ("Practical locally private heavy hitters", NeurIPS 2017 / JMLR 2020)
with its own frequency oracle, Hashtogram (:mod:`ldpfast.protocols.frequency.hashtogram`), at every level.

:meth:`ldpfast.protocols.heavy.hadaheavy.HadaHeavyParams.treehist` is the same binary prefix search with [WW]'s
HadaOracle as the level oracle (so that only the alphabet differs from HadaHeavy); this
module is the original, so [WW] Table 1's TreeHist row can be measured as published.

Values in ``[0, d)`` are ``L = ceil(log2 d)``-bit strings; the level-``l`` prefix of ``x``
is ``x >> (L - l)`` (``l = 1..L``). Users are split uniformly over the ``L`` levels and, within
a level, over ``R`` Hashtogram groups (bucket hash into ``[T]`` and sign hash per group;
levels whose prefix domain fits in ``T`` use the prefix itself as the bucket and no sign,
i.e. Hadamard randomized response). A user sends one bit about its level-``l`` prefix. The
level estimate of a prefix is the median over the level's groups of
``L R c_eps g(s) (H z)[h(s)]`` (counts). The search keeps the children of kept prefixes whose
estimate is at least ``tau - delta`` (our choice: the same ``delta``/``tau`` rules as HadaHeavy,
:func:`ldpfast.theory.hadaheavy_defaults` with ``b = 1``; Bassily et al.'s threshold
``eta = Theta((1/eps) sqrt(n log d log(n/beta)))`` has the same order).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar, List, Optional, Tuple

import numpy as np

from ... import _core
from ..._base import ClientBase, Params as _ParamsBase, Protocol, register_protocol
from ..._validate import (as_values, check_below, check_binary_epsilon, check_int, check_real, optional_index_array)
from ...errors import ParameterError, ReportError
from .hadaheavy import HeavyHitters, surviving_prefixes
from .._hadamard_layout import (GroupBitReports, _parity_sign, _random_seed, binary_flip_threshold, gf64_field,
                               hash_coefficients, pow2_at_least)
from ..frequency.hashtogram import GroupedSignSketchServer, _uniform
from ...theory import hadamard as _th
from ..._base import AuditHooks
from .._aliases import deprecated_names
from .._registration import edges, binary_epsilon, count_sketch_plan, heavy_params, median_of_groups
from ...uncertainty import MedianOfGroups

if TYPE_CHECKING:
    from ..._base import WireField
    from ...experiments import HeavyAlgorithm

__all__ = ["TreeHistCSParams", "TreeHistCSReports", "TreeHistCSClient", "TreeHistCSServer"]


@dataclasses.dataclass(frozen=True)
class TreeHistCSParams(_ParamsBase):
    """TreeHist (Count-Sketch) parameters.

    Attributes:
        epsilon: privacy parameter, in [2^-20, 22.18] (binary RR: ``_validate.rr_threshold``).
        d: dictionary size, ``2 <= d <= 2^64``.
        R: Hashtogram groups per level (odd for a well-defined median).
        T: bucket range (power of two); levels with at most ``T`` prefixes are not hashed.
        delta, tau: the search's error allowance and heavy-hitter threshold (counts).
        hash_seed: seed of the public hash functions.
        top: optional cap on the prefixes kept per level.
    """

    protocol: ClassVar[str] = "treehist-cs"

    epsilon: float
    d: int
    R: int
    T: int
    delta: float
    tau: float
    hash_seed: int = dataclasses.field(default_factory=_random_seed)
    top: Optional[int] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_binary_epsilon(self.epsilon))
        object.__setattr__(self, "d", check_int("d", self.d, 2, 2**64))
        object.__setattr__(self, "R", check_int("R", self.R, 1, 4096))
        object.__setattr__(self, "T", check_int("T", self.T, 2, 2**24))
        if self.T & (self.T - 1):
            raise ParameterError(f"T must be a power of two, got {self.T}")
        object.__setattr__(self, "delta", check_real("delta", self.delta))
        object.__setattr__(self, "tau", check_real("tau", self.tau))
        object.__setattr__(self, "hash_seed", check_int("hash_seed", self.hash_seed, 0, 2**64 - 1))
        if self.top is not None:
            object.__setattr__(self, "top", check_int("top", self.top, 1))
        if self.L * self.R * self.T > 2**28:
            raise ParameterError(f"L * R * T must be <= 2^28 cells, got {self.L}*{self.R}*{self.T}")

    @classmethod
    def create(cls, epsilon: float, d: int, n: int, beta: float = 0.05, **kwargs: Any) -> "TreeHistCSParams":
        """Defaults (our choice): ``delta``, ``tau`` and the per-level failure probability
        ``beta'`` from :func:`ldpfast.theory.hadaheavy_defaults` with ``b = 1``;
        ``R`` = HadaOracle's ``k`` for ``beta'``; ``T = 2^ceil(log2 sqrt(n/L))`` (Hashtogram's
        ``Theta(sqrt n)`` for the ``n/L`` users of a level)."""
        n = check_int("n", n, 1)
        dflt = _th.hadaheavy_defaults(epsilon, n, beta, d, b=1, delta=kwargs.pop("delta", None),
                                      tau=kwargs.pop("tau", None))
        R = kwargs.pop("R", _th.hadaoracle_k(dflt["beta_level"]))
        T = kwargs.pop("T", max(2, pow2_at_least(math.ceil(math.sqrt(n / dflt["t"])))))
        return cls(epsilon=epsilon, d=d, R=R, T=T, delta=dflt["delta"], tau=dflt["tau"], **kwargs)

    @property
    def L(self) -> int:
        return max(1, (self.d - 1).bit_length())

    def prefix_domain(self, level: int) -> int:
        return -(-self.d // (1 << (self.L - level)))

    def hashed(self, level: int) -> bool:
        """True when the level's prefixes are hashed into ``[T]`` (more than ``T`` of them)."""
        return self.prefix_domain(level) > self.T

    def hashes(self, groups: np.ndarray, prefixes: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """``(bucket, sign)`` of each prefix under its global group (level ``l`` owns groups
        ``[(l-1) R, l R)``)."""
        groups = np.asarray(groups, dtype=np.int64)
        prefixes = np.ascontiguousarray(prefixes, dtype=np.uint64)
        coef = hash_coefficients(self.hash_seed, 2 * self.L * self.R, 2**64).reshape(self.L * self.R, 4)[groups]
        field = gf64_field()
        bucket = prefixes.copy()
        sign = np.ones(prefixes.size, dtype=np.int64)
        levels = groups // self.R + 1
        hashed = np.array([self.hashed(int(lv)) for lv in range(self.L + 1)])[levels]
        if hashed.any():
            sel = np.flatnonzero(hashed)
            c = coef[sel]
            x = np.ascontiguousarray(prefixes[sel])
            bucket[sel] = _core.ocms_hash(field, np.ascontiguousarray(c[:, 0]), np.ascontiguousarray(c[:, 1]), x,
                                          self.T)
            low = _core.ocms_hash(field, np.ascontiguousarray(c[:, 2]), np.ascontiguousarray(c[:, 3]), x, 2)
            sign[sel] = 1 - 2 * low.astype(np.int64)
        return bucket, sign


@dataclasses.dataclass
class TreeHistCSReports(GroupBitReports):
    """TreeHist reports: global group ``groups`` (level ``l`` owns ``[(l-1) R, l R)``), Hadamard
    row ``rows`` and bit ``bits`` (int8, +-1)."""

    protocol: ClassVar[str] = "treehist-cs"

    @classmethod
    def wire_fields(cls, params: Any) -> List[WireField]:
        """The group, the Hadamard row and one bit (only the bit when the server assigns
        group and row)."""
        from ..._base import WireField, bits_for

        return [WireField("groups", bits_for(params.L * params.R), dtype="uint32"),
                WireField("rows", bits_for(params.T), dtype="uint32"), WireField("bits", 1, (-1, 1), "int8")]


class TreeHistCSClient(ClientBase):
    """TreeHist client: a uniform level and group (unless assigned), one bit about the
    level's prefix. ``rng=None`` (default) uses OS entropy; a seed is for simulation only."""

    params: TreeHistCSParams

    def perturb(self, values: Any, groups: Any = None, rows: Any = None) -> TreeHistCSReports:
        p = self.params
        x = as_values(values, p.d)
        n = x.size
        g = optional_index_array("groups", groups, n)
        r = optional_index_array("rows", rows, n)
        if g is None:
            g = _uniform(self._keys.key(), n, p.L * p.R, self.threads).astype(np.uint32)
        check_below(g, p.L * p.R, "groups", "in", ParameterError)
        if r is None:
            r = _uniform(self._keys.key(), n, p.T, self.threads).astype(np.uint32)
        check_below(r, p.T, "rows", "in", ParameterError)
        shift = (p.L - (g.astype(np.int64) // p.R + 1)).astype(np.uint64)
        bucket, sign = p.hashes(g, x >> shift)
        truth = (sign * _parity_sign(r.astype(np.uint64) & bucket) < 0).astype(np.uint64)
        noisy = _core.randomized_response(self._keys.key(), truth, 2, binary_flip_threshold(p.epsilon), self.threads)
        return TreeHistCSReports(groups=g, rows=r, bits=(1 - 2 * noisy.astype(np.int64)).astype(np.int8))


class TreeHistCSServer(GroupedSignSketchServer):
    """TreeHist aggregator: ``z`` (``L R x T`` int64), report count, group sizes."""

    protocol: ClassVar[str] = "treehist-cs"
    params_type: ClassVar[type] = TreeHistCSParams
    reports_type: ClassVar[type] = TreeHistCSReports
    params: TreeHistCSParams

    @classmethod
    def _groups(cls, params: TreeHistCSParams) -> int:
        return params.L * params.R

    def level_estimates(self, level: int, prefixes: Any) -> np.ndarray:
        """Median over the level's groups of ``L R c_eps g(s) (H z)[h(s)]`` (counts)."""
        if self.n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        p = self.params
        level = check_int("level", level, 1, p.L)
        self._check_query(prefixes, 40 * p.R + 8, 0, f"a level-{level} TreeHist query (R={p.R})")
        xs = as_values(prefixes, p.prefix_domain(level), "prefixes")
        groups = np.repeat(np.arange((level - 1) * p.R, level * p.R), xs.size)
        bucket, sign = p.hashes(groups, np.tile(xs, p.R))
        values = (self.decoded()[groups, bucket.astype(np.int64)] * sign).reshape(p.R, xs.size)
        median: np.ndarray = np.median(values.astype(np.float64), axis=0)
        return median * (p.L * p.R * _th.c_eps(p.epsilon))

    def estimate(self, candidates: Any, counts: bool = False) -> np.ndarray:
        """Fractions (counts with ``counts=True``) of ``candidates`` from the last level's oracle."""
        est = self.level_estimates(self.params.L, as_values(candidates, self.params.d, "candidates"))
        return est if counts else est / self.n

    def heavy_hitters(self, delta: Optional[float] = None, tau: Optional[float] = None,
                      top: Optional[int] = None) -> HeavyHitters:
        """The binary prefix search: keep children whose estimate is ``>= tau - delta``."""
        if self.n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        p = self.params
        delta = p.delta if delta is None else check_real("delta", delta)
        tau = p.tau if tau is None else check_real("tau", tau)
        top = p.top if top is None else check_int("top", top, 1)
        kept = np.zeros(1, dtype=np.uint64)
        est = np.zeros(0)
        examined = 0
        for level in range(1, p.L + 1):
            children = (kept[:, None] * np.uint64(2) + np.arange(2, dtype=np.uint64)[None, :]).ravel()
            children = children[children < np.uint64(p.prefix_domain(level))]
            examined += len(children)
            est = self.level_estimates(level, children) if len(children) else np.zeros(0)
            kept, est = surviving_prefixes(children, est, tau - delta, top)
            if not len(kept):
                break
        return HeavyHitters.ranked(kept, est, self.n, examined, p.label_domain)


def _example() -> Tuple[TreeHistCSParams, np.ndarray]:
    rng = np.random.default_rng(1)
    params = TreeHistCSParams.create(epsilon=2.0, d=1024, n=4000, hash_seed=3)
    return params, np.minimum(rng.zipf(1.3, size=4000) - 1, 1023)


def _simulations() -> Tuple[HeavyAlgorithm]:
    from ...experiments import HeavyAlgorithm

    return (HeavyAlgorithm("treehist-cs", "TreeHist-CS", "protocols.heavy.treehist_cs",
                           heavy_params("treehist-cs", "create"),
                           "Bassily et al.'s TreeHist with Count-Sketch (Hashtogram) level oracles"),)


def _variance(server: TreeHistCSServer, candidates: Any) -> MedianOfGroups:
    # estimate() answers from the last level: R groups of the users' 1/L there
    p = server.params
    return median_of_groups(server, candidates, p.R, p.L * p.R, p.hashed(p.L), signed=True)


register_protocol(Protocol(
    "treehist-cs", TreeHistCSParams, TreeHistCSReports, TreeHistCSServer, TreeHistCSClient,
    example=_example, simulations=_simulations, variance=_variance,
    extremes=edges(d=(2, 2**64)),
    audit=AuditHooks(lambda e, **kw: TreeHistCSParams(epsilon=e, d=64, R=3, T=8, delta=1.0, tau=2.0, hash_seed=1, **kw),
                     count_sketch_plan, binary_epsilon)))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "treehist-cs", {"Params": TreeHistCSParams, "Client": TreeHistCSClient,
                                                      "Server": TreeHistCSServer, "Reports": TreeHistCSReports})
