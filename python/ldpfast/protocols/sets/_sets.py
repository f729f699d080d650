"""Pieces shared by the protocols for users holding *sets* of items from ``[0, d)``
(PrivSketch, its baselines and nPCMS): the CSR input form (:func:`as_sets`), the K x M
sketch parameters (:class:`SketchParams`, ``K`` public pairwise-independent hashes
``H_k(x) = ((a0_k + a1_k x) mod p) mod M``), the sketch client (:class:`SketchClient`),
the aggregator with counts per tracked candidate (:class:`TrackedServer`), users' sets
intersected with a candidate list (:func:`intersect_candidates`); it re-exports
:class:`~ldpfast.errors.PrivacyWarning`.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, ClassVar, Dict, Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union

import numpy as np
from numpy.typing import ArrayLike

from ... import _core
from ..._base import Aggregator, ClientBase, Delta, Params as _ParamsBase
from ..._delta import _State
from ..._memory import check_allocation
from ..._random import KeySource, RngLike
from ...datasets import SetData
from ..._budget import split
from ..._validate import candidate_array, check_epsilon, check_int, check_threads, rr_threshold
from ...errors import DTypeError, FormatError, IncompatibleError, ParameterError, ReportError
from ...errors import PrivacyWarning as PrivacyWarning  # re-exported: its home before ldpfast.errors
from ...kernels.field import PRIME, is_prime


def warn_not_ldp(params: Any, stacklevel: int = 3) -> None:
    """Emit a :class:`PrivacyWarning` when ``params.privacy_warning()`` names a leak (the
    parameters and clients of configurations that are not eps-LDP call it)."""
    message = params.privacy_warning()
    if message:
        warnings.warn(message, PrivacyWarning, stacklevel=stacklevel)


#: Users' sets in CSR form: ``(offsets int64[n+1], items uint64)``.
CSR = Tuple[np.ndarray, np.ndarray]
#: What :func:`as_sets` reads as users' sets.
SetsLike = Union[SetData, CSR, Sequence[ArrayLike]]


#: The largest domain of a set protocol: users' items are int64 (:class:`~ldpfast.datasets.SetData`).
MAX_SET_DOMAIN = 2**63


def as_sets(sets: SetsLike, d: int) -> CSR:
    """Users' sets as CSR ``(offsets int64[n+1], items uint64)``, checked to lie in [0, d).

    ``sets`` is a :class:`~ldpfast.datasets.SetData`, an ``(offsets, items)`` pair, or a
    sequence of per-user iterables of ints (de-duplicated here)."""
    raw_offsets: ArrayLike
    raw_items: ArrayLike
    if isinstance(sets, SetData):
        raw_offsets, raw_items = sets.offsets, sets.items
    elif isinstance(sets, tuple) and len(sets) == 2 and isinstance(sets[0], np.ndarray):
        raw_offsets, raw_items = sets
    else:
        data = SetData.from_lists(list(sets))
        raw_offsets, raw_items = data.offsets, data.items
    offsets = np.ascontiguousarray(raw_offsets, dtype=np.int64)
    items = np.asarray(raw_items)
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
_T = TypeVar("_T", bound="TrackedServer")


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        K = check_int("K", self.K, 1, 65536)
        M = check_int("M", self.M, 2, 65536)
        if K * M > 65536:
            raise ParameterError(f"K*M must be <= 65536 (ranks are uint16), got K*M={K * M}")
        p = check_int("field_size", self.field_size, 3, 2**64 - 1)
        if not is_prime(p):
            raise ParameterError(f"field_size must be a prime, got {p}")
        d = check_int("d", self.d, 1, min(p - 1, MAX_SET_DOMAIN))
        for name in ("hash_a0", "hash_a1"):
            coeffs = tuple(check_int(name, a, 0, p - 1) for a in getattr(self, name))
            if len(coeffs) != K:
                raise ParameterError(f"{name} must hold K={K} coefficients, got {len(coeffs)}")
            object.__setattr__(self, name, coeffs)
        _ = self.flip_threshold                 # refuses a budget the 64-bit sampler cannot represent
        object.__setattr__(self, "K", K)
        object.__setattr__(self, "M", M)
        object.__setattr__(self, "d", d)
        object.__setattr__(self, "field_size", p)
        warn_not_ldp(self, stacklevel=4)

    def privacy_warning(self) -> str:
        """Why reports under these parameters are not eps-LDP ("" when they are)."""
        return ""

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
    def field(self) -> _core.Field:
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
    def bits_per_report(self) -> int:
        """Randomized bits that depend on the user's set: 1, ``M`` or ``K M``."""
        return {"1": 1, "M": self.M, "K*M": self.K * self.M}[self.bit_divisor]

    @property
    def bit_epsilon(self) -> float:
        """Budget of each randomized-response bit: ``epsilon / bits_per_report`` rounded
        down (:func:`ldpfast._budget.split`), so the bits together never exceed ``epsilon``."""
        return split(self.epsilon, self.bits_per_report)

    @property
    def flip_threshold(self) -> int:
        """The 64-bit flip threshold of each bit (:func:`ldpfast._validate.rr_threshold`:
        rounded so the bit's effective epsilon is at most :attr:`bit_epsilon`)."""
        name = "epsilon" if self.bit_divisor == "1" else f"epsilon/({self.bit_divisor})"
        return rr_threshold(self.bit_epsilon, 2, name)

    def cells(self, x: np.ndarray) -> np.ndarray:
        """Flat cell indices ``k*M + H_k(x)``, shape ``(len(x), K)``, uint16."""
        return (self.hash(x) + np.arange(self.K, dtype=np.uint64) * self.M).astype(np.uint16)

    def query_cells(self, candidates: Any = None) -> np.ndarray:
        """:meth:`cells` of the query ``candidates`` (``None``: the whole domain, after a
        memory-budget check) as int64 indices, shape ``(len(candidates), K)``."""
        if candidates is None:
            check_allocation(24 * self.K * self.d, f"a whole-domain query over d={self.d} items and K={self.K} rows")
            cand = np.arange(self.d, dtype=np.int64)
        else:
            cand = candidate_array(candidates, self.d)
        return self.cells(cand).astype(np.int64)



def intersect_candidates(offsets: np.ndarray, items: np.ndarray, candidates: Sequence[int]) -> CSR:
    """Each user's ``S ∩ C`` as CSR ``(offsets, positions in C)`` (set order kept)."""
    cand = np.asarray(candidates, dtype=np.uint64)
    order = np.argsort(cand, kind="stable")
    ordered = cand[order]
    pos = np.minimum(np.searchsorted(ordered, items), ordered.size - 1)
    keep = ordered[pos] == items
    users = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    sizes = np.bincount(users[keep], minlength=offsets.size - 1)
    return np.concatenate(([0], np.cumsum(sizes))).astype(np.int64), order[pos[keep]].astype(np.uint64)


class SketchClient(ClientBase):
    """The user side of a K x M sketch protocol: :meth:`_perturb` runs the C++ sketch kernel
    with the subclass's sampling mode (0: every cell, 1: one cell, 2: one row) and ordering
    matrix choice."""

    params_type: ClassVar[type] = SketchParams
    _sampling: ClassVar[int] = 1
    _with_order: ClassVar[bool] = True

    params: SketchParams

    def _perturb(self, sets: SetsLike) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
        p = self.params
        offsets, items = as_sets(sets, p.d)
        a0, a1 = p.coefficients()
        return _core.privsketch_perturb(p.field, a0, a1, p.K, p.M, offsets, items, self._keys.key(),
                                        self._sampling, self._with_order,
                                        p.flip_threshold, self.threads)



class TrackedServer(Aggregator):
    """Aggregator with integer counts per tracked candidate. Decoding needs the candidate
    set when reports arrive (the per-user side information cannot be stored), so the set is
    fixed at construction; it is part of the state (``tracked`` mask) and must match for a
    merge. State: ``n`` (reports), ``pos``/``neg`` (per item of ``[0, d)``: decoded +1 and -1
    bits; zero for untracked items) and ``bits`` (numbers of +1 and -1 bits received in all,
    for diagnostics). Thread-safe (see :class:`ldpfast._base.Aggregator`)."""

    #: +-1 bits received per report (``bits`` sums to ``n`` times this; 0: not counted).
    _bits_per_report: ClassVar[int] = 0

    params: Any  # a SketchParams, or PS-OLH's params (no sketch): read here for d only

    def __init__(self, params: Any, candidates: Any = None, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        d = params.d
        tracked = np.ones(d, dtype=np.uint8)
        if candidates is not None:
            tracked[:] = 0
            tracked[candidate_array(candidates, d)] = 1
        self._set_tracked(tracked)
        self._st = _State(n=np.zeros(1, dtype=np.int64), bits=np.zeros(2, dtype=np.int64),
                          pos=np.zeros(d, dtype=np.int64), neg=np.zeros(d, dtype=np.int64))

    @classmethod
    def _state_layout(cls, params: Any) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        d = params.d
        return {"n": ((1,), "int64"), "bits": ((2,), "int64"), "pos": ((d,), "int64"), "neg": ((d,), "int64"),
                "tracked": ((d,), "uint8")}

    def _set_tracked(self, tracked: np.ndarray) -> None:
        tracked = np.array(tracked, dtype=np.uint8)
        tracked.flags.writeable = False
        self._tracked = tracked
        self._cand = np.flatnonzero(tracked).astype(np.int64)
        self._index_ready = False

    def _array(self, name: str) -> np.ndarray:
        array: np.ndarray = self._st[name]
        return array

    @property
    def _n(self) -> np.ndarray:
        return self._array("n")

    @property
    def _bits(self) -> np.ndarray:
        return self._array("bits")

    @property
    def _pos(self) -> np.ndarray:
        return self._array("pos")

    @property
    def _neg(self) -> np.ndarray:
        return self._array("neg")

    def _state(self) -> Dict[str, np.ndarray]:
        return {**self._st, "tracked": self._tracked}

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
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

    def merge(self: _T, other: _T) -> _T:
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

    def _query(self, candidates: Any) -> np.ndarray:
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")
        # the candidates, their counts and estimates as float64
        self._check_query(candidates, 48, self._cand.size, f"a {self.protocol!r} query")
        if candidates is None:
            return self._cand
        cand = candidate_array(candidates, self.params.d)
        if cand.size and not np.all(self._tracked[cand]):
            missing = int(cand[self._tracked[cand] == 0][0])
            raise ParameterError(f"candidates must be tracked by this server (see Server(candidates=...)), "
                                 f"item {missing} is not")
        return cand

    def _added(self, n_reports: int, pos: np.ndarray, neg: np.ndarray, ups: int = 0, downs: int = 0) -> Delta:
        """A decoded batch's change to the state: ``pos``/``neg`` per tracked candidate."""
        delta = self._delta().add("n", [n_reports]).add("bits", [ups, downs])
        for name, counts in (("pos", pos), ("neg", neg)):
            hit = np.flatnonzero(counts)
            delta.add(name, counts[hit], self._cand[hit])
        return delta

