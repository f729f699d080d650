"""Hadamard-family frequency oracles: HRR ([WW] Fact 2.1 / App. 7.1) and the
comparison algorithms of [PAN] section 6: HE, CMS+HE, RHR and OLH.

Protocols (each with ``Params``, ``Client``, ``Reports``, ``Server``; HRR's are also
exported as ``Params``/``Client``/``Reports``/``Server``)::

    params = lf.hadamard.HRRParams(epsilon=1.0, d=2**20)
    reports = lf.hadamard.HRRClient(params, rng=None).perturb(values)   # 1 bit + row per user
    server = lf.hadamard.HRRServer(params).update(reports)
    freq = server.estimate()               # fractions; estimate(counts=True) for counts

HRR, HE, CMS+HE (and HadaOracle/HadaHeavy, built on the same machinery) are sets of HRR
instances ("groups"): a user in group ``g`` holding ``x`` computes
``y = hash_g(x >> shift_g) mod m_g`` (or ``y = x >> shift_g``), draws (or is assigned) a
Hadamard row ``r`` and reports ``b = H[r, y + col_offset_g] * s`` where ``s = -1`` with
probability ``1/(e^eps + 1)``. The server keeps integer vectors ``z_g[r] += b`` (C++,
multithreaded) and decodes each with one exact (integer) FWHT.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Dict, Optional, Tuple

import numpy as np

from .. import _core
from .._base import Aggregator, ClientBase, Params, Protocol, Reports, _describe, _State, register_protocol
from .._memory import check_allocation
from .._random import KeySource, RngLike
from .._validate import (check_binary_epsilon, check_choice, check_derived_range, check_epsilon, check_int,
                        check_threads, rr_threshold)
from .._validate import probability_threshold  # noqa: F401  (re-exported)
from ..errors import DTypeError, FormatError, ParameterError, ReportError
from ..theory.hadamard import c_eps

__all__ = [
    "Params", "Client", "Reports", "Server",
    "HRRParams", "HRRClient", "HRRReports", "HRRServer",
    "HEParams", "HEClient", "HEReports", "HEServer",
    "CMSHEParams", "CMSHEClient", "CMSHEReports", "CMSHEServer",
    "RHRParams", "RHRClient", "RHRReports", "RHRServer",
    "OLHParams", "OLHClient", "OLHReports", "OLHServer",
    "BitReports", "GroupBitReports", "PRIME",
]

from ..kernels.field import PRIME  # noqa: E402  (re-exported)
#: GF(2^64) with z^64 + z^4 + z^3 + z + 1 (the standard pentanomial): the low bits of a1*x
#: XOR a0 are an exactly pairwise-independent hash into a power-of-two range.
GF64_POLY_LOW = 0x1B


def binary_flip_threshold(epsilon: float) -> int:
    """Binary RR flips with probability ``1/(e^eps + 1)``, computed directly."""
    return rr_threshold(epsilon, 2)


def pow2_at_least(value: int) -> int:
    """The smallest power of two ``>= value`` (value >= 1)."""
    return 1 << max(0, (int(value) - 1).bit_length())


def as_values(values: Any, d: int, name: str = "values") -> np.ndarray:
    """Client inputs as a contiguous uint64 array, each in ``[0, d)``."""
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ParameterError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise DTypeError(f"{name} must be integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "i" and arr.size and arr.min() < 0:
        raise ParameterError(f"{name} must be in [0, {d}), got {int(arr.min())}")
    arr = np.ascontiguousarray(arr, dtype=np.uint64)
    if arr.size and int(arr.max()) >= d:
        bad = int(np.argmax(arr >= np.uint64(d)) if d < 2**64 else 0)
        raise ParameterError(f"{name} must be in [0, {d}), got {int(arr[bad])} at index {bad}")
    return arr


def column(name: str, value: Any, dtype: Any) -> np.ndarray:
    """A report column: 1-D, exactly ``dtype`` (no silent casts), made contiguous."""
    arr = np.asarray(value)
    if arr.dtype != np.dtype(dtype):
        raise DTypeError(f"{name} must have dtype {np.dtype(dtype).name}, got {arr.dtype}")
    if arr.ndim != 1:
        raise ReportError(f"{name} must be 1-D, got shape {arr.shape}")
    return np.ascontiguousarray(arr)


def optional_index_array(name: str, value: Any, n: int) -> Optional[np.ndarray]:
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ParameterError(f"{name} must be a 1-D array of length {n}, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise DTypeError(f"{name} must be integers, got dtype {arr.dtype}")
    if arr.size and arr.dtype.kind == "i" and arr.min() < 0:
        raise ParameterError(f"{name} must be non-negative, got {int(arr.min())}")
    if arr.size and int(arr.max()) >= 2**32:
        raise ParameterError(f"{name} must be < 2^32, got {int(arr.max())}")
    return np.ascontiguousarray(arr, dtype=np.uint32)


def hash_coefficients(seed: int, count: int, field_size: int) -> np.ndarray:
    """``count`` pairs ``(a0, a1)`` uniform on a field of ``field_size`` elements, derived
    from ``seed`` (the hash functions are public, so a seed in the parameters makes them
    serializable). Returns a (count, 2) uint64 array."""
    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), 0x48414441])))
    return gen.integers(0, field_size - 1, size=(count, 2), dtype=np.uint64, endpoint=True)


# -- group layout ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """The HRR instances of one protocol configuration (see module docstring)."""

    table: np.ndarray          # (G, 7) uint64: a0, a1, hash_modulus, col_offset, rows, cell_base, shift
    level_first: np.ndarray    # uint32, first group of each level
    level_count: np.ndarray    # uint32, groups per level
    field: Optional[Any]       # _core.Field or None

    @property
    def n_groups(self) -> int:
        return int(self.table.shape[0])

    @property
    def rows(self) -> np.ndarray:
        return self.table[:, 4]

    @property
    def cell_base(self) -> np.ndarray:
        return np.ascontiguousarray(self.table[:, 5])

    @property
    def n_cells(self) -> int:
        return int(self.table[-1, 5] + self.table[-1, 4])

    def group_hashes(self, groups: np.ndarray, x: np.ndarray, threads: int = 0) -> np.ndarray:
        """``y_g(x)`` for pairs ``(groups[i], x[i])`` (uint64), the hashed/shifted value
        before the column offset."""
        t = self.table
        shifted = x >> t[groups, 6]
        moduli = np.unique(t[:, 2])
        if len(moduli) == 1 and moduli[0] == 0:
            return shifted
        a0 = np.ascontiguousarray(t[groups, 0])
        a1 = np.ascontiguousarray(t[groups, 1])
        if len(moduli) == 1:
            return _core.ocms_hash(self.field, a0, a1, shifted, int(moduli[0]), threads)
        out = shifted.copy()
        modulus = t[groups, 2]
        for mod in moduli[moduli != 0]:
            sel = np.flatnonzero(modulus == mod)
            out[sel] = _core.ocms_hash(self.field, a0[sel], a1[sel], np.ascontiguousarray(shifted[sel]), int(mod),
                                       threads)
        return out


def make_layout(groups: list, levels: Optional[list] = None, field: Optional[Any] = None) -> Layout:
    """``groups``: list of dicts with keys a0, a1, hash_modulus, col_offset, rows, shift
    (cell_base is assigned here, contiguous in group order). ``levels``: list of
    (first, count); default one level with every group."""
    table = np.zeros((len(groups), 7), dtype=np.uint64)
    base = 0
    for g, spec in enumerate(groups):
        table[g] = (spec.get("a0", 0), spec.get("a1", 0), spec.get("hash_modulus", 0),
                    spec.get("col_offset", 0), spec["rows"], base, spec.get("shift", 0))
        base += int(spec["rows"])
    if levels is None:
        levels = [(0, len(groups))]
    first = np.array([lv[0] for lv in levels], dtype=np.uint32)
    count = np.array([lv[1] for lv in levels], dtype=np.uint32)
    return Layout(table, first, count, field)


def gf64_field():
    return _core.Field.binary(64, GF64_POLY_LOW)


def prime_field():
    return _core.Field.prime(PRIME)


# -- reports --------------------------------------------------------------------------
@dataclasses.dataclass
class BitReports(Reports):
    """One HRR-style report per user: the Hadamard row ``rows`` (uint32) and the
    privatized bit ``bits`` (int8, +1 or -1)."""

    column_types: ClassVar = {"rows": ("uint32", 1), "bits": ("int8", 1)}

    rows: np.ndarray
    bits: np.ndarray

    def __post_init__(self):
        self.rows = column("rows", self.rows, np.uint32)
        self.bits = column("bits", self.bits, np.int8)
        self._check_lengths()

    @property
    def groups(self) -> Optional[np.ndarray]:
        return None


@dataclasses.dataclass
class GroupBitReports(Reports):
    """One report per user of a sketched Hadamard protocol: the group (hash function /
    user subset) ``groups`` (uint32), the Hadamard row ``rows`` (uint32) and the
    privatized bit ``bits`` (int8, +1 or -1)."""

    column_types: ClassVar = {"groups": ("uint32", 1), "rows": ("uint32", 1), "bits": ("int8", 1)}

    groups: np.ndarray
    rows: np.ndarray
    bits: np.ndarray

    def __post_init__(self):
        self.groups = column("groups", self.groups, np.uint32)
        self.rows = column("rows", self.rows, np.uint32)
        self.bits = column("bits", self.bits, np.int8)
        self._check_lengths()


# -- client ---------------------------------------------------------------------------
class LayoutClient(ClientBase):
    """Client of a group-layout protocol. Subclasses set ``params_type``,
    ``reports_type`` and implement ``_layout()`` / ``_domain()``."""

    params_type: ClassVar[type] = Params
    reports_type: ClassVar[type] = BitReports

    def __init__(self, params: Params, rng: RngLike = None, threads: int = 0):
        if not isinstance(params, self.params_type):
            raise ParameterError(f"params must be {self.params_type.__name__}, got {type(params).__name__}")
        self.params = params
        self._keys = KeySource(rng)
        self.threads = check_threads(threads)

    @property
    def seeded(self) -> bool:
        """True when this client is a reproducible simulator (seeded), not a private client."""
        return self._keys.seeded

    def _perturb(self, values: np.ndarray, groups: Any, rows: Any) -> Tuple[Optional[np.ndarray], np.ndarray, np.ndarray]:
        layout = self.params.layout()
        n = values.shape[0]
        groups = optional_index_array("groups", groups, n)
        rows = optional_index_array("rows", rows, n)
        if groups is not None and layout.n_groups == 1:
            raise ParameterError("groups must be None for a protocol with a single group")
        try:
            return _core.hadamard_perturb(self._keys.key(), values, layout.table, layout.level_first,
                                          layout.level_count, layout.field, groups, rows,
                                          binary_flip_threshold(self.params.epsilon), self.threads)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None


# -- server ---------------------------------------------------------------------------
class LayoutServer(Aggregator):
    """Aggregator of a group-layout protocol: integer state ``z`` (one Hadamard-sized
    vector per group, flat), the report count ``n`` and, for several groups, the number
    of reports per group. Decoding applies one exact int64 FWHT per group."""

    reports_type: ClassVar[type] = BitReports
    _ingest_validates = True  # hadamard_update checks every report before adding any

    def __init__(self, params: Params, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        cells, groups = params._layout_size()
        self._st = _State(z=np.zeros(cells, dtype=np.int64), n=np.zeros(1, dtype=np.int64),
                          group_sizes=np.zeros(groups, dtype=np.int64))

    @classmethod
    def _state_layout(cls, params: Params):
        cells, groups = params._layout_size()
        return {"z": ((cells,), "int64"), "n": ((1,), "int64"), "group_sizes": ((groups,), "int64")}

    # state
    @property
    def _z(self) -> np.ndarray:
        return self._st["z"]

    @property
    def _n(self) -> np.ndarray:
        return self._st["n"]

    @property
    def _group_sizes(self) -> np.ndarray:
        return self._st["group_sizes"]

    def _set_state(self, state: Dict[str, np.ndarray]) -> None:
        self._st = _State({name: np.array(state[name], dtype=np.int64) for name in ("z", "n", "group_sizes")})

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        sizes, n = state["group_sizes"], int(state["n"][0])
        if n < 0 or (sizes.size and int(sizes.min()) < 0) or float(sizes.sum(dtype=np.float64)) != n:
            raise FormatError(f"stored report counts are inconsistent: n = {n}, per group {_describe(sizes)}")
        # each report adds +-1 to one cell of its group
        starts = self.params.layout().cell_base.astype(np.intp)
        spread = np.add.reduceat(np.abs(state["z"].astype(np.float64)), starts)
        parity = np.add.reduceat(state["z"], starts) % 2
        if np.any(spread > sizes) or np.any(parity != sizes % 2):
            raise FormatError("stored aggregation vector does not fit the stored report counts")

    @property
    def n(self) -> int:
        """Number of reports aggregated."""
        return int(self._n[0])

    @property
    def group_sizes(self) -> np.ndarray:
        """Reports per group (a copy)."""
        return self._group_sizes.copy()

    @property
    def z(self) -> np.ndarray:
        """The integer aggregation vector (a read-only view)."""
        view = self._z.view()
        view.flags.writeable = False
        return view

    def assign_rows(self, n: int, rng: RngLike = None) -> np.ndarray:
        """Server-assigned Hadamard rows for ``n`` users of a single-group protocol,
        uniform on ``[0, D)`` (in HRR the server may draw ``r_i`` and send it)."""
        layout = self.params.layout()
        n = check_int("n", n, 0)
        gen = KeySource(rng).generator()
        return gen.integers(0, int(layout.rows[0]), size=n, dtype=np.uint64).astype(np.uint32)

    def assign(self, n: int, rng: RngLike = None, partition: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
        """Server-assigned ``(groups, rows)`` for ``n`` users of a multi-group protocol.

        ``partition="independent"``: each user draws a level uniformly, then a group of
        that level uniformly ([WW] section 3.1). ``"permutation"``: a uniformly random
        permutation of the users is cut into consecutive blocks, one per level (sizes
        ``floor``/``ceil`` of ``n/levels``), each cut again into one block per group.
        Rows are uniform on each group's Hadamard size. ``partition`` defaults to the
        parameters' (``"independent"`` when they have none). Pass the result to
        ``Client.perturb(values, groups=..., rows=...)``."""
        layout = self.params.layout()
        n = check_int("n", n, 0)
        if partition is None:
            partition = getattr(self.params, "partition", "independent")
        check_choice("partition", partition, ("independent", "permutation"))
        gen = KeySource(rng).generator()
        first = layout.level_first.astype(np.int64)
        count = layout.level_count.astype(np.int64)
        if partition == "independent":
            level = gen.integers(0, len(first), size=n)
            groups = first[level] + gen.integers(0, count[level])
        else:
            labels = np.empty(n, dtype=np.int64)
            level_bounds = (np.arange(len(first) + 1) * n) // len(first)
            for lv in range(len(first)):
                lo, hi = level_bounds[lv], level_bounds[lv + 1]
                bounds = lo + (np.arange(count[lv] + 1) * (hi - lo)) // count[lv]
                labels[lo:hi] = first[lv] + np.repeat(np.arange(count[lv]), np.diff(bounds))
            groups = np.empty(n, dtype=np.int64)
            groups[gen.permutation(n)] = labels
        rows = gen.integers(0, layout.rows.astype(np.int64)[groups])
        return groups.astype(np.uint32), rows.astype(np.uint32)

    def _validate(self, reports: Reports) -> None:
        """Groups and rows in range, bits in {-1, +1} (the first bad report is named)."""
        layout = self.params.layout()
        groups, rows, bits = reports.groups, reports.rows, reports.bits
        widths = layout.rows
        if groups is None:
            bad_group = np.zeros(rows.size, dtype=bool)
            width = widths[0]
        else:
            bad_group = groups >= layout.n_groups
            width = widths[np.minimum(groups, layout.n_groups - 1)]
        bad = bad_group | (rows >= width) | ((bits != 1) & (bits != -1))
        if bad.any():
            i = int(np.argmax(bad))
            g = int(groups[i]) if groups is not None else 0
            if g >= layout.n_groups:
                raise ReportError(f"report {i}: group {g} is out of range [0, {layout.n_groups})")
            if int(rows[i]) >= int(widths[g]):
                raise ReportError(f"report {i}: row {int(rows[i])} is out of range [0, {int(widths[g])})")
            raise ReportError(f"report {i}: bit must be -1 or +1, got {int(bits[i])}")

    def _ingest(self, reports: Reports) -> Dict[str, np.ndarray]:
        layout = self.params.layout()
        st = self._st
        z = st["z"].copy()
        groups = reports.groups
        bad = _core.hadamard_update(groups, reports.rows, reports.bits, np.ascontiguousarray(layout.rows),
                                    layout.cell_base, z, self.threads)
        if bad < len(reports):
            self._validate(reports)  # names the first bad report
            raise ReportError(f"report {bad} does not fit the parameters")
        if groups is None:
            sizes = st["group_sizes"] + len(reports)
        else:
            sizes = st["group_sizes"] + np.bincount(groups.astype(np.intp), minlength=layout.n_groups)
        return {"z": z, "n": st["n"] + len(reports), "group_sizes": sizes}

    def decoded(self) -> np.ndarray:
        """``H z_g`` for every group, flat int64 (exact; cached until the next update).
        Multiply by ``c_eps`` for the HRR count estimates."""
        st = self._st
        decoded = getattr(st, "decoded", None)
        if decoded is None:
            layout = self.params.layout()
            out = st["z"].copy()
            rows = layout.rows
            start = 0
            while start < layout.n_groups:  # runs of groups with equal Hadamard size: one 2-D FWHT each
                stop = start
                while stop < layout.n_groups and rows[stop] == rows[start]:
                    stop += 1
                width = int(rows[start])
                lo = int(layout.table[start, 5])
                block = out[lo:lo + (stop - start) * width].reshape(stop - start, width)
                if width >= 2:
                    _core.fwht(block, self.threads)
                start = stop
            out.flags.writeable = False  # cached with the state it was decoded from
            st.decoded = decoded = out
        return decoded

    def _require_reports(self) -> None:
        if self.n == 0:
            raise ReportError("no reports have been aggregated yet")


# -- parameters helpers ---------------------------------------------------------------
_LAYOUT_CACHE: Dict[Any, Layout] = {}


def cached_layout(params: Any) -> Layout:
    """The layout of ``params`` (built once per distinct parameter object value)."""
    layout = _LAYOUT_CACHE.get(params)
    if layout is None:
        if len(_LAYOUT_CACHE) > 64:
            _LAYOUT_CACHE.clear()
        layout = params._build_layout()
        _LAYOUT_CACHE[params] = layout
    return layout


def _random_seed() -> int:
    import secrets

    return secrets.randbits(63)


def _check_d(d: Any, high: int) -> int:
    return check_int("d", d, 2, high)


# == HRR ==============================================================================
@dataclasses.dataclass(frozen=True)
class HRRParams(Params):
    """Hadamard Randomized Response ([WW] Fact 2.1 / App. 7.1).

    Args:
        epsilon: privacy parameter, in [2^-20, 22.18] (binary RR: ``_validate.rr_threshold``).
        d: domain size, values in ``[0, d)``, ``2 <= d <= 2^30``. The Hadamard size is
            ``D = 2^ceil(log2 d)`` and value ``x`` is column ``x`` (no offset: the
            estimator is unbiased for every column, including 0).
    Raises:
        ParameterError: on an invalid value.
    """

    protocol: ClassVar[str] = "hrr"
    epsilon: float
    d: int

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_binary_epsilon(self.epsilon))
        object.__setattr__(self, "d", _check_d(self.d, 2**30))

    @property
    def hadamard_size(self) -> int:
        return pow2_at_least(self.d)

    def layout(self) -> Layout:
        return cached_layout(self)

    def _layout_size(self) -> Tuple[int, int]:
        """(cells, groups) of the server state."""
        return self.hadamard_size, 1

    def _build_layout(self) -> Layout:
        return make_layout([{"rows": self.hadamard_size}])


@dataclasses.dataclass
class HRRReports(BitReports):
    """HRR reports: Hadamard row ``rows`` (uint32) and bit ``bits`` (int8, +-1)."""

    protocol: ClassVar[str] = "hrr"


class HRRClient(LayoutClient):
    """HRR client ([WW] Algorithm 2): ``b = H[r, x] * s``, ``s = -1`` with probability
    ``1/(e^eps + 1)``.

    Args:
        params: :class:`HRRParams`.
        rng: ``None`` (default) draws each batch's key from OS entropy, the only setting
            for real users; an int / SeedSequence / Generator makes a reproducible
            **simulation only** (anyone with the seed can undo the perturbation).
        threads: client-side threads for batches (0 = default).
    """

    params_type = HRRParams
    reports_type = HRRReports

    def perturb(self, values: Any, rows: Any = None) -> HRRReports:
        """Privatize ``values`` (integers in ``[0, d)``). ``rows``: server-assigned rows
        (:meth:`HRRServer.assign_rows`); ``None`` lets the client draw ``r ~ U[0, D)``
        (it is then part of the report). Returns :class:`HRRReports`."""
        x = as_values(values, self.params.d)
        _, rows_out, bits = self._perturb(x, None, rows)
        return HRRReports(rows=rows_out, bits=bits)


class HRRServer(LayoutServer):
    """HRR server ([WW] Algorithm 3): ``z[r_i] += b_i`` (C++, threaded, GIL released),
    then ``chat = c_eps H z`` with one FWHT. Unbiased with
    ``Var(chat(x)) = n c_eps^2 - c(x)`` (counts).

    Args:
        params: :class:`HRRParams`.
        threads: server threads (0 = default; results do not depend on it).
    """

    protocol = "hrr"
    params_type = HRRParams
    reports_type = HRRReports

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated frequencies (fractions; counts with ``counts=True``) of
        ``candidates`` (``None``: every value in ``[0, d)``), float64. Raw (unclipped)
        unbiased estimates.

        Raises:
            ReportError: no reports aggregated yet.
        """
        self._require_reports()
        decoded = self.decoded()
        scale = c_eps(self.params.epsilon) / (1.0 if counts else self.n)
        if candidates is None:
            return decoded[:self.params.d] * scale
        return decoded[as_values(candidates, self.params.d, "candidates")] * scale


# == HE ===============================================================================
@dataclasses.dataclass(frozen=True)
class HEParams(Params):
    """Hadamard Encoding ([PAN] section 6, R1 ``HadamardSketch``): CMS+RR with
    ``m = 2``. ``Hsize = 2^ceil(log2(d+1))``, value ``x`` is column ``x + 1`` (skipping the
    all-ones column 0; row 0 stays allowed).

    Args:
        epsilon: privacy parameter, in [2^-20, 22.18] (binary RR: ``_validate.rr_threshold``).
        d: domain size, ``2 <= d < 2^30``.
    """

    protocol: ClassVar[str] = "he"
    epsilon: float
    d: int

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_binary_epsilon(self.epsilon))
        object.__setattr__(self, "d", _check_d(self.d, 2**30 - 1))

    @property
    def hadamard_size(self) -> int:
        return 1 << self.d.bit_length()

    def layout(self) -> Layout:
        return cached_layout(self)

    def _layout_size(self) -> Tuple[int, int]:
        """(cells, groups) of the server state."""
        return self.hadamard_size, 1

    def _build_layout(self) -> Layout:
        return make_layout([{"rows": self.hadamard_size, "col_offset": 1}])


@dataclasses.dataclass
class HEReports(BitReports):
    """HE reports: row ``rows`` (uint32) and bit ``bits`` (int8, +-1)."""

    protocol: ClassVar[str] = "he"


class HEClient(LayoutClient):
    """HE client: ``RR_2(H01[r, x + 1])`` in +-1 form, with the row ``r`` drawn by the
    client (or assigned). ``rng``: see :class:`HRRClient`."""

    params_type = HEParams
    reports_type = HEReports

    def perturb(self, values: Any, rows: Any = None) -> HEReports:
        """Privatize ``values`` in ``[0, d)``; returns :class:`HEReports`."""
        x = as_values(values, self.params.d)
        _, rows_out, bits = self._perturb(x, None, rows)
        return HEReports(rows=rows_out, bits=bits)


class HEServer(LayoutServer):
    """HE server: ``fhat(x) = (1/n) sum_i c_eps b_i H[r_i, x+1]`` for all ``x`` with one
    FWHT (equal to the CMS estimator with ``m = 2``). Variance ``(c_eps^2 - f)/n``."""

    protocol = "he"
    params_type = HEParams
    reports_type = HEReports

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (``None``:
        all of ``[0, d)``), float64."""
        self._require_reports()
        decoded = self.decoded()
        scale = c_eps(self.params.epsilon) / (1.0 if counts else self.n)
        if candidates is None:
            return decoded[1:self.params.d + 1] * scale
        return decoded[as_values(candidates, self.params.d, "candidates") + np.uint64(1)] * scale


# == CMS+HE ===========================================================================
@dataclasses.dataclass(frozen=True)
class CMSHEParams(Params):
    """Apple's Count-Mean Sketch with Hadamard encoding ([PAN] section 6, R1
    ``CountMeanSketchHadamardEncoding.apple_cms``).

    ``k`` hash functions ``((a0 + a1 x) mod PRIME) mod m`` (PRIME = 2^64 - 59, ``a0, a1``
    uniform on the field) are drawn once per run from ``hash_seed``; each user picks one
    uniformly and runs HE on ``[m]`` (``Hsize = 2^ceil(log2(m+1))``, column ``y + 1``).

    Args:
        epsilon: privacy parameter, in [2^-20, 22.18] (binary RR: ``_validate.rr_threshold``).
        d: domain size, ``2 <= d <= PRIME``.
        k: number of hash functions (default 2048, Apple's value).
        m: hash range (default 1024, Apple's value), ``2 <= m < 2^30``.
        hash_seed: seed of the public hash family (default: fresh from OS entropy).
    """

    protocol: ClassVar[str] = "cmshe"
    epsilon: float
    d: int
    k: int = 2048
    m: int = 1024
    hash_seed: int = dataclasses.field(default_factory=_random_seed)

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_binary_epsilon(self.epsilon))
        object.__setattr__(self, "d", _check_d(self.d, PRIME))
        object.__setattr__(self, "k", check_int("k", self.k, 1, 2**20))
        object.__setattr__(self, "m", check_int("m", self.m, 2, 2**30 - 1))
        object.__setattr__(self, "hash_seed", check_int("hash_seed", self.hash_seed, 0, 2**64 - 1))
        if self.k * pow2_at_least(self.m + 1) > 2**31:
            raise ParameterError(f"k * Hsize must be <= 2^31 cells, got k={self.k}, m={self.m}")

    @property
    def hadamard_size(self) -> int:
        return pow2_at_least(self.m + 1)

    def layout(self) -> Layout:
        return cached_layout(self)

    def _layout_size(self) -> Tuple[int, int]:
        """(cells, groups) of the server state."""
        return self.k * self.hadamard_size, self.k

    def _build_layout(self) -> Layout:
        coef = hash_coefficients(self.hash_seed, self.k, PRIME)
        groups = [{"a0": int(coef[j, 0]), "a1": int(coef[j, 1]), "hash_modulus": self.m, "col_offset": 1,
                   "rows": self.hadamard_size} for j in range(self.k)]
        return make_layout(groups, field=prime_field())


@dataclasses.dataclass
class CMSHEReports(GroupBitReports):
    """CMS+HE reports: hash index ``groups`` (uint32), row ``rows`` (uint32), bit ``bits``."""

    protocol: ClassVar[str] = "cmshe"


class CMSHEClient(LayoutClient):
    """CMS+HE client: picks ``j ~ U[k]`` (unless assigned), ``y = h_j(x)``, reports
    ``RR_2(H01[r, y + 1])`` in +-1 form with ``r ~ U[0, Hsize)``. ``rng``: see
    :class:`HRRClient`."""

    params_type = CMSHEParams
    reports_type = CMSHEReports

    def perturb(self, values: Any, groups: Any = None, rows: Any = None) -> CMSHEReports:
        """Privatize ``values`` in ``[0, d)``; ``groups``/``rows`` optionally assigned by
        the server (:meth:`CMSHEServer.assign`). Returns :class:`CMSHEReports`."""
        x = as_values(values, self.params.d)
        g, r, b = self._perturb(x, groups, rows)
        return CMSHEReports(groups=g, rows=r, bits=b)


def _chunked_group_sum(layout: Layout, decoded: np.ndarray, xs: np.ndarray, offset: int, threads: int,
                       chunk: int = 1024) -> np.ndarray:
    """``sum_g decoded[cell_base_g + y_g(x) + offset]`` for each x (int64-exact sums as float)."""
    k = layout.n_groups
    out = np.empty(len(xs), dtype=np.float64)
    gids = np.arange(k, dtype=np.int64)
    base = layout.cell_base.astype(np.int64)
    for lo in range(0, len(xs), chunk):
        part = xs[lo:lo + chunk]
        g = np.repeat(gids, len(part))
        y = layout.group_hashes(g, np.tile(part, k), threads).astype(np.int64)
        out[lo:lo + len(part)] = decoded[base[g] + y + offset].reshape(k, len(part)).sum(axis=0)
    return out


class CMSHEServer(LayoutServer):
    """CMS+HE server: ``z_j[r] += b`` per hash function, one 2-D FWHT, then the CMS
    estimator with ``m`` ([PAN] Eq. 2):
    ``fhat(x) = m/(n(m-1)) sum_j c_eps (H z_j)[h_j(x) + 1] - 1/(m-1)``."""

    protocol = "cmshe"
    params_type = CMSHEParams
    reports_type = CMSHEReports

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (``None``:
        all of ``[0, d)``, which costs ``k d`` hash evaluations), float64."""
        self._require_reports()
        p = self.params
        if candidates is None:
            check_allocation(16 * p.d, f"a whole-domain CMS+HE query (d={p.d})")
            xs = np.arange(p.d, dtype=np.uint64)
        else:
            xs = as_values(candidates, p.d, "candidates")
        total = _chunked_group_sum(p.layout(), self.decoded(), xs, 1, self.threads) * c_eps(p.epsilon)
        est = p.m / ((p.m - 1.0) * self.n) * total - 1.0 / (p.m - 1.0)
        return est * self.n if counts else est


# == RHR ==============================================================================
@dataclasses.dataclass(frozen=True)
class RHRParams(Params):
    """Recursive Hadamard Response as in [PAN]'s reference code R1
    (``RecursiveHadamardResponse``): ``b = ceil(eps log2 e)``,
    ``base = 2^(b-1)``, ``Hsize`` = the smallest power of two above the largest column
    ``(d-1) // base + 1``, RR over ``2^b`` symbols of
    ``y = 2 (x mod base) + H01[r, x // base + 1]``.

    Args:
        epsilon: privacy parameter, in (0, 21] (so that ``2^b`` symbols fit in uint32).
        d: domain size, ``2 <= d <= 2^28``.
    """

    protocol: ClassVar[str] = "rhr"
    epsilon: float
    d: int

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        if self.epsilon > 21.0:
            raise ParameterError(f"epsilon must be <= 21 for RHR (2^b symbols in uint32), got {self.epsilon}")
        object.__setattr__(self, "d", _check_d(self.d, 2**28))
        self.flip_threshold                     # refuses a budget the 64-bit sampler cannot represent

    @property
    def b(self) -> int:
        return max(1, math.ceil(self.epsilon * math.log2(math.e)))

    @property
    def base(self) -> int:
        return 1 << (self.b - 1)

    @property
    def symbols(self) -> int:
        return 1 << self.b

    @property
    def hadamard_size(self) -> int:
        """The smallest power of two above the largest column ``(d-1) // base + 1``. This is
        R1's ``2^ceil(log2(d // base + 1))`` except where R1's size equals the largest
        column (``d // base + 1`` a power of two, ``base`` not dividing ``d``), which would
        leave that column out of range."""
        return 1 << ((self.d - 1) // self.base + 1).bit_length()

    @property
    def flip_probability(self) -> float:
        """RR over ``2^b`` symbols: ``(m-1)/(e + m - 1)``."""
        return (self.symbols - 1.0) / (math.expm1(self.epsilon) + self.symbols)

    @property
    def flip_threshold(self) -> int:
        """Its 64-bit threshold (:func:`ldpfast._validate.rr_threshold`: effective epsilon <= epsilon)."""
        return rr_threshold(self.epsilon, self.symbols)


@dataclasses.dataclass
class RHRReports(Reports):
    """RHR reports: the RR symbol ``z`` in ``[0, 2^b)`` (uint32) and the row ``rows``."""

    protocol: ClassVar[str] = "rhr"
    z: np.ndarray
    rows: np.ndarray

    column_types: ClassVar = {"z": ("uint32", 1), "rows": ("uint32", 1)}

    def __post_init__(self):
        self.z = column("z", self.z, np.uint32)
        self.rows = column("rows", self.rows, np.uint32)
        self._check_lengths()


class RHRClient(ClientBase):
    """RHR client (R1 layout). ``rng``: see :class:`HRRClient`."""

    def __init__(self, params: RHRParams, rng: RngLike = None, threads: int = 0):
        if not isinstance(params, RHRParams):
            raise ParameterError(f"params must be RHRParams, got {type(params).__name__}")
        self.params = params
        self._keys = KeySource(rng)
        self.threads = check_threads(threads)

    def perturb(self, values: Any, rows: Any = None) -> RHRReports:
        """Privatize ``values`` in ``[0, d)``; ``rows`` optionally server-assigned."""
        p = self.params
        x = as_values(values, p.d)
        rows = optional_index_array("rows", rows, len(x))
        try:
            z, r = _core.rhr_perturb(self._keys.key(), x, p.b - 1, p.hadamard_size,
                                     p.flip_threshold, rows, self.threads)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
        return RHRReports(z=z, rows=r)


class RHRServer(Aggregator):
    """RHR server. The query ``fhat(x) = (1/n) sum_i (Q[z_i, h_i(x)] - Q[z_i, h_i(x) XOR 1])``
    equals ``C/n * sum_{i: z_i >> 1 = x mod base} sigma_i H[r_i, x // base + 1]`` with
    ``C = (e + 2^b - 1)/(e - 1)`` and ``sigma_i = +1`` if ``z_i`` is odd else ``-1``, so the
    state is one integer vector per residue block and decoding is a 2-D FWHT."""

    protocol = "rhr"
    params_type = RHRParams
    reports_type = RHRReports
    _ingest_validates = True  # hadamard_update checks every report before adding any

    def __init__(self, params: RHRParams, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        self._st = _State(z=np.zeros(params.base * params.hadamard_size, dtype=np.int64),
                          n=np.zeros(1, dtype=np.int64))

    @classmethod
    def _state_layout(cls, params: RHRParams):
        return {"z": ((params.base * params.hadamard_size,), "int64"), "n": ((1,), "int64")}

    @property
    def _z(self) -> np.ndarray:
        return self._st["z"]

    def _set_state(self, state: Dict[str, np.ndarray]) -> None:
        self._st = _State(z=np.array(state["z"], dtype=np.int64), n=np.array(state["n"], dtype=np.int64))

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        n, z = int(state["n"][0]), state["z"]
        # each report adds +-1 to one cell
        if n < 0 or float(np.abs(z.astype(np.float64)).sum()) > n or int(z.sum()) % 2 != n % 2:
            raise FormatError(f"stored aggregation vector does not fit the stored report count n = {n}")

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    def _validate(self, reports: RHRReports) -> None:
        """``z < 2^b`` and ``rows < Hsize``."""
        p = self.params
        bad = (reports.z >= p.symbols) | (reports.rows >= p.hadamard_size)
        if bad.any():
            i = int(np.argmax(bad))
            if int(reports.z[i]) >= p.symbols:
                raise ReportError(f"report {i}: z = {int(reports.z[i])} is out of range [0, {p.symbols})")
            raise ReportError(f"report {i}: row {int(reports.rows[i])} is out of range [0, {p.hadamard_size})")

    def _ingest(self, reports: RHRReports) -> Dict[str, np.ndarray]:
        p = self.params
        blocks = reports.z >> np.uint32(1)
        bits = np.where(reports.z & np.uint32(1), 1, -1).astype(np.int8)
        group_rows = np.full(p.base, p.hadamard_size, dtype=np.uint64)
        cell_base = np.arange(p.base, dtype=np.uint64) * np.uint64(p.hadamard_size)
        z = self._st["z"].copy()
        bad = _core.hadamard_update(blocks, reports.rows, bits, group_rows, cell_base, z, self.threads)
        if bad < len(reports):
            self._validate(reports)  # names the first bad report
            raise ReportError(f"report {bad} does not fit the parameters")
        return {"z": z, "n": self._st["n"] + len(reports)}

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (``None``:
        all of ``[0, d)``), float64."""
        if self.n == 0:
            raise ReportError("no reports have been aggregated yet")
        p = self.params
        st = self._st
        decoded = getattr(st, "decoded", None)
        if decoded is None:
            decoded = st["z"].copy().reshape(p.base, p.hadamard_size)
            if p.hadamard_size >= 2:
                _core.fwht(decoded, self.threads)
            st.decoded = decoded
        if candidates is None:
            check_allocation(32 * p.d, f"a whole-domain RHR query (d={p.d})")
            xs = np.arange(p.d, dtype=np.uint64)
        else:
            xs = as_values(candidates, p.d, "candidates")
        em1 = math.expm1(p.epsilon)
        scale = (em1 + p.symbols) / em1 / (1.0 if counts else self.n)
        low = (xs & np.uint64(p.base - 1)).astype(np.int64)
        high = (xs >> np.uint64(p.b - 1)).astype(np.int64) + 1
        return decoded[low, high] * scale


# == OLH ==============================================================================
@dataclasses.dataclass(frozen=True)
class OLHParams(Params):
    """Optimal Local Hashing (Wang et al. 2017) with the pairwise-independent
    hash of [PAN] (``((a0 + a1 x) mod PRIME) mod g``, ``a0, a1`` drawn per user) instead
    of a fully random one: OLH is then exactly CMS+RR with ``m = g``.

    Args:
        epsilon: privacy parameter, in [2^-20, log(g-1) + 22.18] (``_validate.rr_threshold``).
        d: domain size, ``2 <= d <= PRIME``.
        g: hash range; default ``round(e^eps) + 1`` (ties upward).
    """

    protocol: ClassVar[str] = "olh"
    epsilon: float
    d: int
    g: Optional[int] = None

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "d", _check_d(self.d, PRIME))
        if self.g is None:
            g = check_derived_range(self.epsilon, int(math.floor(math.exp(self.epsilon) + 0.5)) + 1,
                                    "g = round(e^eps) + 1")
        else:
            g = self.g
        object.__setattr__(self, "g", check_int("g", g, 2, 2**62))
        self.flip_threshold                     # refuses a budget the 64-bit sampler cannot represent

    @property
    def flip_probability(self) -> float:
        """GRR over ``g`` symbols: ``(g-1)/(e + g - 1)``."""
        return (self.g - 1.0) / (math.expm1(self.epsilon) + self.g)

    @property
    def flip_threshold(self) -> int:
        """Its 64-bit threshold (:func:`ldpfast._validate.rr_threshold`: effective epsilon <= epsilon)."""
        return rr_threshold(self.epsilon, self.g)


@dataclasses.dataclass
class OLHReports(Reports):
    """OLH reports: perturbed hash ``z`` in ``[0, g)`` and the user's hash ``(a0, a1)``
    (all uint64)."""

    protocol: ClassVar[str] = "olh"
    z: np.ndarray
    a0: np.ndarray
    a1: np.ndarray

    column_types: ClassVar = {"z": ("uint64", 1), "a0": ("uint64", 1), "a1": ("uint64", 1)}

    def __post_init__(self):
        self.z = column("z", self.z, np.uint64)
        self.a0 = column("a0", self.a0, np.uint64)
        self.a1 = column("a1", self.a1, np.uint64)
        self._check_lengths()


class OLHClient(ClientBase):
    """OLH client: ``(GRR_g(h(x)), a0, a1)`` with ``a0, a1`` uniform on ``F_PRIME``
    (C++ OCMS kernel). ``rng``: see :class:`HRRClient`."""

    def __init__(self, params: OLHParams, rng: RngLike = None, threads: int = 0):
        if not isinstance(params, OLHParams):
            raise ParameterError(f"params must be OLHParams, got {type(params).__name__}")
        self.params = params
        self._keys = KeySource(rng)
        self.threads = check_threads(threads)

    def perturb(self, values: Any) -> OLHReports:
        """Privatize ``values`` in ``[0, d)``; returns :class:`OLHReports`."""
        p = self.params
        x = as_values(values, p.d)
        z, a0, a1 = _core.ocms_perturb(prime_field(), self._keys.key(), x, p.g,
                                       p.flip_threshold, self.threads)
        return OLHReports(z=z, a0=a0, a1=a1)


class OLHServer(Aggregator):
    """OLH server: keeps the reports (each has its own hash, so there is no shared
    sketch) and answers ``fhat(x) = (C(x)/n - 1/g)/(p - 1/g)`` with
    ``C(x) = #{i: h_i(x) = z_i}`` and ``p = e/(e + g - 1)`` (equal to the CMS estimator
    with ``m = g``). The reports are held by an OCMS report-keeping server with
    ``m = g``, so state and bytes are canonical and merge is exact and order-free."""

    protocol = "olh"
    params_type = OLHParams
    reports_type = OLHReports

    def __init__(self, params: OLHParams, threads: int = 0):
        super().__init__(params)
        from . import ocms

        self._reports = ocms.Server(ocms.Params(epsilon=params.epsilon, d=params.d, m=params.g,
                                                use_m_prime=False), threads=check_threads(threads))
        self._reports._lock = self._lock  # one lock for the pair

    @property
    def _st(self) -> _State:  # the state is the inner server's
        return self._reports._st

    @_st.setter
    def _st(self, state: _State) -> None:
        self._reports._st = state

    def _state(self) -> Dict[str, np.ndarray]:
        return self._reports._state()

    def _set_state(self, state: Dict[str, np.ndarray]) -> None:
        self._reports._set_state(state)

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        if set(state) != {"z", "a0", "a1"}:
            raise FormatError(f"stored state must hold the OLH report columns z, a0, a1, got {sorted(state)}")
        self._reports._check_state(state)

    def _validate(self, reports: OLHReports) -> None:
        """``z < g`` and ``a0, a1 < PRIME``."""
        self._reports._validate(self._as_ocms(reports))

    def _ingest(self, reports: OLHReports):
        return self._reports._ingest(self._as_ocms(reports))

    def _merged(self, theirs):
        return self._reports._merged(theirs)

    @staticmethod
    def _as_ocms(reports: OLHReports):
        from . import ocms

        return ocms.Reports(z=reports.z, a0=reports.a0, a1=reports.a1)

    @property
    def n(self) -> int:
        return self._reports.n

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (``None``:
        all of ``[0, d)``; costs ``n d`` hash evaluations), float64."""
        if self.n == 0:
            raise ReportError("no reports have been aggregated yet")
        p = self.params
        xs = None if candidates is None else as_values(candidates, p.d, "candidates")
        matches = self._reports.match_counts(xs)
        em1 = math.expm1(p.epsilon)
        # p_keep - 1/g = (e - 1)(g - 1) / (g (e + g - 1))
        gap = em1 * (p.g - 1.0) / (p.g * (em1 + p.g))
        est = (matches / self.n - 1.0 / p.g) / gap
        return est * self.n if counts else est


# == registry and short names ==========================================================
Params = HRRParams
Client = HRRClient
Reports = HRRReports
Server = HRRServer


for _pid, _params, _reports, _server, _client in (
        ("hrr", HRRParams, HRRReports, HRRServer, HRRClient),
        ("he", HEParams, HEReports, HEServer, HEClient),
        ("cmshe", CMSHEParams, CMSHEReports, CMSHEServer, CMSHEClient),
        ("rhr", RHRParams, RHRReports, RHRServer, RHRClient),
        ("olh", OLHParams, OLHReports, OLHServer, OLHClient)):
    register_protocol(Protocol(_pid, _params, _reports, _server, _client))
