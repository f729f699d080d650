"""The baselines [PS] compares PrivSketch with ([PS] section 4), re-exported by
:mod:`ldpfast.privsketch`:

* ``multi-pcms-mean``: Apple's private Count-Mean Sketch extended to sets (R2
  ``multi_pcms_mean_*``): one uniformly chosen row, every one of its M cells flipped with
  budget eps/M; eps-LDP.
* ``multi-pcms-min``: the whole K x M sketch, every cell flipped with budget eps/(KM),
  aggregate first and take the min; eps-LDP.
* ``ps-olh``: padding and sampling (PSFO, Wang, Li, Jha S&P 2018) + OLH; eps-LDP with the
  default ``amplify=False``. ``amplify=True`` is **not** eps-LDP (see :class:`PSOLHParams`).
* SVIM frequent items (Wang, Li, Jha 2018; R3 ``find_singleton``), three
  phases over disjoint user groups (:func:`svim_groups`: G1/G2/G3 = 40%/10%/50%), each
  with its own Params/Client/Reports/Server; the parameters of phases 2 and 3 carry what
  the previous phase's server decided, so clients and server agree on it:

  - ``svim-items`` (:class:`SVIMItemParams`): one sampled item per user (the dummy ``d``
    for an empty set, so every user reports), OLH over ``[0, d]``;
    :meth:`SVIMItemServer.length_params` keeps the top 2k as candidates C.
  - ``svim-lengths`` (:class:`SVIMLengthParams`, carries C): ``|S ∩ C|`` with OLH;
    :meth:`SVIMLengthServer.padded_params` picks the length L.
  - ``svim-padded`` (:class:`SVIMPaddedParams`, carries C and L): pad ``S ∩ C`` with
    distinct dummies to L and sample one slot, GRR with the amplified eps' or OLH(eps);
    :meth:`SVIMPaddedServer.top` returns the top k of C. ``reference=True`` reproduces R3's
    single dummy, which is only ``log(L(e^eps-1)+1)``-LDP (warns).

  Each phase is eps-LDP for its users (every user belongs to one group and reports once),
  except ``svim-padded`` with ``reference=True``.
  :func:`svim` runs the three phases on a :class:`~ldpfast.datasets.SetData` (simulation).

OLH here is the CMS+RR estimator with ``m = g`` and per-user pairwise-independent hashes
over the prime field ([PAN] section 4.4), on the OCMS kernels.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import ClassVar

import numpy as np

from .. import _core
from .._base import Aggregator, ClientBase, Params as _ParamsBase, Protocol, Reports as _ReportsBase, _State
from .._base import register_protocol
from .._memory import check_allocation
from .._random import KeySource, RngLike
from ..datasets import SetData
from ..errors import FormatError, ParameterError, ReportError
from .._validate import check_derived_range, check_epsilon, check_int, rr_threshold
from ..kernels.field import PRIME, is_prime
from .privsketch import (PrivacyWarning, SketchParams, _candidate_array, _check_below, _check_bits, _column,
                         _SketchClient, _TrackedServer, as_sets)
from ..theory.hadamard import c_eps

__all__ = [
    "MultiPCMSMeanParams", "MultiPCMSMeanReports", "MultiPCMSMeanClient", "MultiPCMSMeanServer",
    "MultiPCMSMinParams", "MultiPCMSMinReports", "MultiPCMSMinClient", "MultiPCMSMinServer",
    "PSOLHParams", "PSOLHReports", "PSOLHClient", "PSOLHServer", "padding_length", "olh_g",
    "SVIMItemParams", "SVIMItemReports", "SVIMItemClient", "SVIMItemServer",
    "SVIMLengthParams", "SVIMLengthReports", "SVIMLengthClient", "SVIMLengthServer",
    "SVIMPaddedParams", "SVIMPaddedReports", "SVIMPaddedClient", "SVIMPaddedServer",
    "SVIM_SHARES", "SVIM_COVERAGE", "SVIM_MAX_L", "svim_groups", "svim", "SvimResult",
]


# -- Multi-PCMS-Mean ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MultiPCMSMeanParams(SketchParams):
    """Multi-PCMS-Mean ([PS] section 4.1): K public hashes into [M]; each user sends one random row
    of its +-1 set sketch with every cell flipped with probability 1/(1 + e^{eps/M})."""

    protocol: ClassVar[str] = "multi-pcms-mean"
    bit_divisor: ClassVar[str] = "M"


@dataclasses.dataclass
class MultiPCMSMeanReports(_ReportsBase):
    """``row`` (uint16) and its perturbed cells ``bits`` (int8 +-1, shape (n, M))."""

    protocol: ClassVar[str] = "multi-pcms-mean"
    column_types: ClassVar = {"row": ("uint16", 1), "bits": ("int8", 2)}
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

    def perturb(self, sets) -> MultiPCMSMeanReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.privsketch.as_sets`)."""
        row, bits, _ = self._perturb(sets)
        return MultiPCMSMeanReports(row=row.astype(np.uint16), bits=bits)


class _TableServer(Aggregator):
    """State: ``sums`` (K x M, sum of the +-1 bits received per cell), ``rows`` (K, users
    per row) and ``n``. Thread-safe (see :class:`ldpfast._base.Aggregator`)."""

    def __init__(self, params):
        super().__init__(params)
        self._st = _State(n=np.zeros(1, dtype=np.int64), rows=np.zeros(params.K, dtype=np.int64),
                          sums=np.zeros((params.K, params.M), dtype=np.int64))

    @classmethod
    def _state_layout(cls, params):
        return {"n": ((1,), "int64"), "rows": ((params.K,), "int64"), "sums": ((params.K, params.M), "int64")}

    @property
    def _rows(self) -> np.ndarray:
        return self._st["rows"]

    @property
    def _sums(self) -> np.ndarray:
        return self._st["sums"]

    def _set_state(self, state):
        self._st = _State({k: np.array(state[k], dtype=np.int64) for k in ("n", "rows", "sums")})

    def _check_state(self, state) -> None:
        super()._check_state(state)
        n, rows, sums = int(state["n"][0]), state["rows"], state["sums"]
        # each report adds one +-1 bit to every cell of the rows it covers
        if n < 0 or int(rows.min()) < 0 or np.any(np.abs(sums.astype(np.float64)) > rows[:, None]) \
                or np.any((sums - rows[:, None]) % 2) or not self._rows_fit(rows, n):
            raise FormatError(f"stored sketch counts do not fit the stored n = {n}")

    def _rows_fit(self, rows: np.ndarray, n: int) -> bool:
        return float(rows.sum(dtype=np.float64)) == n

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    def _require_reports(self):
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")

    def _cells(self, candidates):
        p = self.params
        if candidates is None:
            check_allocation(24 * p.K * p.d, f"a whole-domain query over d={p.d} items and K={p.K} rows")
            cand = np.arange(p.d, dtype=np.int64)
        else:
            cand = _candidate_array(candidates, p.d)
        return p.cells(cand).astype(np.int64)


class MultiPCMSMeanServer(_TableServer):
    """Multi-PCMS-Mean collector (R2 ``multi_pcms_mean_server``): row j collects
    ``K((c/2) vhat + 1/2)`` with ``c = (e^{eps/M}+1)/(e^{eps/M}-1)``; the count of x is
    ``(1/K) sum_k Sum[k, H_k(x)]``."""

    protocol: ClassVar[str] = "multi-pcms-mean"
    params_type: ClassVar[type] = MultiPCMSMeanParams

    reports_type: ClassVar[type] = MultiPCMSMeanReports

    def _validate(self, reports: MultiPCMSMeanReports) -> None:
        p = self.params
        _check_below("row", reports.row, p.K, "K")
        if reports.bits.shape[1] != p.M:
            raise ReportError(f"bits must have shape (n, M={p.M}), got {reports.bits.shape}")
        _check_bits("bits", reports.bits)

    def _ingest(self, reports: MultiPCMSMeanReports):
        p = self.params
        st = self._st
        sums = st["sums"].copy()
        for k in range(p.K):
            sums[k] += reports.bits[reports.row == k].sum(axis=0, dtype=np.int64)
        return {"n": st["n"] + len(reports), "rows": st["rows"] + np.bincount(reports.row.astype(np.intp), minlength=p.K),
                "sums": sums}

    def estimate(self, candidates=None, counts: bool = False, correction: bool = False) -> np.ndarray:
        """Frequencies (counts with ``counts=True``). ``correction=False`` (faithful to R2): ``count(x)/n`` with no collision
        correction, so items look more frequent the fuller the users' rows are.
        ``correction=True`` (derived here; in neither [PS] nor its code): ``sum_i (bhat_i(x)
        - what_i/M) / (n (1 - wbar/M))`` with ``what_i`` the sum of user i's decoded row."""
        self._require_reports()
        p = self.params
        c = c_eps(p.epsilon / p.M)
        decoded = c / 2.0 * self._sums + self._rows[:, None] / 2.0   # sum over users of (c v + 1)/2
        count = decoded.ravel()[self._cells(candidates)].sum(axis=1)
        if not correction:
            est = count / self.n
        else:
            total = decoded.sum()                      # sum_i what_i
            wbar = total / self.n
            est = (count - total / p.M) / (self.n * (1.0 - wbar / p.M))
        return est * self.n if counts else est


# -- Multi-PCMS-Min ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MultiPCMSMinParams(SketchParams):
    """Multi-PCMS-Min ([PS] section 4.2): each user sends its whole +-1 K x M sketch, every cell
    flipped with probability 1/(1 + e^{eps/(KM)})."""

    protocol: ClassVar[str] = "multi-pcms-min"
    bit_divisor: ClassVar[str] = "K*M"


@dataclasses.dataclass
class MultiPCMSMinReports(_ReportsBase):
    """The perturbed sketches ``bits`` (int8 +-1, shape (n, K, M))."""

    protocol: ClassVar[str] = "multi-pcms-min"
    column_types: ClassVar = {"bits": ("int8", 3)}
    bits: np.ndarray

    def __post_init__(self):
        self.bits = _column("bits", self.bits, np.int8, 3)


class MultiPCMSMinClient(_SketchClient):
    """Multi-PCMS-Min user side (R2 ``multi_pcms_min_client``)."""

    params_type: ClassVar[type] = MultiPCMSMinParams
    _sampling = 0
    _with_order = False

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

    reports_type: ClassVar[type] = MultiPCMSMinReports

    def _rows_fit(self, rows: np.ndarray, n: int) -> bool:
        return bool(np.all(rows == n))

    def _validate(self, reports: MultiPCMSMinReports) -> None:
        p = self.params
        if reports.bits.shape[1:] != (p.K, p.M):
            raise ReportError(f"bits must have shape (n, {p.K}, {p.M}), got {reports.bits.shape}")
        _check_bits("bits", reports.bits)

    def _ingest(self, reports: MultiPCMSMinReports):
        st = self._st
        return {"n": st["n"] + len(reports), "rows": st["rows"] + len(reports),
                "sums": st["sums"] + reports.bits.sum(axis=0, dtype=np.int64)}

    def estimate(self, candidates=None, counts: bool = False) -> np.ndarray:
        """Frequencies (counts with ``counts=True``) of ``candidates`` (default the whole
        domain)."""
        self._require_reports()
        p = self.params
        c = c_eps(p.epsilon / (p.K * p.M))
        table = c / 2.0 * self._sums + self.n / 2.0
        est = table.ravel()[self._cells(candidates)].min(axis=1)
        return est if counts else est / self.n


# -- PS-OLH --------------------------------------------------------------------------------------
def olh_g(epsilon: float) -> int:
    """OLH's hash range ``g = round(e^eps) + 1`` (Wang et al. 2017)."""
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
    """PS-OLH (Wang, Li, Jha 2018; R2): padding length ``pad_len``; OLH over
    ``D ∪ {dummy = d}`` with ``g`` (default ``round(e^eps)+1``).

    Privacy: with ``amplify=False`` (default, as R2) OLH runs with eps on the sampled value,
    so the report is eps-LDP for every set. ``amplify=True`` runs OLH with the PSFO budget
    ``eps' = log(pad_len (e^eps - 1) + 1)`` and is only **eps'-LDP** (:attr:`true_epsilon`),
    not eps-LDP: the amplification argument needs every output to have probability between
    q and q + (p - q)/pad_len for every set, which GRR over distinct values gives but OLH does
    not, because all ``pad_len`` items of a set (or the dummy of an empty one) can hash to
    the reported ``z`` (then ``P(z | S) = p`` while a set none of whose items hashes to
    ``z`` gives ``q``: ratio ``e^eps'``, tight). Its client emits a
    :class:`~ldpfast.privsketch.PrivacyWarning`.
    """

    protocol: ClassVar[str] = "ps-olh"
    epsilon: float
    d: int
    pad_len: int
    g: int = 0
    amplify: bool = False
    field_size: int = PRIME

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "field_size", _check_field_size(self.field_size))
        check_int("d", self.d, 1, self.field_size - 2)
        check_int("pad_len", self.pad_len, 1)
        if not isinstance(self.amplify, bool):
            raise ParameterError(f"amplify must be a bool, got {type(self.amplify).__name__}")
        g = self.g or check_derived_range(self.epsilon, int(round(math.exp(self.olh_epsilon))) + 1,
                                          "g = round(e^eps') + 1" if self.amplify else "g = round(e^eps) + 1")
        object.__setattr__(self, "g", check_int("g", g, 2, 2**62))
        self.flip_threshold                     # refuses a budget the 64-bit sampler cannot represent

    @property
    def true_epsilon(self) -> float:
        """The epsilon the reports really satisfy: eps, or eps' with ``amplify=True``."""
        return self.olh_epsilon

    @property
    def olh_epsilon(self) -> float:
        if self.amplify:
            return math.log(self.pad_len * math.expm1(self.epsilon) + 1.0)
        return self.epsilon

    @property
    def flip_probability(self) -> float:
        """GRR flip probability ``(g-1)/(e^eps' + g - 1)``."""
        return (self.g - 1) / (math.exp(self.olh_epsilon) + self.g - 1)

    @property
    def flip_threshold(self) -> int:
        """The 64-bit threshold of that flip (rounded so OLH is at most ``olh_epsilon``-LDP)."""
        return rr_threshold(self.olh_epsilon, self.g, "epsilon' (amplified)" if self.amplify else "epsilon")


@dataclasses.dataclass
class _OLHReports(_ReportsBase):
    """OLH reports: perturbed hash ``z`` in [0, g) and the user's hash ``a0, a1`` (uint64)."""

    column_types: ClassVar = {"z": ("uint64", 1), "a0": ("uint64", 1), "a1": ("uint64", 1)}
    z: np.ndarray
    a0: np.ndarray
    a1: np.ndarray

    def __post_init__(self):
        self.z = _column("z", self.z, np.uint64, 1)
        self.a0 = _column("a0", self.a0, np.uint64, 1)
        self.a1 = _column("a1", self.a1, np.uint64, 1)
        self._check_lengths()


def _check_field_size(value) -> int:
    """The OLH hash field: a prime below 2^64 (the C++ field arithmetic is 64-bit)."""
    size = check_int("field_size", value, 3, 2**64 - 1)
    if not is_prime(size):
        raise ParameterError(f"field_size must be a prime below 2^64, got {size}")
    return size


def _olh_perturb(params, keys: KeySource, values: np.ndarray, threads: int):
    """OLH (Wang et al. 2017): a fresh pairwise-independent hash ``(a0, a1)`` per user over the
    prime field ``params.field_size``, its value in [0, g) kept or moved by GRR with
    ``params.flip_probability``. Returns ``(z, a0, a1)``."""
    return _core.ocms_perturb(_core.Field.prime(params.field_size), keys.key(), values.astype(np.uint64),
                              params.g, params.flip_threshold, threads)


def _check_olh_reports(reports, params) -> None:
    _check_below("z", reports.z, params.g, "g")
    _check_below("a0", reports.a0, params.field_size, "field_size")
    _check_below("a1", reports.a1, params.field_size, "field_size")


def _olh_debias(matches: np.ndarray, n: int, g: int, epsilon: float) -> np.ndarray:
    """OLH counts ``chat = (g C - n)/(p g - 1)``, ``p = e^eps/(e^eps + g - 1)``, from the
    numbers ``C`` of users whose hash of the item matches their report."""
    keep = math.exp(epsilon) / (math.exp(epsilon) + g - 1)
    return (g * np.asarray(matches, dtype=np.float64) - n) / (keep * g - 1.0)


@dataclasses.dataclass
class PSOLHReports(_OLHReports):
    """OLH reports: perturbed hash ``z`` in [0, g) and the user's hash ``a0, a1`` (uint64)."""

    protocol: ClassVar[str] = "ps-olh"


class PSOLHClient(ClientBase):
    """PS-OLH user side: padding and sampling to one item (or the dummy ``d``), then OLH
    with a fresh pairwise-independent hash per user. ``rng``: None = OS entropy; seeds are
    for simulation only. Emits :class:`~ldpfast.privsketch.PrivacyWarning` with
    ``amplify=True`` (only eps'-LDP, see :class:`PSOLHParams`)."""

    def __init__(self, params: PSOLHParams, rng: RngLike = None, threads: int = 0):
        if not isinstance(params, PSOLHParams):
            raise ParameterError(f"params must be PSOLHParams, got {type(params).__name__}")
        if params.amplify:
            warnings.warn(f"PS-OLH with amplify=True is NOT {params.epsilon:g}-LDP: OLH does not amplify under "
                          f"padding and sampling, the reports are only {params.true_epsilon:.6g}-LDP "
                          "(log(pad_len (e^eps - 1) + 1)). Use amplify=False for eps-LDP.",
                          PrivacyWarning, stacklevel=2)
        self.params = params
        self.threads = check_int("threads", threads, 0)
        self._keys = KeySource(rng)

    def perturb(self, sets) -> PSOLHReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.privsketch.as_sets`)."""
        p = self.params
        offsets, items = as_sets(sets, p.d)
        values = _core.privsketch_padding_sample(self._keys.key(), offsets, items, p.pad_len, p.d, self.threads)
        z, a0, a1 = _olh_perturb(p, self._keys, values, self.threads)
        return PSOLHReports(z=z, a0=a0, a1=a1)


class PSOLHServer(_TrackedServer):
    """PS-OLH collector: per candidate the number of users whose hash of it matches their
    report (``pos``; ``neg`` unused); ``chat = (g C - n)/(p g - 1)``, ``fhat = pad_len
    chat / n``. Decoding costs ``O(n |D|)`` hash evaluations (C++, threads)."""

    protocol: ClassVar[str] = "ps-olh"
    params_type: ClassVar[type] = PSOLHParams

    reports_type: ClassVar[type] = PSOLHReports

    def _validate(self, reports: PSOLHReports) -> None:
        _check_olh_reports(reports, self.params)

    def _ingest(self, reports: PSOLHReports):
        p = self.params
        field = _core.Field.prime(p.field_size)
        matches = np.zeros(self._cand.size, dtype=np.uint64)
        if self._cand.size == p.d:
            _core.ocms_count_range(field, reports.z, reports.a0, reports.a1, p.g, 0, matches, self.threads)
        else:
            _core.ocms_count_list(field, reports.z, reports.a0, reports.a1, p.g, self._cand.astype(np.uint64),
                                  matches, self.threads)
        return self._added(len(reports), matches.astype(np.int64), np.zeros(self._cand.size, dtype=np.int64))

    def estimate(self, candidates=None, counts: bool = False) -> np.ndarray:
        """Frequencies (counts with ``counts=True``) of ``candidates`` (default every
        tracked item)."""
        cand = self._query(candidates)
        p = self.params
        est = p.pad_len * _olh_debias(self._pos[cand], self.n, p.g, p.olh_epsilon)
        return est if counts else est / self.n


register_protocol(Protocol(id="multi-pcms-mean", params=MultiPCMSMeanParams, reports=MultiPCMSMeanReports,
                           aggregator=MultiPCMSMeanServer, client=MultiPCMSMeanClient))
register_protocol(Protocol(id="multi-pcms-min", params=MultiPCMSMinParams, reports=MultiPCMSMinReports,
                           aggregator=MultiPCMSMinServer, client=MultiPCMSMinClient))
register_protocol(Protocol(id="ps-olh", params=PSOLHParams, reports=PSOLHReports, aggregator=PSOLHServer,
                           client=PSOLHClient))


# -- SVIM -------------------------------------------------------------------------------------
#: SVIM's default user groups G1 / G2 / G3 (candidates / lengths / padded items).
SVIM_SHARES = (0.4, 0.1, 0.5)
#: SVIM's default coverage: L covers this share of the users' ``|S ∩ C|``.
SVIM_COVERAGE = 0.9
#: SVIM's default cap on L (R3 ``find_percentile_set``).
SVIM_MAX_L = 31


def _svim_g(epsilon: float, g: int) -> int:
    """OLH range in SVIM: ``g = int(e^eps) + 1`` (truncation, as R3's ``fo.lh``) unless given."""
    return check_int("g", g or check_derived_range(epsilon, int(math.exp(epsilon)) + 1, "g = int(e^eps) + 1"), 2, 2**62)


def _check_coverage(coverage) -> float:
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float)) or not 0.0 < coverage <= 1.0:
        raise ParameterError(f"coverage must be a number in (0, 1], got {coverage!r}")
    return float(coverage)


def _check_candidates(candidates, d: int) -> tuple:
    cand = _candidate_array(candidates, d)
    if cand.size == 0:
        raise ParameterError("candidates must not be empty")
    if np.unique(cand).size != cand.size:
        raise ParameterError("candidates must be distinct")
    return tuple(int(x) for x in cand)


class _SVIMOLHParams(_ParamsBase):
    """OLH over the phase's own domain with the full epsilon and ``g`` of :func:`_svim_g`."""

    @property
    def flip_probability(self) -> float:
        """GRR flip probability of the hashed value, ``(g-1)/(e^eps + g - 1)``."""
        return (self.g - 1) / (math.exp(self.epsilon) + self.g - 1)

    @property
    def flip_threshold(self) -> int:
        """The 64-bit threshold of that flip (rounded so OLH is at most eps-LDP)."""
        return rr_threshold(self.epsilon, self.g)


@dataclasses.dataclass(frozen=True)
class SVIMItemParams(_SVIMOLHParams):
    """SVIM phase 1: each G1 user reports one uniformly sampled item of its set with OLH
    over ``[0, d]``, a user with an empty set the dummy ``d`` (R3 lets such users send
    nothing, which reveals that their set is empty); the server keeps the top ``2k`` of
    ``[0, d)`` as candidates. eps-LDP: OLH with eps is eps-LDP whatever value it encodes."""

    protocol: ClassVar[str] = "svim-items"
    epsilon: float
    d: int
    k: int = 50
    g: int = 0
    field_size: int = PRIME

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "field_size", _check_field_size(self.field_size))
        check_int("d", self.d, 1, self.field_size - 1)      # so the dummy d is a field element too
        check_int("k", self.k, 1)
        object.__setattr__(self, "g", _svim_g(self.epsilon, self.g))
        self.flip_threshold

    @property
    def domain(self) -> int:
        return self.d


@dataclasses.dataclass(frozen=True)
class SVIMLengthParams(_SVIMOLHParams):
    """SVIM phase 2: each G2 user reports ``min(|S ∩ C|, max_length)`` with OLH over
    ``[0, max_length]``. ``candidates`` (C, from phase 1, in rank order) fixes what clients
    intersect with; ``max_length`` defaults to ``|C|``, which never clips since
    ``|S ∩ C| <= |C|`` (as R3). ``coverage`` and ``max_L``: L is the smallest ``l >= 1``
    whose estimated cumulative share exceeds ``coverage``, capped at ``max_L`` (default 31:
    R3's ``find_percentile_set`` stops after l = 30 and then returns 31) and ``max_length``."""

    protocol: ClassVar[str] = "svim-lengths"
    epsilon: float
    d: int
    candidates: tuple
    max_length: int = 0
    coverage: float = SVIM_COVERAGE
    max_L: int = SVIM_MAX_L
    g: int = 0
    field_size: int = PRIME

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "field_size", _check_field_size(self.field_size))
        check_int("d", self.d, 1, self.field_size - 1)
        object.__setattr__(self, "candidates", _check_candidates(self.candidates, self.d))
        object.__setattr__(self, "max_length",
                           check_int("max_length", self.max_length or len(self.candidates), 1))
        object.__setattr__(self, "coverage", _check_coverage(self.coverage))
        check_int("max_L", self.max_L, 1)
        object.__setattr__(self, "g", _svim_g(self.epsilon, self.g))
        self.flip_threshold

    @property
    def domain(self) -> int:
        return self.max_length + 1


@dataclasses.dataclass(frozen=True)
class SVIMPaddedParams(_ParamsBase):
    """SVIM phase 3: each G3 user pads ``S ∩ C`` to length ``L`` with ``L - |S ∩ C|``
    distinct dummies drawn at random from the ``L`` dummies ``|C| + j`` (``j < L``) and
    samples one of the ``max(L, |S ∩ C|)`` slots uniformly (items are reported by their
    position in ``candidates``), then reports it with GRR
    over ``|C| + L`` values and the amplified ``eps' = log(L(e^eps - 1) + 1)`` when
    ``|C| < L e^eps (4L - 1) + 1``, else with OLH(eps) (Wang, Li, Jha 2018). ``L`` comes
    from phase 2.

    Privacy (GRR branch): every value, item or dummy, is the padded sample with probability
    ``pi <= 1/L``, so ``P(z | S) = q + (p - q) pi`` lies in ``[q, q + (p - q)/L]`` and the
    ratio for two sets is at most ``1 + (e^eps' - 1)/L = e^eps``: eps-LDP. The OLH branch
    is eps-LDP for any sampled value.

    ``reference=True`` reproduces R3: a single dummy ``|C|`` (domain ``|C| + 1``). A user
    with ``|S ∩ C| = 0`` then reports the dummy's GRR with probability ``p`` and one with
    ``L`` candidates with probability ``q``, so the GRR branch is only
    ``eps' = log(L(e^eps - 1) + 1)``-LDP (:attr:`true_epsilon`); its client emits a
    :class:`~ldpfast.privsketch.PrivacyWarning`.
    """

    protocol: ClassVar[str] = "svim-padded"
    epsilon: float
    d: int
    candidates: tuple
    L: int
    coverage: float = SVIM_COVERAGE
    g: int = 0
    field_size: int = PRIME
    reference: bool = False

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "field_size", _check_field_size(self.field_size))
        check_int("d", self.d, 1, self.field_size - 1)
        object.__setattr__(self, "candidates", _check_candidates(self.candidates, self.d))
        check_int("L", self.L, 1, self.field_size - 1 - len(self.candidates))
        object.__setattr__(self, "coverage", _check_coverage(self.coverage))
        object.__setattr__(self, "g", _svim_g(self.epsilon, self.g))
        if not isinstance(self.reference, bool):
            raise ParameterError(f"reference must be a bool, got {type(self.reference).__name__}")
        self.flip_threshold                     # refuses a budget the 64-bit sampler cannot represent

    @property
    def dummies(self) -> int:
        """Number of dummy values: ``L`` (1 with ``reference=True``)."""
        return 1 if self.reference else self.L

    @property
    def domain(self) -> int:
        """Reported values: candidate positions ``[0, |C|)`` and the dummies ``|C| + j``."""
        return len(self.candidates) + self.dummies

    @property
    def uses_grr(self) -> bool:
        """GRR when ``|C| < L e^eps (4L - 1) + 1`` (the SVIM/PSFO switch), else OLH."""
        return len(self.candidates) < self.L * math.exp(self.epsilon) * (4 * self.L - 1) + 1

    @property
    def grr_epsilon(self) -> float:
        """The amplified budget ``eps' = log(L(e^eps - 1) + 1)`` of the GRR branch."""
        return math.log(self.L * math.expm1(self.epsilon) + 1.0)

    @property
    def true_epsilon(self) -> float:
        """The epsilon the reports really satisfy: eps, except ``eps'`` for the GRR branch
        with ``reference=True``."""
        return self.grr_epsilon if self.reference and self.uses_grr else self.epsilon

    @property
    def flip_probability(self) -> float:
        """GRR branch: ``(m-1)/(e^eps' + m - 1)`` with ``m`` = :attr:`domain`; OLH branch:
        ``(g-1)/(e^eps + g - 1)``."""
        if self.uses_grr:
            return (self.domain - 1) / (math.exp(self.grr_epsilon) + self.domain - 1)
        return (self.g - 1) / (math.exp(self.epsilon) + self.g - 1)

    @property
    def flip_threshold(self) -> int:
        """The 64-bit threshold of that flip (:func:`ldpfast._validate.rr_threshold`)."""
        if self.uses_grr:
            return rr_threshold(self.grr_epsilon, self.domain, "epsilon' = log(L(e^eps-1)+1)")
        return rr_threshold(self.epsilon, self.g)


@dataclasses.dataclass
class SVIMItemReports(_OLHReports):
    """Phase-1 OLH reports ``(z, a0, a1)`` (one per user)."""

    protocol: ClassVar[str] = "svim-items"


@dataclasses.dataclass
class SVIMLengthReports(_OLHReports):
    """Phase-2 OLH reports ``(z, a0, a1)`` of the users' capped ``|S ∩ C|``."""

    protocol: ClassVar[str] = "svim-lengths"


@dataclasses.dataclass
class SVIMPaddedReports(_OLHReports):
    """Phase-3 reports. OLH branch: ``(z, a0, a1)``. GRR branch: ``z`` is the perturbed
    value in ``[0, |C| + dummies)`` and ``a0 = a1 = 0`` (no hash)."""

    protocol: ClassVar[str] = "svim-padded"


class _SVIMClient(ClientBase):
    params_type: ClassVar[type] = _ParamsBase

    def __init__(self, params, rng: RngLike = None, threads: int = 0):
        if not isinstance(params, self.params_type):
            raise ParameterError(f"params must be {self.params_type.__name__}, got {type(params).__name__}")
        self.params = params
        self.threads = check_int("threads", threads, 0)
        self._keys = KeySource(rng)


def _intersect_candidates(offsets: np.ndarray, items: np.ndarray, candidates: tuple):
    """Each user's ``S ∩ C`` as CSR ``(offsets, positions in C)`` (set order kept)."""
    cand = np.asarray(candidates, dtype=np.uint64)
    order = np.argsort(cand, kind="stable")
    ordered = cand[order]
    pos = np.minimum(np.searchsorted(ordered, items), ordered.size - 1)
    keep = ordered[pos] == items
    users = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    sizes = np.bincount(users[keep], minlength=offsets.size - 1)
    return np.concatenate(([0], np.cumsum(sizes))).astype(np.int64), order[pos[keep]].astype(np.uint64)


class SVIMItemClient(_SVIMClient):
    """SVIM phase-1 user side: one uniformly sampled item of ``S`` (the dummy ``d`` when
    ``S`` is empty) reported with OLH, one report per user. ``rng``: None = OS entropy
    (real clients); seeds are for simulation only."""

    params_type: ClassVar[type] = SVIMItemParams

    def perturb(self, sets) -> SVIMItemReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.privsketch.as_sets`)."""
        offsets, items = as_sets(sets, self.params.d)
        # Padding and sampling to length 1: a uniform item of a non-empty set, else d.
        picks = _core.privsketch_padding_sample(self._keys.key(), offsets, items, 1, self.params.d, self.threads)
        return SVIMItemReports(*_olh_perturb(self.params, self._keys, picks, self.threads))


class SVIMLengthClient(_SVIMClient):
    """SVIM phase-2 user side: ``min(|S ∩ C|, max_length)`` reported with OLH over
    ``[0, max_length]``. ``rng``: None = OS entropy; seeds are for simulation only."""

    params_type: ClassVar[type] = SVIMLengthParams

    def perturb(self, sets) -> SVIMLengthReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.privsketch.as_sets`)."""
        p = self.params
        offsets, _ = _intersect_candidates(*as_sets(sets, p.d), p.candidates)
        lengths = np.minimum(np.diff(offsets), p.max_length)
        return SVIMLengthReports(*_olh_perturb(p, self._keys, lengths, self.threads))


def _uniform_below(keys: KeySource, n: int, bound: int, threads: int) -> np.ndarray:
    """``n`` independent uniform draws from ``[0, bound)`` from the ChaCha20 stream: k-ary RR
    of the symbol 0 over ``[0, bound]`` that always flips lands uniformly on ``[1, bound]``;
    the threshold ``2^64 - 1`` keeps 0 with probability 2^-64, redrawn (exact rejection)."""
    out = np.zeros(n, dtype=np.uint64)
    todo = np.arange(n)
    while todo.size:
        draw = _core.randomized_response(keys.key(), np.zeros(todo.size, dtype=np.uint64), bound + 1, 2**64 - 1,
                                         threads)
        out[todo] = draw - 1
        todo = todo[draw == 0]
    return out


class SVIMPaddedClient(_SVIMClient):
    """SVIM phase-3 user side: pad ``S ∩ C`` with distinct dummies to ``L``, sample one slot
    (see :class:`SVIMPaddedParams`), then GRR with eps' or OLH(eps). ``rng``: None = OS
    entropy; seeds are for simulation only. With ``reference=True`` (R3's single dummy) it
    emits :class:`~ldpfast.privsketch.PrivacyWarning` when the GRR branch is used."""

    params_type: ClassVar[type] = SVIMPaddedParams

    def __init__(self, params, rng: RngLike = None, threads: int = 0):
        super().__init__(params, rng, threads)
        if params.true_epsilon > params.epsilon:
            warnings.warn(f"SVIM phase 3 with reference=True (R3's single dummy) is NOT {params.epsilon:g}-LDP: "
                          f"a user with no candidate reports the dummy far more often; the reports are only "
                          f"{params.true_epsilon:.6g}-LDP (log(L (e^eps - 1) + 1)). Use reference=False.",
                          PrivacyWarning, stacklevel=2)

    def perturb(self, sets) -> SVIMPaddedReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.privsketch.as_sets`)."""
        p = self.params
        offsets, positions = _intersect_candidates(*as_sets(sets, p.d), p.candidates)
        size = len(p.candidates)
        values = _core.privsketch_padding_sample(self._keys.key(), offsets, positions, p.L, size, self.threads)
        if p.dummies > 1:
            # Padding with L - |S ∩ C| distinct dummies drawn at random from the L dummies and
            # sampling a slot makes the dummy uniform among the L: each has probability <= 1/L.
            dummy = np.flatnonzero(values == size)
            values[dummy] += _uniform_below(self._keys, dummy.size, p.dummies, self.threads)
        if not p.uses_grr:
            return SVIMPaddedReports(*_olh_perturb(p, self._keys, values, self.threads))
        z = _core.randomized_response(self._keys.key(), values, p.domain, p.flip_threshold, self.threads)
        zeros = np.zeros(z.size, dtype=np.uint64)
        return SVIMPaddedReports(z=z, a0=zeros, a1=zeros.copy())


class _SVIMServer(Aggregator):
    """State: ``n`` (reports) and ``counts`` (int64 per value of the phase's domain: OLH,
    the users whose hash of the value matches their report; GRR, the reports equal to it)."""

    reports_type: ClassVar[type] = _OLHReports

    def __init__(self, params, threads: int = 0):
        super().__init__(params)
        self.threads = check_int("threads", threads, 0)
        self._st = _State(n=np.zeros(1, dtype=np.int64), counts=np.zeros(params.domain, dtype=np.int64))

    @classmethod
    def _state_layout(cls, params):
        return {"n": ((1,), "int64"), "counts": ((params.domain,), "int64")}

    @property
    def _counts(self) -> np.ndarray:
        return self._st["counts"]

    def _set_state(self, state):
        self._st = _State({k: np.array(state[k], dtype=np.int64) for k in ("n", "counts")})

    def _check_state(self, state) -> None:
        super()._check_state(state)
        n, counts = int(state["n"][0]), state["counts"]
        # OLH: a report matches each value at most once; GRR: it counts for one value
        if n < 0 or int(counts.min()) < 0 or int(counts.max()) > n or (
                not self._uses_olh() and float(counts.sum(dtype=np.float64)) != n):
            raise FormatError(f"stored counts do not fit the stored n = {n}")

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    def _uses_olh(self) -> bool:
        return True

    def _validate(self, reports) -> None:
        p = self.params
        if self._uses_olh():
            _check_olh_reports(reports, p)
        else:
            _check_below("z", reports.z, p.domain, "|C| + dummies")
            if np.any(reports.a0) or np.any(reports.a1):
                raise ReportError("GRR reports must have a0 = a1 = 0")

    def _ingest(self, reports):
        p = self.params
        if self._uses_olh():
            counts = np.zeros(p.domain, dtype=np.uint64)
            _core.ocms_count_range(_core.Field.prime(p.field_size), reports.z, reports.a0, reports.a1, p.g, 0,
                                   counts, self.threads)
        else:
            counts = np.bincount(reports.z.astype(np.intp), minlength=p.domain)
        return {"n": self._st["n"] + len(reports), "counts": self._st["counts"] + counts.astype(np.int64)}

    def _chat(self) -> np.ndarray:
        """Unbiased estimates of how many reporting users hold each value of the domain."""
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")
        return _olh_debias(self._counts, self.n, self.params.g, self.params.epsilon)


class SVIMItemServer(_SVIMServer):
    """SVIM phase-1 collector. Decoding costs O(n d) hash evaluations (C++, threads)."""

    protocol: ClassVar[str] = "svim-items"
    params_type: ClassVar[type] = SVIMItemParams
    reports_type: ClassVar[type] = SVIMItemReports

    def estimate(self, candidates=None, counts: bool = False) -> np.ndarray:
        """Unbiased estimates of the item-sampling frequencies ``P(sampled item = x)`` over
        all users, those with empty sets included (they sample the dummy ``d``)
        (``candidates``: default every item of ``[0, d)``; counts of users with
        ``counts=True``)."""
        freq = self._chat() / (1.0 if counts else self.n)
        return freq if candidates is None else freq[_candidate_array(candidates, self.params.d)]

    def candidates(self) -> np.ndarray:
        """C: the ``2k`` items with the largest estimates, best first (ties by item id)."""
        return np.argsort(-self.estimate(), kind="stable")[: min(2 * self.params.k, self.params.d)]

    def length_params(self, max_length: int = 0, coverage: float = SVIM_COVERAGE,
                      max_L: int = SVIM_MAX_L) -> SVIMLengthParams:
        """Phase-2 parameters carrying this phase's candidates (other arguments: see
        :class:`SVIMLengthParams`)."""
        p = self.params
        return SVIMLengthParams(epsilon=p.epsilon, d=p.d, candidates=tuple(self.candidates().tolist()),
                                max_length=max_length, coverage=coverage, max_L=max_L, field_size=p.field_size)


class SVIMLengthServer(_SVIMServer):
    """SVIM phase-2 collector."""

    protocol: ClassVar[str] = "svim-lengths"
    params_type: ClassVar[type] = SVIMLengthParams
    reports_type: ClassVar[type] = SVIMLengthReports

    def estimate(self, candidates=None, counts: bool = False) -> np.ndarray:
        """Unbiased estimates of the length histogram: the share of reporting users with
        capped ``|S ∩ C| = l`` for the lengths ``candidates`` (default ``l = 0 ..
        max_length``); numbers of users with ``counts=True``."""
        hist = self._chat() / (1.0 if counts else self.n)
        return hist if candidates is None else hist[_candidate_array(candidates, self.params.max_length + 1)]

    def length(self) -> int:
        """L: the smallest ``l >= 1`` whose cumulative share of the estimated histogram
        (raw, not clipped at 0, as R3) exceeds ``coverage``, capped at
        ``min(max_L, max_length)`` (also the answer when no l qualifies)."""
        p = self.params
        hist = self.estimate()
        cap = min(p.max_L, p.max_length)
        total = hist.sum()
        if not total > 0:
            return cap
        above = np.flatnonzero(np.cumsum(hist)[1:] / total > p.coverage)
        return min(int(above[0]) + 1, cap) if above.size else cap

    def padded_params(self, reference: bool = False) -> SVIMPaddedParams:
        """Phase-3 parameters carrying C and this phase's L (``reference``: see
        :class:`SVIMPaddedParams`)."""
        p = self.params
        return SVIMPaddedParams(epsilon=p.epsilon, d=p.d, candidates=p.candidates, L=self.length(),
                                coverage=p.coverage, field_size=p.field_size, reference=reference)


class SVIMPaddedServer(_SVIMServer):
    """SVIM phase-3 collector (GRR or OLH as the parameters say)."""

    protocol: ClassVar[str] = "svim-padded"
    params_type: ClassVar[type] = SVIMPaddedParams
    reports_type: ClassVar[type] = SVIMPaddedReports

    def _uses_olh(self) -> bool:
        return not self.params.uses_grr

    def sampling_frequencies(self) -> np.ndarray:
        """Unbiased estimates of ``P(padded sample = C[i])`` over the reporting users."""
        p = self.params
        if p.uses_grr:
            if self.n == 0:
                raise ReportError("estimate needs at least one report (n = 0)")
            e = math.exp(p.grr_epsilon)
            keep, other = e / (e + p.domain - 1), 1.0 / (e + p.domain - 1)
            chat = (self._counts - self.n * other) / (keep - other)
        else:
            chat = self._chat()
        return chat[:len(p.candidates)] / self.n

    def estimate(self, candidates=None, counts: bool = False) -> np.ndarray:
        """Item frequencies ``fhat = L chat3 / (coverage n3)`` (R3 leaves out L) of
        ``candidates``, items of C (default all of C, in ``params.candidates`` order);
        ``n3 fhat`` with ``counts=True``.

        Raises:
            ParameterError: a candidate is not in C.
        """
        freq = self.params.L * self.sampling_frequencies() / self.params.coverage
        if candidates is not None:
            freq = freq[self.candidate_positions(candidates)]
        return freq * self.n if counts else freq

    def candidate_positions(self, items) -> np.ndarray:
        """Positions in ``params.candidates`` of ``items`` (each must be in C)."""
        items = _candidate_array(items, self.params.d)
        lookup = {int(c): i for i, c in enumerate(self.params.candidates)}
        missing = [int(x) for x in items if int(x) not in lookup]
        if missing:
            raise ParameterError(f"candidates must be items of C (params.candidates), {missing[0]} is not")
        return np.array([lookup[int(x)] for x in items], dtype=np.int64)

    def top(self, k: int) -> tuple:
        """The ``k`` candidates with the largest estimates, best first (ties by position in
        C), and their estimates."""
        k = check_int("k", k, 1)
        freq = self.estimate()
        best = np.argsort(-freq, kind="stable")[:k]
        return np.asarray(self.params.candidates, dtype=np.int64)[best], freq[best]


register_protocol(Protocol(id="svim-items", params=SVIMItemParams, reports=SVIMItemReports,
                           aggregator=SVIMItemServer, client=SVIMItemClient))
register_protocol(Protocol(id="svim-lengths", params=SVIMLengthParams, reports=SVIMLengthReports,
                           aggregator=SVIMLengthServer, client=SVIMLengthClient))
register_protocol(Protocol(id="svim-padded", params=SVIMPaddedParams, reports=SVIMPaddedReports,
                           aggregator=SVIMPaddedServer, client=SVIMPaddedClient))


def svim_groups(sets, shares=SVIM_SHARES, rng: RngLike = None) -> tuple:
    """Split users at random into SVIM's groups G1 / G2 / G3 (``shares``, default 40% /
    10% / 50%; the first ``int(s1 n)`` of a random permutation, the next ``int((s1+s2) n) -
    int(s1 n)``, the rest). Returns three ``(offsets, items)`` CSR pairs. ``rng``: None =
    OS entropy; a seed makes the split reproducible (simulation)."""
    shares = tuple(float(s) for s in shares)
    if len(shares) != 3 or min(shares) <= 0 or abs(sum(shares) - 1.0) > 1e-9:
        raise ParameterError(f"shares must be three positive numbers summing to 1, got {shares}")
    offsets, items = as_sets(sets, 2**64)
    gen = KeySource(rng).generator()
    n = offsets.size - 1
    perm = gen.permutation(n)
    cut1, cut2 = int(shares[0] * n), int((shares[0] + shares[1]) * n)
    return tuple(_select_users(offsets, items, users) for users in (perm[:cut1], perm[cut1:cut2], perm[cut2:]))


def _select_users(offsets: np.ndarray, items: np.ndarray, users: np.ndarray) -> tuple:
    sizes = np.diff(offsets)[users]
    starts = offsets[users]
    out_offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    index = np.repeat(starts - out_offsets[:-1], sizes) + np.arange(out_offsets[-1])
    return out_offsets, items[index]


@dataclasses.dataclass
class SvimResult:
    """``top``: the k items SVIM reports (most frequent first); ``estimates``: their
    frequency estimates; ``candidates``: phase-1 candidates; ``L``: the phase-2 length."""

    top: np.ndarray
    estimates: np.ndarray
    candidates: np.ndarray
    L: int


def svim(sets: SetData, epsilon: float, k: int = 50, rng: RngLike = None, threads: int = 0,
         shares=SVIM_SHARES, reference: bool = False) -> SvimResult:
    """SVIM frequent items ([PS] section 4.1; Wang, Li, Jha 2018; R3 ``svsm.find_singleton``),
    simulated on ``sets`` by running the three Client/Server phases in turn.

    ``rng`` (None = OS entropy; a seed is for simulation only) becomes one numpy Generator
    that draws, in order, the group split (:func:`svim_groups` with ``shares``) and the
    keys of the phase-1, phase-2 and phase-3 clients, so the result equals running
    ``SVIMItemClient``/``SVIMItemServer``, ``SVIMLengthClient``/``SVIMLengthServer`` and
    ``SVIMPaddedClient``/``SVIMPaddedServer`` by hand with that Generator. ``threads``:
    C++ worker threads (0 = default; results do not depend on it).
    G1: one sampled item per user (the dummy d for an empty set; R3 skips those users), OLH
    (``g = int(e^eps) + 1`` as in R3), the top 2k of [0, d) become candidates C. G2:
    ``|S ∩ C|`` with OLH; L = the smallest length whose estimated cumulative share exceeds
    0.9, at most 31. G3: pad ``S ∩ C`` with distinct dummies to L and sample a slot
    (``reference=True``: R3's single dummy, not eps-LDP, warns), GRR
    with ``eps' = log(L(e^eps-1)+1)`` when ``|C| < L e^eps (4L-1) + 1``, else OLH(eps);
    ``fhat = L chat3/(0.9 n3)``. Returns the top k of C (:class:`SvimResult`).
    Raises ParameterError for bad epsilon, k, shares or items outside [0, d).
    """
    eps = check_epsilon(epsilon)
    k = check_int("k", k, 1)
    gen = KeySource(rng).generator()
    groups = svim_groups(sets, shares, gen)
    items_params = SVIMItemParams(epsilon=eps, d=sets.d, k=k)
    server1 = SVIMItemServer(items_params, threads)
    server1.update(SVIMItemClient(items_params, gen, threads).perturb(groups[0]))
    length_params = server1.length_params()
    server2 = SVIMLengthServer(length_params, threads)
    server2.update(SVIMLengthClient(length_params, gen, threads).perturb(groups[1]))
    padded_params = server2.padded_params(reference)
    server3 = SVIMPaddedServer(padded_params, threads)
    server3.update(SVIMPaddedClient(padded_params, gen, threads).perturb(groups[2]))
    top, estimates = server3.top(k)
    return SvimResult(top=top, estimates=estimates, candidates=np.asarray(length_params.candidates, dtype=np.int64),
                      L=padded_params.L)
