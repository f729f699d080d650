"""Grids over pairs of attributes (Yang et al., "Answering Multi-Dimensional Range Queries
under Local Differential Privacy", VLDB 2020): the parameters, reports, client and server
that TDG, HDG and the adaptive grid share (:mod:`.tdg`, :mod:`.hdg`, :mod:`.adaptive_grid`).

A grid partitions one attribute (a 1-D grid) or a pair of attributes (a 2-D grid) into
cells, each attribute cut at increasing boundaries. The users are split into one group per
grid: each user draws its group uniformly at random (independently of its record) and
reports the cell of its record in that group's grid spending the **whole** epsilon: the
record's budget is not split across attributes; the users are. The oracle of a grid of
``c`` cells is the one of lower variance (Wang et al. 2017): GRR over the cells when
``c < 3 e^eps + 2``, else OLH with hash range ``g = round(e^eps) + 1``. Both send
``(z, a0, a1)``: GRR is local hashing with the identity hash ``a0 = 0, a1 = 1`` into ``c``
values (``(0 + 1 x) mod c = x``), so one counting kernel serves both. The server counts, per
cell, the reports whose hash of the cell is their ``z`` (the support counts, integers:
exact merges) and the users of each group.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Tuple, TypeVar

import numpy as np

from ... import _core
from ..._base import Aggregator, ClientBase, Delta, Params, Reports
from ..._delta import _State
from ..._validate import check_array, check_below, check_epsilon, check_int, check_threads, check_values, rr_threshold
from ...errors import DTypeError, FormatError, ParameterError, ReportError
from ...kernels.field import PRIME
from .._hadamard_layout import prime_field
from .._local_hashing import default_g

#: Largest attribute domain and number of attributes.
MAX_DOMAIN = 1 << 20
MAX_ATTRIBUTES = 64
#: Largest number of cells of one grid (the server state and the query matrices grow with it).
MAX_CELLS = 1 << 16


def uniform_cuts(d: int, g: int) -> Tuple[int, ...]:
    """The ``g - 1`` inner boundaries of ``[0, d)`` cut into ``g`` near-equal intervals."""
    return tuple(sorted({(i * d) // g for i in range(1, g)} - {0}))


def pow2_granularity(value: float, d: int) -> int:
    """privmdr's rounding of a guideline granularity: the nearest power of two (ties down),
    at least 2, at most the domain."""
    value = min(value, d)
    if value <= 2:
        return min(2, d)
    low = 1 << int(math.floor(math.log2(value)))
    return min(d, low if value - low <= 2 * low - value else 2 * low)


def hdg_granularities(epsilon: float, n: int, k: int, one_way: bool) -> Tuple[float, float]:
    """The guideline granularities ``(g1, g2)`` of [Yang et al.] (alpha1 = 0.7, alpha2 = 0.03) for
    ``n`` users split into the ``k`` 1-D groups (``one_way``) and ``k (k - 1)/2`` 2-D groups."""
    e = math.exp(epsilon)
    groups = k * (k - 1) // 2 + (k if one_way else 0)
    g1 = (n * (e - 1) ** 2 * 0.7 ** 2 / (2 * groups * e)) ** (1 / 3)
    g2 = math.sqrt(2 * 0.03 * (e - 1) * math.sqrt(n / (groups * e)))
    return g1, g2


def check_domains(domains: Any) -> Tuple[int, ...]:
    if isinstance(domains, (str, bytes)) or not hasattr(domains, "__iter__"):
        raise ParameterError(f"domains must be a sequence of attribute domain sizes, got {domains!r}")
    out = tuple(check_int(f"domains[{j}]", d, 2, MAX_DOMAIN) for j, d in enumerate(domains))
    if not 2 <= len(out) <= MAX_ATTRIBUTES:
        raise ParameterError(f"domains must list 2 to {MAX_ATTRIBUTES} attributes, got {len(out)}")
    return out


def check_names(names: Any, k: int) -> Optional[Tuple[str, ...]]:
    if names is None:
        return None
    if isinstance(names, (str, bytes)) or not hasattr(names, "__iter__"):
        raise ParameterError(f"names must be a sequence of {k} attribute names, got {names!r}")
    out = tuple(names)
    if len(out) != k or not all(isinstance(s, str) and s for s in out) or len(set(out)) != k:
        raise ParameterError(f"names must be {k} distinct non-empty strings (one per domain), got {names!r}")
    return out


def check_cuts(name: str, cuts: Any, d: int) -> Tuple[int, ...]:
    """Inner boundaries of one attribute: strictly increasing integers in ``(0, d)``."""
    if isinstance(cuts, (str, bytes)) or not hasattr(cuts, "__iter__"):
        raise ParameterError(f"{name} must be a sequence of boundaries, got {cuts!r}")
    out = tuple(check_int(name, c, 1, d - 1) for c in cuts)
    if any(b <= a for a, b in zip(out, out[1:])):
        raise ParameterError(f"{name} must be strictly increasing, got {out}")
    return out


@dataclasses.dataclass(frozen=True)
class Grid:
    """One grid: its attributes and, per attribute, the boundaries ``[0, c_1, ..., d]``."""

    attributes: Tuple[int, ...]
    edges: Tuple[np.ndarray, ...]

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(e.size - 1 for e in self.edges)

    @property
    def cells(self) -> int:
        return int(np.prod(self.shape))

    def cell_of(self, records: np.ndarray) -> np.ndarray:
        """The cell (row-major over the attributes) of each record."""
        cell = np.zeros(len(records), dtype=np.int64)
        for attribute, edge in zip(self.attributes, self.edges):
            cell = cell * (edge.size - 1) + np.searchsorted(edge, records[:, attribute], side="right") - 1
        return cell


GridParamsT = TypeVar("GridParamsT", bound="GridParams")


class GridParams(Params):
    """What TDG, HDG and the adaptive grid share: ``epsilon``, ``domains`` (one per attribute,
    records hold values in ``[0, domains[j])``), optional attribute ``names``, and the grids
    (:meth:`grids`). Subclasses are frozen dataclasses that define :meth:`cuts_of`."""

    epsilon: float
    domains: Tuple[int, ...]
    names: Optional[Tuple[str, ...]]

    def _check_common(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "domains", check_domains(self.domains))
        object.__setattr__(self, "names", check_names(self.names, len(self.domains)))

    def cuts_of(self) -> Tuple[Optional[Tuple[Tuple[int, ...], ...]], Tuple[Tuple[int, ...], ...]]:
        """``(one-way cuts or None, two-way cuts)``, inner boundaries per attribute."""
        raise NotImplementedError

    def _check_grids(self) -> None:
        """After the subclass checked its cuts: every grid's size, and every oracle's threshold."""
        for grid in self.grids():
            if not 2 <= grid.cells <= MAX_CELLS:
                raise ParameterError(f"a grid of attributes {grid.attributes} would have {grid.cells} cells, "
                                     f"not 2 to {MAX_CELLS}: use more or fewer cells per attribute")
        _ = self.flip_thresholds

    def with_domain(self: "GridParamsT", domain: Any) -> "GridParamsT":
        """Records are integer attributes (bucketize labels first): no label domain attaches."""
        if domain is not None:
            raise ParameterError(f"{type(self).__name__} takes records of integer attributes, not labels: got "
                                 f"domain {domain!r} (bucketize each attribute to [0, domains[j]) instead)")
        return super().with_domain(None)

    def grids(self) -> List[Grid]:
        """The grids, one per user group: the 1-D grids (attribute order), then the 2-D grids
        of every pair ``(a, b)``, ``a < b``, in lexicographic order."""
        cached: Optional[List[Grid]] = self.__dict__.get("_grids")
        if cached is not None:
            return cached
        one, two = self.cuts_of()
        k = len(self.domains)

        def edges(cuts: Tuple[int, ...], d: int) -> np.ndarray:
            return np.array((0, *cuts, d), dtype=np.int64)
        out = [] if one is None else [Grid((a,), (edges(one[a], self.domains[a]),)) for a in range(k)]
        out += [Grid((a, b), (edges(two[a], self.domains[a]), edges(two[b], self.domains[b])))
                for a, b in itertools.combinations(range(k), 2)]
        object.__setattr__(self, "_grids", out)
        return out

    @property
    def attribute_names(self) -> Tuple[str, ...]:
        """``names``, or ``a0, a1, ...``."""
        return self.names if self.names is not None else tuple(f"a{j}" for j in range(len(self.domains)))

    @property
    def offsets(self) -> np.ndarray:
        """Where each grid's cells start in the concatenated cell vector (and the total)."""
        return np.concatenate(([0], np.cumsum([grid.cells for grid in self.grids()]))).astype(np.int64)

    @property
    def d(self) -> int:
        """Cells of all grids together: ``estimate()`` gives one frequency per cell."""
        return int(self.offsets[-1])

    @property
    def g(self) -> int:
        """OLH's hash range ``round(e^eps) + 1``."""
        return default_g(self.epsilon)

    @property
    def identity_hash(self) -> np.ndarray:
        """Per grid: True where it uses GRR (the identity hash, ``cells < 3 e^eps + 2``)."""
        limit = 3 * math.exp(self.epsilon) + 2
        return np.array([grid.cells < limit for grid in self.grids()])

    @property
    def hash_ranges(self) -> np.ndarray:
        """Per grid the range of its reports' ``z``: its cells under GRR, else ``g``."""
        return np.where(self.identity_hash, [grid.cells for grid in self.grids()], self.g).astype(np.int64)

    @property
    def flip_thresholds(self) -> Tuple[int, ...]:
        """Per grid the randomized response's 64-bit flip threshold over its hash range."""
        return tuple(rr_threshold(self.epsilon, int(m)) for m in self.hash_ranges)

    def probabilities(self) -> Tuple[np.ndarray, np.ndarray]:
        """Per grid ``(p, q)``: a report's probability of matching its user's cell (kept) and
        another cell (``1/g`` under OLH's hash, a uniform other symbol under GRR)."""
        m = self.hash_ranges.astype(np.float64)
        flip = np.array(self.flip_thresholds, dtype=np.float64) / 2.0**64
        return 1.0 - flip, np.where(self.identity_hash, flip / (m - 1), 1.0 / m)

    def check_records(self, records: Any) -> np.ndarray:
        """Records as ``int64[n, k]``, each attribute within its domain; a ParameterError
        naming the attribute and the value otherwise."""
        arr = np.asarray(records)
        k = len(self.domains)
        if arr.ndim != 2 or arr.shape[1] != k:
            raise ParameterError(f"records must have shape (n, {k}) (one column per attribute "
                                 f"{', '.join(self.attribute_names)}), got shape {arr.shape}")
        if arr.size and arr.dtype.kind not in "iu":
            raise DTypeError(f"records must be integers, got dtype {arr.dtype}")
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) >= 2**63:
            raise ParameterError(f"records must be below 2^63, got {int(arr.max())}")
        arr = arr.astype(np.int64, copy=False)
        if arr.size:
            bad = (arr < 0) | (arr >= np.array(self.domains, dtype=np.int64))
            if bad.any():
                row, col = (int(i) for i in np.argwhere(bad)[0])
                raise ParameterError(f"records: attribute {self.attribute_names[col]!r} must be in "
                                     f"[0, {self.domains[col]}), got {int(arr[row, col])} at row {row}")
        return np.ascontiguousarray(arr)

    def cell_variance(self, groups: np.ndarray, group_users: np.ndarray, n: int, f: Any) -> Any:
        """Var of the estimates of cells of ``groups`` with ``group_users`` of the ``n`` users,
        each cell holding a share ``f`` of all users: the oracle's ``(f p(1-p) + (1-f)
        q(1-q))/(n_j (p-q)^2)`` (:meth:`probabilities`) on the group's cell share, plus that
        share's variance as a simple random sample of ``n_j`` of the ``n`` users,
        ``f (1-f) (n - n_j)/(n_j (n - 1))`` (the group draw)."""
        keep, other = self.probabilities()
        p, q = keep[groups], other[groups]
        f = np.asarray(f, dtype=np.float64)
        nj = np.asarray(group_users, dtype=np.float64)
        oracle = (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (nj * (p - q) ** 2)
        return oracle + f * (1 - f) * (n - nj) / (nj * max(n - 1, 1))


@dataclasses.dataclass(eq=False)
class GridReports(Reports):
    """Grid reports: the user's ``group`` (its grid) and the ``(z, a0, a1)`` of its cell there
    (uint32, uint64 x 3): OLH's hash and value, or GRR's value with the identity hash (0, 1)."""

    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {
        "group": ("uint32", 1), "z": ("uint64", 1), "a0": ("uint64", 1), "a1": ("uint64", 1)}
    group: np.ndarray
    z: np.ndarray
    a0: np.ndarray
    a1: np.ndarray

    def __post_init__(self) -> None:
        self.group = check_array("group", self.group, np.uint32, cast=True)
        self.z = check_array("z", self.z, np.uint64, cast=True)
        self.a0 = check_array("a0", self.a0, np.uint64, cast=True)
        self.a1 = check_array("a1", self.a1, np.uint64, cast=True)
        self._check_lengths()


class GridClient(ClientBase):
    """Grid client: ``perturb(records)`` with ``records`` ``int64[n, k]``. Each user draws its
    group uniformly (from the client's key source: OS entropy unless seeded for simulation)
    and reports its cell there over the whole epsilon (GRR or OLH, module docstring)."""

    params: Any
    #: The Reports class of the protocol (set by each protocol's client).
    reports_type: ClassVar[Any] = GridReports

    def perturb(self, records: Any) -> Any:
        p: GridParams = self.params
        rows = p.check_records(records)
        grids = p.grids()
        group = self._keys.generator().integers(0, len(grids), size=len(rows)).astype(np.uint32)
        z, a0, a1 = (np.zeros(len(rows), dtype=np.uint64) for _ in range(3))
        for j, (grid, identity, m, t) in enumerate(zip(grids, p.identity_hash, p.hash_ranges, p.flip_thresholds)):
            mine = np.flatnonzero(group == j)
            cell = grid.cell_of(rows[mine]).astype(np.uint64)
            if identity:
                z[mine] = _core.randomized_response(self._keys.key(), cell, int(m), t, self.threads)
                a1[mine] = 1
            else:
                z[mine], a0[mine], a1[mine] = _core.ocms_perturb(prime_field(), self._keys.key(), cell, int(m), t,
                                                                 self.threads)
        return self.reports_type(group=group, z=z, a0=a0, a1=a1)


class GridServer(Aggregator):
    """Grid server: per cell of every grid the OLH support count (``counts``, the reports of
    the cell's group whose hash of the cell is their ``z``), and per group its users
    (``users``). ``estimate()`` gives each cell's unbiased frequency (one group's users
    stand for all); :meth:`range` and :meth:`range_batch` answer range queries after the
    post-processing of :mod:`._grid_answer`."""

    params: Any

    def __init__(self, params: Any, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        self._st = _State(counts=np.zeros(params.d, dtype=np.uint64),
                          users=np.zeros(len(params.grids()), dtype=np.uint64))

    @classmethod
    def _state_layout(cls, params: Any) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        return {"counts": ((params.d,), "uint64"), "users": ((len(params.grids()),), "uint64")}

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State({k: np.array(state[k], dtype=np.uint64) for k in ("counts", "users")})

    @property
    def n(self) -> int:
        return int(self._st["users"].sum())

    def _validate(self, reports: GridReports) -> None:
        p = self.params
        check_below(reports.group, len(p.grids()), "group", label="number of grids")
        group = reports.group.astype(np.intp)
        ranges = p.hash_ranges[group]
        if reports.z.size and bool((reports.z >= ranges.astype(np.uint64)).any()):
            bad = int(np.argmax(reports.z >= ranges.astype(np.uint64)))
            raise ReportError(f"z must be below its group's hash range {int(ranges[bad])}, got {int(reports.z[bad])} "
                              f"at index {bad}")
        identity = p.identity_hash[group]
        if bool((identity & ((reports.a0 != 0) | (reports.a1 != 1))).any()):
            bad = int(np.argmax(identity & ((reports.a0 != 0) | (reports.a1 != 1))))
            raise ReportError(f"a0, a1 must be 0, 1 (the identity hash) in GRR group {int(group[bad])}, got "
                              f"{int(reports.a0[bad])}, {int(reports.a1[bad])} at index {bad}")
        check_below(reports.a0, PRIME, "a0", label="PRIME")
        check_below(reports.a1, PRIME, "a1", label="PRIME")

    def _ingest(self, reports: GridReports) -> Delta:
        p = self.params
        offsets = p.offsets
        groups = len(p.grids())
        users = np.bincount(reports.group, minlength=groups)
        # the reports in group order (groups < 2^16, checked: a radix sort), one kernel call per group
        order = np.argsort(reports.group.astype(np.uint16), kind="stable")
        z, a0, a1 = reports.z[order], reports.a0[order], reports.a1[order]
        starts = np.concatenate(([0], np.cumsum(users)))
        counts = np.zeros(p.d, dtype=np.uint64)
        for j in np.flatnonzero(users):
            mine = slice(starts[j], starts[j + 1])
            _core.ocms_count_range(prime_field(), z[mine], a0[mine], a1[mine], int(p.hash_ranges[j]), 0,
                                   counts[offsets[j]:offsets[j + 1]], self.threads)
        return self._delta().add_nonzero("counts", counts).add_nonzero("users", users.astype(np.uint64))

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        offsets = self.params.offsets
        if int(state["users"].max(initial=0)) >= 2**62:
            raise FormatError("a stored group size is 2^62 or more")
        group_of_cell = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
        if bool((state["counts"] > state["users"][group_of_cell]).any()):
            raise FormatError("a stored support count exceeds the users of its group")

    def group_users(self) -> np.ndarray:
        """Users of each group (grid), int64."""
        return np.asarray(self._st["users"], dtype=np.int64)

    def _cell_estimates(self) -> np.ndarray:
        """Every cell's estimated frequency ``(C/n_j - q)/(p - q)`` (support count ``C`` of the
        group's ``n_j`` users, :meth:`GridParams.probabilities`); a group without users gets the
        uniform 1/cells."""
        p = self.params
        offsets = p.offsets
        keep, other = p.probabilities()
        users = self._st["users"].astype(np.float64)
        out = np.empty(p.d, dtype=np.float64)
        for j in range(users.size):
            span = slice(offsets[j], offsets[j + 1])
            if users[j] == 0:
                out[span] = 1.0 / (offsets[j + 1] - offsets[j])
            else:
                out[span] = (self._st["counts"][span] / users[j] - other[j]) / (keep[j] - other[j])
        return out

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Each cell's unbiased frequency estimate (cells of all grids in :meth:`GridParams.grids`
        order, row-major within a grid; ``candidates``: cell indices, default all)."""
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        est = self._cell_estimates()
        if candidates is not None:
            est = est[check_values(candidates, self.params.d, "candidates", "cell indices in").astype(np.intp)]
        return np.asarray(est * n if counts else est, dtype=np.float64)

    # -- range queries (post-processing in _grid_answer) ------------------------------------
    def _answers(self) -> Any:
        from ._grid_answer import Answers

        cached = self._st.__dict__.get("answers")
        if cached is None:
            if self.n == 0:
                raise ReportError("cannot answer range queries from zero reports")
            domains = self.params.domains
            # per pair its value matrix, the prefix sums kept, and one fitting step's temporaries
            values = sum(domains[a] * domains[b] for a, b in itertools.combinations(range(len(domains)), 2))
            self._check_call(4 * 8 * values, "the range answers' value matrices (one per attribute pair)")
            keep, other = self.params.probabilities()
            users = self._st["users"].astype(np.float64)
            with np.errstate(divide="ignore"):   # a group without users: infinite variance, weight 0
                noise = other * (1 - other) / ((keep - other) ** 2 * users)
            cached = Answers(self.params, self._cell_estimates(), self.n, self.params.cuts_of()[0] is not None,
                             noise)
            self._st.__dict__["answers"] = cached
        return cached

    def range(self, query: Mapping[Any, Tuple[int, int]]) -> float:
        """The estimated fraction of users whose record lies in the box ``query``: ``{attribute:
        (low, high)}``, bounds inclusive, attributes by name (or index); attributes left out
        are unconstrained. After the grids' consistency and (HDG, adaptive grid) weighted update
        the answer has no closed-form variance (see the guide)."""
        p = self.params
        lows = np.zeros((1, len(p.domains)), dtype=np.int64)
        highs = np.array([p.domains], dtype=np.int64) - 1
        for key, bounds in query.items():
            j = self._attribute(key)
            try:
                low, high = (operator.index(b) for b in bounds)
            except (TypeError, ValueError):
                raise ParameterError(f"query: attribute {p.attribute_names[j]!r} needs (low, high), "
                                     f"got {bounds!r}") from None
            lows[0, j], highs[0, j] = low, high
        return float(self.range_batch(lows, highs)[0])

    def range_batch(self, lows: Any, highs: Any) -> np.ndarray:
        """Answers of ``q`` box queries at once: ``lows`` and ``highs`` ``int[q, k]``, inclusive
        bounds per attribute (``[0, domains[j] - 1]``: unconstrained); float64[q] fractions."""
        p = self.params
        lo, hi = self._check_bounds(lows, "lows"), self._check_bounds(highs, "highs")
        if lo.shape != hi.shape:
            raise ParameterError(f"lows and highs must have the same shape, got {lo.shape} and {hi.shape}")
        empty = np.argwhere(lo > hi)
        if empty.size:
            row, col = (int(i) for i in empty[0])
            raise ParameterError(f"query {row}: attribute {p.attribute_names[col]!r} has an empty range "
                                 f"({int(lo[row, col])}, {int(hi[row, col])})")
        return np.asarray(self._answers().boxes(lo, hi), dtype=np.float64)

    def marginal(self, attribute: Any) -> np.ndarray:
        """The estimated distribution of one attribute over its domain (after consistency)."""
        return np.asarray(self._answers().marginal(self._attribute(attribute)), dtype=np.float64)

    def _attribute(self, key: Any) -> int:
        names = self.params.attribute_names
        if isinstance(key, str) and key in names:
            return int(names.index(key))
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and 0 <= int(key) < len(names):
            return int(key)
        raise ParameterError(f"query: unknown attribute {key!r} (attributes: {', '.join(names)})")

    def _check_bounds(self, bounds: Any, name: str) -> np.ndarray:
        p = self.params
        arr = np.asarray(bounds)
        if arr.ndim != 2 or arr.shape[1] != len(p.domains):
            raise ParameterError(f"{name} must have shape (q, {len(p.domains)}), got {arr.shape}")
        if arr.size and arr.dtype.kind not in "iu":
            raise ParameterError(f"{name} must be integers, got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
        bad = (arr < 0) | (arr >= np.array(p.domains, dtype=np.int64))
        if bad.any():
            row, col = (int(i) for i in np.argwhere(bad)[0])
            raise ParameterError(f"query {row}: attribute {p.attribute_names[col]!r} bound must be in "
                                 f"[0, {p.domains[col] - 1}], got {int(arr[row, col])}")
        return arr


def group_of_cells(params: Any, candidates: Any = None) -> np.ndarray:
    """The group (grid) of each cell index."""
    offsets = params.offsets
    index = np.arange(params.d) if candidates is None else np.asarray(candidates, dtype=np.int64)
    return np.searchsorted(offsets, index, side="right") - 1
