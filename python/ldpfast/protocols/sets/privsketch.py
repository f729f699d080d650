"""PrivSketch ([PS]: Li, Lee, Peng, Palpanas, Xue, DEXA 2023) and the sketch baselines it is
compared with, for users holding *sets* of items from ``[0, d)``.

**Privacy, read first.** The published protocol sends, next to one randomized-response
bit, an *ordering matrix* ``O`` that ranks the cells of the user's K x M Bloom-style sketch
so that every 0-cell ranks below every 1-cell. ``O`` is a deterministic function of which
cells are 1 (up to a random order inside each group), so the report is **not eps-LDP for
any finite eps**: anyone who receives it can read the user's sketch support, and with it
recover the items of small sets (the test suite's ``test_privsketch_leak.py``
recovers single-item users' items from ``O`` alone).
The paper's Thm 3.3 limits its claim to an "indistinguishable input set" derived from the
output itself, which is not the LDP definition. :class:`PrivSketchClient` and :class:`NoSmpClient`
therefore emit a :class:`PrivacyWarning` on construction; their ``epsilon`` is only the
budget of the randomized-response part, never a guarantee for the whole report.

Protocols (one ``PrivSketchParams``/``PrivSketchClient``/``PrivSketchReports``/``PrivSketchServer`` set each):

* ``privsketch`` (:class:`PrivSketchParams`): sampled cell + RR + ordering matrix, decode-first
  collector ([PS] Alg. 1-3 with sampling, section 3.3). **Not LDP.**
* ``privsketch-nosmp`` (:class:`NoSmpParams`): every cell flipped with eps/(KM) + ordering
  matrix ([PS] section 4.2). **Not LDP.**
* ``privsketch-ldp`` (:class:`~ldpfast.protocols.sets.privsketch_ldp.SafeParams`, in
  :mod:`ldpfast.protocols.sets.privsketch_ldp`): the LDP-safe variant, the sampled cell + RR
  **without** ordering matrix; eps-LDP (one RR bit on a data-independent cell). Decoded
  count-mean style over the sampled cell; see
  :meth:`~ldpfast.protocols.sets.privsketch_ldp.SafeServer.estimate`.
* the baselines [PS] compares with (section 4), each in its own module:
  ``multi-pcms-mean`` / ``multi-pcms-min`` (Apple's private CMS extended to sets,
  :mod:`ldpfast.protocols.sets.multi_pcms`), ``ps-olh`` (padding and sampling + OLH,
  :mod:`ldpfast.protocols.sets.ps_olh`) and SVIM (:mod:`ldpfast.protocols.sets.svim`).

All sketch protocols share ``K`` public pairwise-independent hash functions
``H_k(x) = ((a0_k + a1_k x) mod p) mod M`` over the prime field ``p = 2^64 - 59``
(the hash of [PAN] Algorithm 1), whose coefficients are part of the parameters.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, List, Tuple, Type, Union

import numpy as np

from ... import _core
from ..._base import Delta, Protocol, Reports as _ReportsBase, register_protocol
from ..._random import RngLike
from ..._validate import check_array, check_below, check_bits
from ...errors import ParameterError, ReportError
from ...kernels.field import PRIME  # noqa: F401  (re-exported)
from ...theory.hadamard import c_eps
from ...errors import PrivacyWarning  # noqa: F401  (re-exported: ldpfast.protocols.sets.privsketch.PrivacyWarning)
from ._sets import SetsLike, SketchClient, SketchParams, TrackedServer, as_sets, warn_not_ldp
from ..._base import AuditHooks
from ...estimates import PLUG_IN
from ...uncertainty import PlugIn
from ..._base import WireField, bits_for
from .._aliases import deprecated_names
from .._registration import (edges, COUNT_MIN, SIGN, order_plan, random_sets, sketch_epsilon, sketch_simulation, theory,
                            tracked_candidates)

__all__ = [
    "PRIME", "SketchParams", "PrivSketchParams", "NoSmpParams", "PrivSketchReports", "NoSmpReports", "PrivSketchClient",
    "NoSmpClient", "PrivSketchServer", "NoSmpServer", "as_sets",
]


_NOT_LDP = (
    "{name} reports are NOT eps-LDP: the ordering matrix O reveals which sketch cells are 1 "
    "(all 0-cells rank below all 1-cells), so the collector can read the user's Bloom-filter "
    "support and recover small item sets. epsilon={eps} covers only the randomized-response "
    "bits, not the report. Use it to reproduce [PS] only; for a private protocol use "
    "ldpfast.protocols.sets.privsketch_ldp.SafeParams (no ordering matrix).")


@dataclasses.dataclass(frozen=True)
class PrivSketchParams(SketchParams):
    """PrivSketch with sampling ([PS] section 3.3). **Not eps-LDP** (module doc): building
    it emits a :class:`PrivacyWarning`."""

    protocol: ClassVar[str] = "privsketch"

    def privacy_warning(self) -> str:
        return _NOT_LDP.format(name="PrivSketch", eps=self.epsilon)


@dataclasses.dataclass(frozen=True)
class NoSmpParams(SketchParams):
    """PrivSketch-noSmp ([PS] Alg. 2-3, section 4.2): every cell flipped with budget eps/(KM).
    **Not eps-LDP** (module doc): building it emits a :class:`PrivacyWarning`."""

    protocol: ClassVar[str] = "privsketch-nosmp"
    bit_divisor: ClassVar[str] = "K*M"

    def privacy_warning(self) -> str:
        return _NOT_LDP.format(name="PrivSketch-noSmp", eps=self.epsilon)


@dataclasses.dataclass
class PrivSketchReports(_ReportsBase):
    """PrivSketch reports: sampled row ``k`` and column ``m`` (uint16), the RR bit
    ``bit`` (int8, +-1) of cell ``(k, m)``, and the ordering matrix ``order``
    (uint16, shape (n, K, M), a permutation of ``[0, K*M)`` per user)."""

    protocol: ClassVar[str] = "privsketch"
    column_types: ClassVar = {"k": ("uint16", 1), "m": ("uint16", 1), "bit": ("int8", 1), "order": ("uint16", 3)}
    k: np.ndarray
    m: np.ndarray
    bit: np.ndarray
    order: np.ndarray

    def __post_init__(self) -> None:
        self.k = check_array("k", self.k, np.uint16, 1, cast=True)
        self.m = check_array("m", self.m, np.uint16, 1, cast=True)
        self.bit = check_array("bit", self.bit, np.int8, 1, cast=True)
        self.order = check_array("order", self.order, np.uint16, 3, cast=True)
        self._check_lengths()


@dataclasses.dataclass
class NoSmpReports(_ReportsBase):
    """PrivSketch-noSmp reports: every perturbed cell ``bits`` (int8 +-1, shape (n, K, M))
    and the ordering matrix ``order`` (uint16, shape (n, K, M))."""

    protocol: ClassVar[str] = "privsketch-nosmp"
    column_types: ClassVar = {"bits": ("int8", 3), "order": ("uint16", 3)}
    bits: np.ndarray
    order: np.ndarray

    def __post_init__(self) -> None:
        self.bits = check_array("bits", self.bits, np.int8, 3, cast=True)
        self.order = check_array("order", self.order, np.uint16, 3, cast=True)
        self._check_lengths()


def _check_reports(reports: Union[PrivSketchReports, NoSmpReports], params: SketchParams) -> None:
    K, M = params.K, params.M
    if isinstance(reports, PrivSketchReports):
        check_below(reports.k, K, "k", label="K")
        check_below(reports.m, M, "m", label="M")
        check_bits("bit", reports.bit)
    if isinstance(reports, NoSmpReports):
        if reports.bits.shape[1:] != (K, M):
            raise ReportError(f"bits must have shape (n, {K}, {M}), got {reports.bits.shape}")
        check_bits("bits", reports.bits)
    if hasattr(reports, "order") and reports.order.shape[1:] != (K, M):
        raise ReportError(f"order must have shape (n, {K}, {M}), got {reports.order.shape}")


class PrivSketchClient(SketchClient):
    """PrivSketch user side with sampling ([PS] Alg. 2 lines 1-5 + section 3.3 sampling).

    Each user builds the K x M bit sketch of its set (Boolean OR), the ordering matrix ([PS]
    section 3.2, with its rank ranges' off-by-one corrected to half-open ranges), samples
    one cell uniformly and flips its +-1 value with probability 1/(e^eps + 1). Randomness:
    ChaCha20 per batch; ``rng=None`` uses OS entropy, an int/SeedSequence/Generator is for
    simulation only.

    Emits :class:`PrivacyWarning`: the ordering matrix makes the report **not** eps-LDP.
    """

    params_type: ClassVar[type] = PrivSketchParams
    _sampling = 1

    def __init__(self, params: PrivSketchParams, rng: RngLike = None, threads: int = 0):
        super().__init__(params, rng, threads)
        warn_not_ldp(params)

    def perturb(self, sets: SetsLike) -> PrivSketchReports:
        """PrivSketchReports for a batch of users (``sets``: see :func:`as_sets`)."""
        cell, bits, order = self._perturb(sets)
        assert order is not None  # _with_order (SketchClient's default): the kernel returns it
        return PrivSketchReports(k=(cell // self.params.M).astype(np.uint16),
                                 m=(cell % self.params.M).astype(np.uint16),
                       bit=bits[:, 0], order=order)


class NoSmpClient(SketchClient):
    """PrivSketch-noSmp user side ([PS] Alg. 2, whose lines 6-10 index
    with the leftover item ``l`` where every cell is meant): every
    cell of the +-1 sketch is flipped with probability 1/(e^{eps/(KM)} + 1).

    Emits :class:`PrivacyWarning`: the ordering matrix makes the report **not** eps-LDP."""

    params_type: ClassVar[type] = NoSmpParams
    _sampling = 0

    def __init__(self, params: NoSmpParams, rng: RngLike = None, threads: int = 0):
        super().__init__(params, rng, threads)
        warn_not_ldp(params)

    def perturb(self, sets: SetsLike) -> NoSmpReports:
        """PrivSketchReports for a batch of users (``sets``: see :func:`as_sets`)."""
        _, bits, order = self._perturb(sets)
        assert order is not None  # _with_order (SketchClient's default): the kernel returns it
        return NoSmpReports(bits=bits.reshape(-1, self.params.K, self.params.M), order=order)


#: Per-candidate cells, then the inverted index: CSR offsets, candidate positions, their cells.
_Index = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
_INDEX_CACHE: Dict[Tuple[SketchParams, bytes], _Index] = {}
_INDEX_CACHE_SIZE = 4


def _bucket_index(params: SketchParams, cand: np.ndarray) -> _Index:
    """Per-candidate cells ``k*M + H_k(x)`` (shape (D, K)) and the inverted index
    cell -> candidates (CSR offsets over the K*M cells, candidate positions, and each
    entry's K cells). Built once per (parameters, candidate set) and cached."""
    cells = params.cells(cand)
    flat = cells.ravel().astype(np.int64)
    order = np.argsort(flat, kind="stable")
    bucket_cand = (order // params.K).astype(np.uint32)
    bucket_cells = np.ascontiguousarray(cells[bucket_cand])
    offsets = np.zeros(params.K * params.M + 1, dtype=np.int64)
    np.cumsum(np.bincount(flat, minlength=params.K * params.M), out=offsets[1:])
    for arr in (cells, offsets, bucket_cand, bucket_cells):
        arr.flags.writeable = False
    return cells, offsets, bucket_cand, bucket_cells


class PrivSketchServer(TrackedServer):
    """PrivSketch collector, decode-first with sampling ([PS] section 3.3; Alg. 3 adapted).

    ``PrivSketchServer(params, candidates=None, threads=0)``: ``candidates`` is the set ``D`` to be
    estimated (default: the whole domain). For each report only the candidates hashed into
    the sampled bucket ``(k, m)`` can count (a per-row inverted index built once); a
    candidate counts when the sampled cell has the smallest rank among its K cells
    (``argmin_k O[k, H_k(x)] == k``). Counts of +1 and -1 bits per candidate are integral;
    :meth:`estimate` applies the debiasing. C++, multithreaded, GIL released.
    """

    protocol: ClassVar[str] = "privsketch"
    params_type: ClassVar[type] = PrivSketchParams
    reports_type: ClassVar[type] = PrivSketchReports
    params: SketchParams  # PrivSketchParams, or NoSmpParams for the subclass
    _bits_per_report = 1

    def _build_index(self) -> None:
        if self._index_ready:
            return
        key = (self.params, hashlib.sha256(self._tracked.tobytes()).digest())
        index = _INDEX_CACHE.pop(key, None) or _bucket_index(self.params, self._cand)
        _INDEX_CACHE[key] = index                     # most recently used last
        while len(_INDEX_CACHE) > _INDEX_CACHE_SIZE:
            _INDEX_CACHE.pop(next(iter(_INDEX_CACHE)))
        self._cand_cells, self._bucket_offsets, self._bucket_cand, self._bucket_cells = index
        self._index_ready = True

    def _decode(self, reports: Any) -> Tuple[np.ndarray, np.ndarray, int]:
        # reports: this server's reports_type (PrivSketchReports here, NoSmpReports in NoSmpServer)
        p = self.params
        cell = reports.k.astype(np.uint32) * p.M + reports.m
        return _core.privsketch_decode_cell(p.K, p.M, reports.order, cell, reports.bit, self._bucket_offsets,
                                            self._bucket_cand, self._bucket_cells, self._cand.size,
                                            self.threads)

    def _validate(self, reports: Union[PrivSketchReports, NoSmpReports]) -> None:
        """Ranges, +-1 bits and shapes (the ordering matrices are checked while decoding:
        each must be a permutation of ``[0, K*M)``)."""
        _check_reports(reports, self.params)

    def _ingest(self, reports: Union[PrivSketchReports, NoSmpReports]) -> Delta:
        n, D = len(reports), self._cand.size
        if not self._index_ready:
            # cells (D, K), their sort order, flat copies and the inverted index: about 40 bytes per cell
            self._check_call(40 * D * self.params.K + 8 * self.params.K * self.params.M,
                             f"the bucket index of {D} PrivSketch candidates")
        # the decoded +1 and -1 counts per candidate and the sampled cells
        self._check_call(16 * D + 4 * n, f"decoding a batch of {n} reports for {D} candidates")
        self._build_index()
        pos, neg, bad = self._decode(reports)
        if bad < n:
            raise ReportError(f"order of report {bad} is not a permutation of [0, K*M={self.params.K * self.params.M})")
        bits = reports.bits if hasattr(reports, "bits") else reports.bit
        ups = int(np.count_nonzero(bits > 0))
        return self._added(len(reports), pos, neg, ups, bits.size - ups)

    def diagnostics(self) -> Dict[str, float]:
        """Bloom-bias diagnostics (the estimates target the count-min frequency ``ftilde >=
        f``; the gap is the sketches' false-positive mass): ``mean_fill``, an unbiased
        estimate of the average share of 1-cells in the users' sketches (from the received
        bits of uniformly placed cells), and ``false_positive_rate`` = ``mean_fill ** K``,
        approximately the chance that a non-member looks present in a user's count-min (a
        lower bound by Jensen's inequality when fills vary between users), so ``ftilde(x) -
        f(x)`` is about ``(1 - f(x)) * false_positive_rate``."""
        if self.n == 0:
            raise ReportError("diagnostics need at least one report (n = 0)")
        p = self.params
        ups, downs = (float(v) for v in self._bits)
        cells = self._cells_per_report()
        c = self._bit_constant()
        fill = (c * (ups - downs) + (ups + downs)) / (2.0 * self.n * cells)
        return {"n": self.n, "mean_fill": fill, "false_positive_rate": max(fill, 0.0) ** p.K}

    def _cells_per_report(self) -> int:
        return 1

    def _bit_constant(self) -> float:
        return c_eps(self.params.epsilon)

    def estimate(self, candidates: Any = None, counts: bool = False, estimator: str = "r2") -> np.ndarray:
        """Frequencies (fractions of users; counts with ``counts=True``) of ``candidates``
        (default: every tracked item).

        ``estimator="r2"`` (default, [PS]/R2): ``fhat = (KM/n) sum_i I_i (c b_i + 1)/2``,
        unbiased for the count-min frequency ``ftilde >= f`` with variance
        ``[KM e^eps/(e^eps-1)^2 + (KM-1) ftilde]/n`` (derived here; [PS] prints only the
        ``ftilde = 0`` value).
        ``estimator="centred"``: ``1/2 + (KM c/(2n)) sum_i I_i b_i``, also unbiased, variance
        ``(KM c^2 - 1)/(4n)`` (smaller when ``ftilde > 1/4``). Here ``c = (e^eps+1)/(e^eps-1)``.
        """
        cand = self._query(candidates)
        p = self.params
        pos, neg = self._pos[cand].astype(np.float64), self._neg[cand].astype(np.float64)
        KM, n, c = p.K * p.M, float(self.n), c_eps(p.epsilon)
        est: np.ndarray
        if estimator == "r2":
            est = KM / n * (c * (pos - neg) + (pos + neg)) / 2.0
        elif estimator == "centred":
            est = 0.5 + KM * c / (2.0 * n) * (pos - neg)
        else:
            raise ParameterError(f"estimator must be 'r2' or 'centred', got {estimator!r}")
        return est * n if counts else est


class NoSmpServer(PrivSketchServer):
    """PrivSketch-noSmp collector ([PS] Alg. 3): every candidate takes each
    user's perturbed bit at ``argmin_k O[k, H_k(x)]``. Cost ``O(n |D| K)`` (C++, threads)."""

    protocol: ClassVar[str] = "privsketch-nosmp"
    params_type: ClassVar[type] = NoSmpParams
    reports_type: ClassVar[type] = NoSmpReports

    @property
    def _bits_per_report(self) -> int:  # type: ignore[override]
        return self.params.K * self.params.M

    def _decode(self, reports: Any) -> Tuple[np.ndarray, np.ndarray, int]:
        p = self.params
        bits = reports.bits.reshape(len(reports), p.K * p.M)
        return _core.privsketch_decode_full(p.K, p.M, reports.order, bits, self._cand_cells, self.threads)

    def _cells_per_report(self) -> int:
        return self.params.K * self.params.M

    def _bit_constant(self) -> float:
        return c_eps(self.params.bit_epsilon)

    # noSmp has a single estimator, so no estimator= argument
    def estimate(self, candidates: Any = None, counts: bool = False, estimator: str = "nosmp") -> np.ndarray:
        """Frequencies (counts with ``counts=True``): ``fhat = (c' C(x)/n + 1)/2`` with ``C = #(+1) - #(-1)`` and
        ``c' = (e^{eps/KM}+1)/(e^{eps/KM}-1)``: unbiased for ``ftilde``, variance
        ``e^{eps/KM}/(n (e^{eps/KM}-1)^2)`` ([PS] Thm 3.2). Without sampling there is one
        estimator, ``"nosmp"``."""
        if estimator != "nosmp":
            raise ParameterError(f"estimator must be 'nosmp' (PrivSketch-noSmp has one estimator), got {estimator!r}")
        cand = self._query(candidates)
        p = self.params
        c = c_eps(p.bit_epsilon)
        diff = self._pos[cand].astype(np.float64) - self._neg[cand].astype(np.float64)
        est: np.ndarray = 0.5 * (c * diff / self.n + 1.0)
        return est * self.n if counts else est


def _sketch_example(params_type: Type[SketchParams]) -> Callable[[], Tuple[SketchParams, List[List[int]]]]:
    return lambda: (params_type.create(epsilon=2.0, d=60, K=2, M=8, seed=1), random_sets(60))


def _privsketch_variance(server: PrivSketchServer, candidates: np.ndarray) -> PlugIn:
    p, n = server.params, server.n
    return PlugIn(lambda f: theory().privsketch_variance(p.epsilon, n, f, K=p.K, M=p.M), len(candidates),
                  f"{PLUG_IN} (theory.privsketch_variance, R2 estimator)", COUNT_MIN)


def _nosmp_variance(server: NoSmpServer, candidates: np.ndarray) -> PlugIn:
    p, n = server.params, server.n
    return PlugIn(lambda f: np.full(np.shape(f), theory().privsketch_nosmp_variance(p.epsilon, n, K=p.K, M=p.M)),
                  len(candidates), "closed form (theory.privsketch_nosmp_variance)", COUNT_MIN)


register_protocol(Protocol(
    "privsketch", PrivSketchParams, PrivSketchReports, PrivSketchServer, PrivSketchClient,
    example=_sketch_example(PrivSketchParams), inputs="sets",
    extremes=edges(d=(1, 2**20)),
    # [PS] Alg. 2: the sampled cell (k, m), its bit, and the ordering matrix as one rank in
    # [0, K M) per cell, ceil(log2(K M)) bits each (a permutation of the cells).
    wire_fields=lambda p: [WireField("k", bits_for(p.K), dtype="uint16"), WireField("m", bits_for(p.M), dtype="uint16"),
                           WireField("bit", 1, SIGN, "int8"),
                           WireField("order", bits_for(p.K * p.M), dtype="uint16", shape=(p.K, p.M))],
    variance=_privsketch_variance, default_candidates=tracked_candidates,
    simulations=sketch_simulation("privsketch", "PrivSketch", "PrivSketch, K=4, M=128, R2 estimator (NOT eps-LDP: "
                                  "its ordering matrix leaks, PS reproduction only)"),
    audit=AuditHooks(lambda e, **kw: PrivSketchParams.create(epsilon=e, d=64, K=4, M=16, seed=1, **kw), order_plan,
                     sketch_epsilon)))
register_protocol(Protocol(
    "privsketch-nosmp", NoSmpParams, NoSmpReports, NoSmpServer, NoSmpClient, example=_sketch_example(NoSmpParams),
    extremes=edges(d=(1, 2**20)),
    inputs="sets",
    # every cell's bit and the ordering matrix
    wire_fields=lambda p: [WireField("bits", 1, SIGN, "int8", (p.K, p.M)),
                           WireField("order", bits_for(p.K * p.M), dtype="uint16", shape=(p.K, p.M))],
    variance=_nosmp_variance, default_candidates=tracked_candidates,
    simulations=sketch_simulation("privsketch-nosmp", "PrivSketch-noSmp",
                                  "PrivSketch without sampling: every cell with eps/(KM) (NOT eps-LDP, as PrivSketch)"),
    audit=AuditHooks(lambda e, **kw: NoSmpParams.create(epsilon=e, d=64, K=4, M=16, seed=1, **kw), order_plan,
                     sketch_epsilon)))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "privsketch", {"Params": PrivSketchParams, "Client": PrivSketchClient,
                                                      "Server": PrivSketchServer, "Reports": PrivSketchReports})
