"""PEM: the prefix extending method for heavy hitters (Wang, Li, Jha, "Locally differentially
private heavy hitter identification", IEEE TDSC 2019), beside HadaHeavy and the TreeHists
(:mod:`ldpfast.protocols.heavy.hadaheavy`, :mod:`ldpfast.protocols.heavy.treehist_cs`).

Values in ``[0, d)`` are ``L = ceil(log2 d)``-bit strings. Users are split uniformly at
random into ``levels = ceil((L - s0) / eta)`` groups (``s0 = ceil(log2 k)``); group ``j``
reports the prefix of its value of ``s_j = min(L, s0 + j eta)`` bits with OLH (a
pairwise-independent hash per user into ``[g]``, ``g = round(e^eps) + 1``, randomized
response over ``[g]``: the C++ OCMS kernels). The server estimates every ``s_1``-bit
prefix from group 1 and keeps the top ``k``; each next group estimates the kept prefixes
extended by every ``eta``-bit suffix (``k 2^eta`` candidates) and keeps the top ``k`` again.
Counts are ``levels`` times the group's debiased match counts (unbiased: groups are drawn
uniformly). :meth:`PEMServer.top_k` is the paper's search; :meth:`PEMServer.heavy_hitters` keeps,
among them, only the prefixes whose estimate is at least ``tau - delta`` (the threshold
rule HadaHeavy's and TreeHist's searches use, so the three are compared on one footing)::

    from ldpfast.protocols.heavy import pem

    params = pem.PEMParams.create(epsilon=2.0, d=2**32, n=10**6, beta=0.05, k=32)
    server = pem.PEMServer(params).update(pem.PEMClient(params).perturb(values))
    hh = server.heavy_hitters()        # hh.items (uint64), hh.counts (float64)

Defaults (:meth:`PEMParams.create`, our constants): ``k = 32``, ``eta = 4``, ``delta`` the
Bernstein radius of one prefix's count estimate (an absent prefix's variance, per-report
range ``levels / (p - 1/g)``) at failure ``beta / N`` for the ``N`` candidates the search
can examine, ``tau = 3 delta``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ... import _core
from ..._delta import Delta, _State
from ..._base import (Aggregator, AuditHooks, ClientBase, Params as _ParamsBase, Protocol, Reports as _ReportsBase,
                     register_protocol)
from ..._memory import check_allocation
from ..._validate import (as_values, check_array, check_below, check_epsilon, check_int, check_real,
                         optional_index_array, rr_threshold)
from ...errors import FormatError, ParameterError, ReportError
from ...kernels.field import PRIME
from ..._base import WireField, bits_for
from .._local_hashing import default_g
from .._aliases import deprecated_names
from .._registration import edges, rr_epsilon, zipf_values
from .hadaheavy import HeavyHitters, surviving_prefixes

__all__ = ["PEMParams", "PEMReports", "PEMClient", "PEMServer"]

PROTOCOL_ID = "pem"
_COLUMNS = ("groups", "z", "a0", "a1")


def _field() -> Any:
    return _core.Field.prime(PRIME)


@dataclasses.dataclass(frozen=True)
class PEMParams(_ParamsBase):
    """PEM parameters. Use :meth:`create` for the default ``delta``/``tau``.

    Attributes:
        epsilon: privacy parameter (of OLH over ``[g]``).
        d: domain size, ``2 <= d <= 2^64 - 59`` (the hash field).
        k: prefixes kept per step (the top ``k``), ``1 <= k <= 2^16``.
        eta: bits added per step, ``1 <= eta <= 16``; ``k 2^eta <= 2^22`` candidates per step.
        delta, tau: the error allowance and the heavy-hitter threshold (counts) of
            :meth:`PEMServer.heavy_hitters`.
        g: OLH's hash range; ``0`` (default) picks ``round(e^eps) + 1``.
    """

    protocol: ClassVar[str] = PROTOCOL_ID
    epsilon: float
    d: int
    k: int
    eta: int
    delta: float
    tau: float
    g: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "d", check_int("d", self.d, 2, PRIME))
        object.__setattr__(self, "k", check_int("k", self.k, 1, 2**16))
        object.__setattr__(self, "eta", check_int("eta", self.eta, 1, 16))
        if self.k << self.eta > 2**22:
            raise ParameterError(f"k * 2^eta must be <= 2^22 candidates per step, got {self.k} * 2^{self.eta}")
        object.__setattr__(self, "delta", check_real("delta", self.delta))
        object.__setattr__(self, "tau", check_real("tau", self.tau))
        if self.tau <= self.delta:
            raise ParameterError(f"tau must exceed delta, got tau={self.tau}, delta={self.delta}")
        g = check_int("g", self.g, 0, 2**62) or default_g(self.epsilon)
        object.__setattr__(self, "g", check_int("g", g, 2, 2**62))
        _ = self.flip_threshold                 # refuses a budget the 64-bit sampler cannot represent

    @classmethod
    def create(cls, epsilon: float, d: int, n: int, beta: float = 0.05, k: int = 32, eta: int = 4,
               delta: Optional[float] = None, tau: Optional[float] = None, **kwargs: Any) -> "PEMParams":
        """Parameters for ``n`` users with the default ``delta`` (module doc) at failure
        probability ``beta`` and ``tau = 3 delta`` unless given."""
        n = check_int("n", n, 1)
        beta = check_real("beta", beta, 0.0, 1.0)
        draft = cls(epsilon=epsilon, d=d, k=k, eta=eta, delta=1.0, tau=2.0, **kwargs)
        if delta is None:
            delta = draft.error_radius(n, beta)
        return dataclasses.replace(draft, delta=delta, tau=3 * delta if tau is None else tau)

    @property
    def L(self) -> int:
        """Bits of a value."""
        return max(1, (self.d - 1).bit_length())

    @property
    def start(self) -> int:
        """``s0 = ceil(log2 k)`` (at most ``L``)."""
        return min(self.L, max(0, (self.k - 1).bit_length()))

    @property
    def levels(self) -> int:
        """The number of groups (steps of the search)."""
        return max(1, -(-(self.L - self.start) // self.eta))

    def bits(self, level: int) -> int:
        """Prefix length of group ``level`` (1-based; 0 for level 0)."""
        return 0 if level == 0 else min(self.L, self.start + level * self.eta)

    def shift(self, level: int) -> int:
        """Right shift giving the level-``level`` prefix of a value."""
        return self.L - self.bits(level)

    def prefix_domain(self, level: int) -> int:
        """Number of possible level-``level`` prefixes: ``ceil(d / 2^shift)``."""
        return -(-self.d // (1 << self.shift(level)))

    @property
    def flip_threshold(self) -> int:
        """OLH's randomized response over ``[g]`` (effective epsilon <= epsilon)."""
        return rr_threshold(self.epsilon, self.g)

    @property
    def probabilities(self) -> Tuple[float, float]:
        """``(p, 1/g)``: probability that a report's hash matches its own prefix / another."""
        return math.exp(self.epsilon) / (math.expm1(self.epsilon) + self.g), 1.0 / self.g

    def variance(self, n: int, f: Any = 0.0) -> Any:
        """``Var(fhat)`` of the full-value estimate (the last group, counts scaled by
        ``levels``) at true frequency ``f``: ``[levels ((1-f) p'(1-p') + f (p(1-p) + (p-p')^2))
        / (p-p')^2 - f] / n``."""
        p, po = self.probabilities
        gap = p - po
        f = np.asarray(f, dtype=np.float64)
        out = (self.levels * ((1 - f) * po * (1 - po) + f * (p * (1 - p) + gap * gap)) / (gap * gap) - f) / n
        return float(out) if out.ndim == 0 else out

    def error_radius(self, n: int, beta: float) -> float:
        """Bernstein's bound on one prefix count estimate's error (absent prefix: variance
        ``n levels p'(1-p')/(p-p')^2``, each report within ``levels/(p-p')`` of its mean),
        at failure ``beta / N`` for the ``N`` candidates a search can examine."""
        p, po = self.probabilities
        variance = n * self.levels * po * (1 - po) / (p - po) ** 2
        spread = self.levels * max(po, 1 - po) / (p - po)
        examined = self.prefix_domain(1) + (self.levels - 1) * (self.k << self.eta)
        log_term = math.log(2 * examined / beta)
        return math.sqrt(2 * variance * log_term) + 2 * spread * log_term / 3


@dataclasses.dataclass
class PEMReports(_ReportsBase):
    """PEM reports: the user's group ``groups`` (uint32, ``< levels``), its OLH report of
    the group's prefix: the randomized hash ``z`` and the hash ``(a0, a1)`` (uint64)."""

    protocol: ClassVar[str] = PROTOCOL_ID
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"groups": ("uint32", 1), "z": ("uint64", 1),
                                                              "a0": ("uint64", 1), "a1": ("uint64", 1)}
    groups: np.ndarray
    z: np.ndarray
    a0: np.ndarray
    a1: np.ndarray

    def __post_init__(self) -> None:
        self.groups = check_array("groups", self.groups, np.uint32)
        self.z = check_array("z", self.z, np.uint64)
        self.a0 = check_array("a0", self.a0, np.uint64)
        self.a1 = check_array("a1", self.a1, np.uint64)
        self._check_lengths()

    def validate(self, params: PEMParams) -> None:
        """Raise ReportError unless every report fits ``params``."""
        check_below(self.groups, params.levels, "groups", "in", ReportError)
        check_below(self.z, params.g, "z", "in", ReportError)
        check_below(self.a0, PRIME, "a0", "field elements in", ReportError)
        check_below(self.a1, PRIME, "a1", "field elements in", ReportError)


def _uniform(key: bytes, count: int, size: int, threads: int) -> np.ndarray:
    from ..frequency.hashtogram import _uniform as uniform

    return np.asarray(uniform(key, count, size, threads))


class PEMClient(ClientBase):
    """PEM client: a uniform group (unless assigned, ``groups=``), then OLH of the group's
    prefix. ``rng=None`` (default) keys each batch from OS entropy; a seed is for simulation
    only."""

    def perturb(self, values: Any, groups: Any = None) -> PEMReports:
        """Privatize ``values`` in ``[0, d)``; ``groups`` (optional, ``< levels``) assigns the
        users' groups, which must not depend on the values."""
        p = self.params
        x = as_values(values, p.d)
        assigned = optional_index_array("groups", groups, x.size)
        if assigned is None:
            group = _uniform(self._keys.key(), x.size, p.levels, self.threads).astype(np.uint32)
        else:
            group = np.array(assigned, dtype=np.uint32)
            check_below(group, p.levels, "groups", "in", ParameterError)
        shifts = np.array([p.shift(level + 1) for level in range(p.levels)], dtype=np.uint64)
        prefixes = x >> shifts[group.astype(np.intp)]
        z, a0, a1 = _core.ocms_perturb(_field(), self._keys.key(), prefixes, p.g, p.flip_threshold, self.threads)
        return PEMReports(groups=group, z=z, a0=a0, a1=a1)


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


class PEMServer(Aggregator):
    """PEM server: keeps the reports (each has its own hash), in canonical order (sorted by
    group, z, a0, a1) for bytes and merges; estimates count matches per group in C++."""

    protocol: ClassVar[str] = PROTOCOL_ID
    params_type: ClassVar[type] = PEMParams
    reports_type: ClassVar[type] = PEMReports
    _ingest_validates: ClassVar[bool] = True
    params: PEMParams

    def __init__(self, params: PEMParams, threads: int = 0):
        super().__init__(params)
        self.threads = check_int("threads", threads, 0)
        self._st = _State(chunks=(), canonical=True)

    # -- aggregation ---------------------------------------------------------------------
    def _validate(self, reports: PEMReports) -> None:
        reports.validate(self.params)

    def _keeps_batch(self) -> bool:
        return True  # the batch's columns become a chunk of the state: fresh copies

    def _ingest(self, reports: PEMReports) -> Delta:
        # the columns are the library's own copies (see Aggregator._own), checked, then kept
        chunk = tuple(_frozen(getattr(reports, name)) for name in _COLUMNS)
        PEMReports(*chunk).validate(self.params)
        return (self._delta().replace("chunks", self._st["chunks"] + (chunk,)).replace("canonical", False)
                .replace("grouped", False))

    def _merged(self, theirs: Mapping[str, Any]) -> Delta:
        mine = self._st
        return (self._delta().replace("chunks", mine["chunks"] + theirs["chunks"])
                .replace("canonical", mine["canonical"] and not theirs["chunks"])
                .replace("grouped", mine.get("grouped", False) and not theirs["chunks"]))

    def _columns(self, canonical: bool = True) -> Tuple[np.ndarray, ...]:
        """The reports as one set of columns, sorted by group (estimates need no more) or,
        with ``canonical``, by (group, z, a0, a1) (bytes and equality); the compacted state
        (the same reports) is committed."""
        st = self._st
        chunks, ordered = st["chunks"], st["canonical"]
        if not chunks:
            return (np.zeros(0, np.uint32),) + tuple(np.zeros(0, np.uint64) for _ in range(3))
        if len(chunks) > 1 or (canonical and not ordered) or not st.get("grouped"):
            n = sum(int(c[0].size) for c in chunks)
            # the concatenated columns, the order and the sorted copies
            self._check_call(2 * 28 * n + 8 * n, lambda: f"compacting the {n} reports a PEM server keeps")
            columns = [np.concatenate([c[i] for c in chunks]) for i in range(4)]
            order = np.lexsort(columns[::-1]) if canonical else np.argsort(columns[0], kind="stable")
            chunks = (tuple(_frozen(column[order]) for column in columns),)
            self._st = _State(chunks=chunks, canonical=canonical, grouped=True)
        return tuple(chunks[0])

    def _state(self) -> Dict[str, np.ndarray]:
        return dict(zip(_COLUMNS, self._columns(canonical=True)))

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        columns = tuple(_frozen(np.array(state[name])) for name in _COLUMNS)
        self._st = _State(chunks=(columns,) if columns[0].size else (), canonical=False)

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        if set(state) != set(_COLUMNS):
            raise FormatError(f"stored state must hold the PEM report columns {list(_COLUMNS)}, got {sorted(state)}")
        try:
            PEMReports(**state).validate(self.params)
        except (ReportError, ParameterError) as exc:
            raise FormatError(f"stored reports do not fit the parameters: {exc}") from None

    # -- estimates -----------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of reports aggregated."""
        return sum(int(chunk[0].size) for chunk in self._st["chunks"])

    def _require_reports(self) -> None:
        if self.n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")

    def level_estimates(self, level: int, prefixes: Any) -> np.ndarray:
        """Count estimates ``levels (C(s) - n_j/g)/(p - 1/g)`` of level-``level`` prefixes from
        the ``n_j`` reports of group ``level`` (``C``: their hash matches)."""
        self._require_reports()
        p = self.params
        level = check_int("level", level, 1, p.levels)
        xs = as_values(prefixes, p.prefix_domain(level), "prefixes")
        groups, z, a0, a1 = self._columns(canonical=False)
        lo, hi = np.searchsorted(groups, [level - 1, level])
        matches = np.zeros(xs.size, dtype=np.uint64)
        if hi > lo and xs.size:
            _core.ocms_count_list(_field(), z[lo:hi], a0[lo:hi], a1[lo:hi], p.g, xs, matches, self.threads)
        prob, po = p.probabilities
        return np.asarray(p.levels * (matches.astype(np.float64) - (hi - lo) * po) / (prob - po))

    def estimate(self, candidates: Any, counts: bool = False) -> np.ndarray:
        """Full-value estimates of ``candidates`` (the last group), fractions (counts with
        ``counts=True``)."""
        est = self.level_estimates(self.params.levels, as_values(candidates, self.params.d, "candidates"))
        return est if counts else est / self.n

    def _search(self, threshold: float, top: int) -> HeavyHitters:
        self._require_reports()
        p = self.params
        kept = np.zeros(1, dtype=np.uint64)
        est = np.zeros(0)
        examined = 0
        for level in range(1, p.levels + 1):
            width = 1 << (p.bits(level) - p.bits(level - 1))
            check_allocation(32 * len(kept) * width, f"the level-{level} PEM search over {len(kept)} prefixes "
                                                     f"x {width} extensions")
            children = ((kept[:, None] << np.uint64(p.bits(level) - p.bits(level - 1)))
                        + np.arange(width, dtype=np.uint64)[None, :]).ravel()
            children = children[children < np.uint64(p.prefix_domain(level))]
            examined += len(children)
            est = self.level_estimates(level, children) if len(children) else np.zeros(0)
            kept, est = surviving_prefixes(children, est, threshold, top)
            if not len(kept):
                break
        return HeavyHitters.ranked(kept, est, self.n, examined, p.label_domain)

    def top_k(self, k: Optional[int] = None) -> HeavyHitters:
        """The paper's search: the top ``k`` (default ``params.k``) prefixes at every step, and
        the top ``k`` values at the last, with their count estimates."""
        return self._search(-math.inf, self.params.k if k is None else check_int("k", k, 1))

    def heavy_hitters(self, delta: Optional[float] = None, tau: Optional[float] = None,
                      top: Optional[int] = None) -> HeavyHitters:
        """The top-``k`` search keeping only the prefixes with an estimate ``>= tau - delta``
        (``delta``, ``tau``, ``top`` default to the parameters' ``delta``, ``tau``, ``k``):
        with every examined estimate within ``delta``, every value of count ``>= tau`` among
        the top ``k`` survivors is found and every output has count ``>= tau - 2 delta``."""
        p = self.params
        delta = p.delta if delta is None else check_real("delta", delta)
        tau = p.tau if tau is None else check_real("tau", tau)
        return self._search(tau - delta, p.k if top is None else check_int("top", top, 1))

    def _repr_extra(self) -> str:
        return f"levels={self.params.levels}"


def _variance(server: PEMServer, candidates: Any) -> Tuple[Any, str]:
    p, n = server.params, server.n
    return (lambda f: p.variance(n, f)), "plug-in f (PEMParams.variance: OLH on the last group, scaled by levels)"


def _audit_plan(params: PEMParams) -> Any:
    from ...audit import Plan, support_events, value_inputs

    shifts = np.array([params.shift(level + 1) for level in range(params.levels)], dtype=np.uint64)

    def support(reports: Any, w: int) -> np.ndarray:
        prefixes = np.uint64(w) >> shifts[reports.groups.astype(np.intp)]
        return np.asarray(_core.ocms_hash(_field(), reports.a0, reports.a1, prefixes, params.g) == reports.z)
    return Plan(value_inputs(0, params.d - 1), support_events(support, 0, params.d - 1),
                ("H(prefix x0) = z != H(prefix x1)", "H(prefix x1) = z != H(prefix x0)"))


def _make_params(eps: float, data: Any, beta: float, gen: np.random.Generator) -> PEMParams:
    return PEMParams.create(eps, data.d, data.n, beta)


def _simulations() -> Tuple[Any, ...]:
    from ...experiments import HeavyAlgorithm

    return (HeavyAlgorithm("pem", "PEM", "protocols.heavy.pem", _make_params,
                           "Wang et al.'s prefix extending method: top-k prefixes, eta bits per step, OLH groups"),)


def _wire(params: PEMParams) -> List[WireField]:
    return [WireField("groups", bits_for(params.levels), dtype="uint32"), WireField("z", bits_for(params.g)),
            WireField("a0", 64), WireField("a1", 64)]


def _example() -> Tuple[PEMParams, np.ndarray]:
    return PEMParams.create(epsilon=2.0, d=1024, n=3000, k=8, eta=3), zipf_values(1024, n=3000)


def _audit_params(eps: float, **changes: Any) -> PEMParams:
    return PEMParams(**{"epsilon": eps, "d": 64, "k": 4, "eta": 2, "delta": 1.0, "tau": 2.0, **changes})


register_protocol(Protocol(
    PROTOCOL_ID, PEMParams, PEMReports, PEMServer, PEMClient, example=_example, wire_fields=_wire, variance=_variance,
    extremes=edges(d=(2, 2**64), k=(1, 2**20), eta=(1, 64)),
    simulations=_simulations, audit=AuditHooks(_audit_params, _audit_plan, rr_epsilon("g"))))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "pem", {"Params": PEMParams, "Client": PEMClient,
                                                      "Server": PEMServer, "Reports": PEMReports})
