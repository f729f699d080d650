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
output itself, which is not the LDP definition. :class:`Client` and :class:`NoSmpClient`
therefore emit a :class:`PrivacyWarning` on construction; their ``epsilon`` is only the
budget of the randomized-response part, never a guarantee for the whole report.

Protocols (one ``Params``/``Client``/``Reports``/``Server`` set each):

* ``privsketch`` (:class:`Params`): sampled cell + RR + ordering matrix, decode-first
  collector ([PS] Alg. 1-3 with sampling, section 3.3). **Not LDP.**
* ``privsketch-nosmp`` (:class:`NoSmpParams`): every cell flipped with eps/(KM) + ordering
  matrix ([PS] section 4.2). **Not LDP.**
* ``privsketch-ldp`` (:class:`SafeParams`): the LDP-safe variant, the sampled cell + RR
  **without** ordering matrix; eps-LDP (one RR bit on a data-independent cell). Decoded
  count-mean style over the sampled cell; see :meth:`SafeServer.estimate`.
* ``multi-pcms-mean`` / ``multi-pcms-min``: Apple's private CMS extended to sets
  ([PS] section 4), from :mod:`ldpfast.privsketch_baselines`, like ``ps-olh`` (padding and
  sampling + OLH) and SVIM.

All sketch protocols share ``K`` public pairwise-independent hash functions
``H_k(x) = ((a0_k + a1_k x) mod p) mod M`` over the prime field ``p = 2^64 - 59``
(the hash of [PAN] Algorithm 1), whose coefficients are part of the parameters.
"""

from __future__ import annotations

import dataclasses
import hashlib
import warnings
from typing import Any, ClassVar, Dict, Tuple, Type, TypeVar

import numpy as np

from .. import _core
from .._base import Aggregator, ClientBase, Params as _ParamsBase, Protocol, Reports as _ReportsBase, _checked_sum
from .._base import _State, register_protocol
from .._memory import check_allocation
from .._random import KeySource, RngLike
from ..datasets import SetData
from .._validate import check_epsilon, check_int, rr_threshold
from ..errors import DTypeError, FormatError, IncompatibleError, ParameterError, ReportError
from ..kernels.field import PRIME, is_prime
from ..theory.hadamard import c_eps

__all__ = [
    "PrivacyWarning", "PRIME", "SketchParams", "Params", "NoSmpParams", "SafeParams", "Reports",
    "NoSmpReports", "SafeReports", "Client", "NoSmpClient", "SafeClient", "Server", "NoSmpServer",
    "SafeServer", "as_sets",
]



class PrivacyWarning(UserWarning):
    """A protocol whose reports are not covered by its nominal eps (e.g. PrivSketch's
    ordering matrix). A ``UserWarning``, so Python shows it by default; silencing it takes
    an explicit filter (``warnings.simplefilter("ignore", PrivacyWarning)``)."""

_NOT_LDP = (
    "{name} reports are NOT eps-LDP: the ordering matrix O reveals which sketch cells are 1 "
    "(all 0-cells rank below all 1-cells), so the collector can read the user's Bloom-filter "
    "support and recover small item sets. epsilon={eps} covers only the randomized-response "
    "bits, not the report. Use it to reproduce [PS] only; for a private protocol use "
    "ldpfast.privsketch.SafeParams (no ordering matrix).")


# -- parameter helpers -----------------------------------------------------------------------
def as_sets(sets, d: int) -> Tuple[np.ndarray, np.ndarray]:
    """Users' sets as CSR ``(offsets int64[n+1], items uint64)``, checked to lie in [0, d).

    ``sets`` is a :class:`~ldpfast.datasets.SetData`, an ``(offsets, items)`` pair, or a
    sequence of per-user iterables of ints (de-duplicated here)."""
    if isinstance(sets, SetData):
        offsets, items = sets.offsets, sets.items
    elif isinstance(sets, tuple) and len(sets) == 2 and isinstance(sets[0], np.ndarray):
        offsets, items = sets
    else:
        data = SetData.from_lists(list(sets))
        offsets, items = data.offsets, data.items
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    items = np.asarray(items)
    if items.size and not np.issubdtype(items.dtype, np.integer):
        raise DTypeError(f"items must be integers, got dtype {items.dtype}")
    if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != items.size \
            or np.any(np.diff(offsets) < 0):
        raise ParameterError("offsets must be non-decreasing, start at 0 and end at len(items)")
    if items.size:
        low, high = int(items.min()), int(items.max())
        if low < 0 or high >= d:
            bad = low if low < 0 else high
            raise ParameterError(f"items must be in [0, d={d}), got {bad}")
    return offsets, np.ascontiguousarray(items, dtype=np.uint64)


_P = TypeVar("_P", bound="SketchParams")


@dataclasses.dataclass(frozen=True)
class SketchParams(_ParamsBase):
    """Parameters shared by every K x M sketch protocol.

    Attributes: ``epsilon`` (budget of the randomized response), ``d`` (domain ``[0, d)``),
    ``K`` hash rows, ``M`` hash range, ``hash_a0``/``hash_a1`` (K public coefficients of
    ``H_k(x) = ((a0_k + a1_k x) mod field_size) mod M``) and ``field_size`` (a prime
    > d, default ``2^64 - 59``). Build with :meth:`create` to draw the coefficients.
    Raises :class:`~ldpfast.errors.ParameterError` on invalid values.
    """

    epsilon: float
    d: int
    K: int = 4
    M: int = 128
    hash_a0: Tuple[int, ...] = ()
    hash_a1: Tuple[int, ...] = ()
    field_size: int = PRIME

    #: The budget of each randomized bit: ``epsilon / bit_divisor`` (``"K*M"``, ``"M"`` or 1).
    bit_divisor: ClassVar[str] = "1"

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        K = check_int("K", self.K, 1, 65536)
        M = check_int("M", self.M, 2, 65536)
        if K * M > 65536:
            raise ParameterError(f"K*M must be <= 65536 (ranks are uint16), got K*M={K * M}")
        p = check_int("field_size", self.field_size, 3, 2**64 - 1)
        if not is_prime(p):
            raise ParameterError(f"field_size must be a prime, got {p}")
        d = check_int("d", self.d, 1, p - 1)
        for name in ("hash_a0", "hash_a1"):
            coeffs = tuple(check_int(name, a, 0, p - 1) for a in getattr(self, name))
            if len(coeffs) != K:
                raise ParameterError(f"{name} must hold K={K} coefficients, got {len(coeffs)}")
            object.__setattr__(self, name, coeffs)
        self.flip_threshold                     # refuses a budget the 64-bit sampler cannot represent
        object.__setattr__(self, "K", K)
        object.__setattr__(self, "M", M)
        object.__setattr__(self, "d", d)
        object.__setattr__(self, "field_size", p)

    @classmethod
    def create(cls: Type[_P], epsilon: float, d: int, K: int = 4, M: int = 128, seed: RngLike = None,
               **kwargs: Any) -> _P:
        """Parameters with K hash functions drawn uniformly from the field (pairwise
        independent up to the ``mod M``, [PAN] section 3.5). The coefficients are public;
        ``seed`` makes them reproducible (``None``: OS entropy)."""
        K = check_int("K", K, 1, 65536)
        field_size = kwargs.pop("field_size", PRIME)
        gen = KeySource(seed).generator()
        a = gen.integers(0, field_size, size=(2, K), dtype=np.uint64)
        return cls(epsilon=epsilon, d=d, K=K, M=M, hash_a0=tuple(int(v) for v in a[0]),
                   hash_a1=tuple(int(v) for v in a[1]), field_size=field_size, **kwargs)

    # -- derived ---------------------------------------------------------------------------
    @property
    def field(self):
        return _core.Field.prime(self.field_size)

    def coefficients(self) -> Tuple[np.ndarray, np.ndarray]:
        return (np.array(self.hash_a0, dtype=np.uint64), np.array(self.hash_a1, dtype=np.uint64))

    def hash(self, x: np.ndarray) -> np.ndarray:
        """``H_k(x)`` for every row: array of shape ``(len(x), K)``, values in ``[0, M)``."""
        x = np.ascontiguousarray(x, dtype=np.uint64)
        a0, a1 = self.coefficients()
        out = np.empty((x.size, self.K), dtype=np.uint64)
        for k in range(self.K):
            out[:, k] = _core.ocms_hash(self.field, np.full(x.size, a0[k]), np.full(x.size, a1[k]), x, self.M)
        return out

    @property
    def bit_epsilon(self) -> float:
        """Budget of each randomized-response bit."""
        divisor = {"1": 1, "M": self.M, "K*M": self.K * self.M}[self.bit_divisor]
        return self.epsilon / divisor

    @property
    def flip_threshold(self) -> int:
        """The 64-bit flip threshold of each bit (:func:`ldpfast._validate.rr_threshold`:
        rounded so the bit's effective epsilon is at most :attr:`bit_epsilon`)."""
        name = "epsilon" if self.bit_divisor == "1" else f"epsilon/({self.bit_divisor})"
        return rr_threshold(self.bit_epsilon, 2, name)

    def cells(self, x: np.ndarray) -> np.ndarray:
        """Flat cell indices ``k*M + H_k(x)``, shape ``(len(x), K)``, uint16."""
        return (self.hash(x) + np.arange(self.K, dtype=np.uint64) * self.M).astype(np.uint16)


@dataclasses.dataclass(frozen=True)
class Params(SketchParams):
    """PrivSketch with sampling ([PS] section 3.3). **Not eps-LDP** (module doc)."""

    protocol: ClassVar[str] = "privsketch"


@dataclasses.dataclass(frozen=True)
class NoSmpParams(SketchParams):
    """PrivSketch-noSmp ([PS] Alg. 2-3, section 4.2): every cell flipped with budget eps/(KM).
    **Not eps-LDP** (module doc)."""

    protocol: ClassVar[str] = "privsketch-nosmp"
    bit_divisor: ClassVar[str] = "K*M"


@dataclasses.dataclass(frozen=True)
class SafeParams(SketchParams):
    """The LDP-safe PrivSketch variant: one uniformly sampled cell, binary RR with eps, no
    ordering matrix. The cell is chosen independently of the data and only its bit is
    randomized, so the report is eps-LDP (binary
    randomized response: the bit is kept with probability e^eps/(e^eps + 1))."""

    protocol: ClassVar[str] = "privsketch-ldp"


# -- report columns ---------------------------------------------------------------------------
def _column(name: str, value, dtype, ndim: int) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != ndim:
        raise ReportError(f"{name} must have {ndim} dimension(s), got {arr.ndim}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise DTypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
    if arr.dtype != dtype:
        info = np.iinfo(dtype)
        if arr.size and (int(arr.min()) < info.min or int(arr.max()) > info.max):
            raise ReportError(f"{name} values must fit {np.dtype(dtype).name}, got range "
                              f"[{int(arr.min())}, {int(arr.max())}]")
    return np.ascontiguousarray(arr, dtype=dtype)


def _check_bits(name: str, bits: np.ndarray) -> None:
    if bits.size and not np.all(np.abs(bits.astype(np.int16)) == 1):
        bad = int(np.flatnonzero(np.abs(bits.astype(np.int16).ravel()) != 1)[0])
        raise ReportError(f"{name} must be +1 or -1, got {int(bits.ravel()[bad])} at flat index {bad}")


def _check_below(name: str, values: np.ndarray, bound: int, what: str) -> None:
    if values.size and int(values.max()) >= bound:
        raise ReportError(f"{name} must be < {what}={bound}, got {int(values.max())}")


@dataclasses.dataclass
class Reports(_ReportsBase):
    """PrivSketch reports: sampled row ``k`` and column ``m`` (uint16), the RR bit
    ``bit`` (int8, +-1) of cell ``(k, m)``, and the ordering matrix ``order``
    (uint16, shape (n, K, M), a permutation of ``[0, K*M)`` per user)."""

    protocol: ClassVar[str] = "privsketch"
    column_types: ClassVar = {"k": ("uint16", 1), "m": ("uint16", 1), "bit": ("int8", 1), "order": ("uint16", 3)}
    k: np.ndarray
    m: np.ndarray
    bit: np.ndarray
    order: np.ndarray

    def __post_init__(self):
        self.k = _column("k", self.k, np.uint16, 1)
        self.m = _column("m", self.m, np.uint16, 1)
        self.bit = _column("bit", self.bit, np.int8, 1)
        self.order = _column("order", self.order, np.uint16, 3)
        self._check_lengths()


@dataclasses.dataclass
class NoSmpReports(_ReportsBase):
    """PrivSketch-noSmp reports: every perturbed cell ``bits`` (int8 +-1, shape (n, K, M))
    and the ordering matrix ``order`` (uint16, shape (n, K, M))."""

    protocol: ClassVar[str] = "privsketch-nosmp"
    column_types: ClassVar = {"bits": ("int8", 3), "order": ("uint16", 3)}
    bits: np.ndarray
    order: np.ndarray

    def __post_init__(self):
        self.bits = _column("bits", self.bits, np.int8, 3)
        self.order = _column("order", self.order, np.uint16, 3)
        self._check_lengths()


@dataclasses.dataclass
class SafeReports(_ReportsBase):
    """LDP-safe variant reports: sampled ``k``, ``m`` (uint16) and the RR bit (int8 +-1)."""

    protocol: ClassVar[str] = "privsketch-ldp"
    column_types: ClassVar = {"k": ("uint16", 1), "m": ("uint16", 1), "bit": ("int8", 1)}
    k: np.ndarray
    m: np.ndarray
    bit: np.ndarray

    def __post_init__(self):
        self.k = _column("k", self.k, np.uint16, 1)
        self.m = _column("m", self.m, np.uint16, 1)
        self.bit = _column("bit", self.bit, np.int8, 1)
        self._check_lengths()


def _check_reports(reports, params: SketchParams) -> None:
    K, M = params.K, params.M
    if hasattr(reports, "k"):
        _check_below("k", reports.k, K, "K")
        _check_below("m", reports.m, M, "M")
        _check_bits("bit", reports.bit)
    if hasattr(reports, "bits"):
        if reports.bits.shape[1:] != (K, M):
            raise ReportError(f"bits must have shape (n, {K}, {M}), got {reports.bits.shape}")
        _check_bits("bits", reports.bits)
    if hasattr(reports, "order") and reports.order.shape[1:] != (K, M):
        raise ReportError(f"order must have shape (n, {K}, {M}), got {reports.order.shape}")


# -- clients -----------------------------------------------------------------------------------
class _SketchClient(ClientBase):
    params_type: ClassVar[type] = SketchParams
    _sampling: ClassVar[int] = 1
    _with_order: ClassVar[bool] = True

    def __init__(self, params: SketchParams, rng: RngLike = None, threads: int = 0):
        if not isinstance(params, self.params_type):
            raise ParameterError(f"params must be {self.params_type.__name__}, got {type(params).__name__}")
        self.params = params
        self.threads = check_int("threads", threads, 0)
        self._keys = KeySource(rng)

    def _perturb(self, sets):
        p = self.params
        offsets, items = as_sets(sets, p.d)
        a0, a1 = p.coefficients()
        return _core.privsketch_perturb(p.field, a0, a1, p.K, p.M, offsets, items, self._keys.key(),
                                        self._sampling, self._with_order,
                                        p.flip_threshold, self.threads)


class Client(_SketchClient):
    """PrivSketch user side with sampling ([PS] Alg. 2 lines 1-5 + section 3.3 sampling).

    Each user builds the K x M bit sketch of its set (Boolean OR), the ordering matrix ([PS]
    section 3.2, with its rank ranges' off-by-one corrected to half-open ranges), samples
    one cell uniformly and flips its +-1 value with probability 1/(e^eps + 1). Randomness:
    ChaCha20 per batch; ``rng=None`` uses OS entropy, an int/SeedSequence/Generator is for
    simulation only.

    Emits :class:`PrivacyWarning`: the ordering matrix makes the report **not** eps-LDP.
    """

    params_type: ClassVar[type] = Params
    _sampling = 1

    def __init__(self, params: Params, rng: RngLike = None, threads: int = 0):
        super().__init__(params, rng, threads)
        warnings.warn(_NOT_LDP.format(name="PrivSketch", eps=params.epsilon), PrivacyWarning, stacklevel=2)

    def perturb(self, sets) -> Reports:
        """Reports for a batch of users (``sets``: see :func:`as_sets`)."""
        cell, bits, order = self._perturb(sets)
        return Reports(k=(cell // self.params.M).astype(np.uint16), m=(cell % self.params.M).astype(np.uint16),
                       bit=bits[:, 0], order=order)


class NoSmpClient(_SketchClient):
    """PrivSketch-noSmp user side ([PS] Alg. 2, whose lines 6-10 index
    with the leftover item ``l`` where every cell is meant): every
    cell of the +-1 sketch is flipped with probability 1/(e^{eps/(KM)} + 1).

    Emits :class:`PrivacyWarning`: the ordering matrix makes the report **not** eps-LDP."""

    params_type: ClassVar[type] = NoSmpParams
    _sampling = 0

    def __init__(self, params: NoSmpParams, rng: RngLike = None, threads: int = 0):
        super().__init__(params, rng, threads)
        warnings.warn(_NOT_LDP.format(name="PrivSketch-noSmp", eps=params.epsilon), PrivacyWarning,
                      stacklevel=2)

    def perturb(self, sets) -> NoSmpReports:
        """Reports for a batch of users (``sets``: see :func:`as_sets`)."""
        _, bits, order = self._perturb(sets)
        return NoSmpReports(bits=bits.reshape(-1, self.params.K, self.params.M), order=order)


class SafeClient(_SketchClient):
    """LDP-safe variant user side: one uniformly sampled cell of the sketch, binary RR with
    eps, no ordering matrix (eps-LDP)."""

    params_type: ClassVar[type] = SafeParams
    _sampling = 1
    _with_order = False

    def perturb(self, sets) -> SafeReports:
        """Reports for a batch of users (``sets``: see :func:`as_sets`)."""
        cell, bits, _ = self._perturb(sets)
        return SafeReports(k=(cell // self.params.M).astype(np.uint16),
                           m=(cell % self.params.M).astype(np.uint16), bit=bits[:, 0])


# -- servers ---------------------------------------------------------------------------------
def _candidate_array(candidates, d: int, name: str = "candidates") -> np.ndarray:
    arr = np.asarray(candidates)
    if arr.ndim != 1:
        raise ParameterError(f"{name} must be 1-D, got ndim={arr.ndim}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise DTypeError(f"{name} must be integers, got dtype {arr.dtype}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= d):
        raise ParameterError(f"{name} must lie in [0, d={d}), got range [{int(arr.min())}, {int(arr.max())}]")
    return arr.astype(np.int64)


class _TrackedServer(Aggregator):
    """Aggregator with integer counts per tracked candidate. Decoding needs the candidate
    set when reports arrive (the per-user side information cannot be stored), so the set is
    fixed at construction; it is part of the state (``tracked`` mask) and must match for a
    merge. State: ``n`` (reports), ``pos``/``neg`` (per item of ``[0, d)``: decoded +1 and -1
    bits; zero for untracked items) and ``bits`` (numbers of +1 and -1 bits received in all,
    for diagnostics). Thread-safe (see :class:`ldpfast._base.Aggregator`)."""

    #: +-1 bits received per report (``bits`` sums to ``n`` times this; 0: not counted).
    _bits_per_report: ClassVar[int] = 0

    def __init__(self, params, candidates=None, threads: int = 0):
        super().__init__(params)
        self.threads = check_int("threads", threads, 0)
        d = params.d
        tracked = np.ones(d, dtype=np.uint8)
        if candidates is not None:
            tracked[:] = 0
            tracked[_candidate_array(candidates, d)] = 1
        self._set_tracked(tracked)
        self._st = _State(n=np.zeros(1, dtype=np.int64), bits=np.zeros(2, dtype=np.int64),
                          pos=np.zeros(d, dtype=np.int64), neg=np.zeros(d, dtype=np.int64))

    @classmethod
    def _state_layout(cls, params):
        d = params.d
        return {"n": ((1,), "int64"), "bits": ((2,), "int64"), "pos": ((d,), "int64"), "neg": ((d,), "int64"),
                "tracked": ((d,), "uint8")}

    def _set_tracked(self, tracked: np.ndarray) -> None:
        tracked = np.array(tracked, dtype=np.uint8)
        tracked.flags.writeable = False
        self._tracked = tracked
        self._cand = np.flatnonzero(tracked).astype(np.int64)
        self._index_ready = False

    @property
    def _n(self) -> np.ndarray:
        return self._st["n"]

    @property
    def _bits(self) -> np.ndarray:
        return self._st["bits"]

    @property
    def _pos(self) -> np.ndarray:
        return self._st["pos"]

    @property
    def _neg(self) -> np.ndarray:
        return self._st["neg"]

    def _state(self) -> Dict[str, np.ndarray]:
        return {**self._st, "tracked": self._tracked}

    def _set_state(self, state: Dict[str, np.ndarray]) -> None:
        if not np.array_equal(state["tracked"], self._tracked):
            self._set_tracked(state["tracked"])
        self._st = _State({name: np.array(state[name], dtype=np.int64) for name in ("n", "bits", "pos", "neg")})

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        n, bits, pos, neg, tracked = (state[k] for k in ("n", "bits", "pos", "neg", "tracked"))
        count = int(n[0])
        if count < 0 or int(bits.min()) < 0 or int(pos.min(initial=0)) < 0 or int(neg.min(initial=0)) < 0:
            raise FormatError("stored counts must not be negative")
        if self._bits_per_report and float(bits.sum(dtype=np.float64)) != float(count) * self._bits_per_report:
            raise FormatError(f"stored bit counts {bits.tolist()} do not fit n = {count}")
        if np.any(tracked > 1) or np.any((tracked == 0) & ((pos != 0) | (neg != 0))):
            raise FormatError("stored tracked mask must be 0/1, with zero counts for untracked items")
        if np.any(pos.astype(np.float64) + neg > count):
            raise FormatError(f"stored per-item counts exceed the number of reports n = {count}")

    def _merged(self, theirs):
        mine = self._st
        return {k: _checked_sum(k, mine[k], theirs[k]) for k in ("n", "bits", "pos", "neg")}

    def merge(self, other):
        """Add ``other``'s counts (exact); both must track the same candidates."""
        if type(other) is type(self) and not np.array_equal(other._tracked, self._tracked):
            raise IncompatibleError("cannot merge aggregators that track different candidate sets")
        return super().merge(other)

    @property
    def n(self) -> int:
        return int(self._n[0])

    @property
    def candidates(self) -> np.ndarray:
        """The tracked items (sorted)."""
        return self._cand.copy()

    def _query(self, candidates) -> np.ndarray:
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")
        if candidates is None:
            return self._cand
        cand = _candidate_array(candidates, self.params.d)
        if cand.size and not np.all(self._tracked[cand]):
            missing = int(cand[self._tracked[cand] == 0][0])
            raise ParameterError(f"candidates must be tracked by this server (see Server(candidates=...)), "
                                 f"item {missing} is not")
        return cand

    def _added(self, n_reports: int, pos: np.ndarray, neg: np.ndarray, ups: int = 0,
               downs: int = 0) -> Dict[str, np.ndarray]:
        """The state with a decoded batch added (new arrays; the committed state is kept)."""
        st = self._st
        new_pos, new_neg = st["pos"].copy(), st["neg"].copy()
        new_pos[self._cand] += pos
        new_neg[self._cand] += neg
        return {"n": st["n"] + n_reports, "bits": st["bits"] + np.array([ups, downs], dtype=np.int64),
                "pos": new_pos, "neg": new_neg}


_INDEX_CACHE: Dict[tuple, tuple] = {}
_INDEX_CACHE_SIZE = 4


def _bucket_index(params: SketchParams, cand: np.ndarray) -> tuple:
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


class Server(_TrackedServer):
    """PrivSketch collector, decode-first with sampling ([PS] section 3.3; Alg. 3 adapted).

    ``Server(params, candidates=None, threads=0)``: ``candidates`` is the set ``D`` to be
    estimated (default: the whole domain). For each report only the candidates hashed into
    the sampled bucket ``(k, m)`` can count (a per-row inverted index built once); a
    candidate counts when the sampled cell has the smallest rank among its K cells
    (``argmin_k O[k, H_k(x)] == k``). Counts of +1 and -1 bits per candidate are integral;
    :meth:`estimate` applies the debiasing. C++, multithreaded, GIL released.
    """

    protocol: ClassVar[str] = "privsketch"
    params_type: ClassVar[type] = Params
    reports_type: ClassVar[type] = Reports
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

    def _decode(self, reports) -> Tuple[np.ndarray, np.ndarray, int]:
        p = self.params
        cell = reports.k.astype(np.uint32) * p.M + reports.m
        return _core.privsketch_decode_cell(p.K, p.M, reports.order, cell, reports.bit, self._bucket_offsets,
                                            self._bucket_cand, self._bucket_cells, self._cand.size,
                                            self.threads)

    def _validate(self, reports) -> None:
        """Ranges, +-1 bits and shapes (the ordering matrices are checked while decoding:
        each must be a permutation of ``[0, K*M)``)."""
        _check_reports(reports, self.params)

    def _ingest(self, reports):
        self._build_index()
        pos, neg, bad = self._decode(reports)
        if bad < len(reports):
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

    def estimate(self, candidates=None, counts: bool = False, estimator: str = "r2") -> np.ndarray:
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
        if estimator == "r2":
            est = KM / n * (c * (pos - neg) + (pos + neg)) / 2.0
        elif estimator == "centred":
            est = 0.5 + KM * c / (2.0 * n) * (pos - neg)
        else:
            raise ParameterError(f"estimator must be 'r2' or 'centred', got {estimator!r}")
        return est * n if counts else est


class NoSmpServer(Server):
    """PrivSketch-noSmp collector ([PS] Alg. 3): every candidate takes each
    user's perturbed bit at ``argmin_k O[k, H_k(x)]``. Cost ``O(n |D| K)`` (C++, threads)."""

    protocol: ClassVar[str] = "privsketch-nosmp"
    params_type: ClassVar[type] = NoSmpParams
    reports_type: ClassVar[type] = NoSmpReports

    @property
    def _bits_per_report(self) -> int:  # type: ignore[override]
        return self.params.K * self.params.M

    def _decode(self, reports):
        p = self.params
        bits = reports.bits.reshape(len(reports), p.K * p.M)
        return _core.privsketch_decode_full(p.K, p.M, reports.order, bits, self._cand_cells, self.threads)

    def _cells_per_report(self) -> int:
        return self.params.K * self.params.M

    def _bit_constant(self) -> float:
        return c_eps(self.params.epsilon / (self.params.K * self.params.M))

    def estimate(self, candidates=None, counts: bool = False) -> np.ndarray:
        """Frequencies (counts with ``counts=True``): ``fhat = (c' C(x)/n + 1)/2`` with ``C = #(+1) - #(-1)`` and
        ``c' = (e^{eps/KM}+1)/(e^{eps/KM}-1)``: unbiased for ``ftilde``, variance
        ``e^{eps/KM}/(n (e^{eps/KM}-1)^2)`` ([PS] Thm 3.2)."""
        cand = self._query(candidates)
        p = self.params
        c = c_eps(p.epsilon / (p.K * p.M))
        diff = self._pos[cand].astype(np.float64) - self._neg[cand].astype(np.float64)
        est = 0.5 * (c * diff / self.n + 1.0)
        return est * self.n if counts else est


class SafeServer(Aggregator):
    """Collector for the LDP-safe variant (no ordering matrix). State: per cell ``(k, m)``
    the numbers of +1 and -1 bits (``pos``/``neg``, shape (K, M)) and ``n``; O(n) to ingest.

    Without ``O`` the collector cannot tell which of an item's K cells is the minimum, so it
    decodes count-mean style: ``Z_i = M sum_k 1{(k_i, m_i) = (k, H_k(x))} Xhat_i`` with
    ``Xhat = (c b + 1)/2`` is unbiased for ``sum_k X_i[k, H_k(x)]/K``.
    """

    protocol: ClassVar[str] = "privsketch-ldp"
    params_type: ClassVar[type] = SafeParams
    reports_type: ClassVar[type] = SafeReports

    def __init__(self, params: SafeParams):
        super().__init__(params)
        self._st = _State(n=np.zeros(1, dtype=np.int64), pos=np.zeros((params.K, params.M), dtype=np.int64),
                          neg=np.zeros((params.K, params.M), dtype=np.int64))

    @classmethod
    def _state_layout(cls, params):
        shape = (params.K, params.M)
        return {"n": ((1,), "int64"), "pos": (shape, "int64"), "neg": (shape, "int64")}

    @property
    def _pos(self) -> np.ndarray:
        return self._st["pos"]

    @property
    def _neg(self) -> np.ndarray:
        return self._st["neg"]

    def _set_state(self, state):
        self._st = _State({k: np.array(state[k], dtype=np.int64) for k in ("n", "pos", "neg")})

    def _check_state(self, state) -> None:
        super()._check_state(state)
        n, pos, neg = int(state["n"][0]), state["pos"], state["neg"]
        if n < 0 or int(pos.min()) < 0 or int(neg.min()) < 0 or float(pos.sum(dtype=np.float64) + neg.sum()) != n:
            raise FormatError(f"stored cell counts do not add up to the stored n = {n}")

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    def _validate(self, reports: SafeReports) -> None:
        _check_reports(reports, self.params)

    def _ingest(self, reports: SafeReports):
        p = self.params
        cell = reports.k.astype(np.int64) * p.M + reports.m
        up = reports.bit > 0
        st = self._st
        return {"n": st["n"] + len(reports),
                "pos": st["pos"] + np.bincount(cell[up], minlength=p.K * p.M).reshape(p.K, p.M),
                "neg": st["neg"] + np.bincount(cell[~up], minlength=p.K * p.M).reshape(p.K, p.M)}

    def _cell_sums(self) -> np.ndarray:
        """Per cell, the sum of the debiased bits ``(c b + 1)/2`` of the users that sampled it."""
        c = c_eps(self.params.epsilon)
        return (c * (self._pos - self._neg) + (self._pos + self._neg)) / 2.0

    def mean_fill(self) -> float:
        """Unbiased estimate of the average share of 1-cells in the users' sketches."""
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")
        return float(self._cell_sums().sum() / self.n)

    def estimate(self, candidates=None, counts: bool = False, estimator: str = "mean") -> np.ndarray:
        """Frequencies (counts with ``counts=True``) of ``candidates`` (default the whole
        domain).

        * ``"mean"`` (default): ``fbar(x) = (M/n) sum_k S[k, H_k(x)]`` with ``S`` the per-cell
          sums of ``(c b + 1)/2``; unbiased for the count-mean sketch frequency
          ``(1/(nK)) sum_i sum_k X_i[k, H_k(x)] >= ftilde >= f``, variance
          ``[M e^eps/(e^eps-1)^2 + M fbar - mean_i(fbar_i^2)]/n`` (K times less noise than
          PrivSketch, but more Bloom bias since it averages rows instead of taking the min).
        * ``"mean-corrected"``: ``(fbar - w)/(1 - w)`` with ``w`` = :meth:`mean_fill`, a
          ratio estimator that removes most of the collision bias (not exactly unbiased).
        * ``"min"``: ``min_k (KM/n) S[k, H_k(x)]`` (aggregate-then-min, biased).
        """
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")
        p = self.params
        if candidates is None:
            check_allocation(24 * p.K * p.d, f"a whole-domain query over d={p.d} items and K={p.K} rows")
            cand = np.arange(p.d, dtype=np.int64)
        else:
            cand = _candidate_array(candidates, p.d)
        sums = self._cell_sums().ravel()[p.cells(cand).astype(np.int64)]  # (D, K)
        if estimator == "mean":
            est = p.M / self.n * sums.sum(axis=1)
        elif estimator == "mean-corrected":
            w = self.mean_fill()
            est = (p.M / self.n * sums.sum(axis=1) - w) / (1.0 - w)
        elif estimator == "min":
            est = p.K * p.M / self.n * sums.min(axis=1)
        else:
            raise ParameterError(f"estimator must be 'mean', 'mean-corrected' or 'min', got {estimator!r}")
        return est * self.n if counts else est


register_protocol(Protocol(id="privsketch", params=Params, reports=Reports, aggregator=Server, client=Client))
register_protocol(Protocol(id="privsketch-nosmp", params=NoSmpParams, reports=NoSmpReports,
                           aggregator=NoSmpServer, client=NoSmpClient))
register_protocol(Protocol(id="privsketch-ldp", params=SafeParams, reports=SafeReports,
                           aggregator=SafeServer, client=SafeClient))

from .privsketch_baselines import *  # noqa: E402,F401,F403
from . import privsketch_baselines as _baselines  # noqa: E402

__all__ += _baselines.__all__
