"""The group-layout engine shared by the Hadamard-response protocols (HRR, HE, CMS+HE in
:mod:`ldpfast.protocols.frequency.hadamard`; :mod:`ldpfast.protocols.frequency.hadaoracle`,
:mod:`ldpfast.protocols.heavy.hadaheavy`) and the report/hash pieces
:mod:`ldpfast.protocols.frequency.hashtogram` and :mod:`ldpfast.protocols.heavy.treehist_cs` reuse.

A protocol here is a set of HRR instances ("groups"): a user in group ``g`` holding ``x``
computes ``y = hash_g(x >> shift_g) mod m_g`` (or ``y = x >> shift_g``), draws (or is
assigned) a Hadamard row ``r`` and reports ``b = H[r, y + col_offset_g] * s`` where
``s = -1`` with probability ``1/(e^eps + 1)``. :class:`Layout` is the table of groups,
:class:`LayoutClient` perturbs with it (C++) and :class:`LayoutServer` keeps integer
vectors ``z_g[r] += b`` (C++, multithreaded) and decodes each with one exact (integer) FWHT.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar, Dict, Mapping, Optional, Protocol, Sequence, Tuple, Union, cast

import numpy as np

from .. import _core
from .._base import Aggregator, ClientBase, Params, Reports
from .._container import _describe
from .._delta import _State
from .._random import KeySource, RngLike
from .._validate import (as_values, check_array, check_choice, check_int, check_threads,  # noqa: F401
                         optional_index_array, rr_threshold, check_values)
from ..errors import FormatError, ParameterError, ReportError
from ..kernels.field import PRIME
from ..kernels.field import gf64_field as gf64_field  # imported from here by the family modules

def binary_flip_threshold(epsilon: float) -> int:
    """Binary RR flips with probability ``1/(e^eps + 1)``, computed directly."""
    return rr_threshold(epsilon, 2)


def _parity_sign(v: np.ndarray) -> np.ndarray:
    """(-1)^popcount(v) for a uint64 array (xor folding)."""
    v = v.copy()
    for shift in (32, 16, 8, 4, 2, 1):
        v ^= v >> np.uint64(shift)
    return 1 - 2 * (v & np.uint64(1)).astype(np.int64)


def pow2_at_least(value: int) -> int:
    """The smallest power of two ``>= value`` (value >= 1)."""
    return 1 << max(0, (int(value) - 1).bit_length())


def hash_coefficients(seed: int, count: int, field_size: int) -> np.ndarray:
    """``count`` pairs ``(a0, a1)`` uniform on a field of ``field_size`` elements, derived
    from ``seed`` (the hash functions are public, so a seed in the parameters makes them
    serializable). Returns a (count, 2) uint64 array."""
    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), 0x48414441])))
    return gen.integers(0, field_size - 1, size=(count, 2), dtype=np.uint64, endpoint=True)


def _frozen(column: np.ndarray) -> np.ndarray:
    out = np.ascontiguousarray(column)
    out.flags.writeable = False
    return out


# -- group layout ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """The HRR instances of one protocol configuration (see module docstring)."""

    table: np.ndarray          # (G, 7) uint64: a0, a1, hash_modulus, col_offset, rows, cell_base, shift
    level_first: np.ndarray    # uint32, first group of each level
    level_count: np.ndarray    # uint32, groups per level
    field: Optional[_core.Field]

    @property
    def n_groups(self) -> int:
        return int(self.table.shape[0])

    @property
    def rows(self) -> np.ndarray:
        return self.table[:, 4]

    @functools.cached_property
    def group_rows(self) -> np.ndarray:
        """Hadamard size of each group (contiguous uint64, read-only)."""
        return _frozen(self.table[:, 4])

    @functools.cached_property
    def cell_base(self) -> np.ndarray:
        """First cell of each group (contiguous uint64, read-only)."""
        return _frozen(self.table[:, 5])

    @property
    def n_cells(self) -> int:
        return int(self.table[-1, 5] + self.table[-1, 4])

    def group_hashes(self, groups: np.ndarray, x: np.ndarray, threads: int = 0) -> np.ndarray:
        """``y_g(x)`` for pairs ``(groups[i], x[i])`` (uint64), the hashed/shifted value
        before the column offset."""
        t = self.table
        shifted: np.ndarray = x >> t[groups, 6]
        moduli = np.unique(t[:, 2])
        if len(moduli) == 1 and moduli[0] == 0:
            return shifted
        # a layout with hashed groups is always made with its field
        assert self.field is not None, "a hashed layout needs a field"
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


def make_layout(groups: Sequence[Mapping[str, Union[int, np.integer[Any]]]],
                levels: Optional[Sequence[Tuple[int, int]]] = None, field: Optional[_core.Field] = None) -> Layout:
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


def prime_field() -> _core.Field:
    return _core.Field.prime(PRIME)


# -- reports --------------------------------------------------------------------------
@dataclasses.dataclass
class BitReports(Reports):
    """One HRR-style report per user: the Hadamard row ``rows`` (uint32) and the
    privatized bit ``bits`` (int8, +1 or -1)."""

    column_types: ClassVar = {"rows": ("uint32", 1), "bits": ("int8", 1)}

    rows: np.ndarray
    bits: np.ndarray

    def __post_init__(self) -> None:
        self.rows = check_array("rows", self.rows, np.uint32)
        self.bits = check_array("bits", self.bits, np.int8)
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

    def __post_init__(self) -> None:
        self.groups = check_array("groups", self.groups, np.uint32)
        self.rows = check_array("rows", self.rows, np.uint32)
        self.bits = check_array("bits", self.bits, np.int8)
        self._check_lengths()


# -- client ---------------------------------------------------------------------------
class LayoutClient(ClientBase):
    """Client of a group-layout protocol. Subclasses set ``params_type``,
    ``reports_type`` and implement ``_layout()`` / ``_domain()``."""

    params_type: ClassVar[type] = Params
    reports_type: ClassVar[type] = BitReports

    def _perturb(self, values: np.ndarray, groups: Any,
                 rows: Any) -> Tuple[Optional[np.ndarray], np.ndarray, np.ndarray]:
        layout = self.params.layout()
        n = values.shape[0]
        groups = optional_index_array("groups", groups, n)
        rows = optional_index_array("rows", rows, n)
        if groups is not None and layout.n_groups == 1:
            if np.any(groups != 0):   # what Server.assign gives with one group: all 0
                raise ParameterError(f"groups must be 0 or None for a protocol with a single group, "
                                     f"got {int(groups[np.flatnonzero(groups != 0)[0]])}")
            groups = None
        try:
            return _core.hadamard_perturb(self._keys.key(), values, layout.table, layout.level_first,
                                          layout.level_count, layout.field, groups, rows,
                                          binary_flip_threshold(self.params.epsilon), self.threads)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None

    def _perturb_groups(self, values: np.ndarray, groups: Any,
                        rows: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_perturb` for :class:`GroupBitReports`: with a single group (k = 1) the
        kernel returns no groups column, and every report is in group 0."""
        g, r, b = self._perturb(values, groups, rows)
        return (np.zeros(len(r), dtype=np.uint32) if g is None else g), r, b


# -- server ---------------------------------------------------------------------------
class _BitColumns(Protocol):
    """The columns of :class:`BitReports` and :class:`GroupBitReports`."""

    @property
    def groups(self) -> Optional[np.ndarray]: ...
    @property
    def rows(self) -> np.ndarray: ...
    @property
    def bits(self) -> np.ndarray: ...


class LayoutServer(Aggregator):
    """Aggregator of a group-layout protocol: integer state ``z`` (one Hadamard-sized
    vector per group, flat), the report count ``n`` and, for several groups, the number
    of reports per group. Decoding applies one exact int64 FWHT per group."""

    reports_type: ClassVar[type] = BitReports
    _ingest_validates = True  # hadamard_update checks every report before adding any
    _reads_once = True        # ... reading each value of the columns once
    params: Any  # the protocol's own Params: layout(), _layout_size(), epsilon (and d)

    def __init__(self, params: Params, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        self._layout: Layout = self.params.layout()
        cells, groups = self.params._layout_size()
        self._n_cells: int = cells
        self._n_groups: int = groups
        self._st = _State(z=np.zeros(cells, dtype=np.int64), n=np.zeros(1, dtype=np.int64),
                          group_sizes=np.zeros(groups, dtype=np.int64))

    @classmethod
    def _state_layout(cls, params: Any) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        cells, groups = params._layout_size()
        return {"z": ((cells,), "int64"), "n": ((1,), "int64"), "group_sizes": ((groups,), "int64")}

    # state
    @property
    def _z(self) -> np.ndarray:
        z: np.ndarray = self._st["z"]
        return z

    @property
    def _n(self) -> np.ndarray:
        n: np.ndarray = self._st["n"]
        return n

    @property
    def _group_sizes(self) -> np.ndarray:
        sizes: np.ndarray = self._st["group_sizes"]
        return sizes

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
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
        """The integer aggregation vector (a read-only copy: updates change the state in
        place)."""
        out = self._z.copy()
        out.flags.writeable = False
        return out

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
        columns = cast(_BitColumns, reports)  # update checked the type: a reports_type batch
        groups, rows, bits = columns.groups, columns.rows, columns.bits
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

    def _ingest(self, reports: Reports) -> None:
        columns = cast(_BitColumns, reports)  # update checked the type: a reports_type batch
        rows = columns.rows
        n = rows.shape[0]
        self._check_call(_core.hadamard_update_scratch_bytes(n, self._n_cells, self._n_groups, self.threads),
                         lambda: f"adding a batch of {n} reports to {self.protocol!r}")
        layout, st = self._layout, self._st
        st.changed()
        # in place, all or nothing: the kernel reads each report once, checks it and adds the
        # batch with the report counts, or takes back what it added when it fails
        bad = _core.hadamard_update(columns.groups, rows, columns.bits, layout.group_rows, layout.cell_base,
                                    st["z"], self.threads, st["group_sizes"], st["n"])
        if bad < n:
            self._validate(reports)  # names the first bad report
            raise ReportError(f"report {bad} does not fit the parameters")

    def _decode_nbytes(self) -> int:
        """Bytes :meth:`decoded` will allocate (0 once cached)."""
        return 0 if getattr(self._st, "decoded", None) is not None else int(self._st["z"].nbytes)

    def decoded(self) -> np.ndarray:
        """``H z_g`` for every group, flat int64 (exact; cached until the next update).
        Multiply by ``c_eps`` for the HRR count estimates."""
        st = self._st
        decoded: Optional[np.ndarray] = getattr(st, "decoded", None)
        if decoded is None:
            self._check_call(st["z"].nbytes, f"decoding the {st['z'].size} cells of {self.protocol!r}")
            layout = self.params.layout()
            out: np.ndarray = st["z"].copy()
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
            st.decoded = decoded = out  # type: ignore[attr-defined]  # a cache attribute (_State)
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


def group_sum(layout: Layout, decoded: np.ndarray, xs: np.ndarray, offset: int, threads: int,
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




def layout_channel(server: Any, candidates: Any) -> Any:
    """The IBU/MLE channel (:func:`ldpfast.estimation.channel.hadamard_channel`) of a
    one-level layout whose groups share one Hadamard width (HRR, HE, CMS+HE). A value
    outside the candidates is spread uniformly over the non-candidate columns of an
    unhashed group, or over the ``m`` hashed columns of a hashed one."""
    from .._memory import check_allocation
    from ..estimation.channel import hadamard_channel

    params = server.params
    layout = params.layout()
    table = layout.table
    width = int(table[0, 4])
    groups = layout.n_groups
    if server.n == 0:
        raise ReportError("cannot estimate frequencies from zero reports")
    xs = (np.arange(params.d, dtype=np.uint64) if candidates is None
          else check_values(candidates, params.d, "candidates", "values in", distinct=True))
    check_allocation(24 * groups * max(xs.size, width),
                     f"the Hadamard channel of {groups} group(s) x {xs.size} candidates")
    gids = np.repeat(np.arange(groups, dtype=np.int64), xs.size)
    offsets = table[:, 3].astype(np.int64).reshape(groups, 1)
    columns = layout.group_hashes(gids, np.tile(xs, groups)).astype(np.int64).reshape(groups, xs.size) + offsets
    profile = None
    if xs.size < params.d:
        profile = np.zeros((groups, width))
        for g in range(groups):
            modulus, offset = int(table[g, 2]), int(table[g, 3])
            if modulus:
                profile[g, offset:offset + modulus] = 1.0 / modulus
            else:
                outside = np.ones(params.d, dtype=bool)
                outside[xs.astype(np.intp)] = False
                profile[g, offset:offset + params.d] = outside / outside.sum()
    keep = math.exp(params.epsilon) / (math.exp(params.epsilon) + 1.0)
    z = server.z.reshape(groups, width)
    return hadamard_channel(z, server.group_sizes, columns, keep, profile)
