"""HadaHeavy: succinct histograms / heavy hitters by a base-B prefix search with one
HadaOracle per level and disjoint user groups ([WW] section 4, Thm 4.1/4.3),
and the TreeHist baseline (Bassily et al. 2017) as its binary special case.

Values in ``[0, d)`` (``d <= 2^64``) are strings of ``t = ceil(L/b)`` symbols of ``b``
bits (``L = ceil(log2 d)``); the level-``l`` prefix of ``x`` is ``x >> b(t-l)``. Users are
split into ``t`` groups (independent or permutation partitioning); group ``l`` runs a
HadaOracle (``k`` subsets, range ``m``) on level-``l`` prefixes. The server estimates
``fhat(s) = t * chat_l(s)`` and keeps the children of kept prefixes whose estimate is at
least ``tau - Delta``; the survivors at level ``t`` are returned with their estimates::

    params = lf.protocols.heavy.hadaheavy.HadaHeavyParams.create(epsilon=1.0, d=2**32, n=10**6, beta=0.05)
    reports = lf.protocols.heavy.hadaheavy.HadaHeavyClient(params, rng=None).perturb(values)
    server = lf.protocols.heavy.hadaheavy.HadaHeavyServer(params).update(reports)
    hh = server.heavy_hitters()       # hh.items (uint64), hh.counts (float64)

Defaults (our constants: [WW] fixes them only up to constant factors; see
:func:`ldpfast.theory.hadaheavy_defaults`):
``b = max(1, ceil(log2 sqrt n))``, ``Delta = 2 c_eps sqrt(n t log(t B n / beta))``,
``tau = 3 Delta``, per-level failure ``beta' = beta/(t B n)``. They are conservative;
``delta``/``tau`` can be overridden in the parameters or per query.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Optional, Tuple

import numpy as np

from ..._base import Params as _ParamsBase
from ..._base import Protocol, register_protocol
from ...errors import ParameterError
from ..._validate import as_values, check_binary_epsilon, check_choice, check_epsilon, check_int, check_real
from .._hadamard_layout import (GroupBitReports, Layout, LayoutServer, cached_layout, gf64_field,
                               hash_coefficients, make_layout, pow2_at_least, _random_seed)
from ..frequency import hadaoracle
from ..frequency.hadaoracle import PARTITIONS, SCALINGS, median_estimates
from ...theory import hadamard as _theory
from ..._base import AuditHooks
from ..._base import WireField, bits_for
from .._aliases import deprecated_names
from .._registration import edges, SIGN, binary_epsilon, heavy_params, layout_plan, median_of_groups, zipf_values
from ...uncertainty import MedianOfGroups

if TYPE_CHECKING:
    from ...experiments import HeavyAlgorithm

__all__ = ["HadaHeavyParams", "HadaHeavyClient", "HadaHeavyReports", "HadaHeavyServer", "HeavyHitters"]


@dataclasses.dataclass(frozen=True)
class HadaHeavyParams(_ParamsBase):
    """HadaHeavy parameters ([WW] section 4). Use :meth:`create` (defaults from ``n`` and
    ``beta``) or :meth:`treehist` (``b = 1``).

    Args:
        epsilon: privacy parameter, in [2^-20, 22.18] (binary RR: ``_validate.rr_threshold``).
        d: domain size, ``2 <= d <= 2^64``.
        b: bits per symbol (alphabet ``B = 2^b``), ``1 <= b <= 24``.
        k: subsets per level oracle (odd).
        m: level-oracle hash range (power of two; levels whose prefix domain is smaller
            use HRR on that domain directly).
        delta: the uniform error ``Delta`` (counts) assumed by the search.
        tau: the heavy-hitter threshold (counts); prefixes with ``fhat >= tau - delta``
            are expanded/reported.
        partition: ``"independent"`` or ``"permutation"`` (users to levels and subsets).
        scaling: ``"k"`` (default) or ``"subset"`` (see
            :class:`ldpfast.protocols.frequency.hadaoracle.HadaOracleParams`).
        top: optional top-T pruning: keep at most ``top`` prefixes per level (an option
            of ours, not in [WW]).
        hash_seed: seed of the public hash functions.
    """

    protocol: ClassVar[str] = "hadaheavy"
    epsilon: float
    d: int
    b: int
    k: int
    m: int
    delta: float
    tau: float
    partition: str = "independent"
    scaling: str = "k"
    top: Optional[int] = None
    hash_seed: int = dataclasses.field(default_factory=_random_seed)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_binary_epsilon(self.epsilon))
        object.__setattr__(self, "d", check_int("d", self.d, 2, 2**64))
        object.__setattr__(self, "b", check_int("b", self.b, 1, 24))
        object.__setattr__(self, "k", check_int("k", self.k, 1, 2**16))
        if self.k % 2 == 0:
            raise ParameterError(f"k must be odd, got {self.k}")
        m = check_int("m", self.m, 2, 2**24)
        if m & (m - 1):
            raise ParameterError(f"m must be a power of two, got {m}")
        object.__setattr__(self, "delta", check_real("delta", self.delta))
        object.__setattr__(self, "tau", check_real("tau", self.tau))
        if self.tau <= self.delta:
            raise ParameterError(f"tau must exceed delta, got tau={self.tau}, delta={self.delta}")
        check_choice("partition", self.partition, PARTITIONS)
        check_choice("scaling", self.scaling, SCALINGS)
        if self.top is not None:
            object.__setattr__(self, "top", check_int("top", self.top, 1))
        object.__setattr__(self, "hash_seed", check_int("hash_seed", self.hash_seed, 0, 2**64 - 1))
        if self.t * self.k * self.m > 2**28:
            raise ParameterError(f"t * k * m must be <= 2^28 cells, got {self.t}*{self.k}*{self.m}")

    @classmethod
    def create(cls, epsilon: float, d: int, n: int, beta: float = 0.05, b: Optional[int] = None,
               delta: Optional[float] = None, tau: Optional[float] = None, k: Optional[int] = None,
               m: Optional[int] = None, **kwargs: Any) -> "HadaHeavyParams":
        """The default constants (module doc) for ``n`` users and failure probability
        ``beta``; any of ``b``, ``delta``, ``tau``, ``k``, ``m`` overrides them (``tau``
        defaults to ``3 delta``). Other keyword arguments go to the constructor."""
        check_epsilon(epsilon)
        check_int("n", n, 1)
        check_int("d", d, 2, 2**64)
        dflt = _theory.hadaheavy_defaults(epsilon, n, beta, d, b=b, delta=delta, tau=tau)
        return cls(epsilon=epsilon, d=d, b=int(dflt["b"]), k=int(dflt["k"]) if k is None else k,
                   m=int(dflt["m"]) if m is None else m, delta=dflt["delta"], tau=dflt["tau"], **kwargs)

    @classmethod
    def treehist(cls, epsilon: float, d: int, n: int, beta: float = 0.05, **kwargs: Any) -> "HadaHeavyParams":
        """TreeHist (Bassily et al. 2017) as the binary special case, with HadaOracle as
        level oracle (our choice; the original uses a Count-Sketch oracle): ``b = 1``, ``t =
        ceil(log2 d)`` levels, each a HadaOracle, with the same Delta/tau rules (so only
        ``B`` differs from HadaHeavy)."""
        return cls.create(epsilon, d, n, beta, b=1, **kwargs)

    @property
    def L(self) -> int:
        return max(1, (self.d - 1).bit_length())

    @property
    def t(self) -> int:
        return -(-self.L // self.b)

    @property
    def B(self) -> int:
        return 1 << self.b

    def shift(self, level: int) -> int:
        """Right shift giving the level-``level`` prefix (levels 1..t)."""
        return self.b * (self.t - level)

    def prefix_domain(self, level: int) -> int:
        """Number of possible level-``level`` prefixes: ``ceil(d / 2^shift)``."""
        s = self.shift(level)
        return -(-self.d // (1 << s))

    def level_rows(self, level: int) -> int:
        return min(self.m, pow2_at_least(max(2, self.prefix_domain(level))))

    def layout(self) -> Layout:
        return cached_layout(self)

    def _layout_size(self) -> Tuple[int, int]:
        """(cells, groups) of the server state."""
        return sum(self.k * self.level_rows(level) for level in range(1, self.t + 1)), self.t * self.k

    def _build_layout(self) -> Layout:
        coef = hash_coefficients(self.hash_seed, self.t * self.k, 2**64)
        groups: List[Dict[str, int]] = []
        levels: List[Tuple[int, int]] = []
        for level in range(1, self.t + 1):
            rows = self.level_rows(level)
            hashed = rows < pow2_at_least(max(2, self.prefix_domain(level)))
            levels.append((len(groups), self.k))
            for _ in range(self.k):
                g = len(groups)
                groups.append({"a0": int(coef[g, 0]), "a1": int(coef[g, 1]), "hash_modulus": rows if hashed else 0,
                               "rows": rows, "shift": self.shift(level)})
        return make_layout(groups, levels, field=gf64_field())


@dataclasses.dataclass
class HadaHeavyReports(GroupBitReports):
    """HadaHeavy reports: global subset id ``groups`` (level ``l`` owns
    ``[(l-1) k, l k)``), row ``rows``, bit ``bits`` (int8, +-1)."""

    protocol: ClassVar[str] = "hadaheavy"


class HadaHeavyClient(hadaoracle.HadaOracleClient):
    """HadaHeavy client: the user's level and subset (drawn: level uniform, then subset
    uniform; or assigned by :meth:`HadaHeavyServer.assign`) pick one HRR instance on the hashed
    prefix; one bit is sent. ``rng``: ``None`` = OS entropy (real users); a seed makes a
    reproducible **simulation only**."""

    params_type: ClassVar[type] = HadaHeavyParams
    reports_type: ClassVar[type] = HadaHeavyReports


@dataclasses.dataclass
class HeavyHitters:
    """Output of :meth:`HadaHeavyServer.heavy_hitters`: ``items`` (uint64) sorted by decreasing
    estimated ``counts`` (float64), and the number of reports ``n``. With a domain on the
    parameters that turns values back into labels (:class:`ldpfast.Domain`, or
    :class:`ldpfast.PrefixDomain`: the labels' byte prefixes), ``labels`` holds the items'
    labels (object array), else None."""

    items: np.ndarray
    counts: np.ndarray
    n: int
    candidates_examined: int = 0
    labels: Optional[np.ndarray] = None

    @property
    def fractions(self) -> np.ndarray:
        return self.counts / max(self.n, 1)

    def __len__(self) -> int:
        return len(self.items)

    @classmethod
    def ranked(cls, items: np.ndarray, counts: np.ndarray, n: int, examined: int,
               domain: Any = None) -> "HeavyHitters":
        """The result with ``items`` sorted by decreasing ``counts`` (ties keep their order),
        labelled by ``domain`` when it decodes values (:mod:`ldpfast.domain`)."""
        order = np.argsort(-counts, kind="stable")
        items = items[order]
        labels = domain.decode(items) if domain is not None and domain.decodes else None
        return cls(items=items, counts=counts[order], n=n, candidates_examined=examined, labels=labels)


def surviving_prefixes(children: np.ndarray, est: np.ndarray, threshold: float,
                       top: Optional[int]) -> Tuple[np.ndarray, np.ndarray]:
    """One level of a prefix search: the children whose estimate is ``>= threshold``, only
    the ``top`` largest of them when more survive (ties keep their order)."""
    keep = est >= threshold
    kept, est = children[keep], est[keep]
    if top is not None and len(kept) > top:
        order = np.argsort(-est, kind="stable")[:top]
        kept, est = kept[order], est[order]
    return kept, est


class HadaHeavyServer(LayoutServer):
    """HadaHeavy server: all ``t`` level oracles in one integer state (C++ accumulation,
    mergeable), batched FWHT, prefix search ([WW] "modified search strategy")."""

    protocol = "hadaheavy"
    params_type: ClassVar[type] = HadaHeavyParams
    reports_type: ClassVar[type] = HadaHeavyReports
    params: HadaHeavyParams

    def _level_scales(self, level: int) -> np.ndarray:
        p = self.params
        if p.scaling == "k":
            return np.full(p.k, float(p.k * p.t))
        sizes = self._group_sizes[(level - 1) * p.k: level * p.k].astype(np.float64)
        return np.where(sizes > 0, self.n / np.maximum(sizes, 1), np.nan)

    def level_estimates(self, level: int, prefixes: Any, method: str = "fwht") -> np.ndarray:
        """``fhat(s) = t * chat_level(s)`` (counts) for level-``level`` prefixes.
        ``method="direct"`` skips the FWHT (see :func:`ldpfast.protocols.frequency.hadaoracle.median_estimates`)."""
        self._require_reports()
        p = self.params
        level = check_int("level", level, 1, p.t)
        self._check_query(prefixes, 24 * p.k + 32, 0, f"a level-{level} HadaHeavy query", extra=self._decode_nbytes())
        xs = as_values(prefixes, p.prefix_domain(level), "prefixes")
        # group hashes act on x >> shift; pass prefixes << shift so the kernel's shift undoes it
        shifted = xs << np.uint64(p.shift(level))
        return median_estimates(self, np.arange((level - 1) * p.k, level * p.k), shifted,
                                self._level_scales(level), None, method)

    def estimate(self, candidates: Any, counts: bool = False) -> np.ndarray:
        """Full-length estimates of ``candidates`` (the level-``t`` oracle), fractions
        (counts with ``counts=True``)."""
        est = self.level_estimates(self.params.t, as_values(candidates, self.params.d, "candidates"))
        return est if counts else est / self.n

    def heavy_hitters(self, delta: Optional[float] = None, tau: Optional[float] = None,
                      top: Optional[int] = None, method: str = "fwht") -> HeavyHitters:
        """Run the prefix search: ``S_l = {s.sigma : s in S_{l-1}, fhat(s.sigma) >= tau - delta}``.
        With every candidate's error at most ``delta``: every ``x`` with ``c(x) >= tau`` is
        output and every output has ``c(x) >= tau - 2 delta`` ([WW] Thm 4.3).
        ``delta``, ``tau``, ``top`` default to the parameters'. ``method="direct"`` queries
        the level oracles without the FWHT (as in TreeHist: same output,
        query cost growing with ``m``), as a runtime baseline."""
        self._require_reports()
        p = self.params
        delta = p.delta if delta is None else check_real("delta", delta)
        tau = p.tau if tau is None else check_real("tau", tau)
        top = p.top if top is None else check_int("top", top, 1)
        threshold = tau - delta
        kept = np.zeros(1, dtype=np.uint64)
        est = np.zeros(0)
        examined = 0
        for level in range(1, p.t + 1):
            width = 1 << (p.shift(level - 1) - p.shift(level)) if level > 1 else p.prefix_domain(1)
            # children, their estimates and the query's per-chunk temporaries
            self._check_call(32 * len(kept) * width, f"the level-{level} HadaHeavy search over "
                             f"{len(kept)} prefixes x {width} children (raise tau or set top)")
            children = (kept[:, None] * np.uint64(width) + np.arange(width, dtype=np.uint64)[None, :]).ravel()
            if p.prefix_domain(level) < 2**64:
                children = children[children < np.uint64(p.prefix_domain(level))]
            examined += len(children)
            est = self.level_estimates(level, children, method) if len(children) else np.zeros(0)
            kept, est = surviving_prefixes(children, est, threshold, top)
            if not len(kept):
                break
        return HeavyHitters.ranked(kept, est, self.n, examined, p.label_domain)


def _variance(server: HadaHeavyServer, candidates: Any) -> MedianOfGroups:
    # estimate() answers from the level-t oracle: k subsets of the users' 1/t at that level
    p = server.params
    hashed = p.level_rows(p.t) < pow2_at_least(max(2, p.prefix_domain(p.t)))
    return median_of_groups(server, candidates, p.k, p.k * p.t, hashed, signed=False)


def _simulations() -> Tuple[HeavyAlgorithm, HeavyAlgorithm]:
    from ...experiments import HeavyAlgorithm

    return (HeavyAlgorithm("hadaheavy", "HadaHeavy", "protocols.heavy.hadaheavy", heavy_params("hadaheavy", "create"),
                           "WW HadaHeavy: prefix search over B-ary symbols, HadaOracle per level"),
            HeavyAlgorithm("treehist", "TreeHist", "protocols.heavy.hadaheavy", heavy_params("hadaheavy", "treehist"),
                           "TreeHist as HadaHeavy with B = 2 (binary prefixes, HadaOracle levels)"))


register_protocol(Protocol(
    "hadaheavy", HadaHeavyParams, HadaHeavyReports, HadaHeavyServer, HadaHeavyClient,
    example=lambda: (HadaHeavyParams.create(epsilon=2.0, d=1024, n=4000, hash_seed=3), zipf_values(1024)),
    extremes=edges(d=(2, 2**64)),
    # [WW] section 4: the (level, subset) group, the Hadamard row and one bit.
    wire_fields=lambda p: [WireField("groups", bits_for(p.t * p.k), dtype="uint32"),
                           WireField("rows", bits_for(p.m), dtype="uint32"), WireField("bits", 1, SIGN, "int8")],
    simulations=_simulations, variance=_variance,
    audit=AuditHooks(lambda e, **kw: HadaHeavyParams.create(e, 64, 1000, hash_seed=1, **kw), layout_plan,
                     binary_epsilon)))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "hadaheavy", {"Params": HadaHeavyParams, "Client": HadaHeavyClient,
                                                      "Server": HadaHeavyServer, "Reports": HadaHeavyReports})
