"""The baselines [PS] compares PrivSketch with (SPEC 4.6), re-exported by
:mod:`ldpfast.privsketch`:

* ``multi-pcms-mean``: Apple's private Count-Mean Sketch extended to sets (R2
  ``multi_pcms_mean_*``): one uniformly chosen row, every one of its M cells flipped with
  budget eps/M; eps-LDP.
* ``multi-pcms-min``: the whole K x M sketch, every cell flipped with budget eps/(KM),
  aggregate first and take the min; eps-LDP.
* ``ps-olh``: padding and sampling (PSFO, Wang, Li, Jha S&P 2018) + OLH; eps-LDP.
* :func:`svim`: SVIM frequent items (Wang, Li, Jha 2018; R3 ``find_singleton``), a
  three-group simulation.

OLH here is the CMS+RR estimator with ``m = g`` and per-user pairwise-independent hashes
over the prime field (SPEC 2.7), on the OCMS kernels.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np

from . import _core
from ._base import Aggregator, Params as _ParamsBase, Protocol, Reports as _ReportsBase, register_protocol
from ._random import KeySource, RngLike
from .datasets import SetData
from .errors import ParameterError, ReportError
from ._validate import check_epsilon, check_int, probability_threshold
from .kernels.field import PRIME
from .privsketch import (SketchParams, _candidate_array, _check_below, _check_bits, _column, _rr_flip_probability,
                         _SketchClient, _TrackedServer, as_sets)
from .theory.hadamard import c_eps

__all__ = [
    "MultiPCMSMeanParams", "MultiPCMSMeanReports", "MultiPCMSMeanClient", "MultiPCMSMeanServer",
    "MultiPCMSMinParams", "MultiPCMSMinReports", "MultiPCMSMinClient", "MultiPCMSMinServer",
    "PSOLHParams", "PSOLHReports", "PSOLHClient", "PSOLHServer", "padding_length", "olh_g",
    "svim", "SvimResult",
]


# -- Multi-PCMS-Mean ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MultiPCMSMeanParams(SketchParams):
    """Multi-PCMS-Mean (SPEC 4.6): K public hashes into [M]; each user sends one random row
    of its +-1 set sketch with every cell flipped with probability 1/(1 + e^{eps/M})."""

    protocol: ClassVar[str] = "multi-pcms-mean"


@dataclasses.dataclass
class MultiPCMSMeanReports(_ReportsBase):
    """``row`` (uint16) and its perturbed cells ``bits`` (int8 +-1, shape (n, M))."""

    protocol: ClassVar[str] = "multi-pcms-mean"
    row: np.ndarray
    bits: np.ndarray

    def __post_init__(self):
        self.row = _column("row", self.row, np.uint16, 1)
        self.bits = _column("bits", self.bits, np.int8, 2)
        self._check_lengths()


class MultiPCMSMeanClient(_SketchClient):
    """Multi-PCMS-Mean user side (R2 ``multi_pcms_mean_client``). ``rng``: see
    :class:`ldpfast.privsketch.Client` (None = OS entropy; seeds for simulation only)."""

    params_type: ClassVar[type] = MultiPCMSMeanParams
    _sampling = 2
    _with_order = False

    def _flip_probability(self) -> float:
        return _rr_flip_probability(self.params.epsilon / self.params.M)

    def perturb(self, sets) -> MultiPCMSMeanReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.privsketch.as_sets`)."""
        row, bits, _ = self._perturb(sets)
        return MultiPCMSMeanReports(row=row.astype(np.uint16), bits=bits)


class _TableServer(Aggregator):
    """State: ``sums`` (K x M, sum of the +-1 bits received per cell), ``rows`` (K, users
    per row) and ``n``."""

    def __init__(self, params):
        super().__init__(params)
        self._n = np.zeros(1, dtype=np.int64)
        self._rows = np.zeros(params.K, dtype=np.int64)
        self._sums = np.zeros((params.K, params.M), dtype=np.int64)

    def _state(self):
        return {"n": self._n, "rows": self._rows, "sums": self._sums}

    def _set_state(self, state):
        self._n, self._rows, self._sums = state["n"], state["rows"], state["sums"]

    @property
    def n(self) -> int:
        return int(self._n[0])

    def _require_reports(self):
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")

    def _cells(self, candidates):
        p = self.params
        cand = np.arange(p.d, dtype=np.int64) if candidates is None else _candidate_array(candidates, p.d)
        return p.cells(cand).astype(np.int64)


class MultiPCMSMeanServer(_TableServer):
    """Multi-PCMS-Mean collector (R2 ``multi_pcms_mean_server``): row j collects
    ``K((c/2) vhat + 1/2)`` with ``c = (e^{eps/M}+1)/(e^{eps/M}-1)``; the count of x is
    ``(1/K) sum_k Sum[k, H_k(x)]``."""

    protocol: ClassVar[str] = "multi-pcms-mean"
    params_type: ClassVar[type] = MultiPCMSMeanParams

    def update(self, reports: MultiPCMSMeanReports) -> "MultiPCMSMeanServer":
        """Add a batch (validated first; a rejected batch changes nothing). Returns self."""
        p = self.params
        if not isinstance(reports, MultiPCMSMeanReports):
            raise ReportError(f"reports must be MultiPCMSMeanReports, got {type(reports).__name__}")
        _check_below("row", reports.row, p.K, "K")
        if reports.bits.shape[1] != p.M:
            raise ReportError(f"bits must have shape (n, M={p.M}), got {reports.bits.shape}")
        _check_bits("bits", reports.bits)
        sums = np.zeros_like(self._sums)
        for k in range(p.K):
            sums[k] = reports.bits[reports.row == k].sum(axis=0, dtype=np.int64)
        self._sums = self._sums + sums
        self._rows = self._rows + np.bincount(reports.row, minlength=p.K)
        self._n = self._n + len(reports)
        return self

    def estimate(self, candidates=None, correction: bool = False) -> np.ndarray:
        """Frequencies. ``correction=False`` (faithful to R2): ``count(x)/n`` with no collision
        correction, so items look more frequent the fuller the users' rows are.
        ``correction=True`` (derived here, SPEC 4.6): ``sum_i (bhat_i(x) - what_i/M) /
        (n (1 - wbar/M))`` with ``what_i`` the sum of user i's decoded row."""
        self._require_reports()
        p = self.params
        c = c_eps(p.epsilon / p.M)
        decoded = c / 2.0 * self._sums + self._rows[:, None] / 2.0   # sum over users of (c v + 1)/2
        count = decoded.ravel()[self._cells(candidates)].sum(axis=1)
        if not correction:
            return count / self.n
        total = decoded.sum()                      # sum_i what_i
        wbar = total / self.n
        return (count - total / p.M) / (self.n * (1.0 - wbar / p.M))


# -- Multi-PCMS-Min ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MultiPCMSMinParams(SketchParams):
    """Multi-PCMS-Min (SPEC 4.6): each user sends its whole +-1 K x M sketch, every cell
    flipped with probability 1/(1 + e^{eps/(KM)})."""

    protocol: ClassVar[str] = "multi-pcms-min"


@dataclasses.dataclass
class MultiPCMSMinReports(_ReportsBase):
    """The perturbed sketches ``bits`` (int8 +-1, shape (n, K, M))."""

    protocol: ClassVar[str] = "multi-pcms-min"
    bits: np.ndarray

    def __post_init__(self):
        self.bits = _column("bits", self.bits, np.int8, 3)


class MultiPCMSMinClient(_SketchClient):
    """Multi-PCMS-Min user side (R2 ``multi_pcms_min_client``)."""

    params_type: ClassVar[type] = MultiPCMSMinParams
    _sampling = 0
    _with_order = False

    def _flip_probability(self) -> float:
        return _rr_flip_probability(self.params.epsilon / (self.params.K * self.params.M))

    def perturb(self, sets) -> MultiPCMSMinReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.privsketch.as_sets`)."""
        _, bits, _ = self._perturb(sets)
        return MultiPCMSMinReports(bits=bits.reshape(-1, self.params.K, self.params.M))


class MultiPCMSMinServer(_TableServer):
    """Multi-PCMS-Min collector (R2 ``multi_pcms_min_server``): aggregate the decoded bits
    ``(c/2) vhat + 1/2`` (``c`` for eps/(KM)) into a K x M table, return
    ``min_k Sum[k, H_k(x)] / n`` (biased: aggregate first, then min)."""

    protocol: ClassVar[str] = "multi-pcms-min"
    params_type: ClassVar[type] = MultiPCMSMinParams

    def update(self, reports: MultiPCMSMinReports) -> "MultiPCMSMinServer":
        """Add a batch (validated first; a rejected batch changes nothing). Returns self."""
        p = self.params
        if not isinstance(reports, MultiPCMSMinReports):
            raise ReportError(f"reports must be MultiPCMSMinReports, got {type(reports).__name__}")
        if reports.bits.shape[1:] != (p.K, p.M):
            raise ReportError(f"bits must have shape (n, {p.K}, {p.M}), got {reports.bits.shape}")
        _check_bits("bits", reports.bits)
        self._sums = self._sums + reports.bits.sum(axis=0, dtype=np.int64)
        self._rows = self._rows + len(reports)
        self._n = self._n + len(reports)
        return self

    def estimate(self, candidates=None) -> np.ndarray:
        """Frequencies of ``candidates`` (default the whole domain)."""
        self._require_reports()
        p = self.params
        c = c_eps(p.epsilon / (p.K * p.M))
        table = c / 2.0 * self._sums + self.n / 2.0
        return table.ravel()[self._cells(candidates)].min(axis=1) / self.n


# -- PS-OLH --------------------------------------------------------------------------------------
def olh_g(epsilon: float) -> int:
    """OLH's hash range ``g = round(e^eps) + 1`` (SPEC 2.7)."""
    return int(round(math.exp(check_epsilon(epsilon)))) + 1


def padding_length(sets, quantile: float = 90.0) -> int:
    """Padding length for PS-OLH: the ``quantile``-th percentile (nearest rank) of the set
    sizes, at least 1 ([PS] uses the 90th, assumed known)."""
    sizes = sets.sizes() if isinstance(sets, SetData) else np.diff(np.asarray(sets[0]))
    if sizes.size == 0:
        raise ParameterError("sets must hold at least one user")
    ordered = np.sort(sizes)
    rank = max(1, int(math.ceil(quantile / 100.0 * ordered.size)))
    return max(1, int(ordered[rank - 1]))


@dataclasses.dataclass(frozen=True)
class PSOLHParams(_ParamsBase):
    """PS-OLH (SPEC 4.6): padding length ``pad_len``; OLH over ``D ∪ {dummy = d}`` with
    ``g`` (default ``round(e^eps)+1``). ``amplify=True`` uses the PSFO budget
    ``eps' = log(pad_len (e^eps - 1) + 1)`` for the OLH step (R2 and the default do not)."""

    protocol: ClassVar[str] = "ps-olh"
    epsilon: float
    d: int
    pad_len: int
    g: int = 0
    amplify: bool = False
    field_size: int = PRIME

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        check_int("d", self.d, 1, self.field_size - 2)
        check_int("pad_len", self.pad_len, 1)
        if not isinstance(self.amplify, bool):
            raise ParameterError(f"amplify must be a bool, got {type(self.amplify).__name__}")
        g = self.g or int(round(math.exp(self.olh_epsilon))) + 1
        object.__setattr__(self, "g", check_int("g", g, 2, 2**62))

    @property
    def olh_epsilon(self) -> float:
        if self.amplify:
            return math.log(self.pad_len * math.expm1(self.epsilon) + 1.0)
        return self.epsilon

    @property
    def flip_probability(self) -> float:
        """GRR flip probability ``(g-1)/(e^eps' + g - 1)`` (SPEC 1.2)."""
        return (self.g - 1) / (math.exp(self.olh_epsilon) + self.g - 1)


@dataclasses.dataclass
class PSOLHReports(_ReportsBase):
    """OLH reports: perturbed hash ``z`` in [0, g) and the user's hash ``a0, a1`` (uint64)."""

    protocol: ClassVar[str] = "ps-olh"
    z: np.ndarray
    a0: np.ndarray
    a1: np.ndarray

    def __post_init__(self):
        self.z = _column("z", self.z, np.uint64, 1)
        self.a0 = _column("a0", self.a0, np.uint64, 1)
        self.a1 = _column("a1", self.a1, np.uint64, 1)
        self._check_lengths()


class PSOLHClient:
    """PS-OLH user side: padding and sampling to one item (or the dummy ``d``), then OLH
    with a fresh pairwise-independent hash per user. ``rng``: None = OS entropy; seeds are
    for simulation only."""

    def __init__(self, params: PSOLHParams, rng: RngLike = None, threads: int = 0):
        if not isinstance(params, PSOLHParams):
            raise ParameterError(f"params must be PSOLHParams, got {type(params).__name__}")
        self.params = params
        self.threads = check_int("threads", threads, 0)
        self._keys = KeySource(rng)

    def perturb(self, sets) -> PSOLHReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.privsketch.as_sets`)."""
        p = self.params
        offsets, items = as_sets(sets, p.d)
        values = _core.privsketch_padding_sample(self._keys.key(), offsets, items, p.pad_len, p.d, self.threads)
        z, a0, a1 = _core.ocms_perturb(_core.Field.prime(p.field_size), self._keys.key(), values, p.g,
                                       probability_threshold(p.flip_probability), self.threads)
        return PSOLHReports(z=z, a0=a0, a1=a1)


class PSOLHServer(_TrackedServer):
    """PS-OLH collector: per candidate the number of users whose hash of it matches their
    report (``pos``; ``neg`` unused); ``chat = (g C - n)/(p g - 1)``, ``fhat = pad_len
    chat / n``. Decoding costs O(n |D|) hash evaluations (C++, threads)."""

    protocol: ClassVar[str] = "ps-olh"
    params_type: ClassVar[type] = PSOLHParams

    def update(self, reports: PSOLHReports) -> "PSOLHServer":
        """Add a batch (validated first; a rejected batch changes nothing). Returns self."""
        p = self.params
        if not isinstance(reports, PSOLHReports):
            raise ReportError(f"reports must be PSOLHReports, got {type(reports).__name__}")
        _check_below("z", reports.z, p.g, "g")
        _check_below("a0", reports.a0, p.field_size, "field_size")
        _check_below("a1", reports.a1, p.field_size, "field_size")
        field = _core.Field.prime(p.field_size)
        matches = np.zeros(self._cand.size, dtype=np.uint64)
        if self._cand.size == p.d:
            _core.ocms_count_range(field, reports.z, reports.a0, reports.a1, p.g, 0, matches, self.threads)
        else:
            _core.ocms_count_list(field, reports.z, reports.a0, reports.a1, p.g, self._cand.astype(np.uint64),
                                  matches, self.threads)
        self._commit(len(reports), matches.astype(np.int64), np.zeros(self._cand.size, dtype=np.int64))
        return self

    def estimate(self, candidates=None) -> np.ndarray:
        """Frequencies of ``candidates`` (default every tracked item)."""
        cand = self._query(candidates)
        p = self.params
        keep = math.exp(p.olh_epsilon) / (math.exp(p.olh_epsilon) + p.g - 1)
        chat = (p.g * self._pos[cand].astype(np.float64) - self.n) / (keep * p.g - 1.0)
        return p.pad_len * chat / self.n


register_protocol(Protocol(id="multi-pcms-mean", params=MultiPCMSMeanParams, reports=MultiPCMSMeanReports,
                           aggregator=MultiPCMSMeanServer, client=MultiPCMSMeanClient))
register_protocol(Protocol(id="multi-pcms-min", params=MultiPCMSMinParams, reports=MultiPCMSMinReports,
                           aggregator=MultiPCMSMinServer, client=MultiPCMSMinClient))
register_protocol(Protocol(id="ps-olh", params=PSOLHParams, reports=PSOLHReports, aggregator=PSOLHServer,
                           client=PSOLHClient))


# -- SVIM -------------------------------------------------------------------------------------
@dataclasses.dataclass
class SvimResult:
    """``top``: the k items SVIM reports (most frequent first); ``estimates``: their
    frequency estimates; ``candidates``: phase-1 candidates; ``L``: the phase-2 length."""

    top: np.ndarray
    estimates: np.ndarray
    candidates: np.ndarray
    L: int


def _olh_counts(values: np.ndarray, domain: int, epsilon: float, keys: KeySource, candidates: np.ndarray,
                g: int, threads: int) -> np.ndarray:
    """OLH count estimates ``(g C - n)/(p g - 1)`` of ``candidates`` from users holding ``values``."""
    p_flip = (g - 1) / (math.exp(epsilon) + g - 1)
    field = _core.Field.prime(PRIME)
    z, a0, a1 = _core.ocms_perturb(field, keys.key(), values.astype(np.uint64), g, probability_threshold(p_flip), threads)
    matches = np.zeros(candidates.size, dtype=np.uint64)
    _core.ocms_count_list(field, z, a0, a1, g, candidates.astype(np.uint64), matches, threads)
    keep = math.exp(epsilon) / (math.exp(epsilon) + g - 1)
    return (g * matches.astype(np.float64) - values.size) / (keep * g - 1.0)


def svim(sets: SetData, epsilon: float, k: int = 50, rng: RngLike = None, threads: int = 0) -> SvimResult:
    """SVIM frequent items (SPEC 4.6; R3 ``svsm.find_singleton``), simulated on ``sets``.

    Users are split at random into groups of 40% / 10% / 50%. G1: one uniformly sampled
    item per non-empty user, OLH over [0, d) (``g = int(e^eps) + 1`` as in R3), the top 2k
    become candidates C. G2: ``|S ∩ C|`` with OLH; L = the smallest length whose estimated
    cumulative share exceeds 0.9. G3: pad-and-sample ``S ∩ C`` to L (dummy ``|C|``),
    reported with GRR and the amplified ``eps' = log(L(e^eps-1)+1)`` when
    ``|C| < L e^eps (4L-1) + 1``, else OLH(eps). Estimates: ``fhat = L chat3/(0.9 n3)``
    (SPEC 4.6 [CHOICE]; R3 leaves out L). Returns the top k of C. Seeds: simulation only.
    """
    eps = check_epsilon(epsilon)
    k = check_int("k", k, 1)
    keys = KeySource(rng)
    gen = keys.generator()
    n = sets.n
    perm = gen.permutation(n)
    g1, g2, g3 = perm[: int(0.4 * n)], perm[int(0.4 * n): int(0.5 * n)], perm[int(0.5 * n):]
    g_olh = int(math.exp(eps)) + 1
    sizes = sets.sizes()

    # Phase 1: candidates.
    users = g1[sizes[g1] > 0]
    picks = sets.items[sets.offsets[users] + (gen.random(users.size) * sizes[users]).astype(np.int64)]
    est1 = _olh_counts(picks, sets.d, eps, keys, np.arange(sets.d), g_olh, threads)
    cand = np.argsort(-est1, kind="stable")[: 2 * k]
    in_cand = np.zeros(sets.d, dtype=bool)
    in_cand[cand] = True

    def intersect(user_ids):
        return [sets.user(i)[in_cand[sets.user(i)]] for i in user_ids]

    # Phase 2: length of S ∩ C.
    lengths = np.array([s.size for s in intersect(g2)], dtype=np.int64)
    max_len = max(2, int(lengths.max(initial=0)) + 1)
    est2 = _olh_counts(lengths, max_len, eps, keys, np.arange(max_len), g_olh, threads)
    share = np.cumsum(np.clip(est2, 0, None)) / max(np.clip(est2, 0, None).sum(), 1e-300)
    L = next((l for l in range(1, max_len) if share[l] > 0.9), max_len - 1)

    # Phase 3: pad and sample to L over C ∪ {dummy}.
    c_size = cand.size
    local = np.full(sets.d, c_size, dtype=np.int64)
    local[cand] = np.arange(c_size)
    inter = intersect(g3)
    r = (gen.random(len(inter)) * L).astype(np.int64)
    values = np.array([local[s[j]] if j < s.size else c_size for s, j in zip(inter, r)], dtype=np.int64)
    if c_size < L * math.exp(eps) * (4 * L - 1) + 1:
        eps_amp = math.log(L * math.expm1(eps) + 1)
        m = c_size + 1
        p_flip = (m - 1) / (math.exp(eps_amp) + m - 1)
        z = _core.randomized_response(keys.key(), values.astype(np.uint64), m, probability_threshold(p_flip), threads)
        keep, other = math.exp(eps_amp) / (math.exp(eps_amp) + m - 1), 1.0 / (math.exp(eps_amp) + m - 1)
        counts = np.bincount(z.astype(np.int64), minlength=m)[:c_size]
        chat3 = (counts - values.size * other) / (keep - other)
    else:
        chat3 = _olh_counts(values, c_size + 1, eps, keys, np.arange(c_size), g_olh, threads)
    freq = L * chat3 / (0.9 * max(len(inter), 1))
    best = np.argsort(-freq, kind="stable")[:k]
    return SvimResult(top=cand[best], estimates=freq[best], candidates=cand, L=int(L))
