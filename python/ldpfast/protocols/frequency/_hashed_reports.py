"""The collector state of the per-user-hash protocols whose reports are ``(z, a0, a1)``
columns (OCMS+RR, :mod:`ldpfast.protocols.frequency.ocms`, and OLH,
:mod:`ldpfast.protocols.frequency.olh`, whose server holds an OCMS one): either the reports
themselves (canonical row order, any query later) or, for a candidate set fixed in advance,
the match counts ``C(x) = #{i : z_i = h_i(x)}`` streamed in
(memory ``O(|candidates|)``, mergeable by addition)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple, TypeVar, Union

import numpy as np
from numpy.typing import ArrayLike

from ... import _base, _core, _progress
from ..._delta import Delta, _State
from ..._memory import _length, check_allocation
from ..._validate import check_threads, check_values
from ...errors import FormatError, IncompatibleError, ParameterError, ReportError

S = TypeVar("S", bound="HashedReportsServer")
_Columns = Tuple[np.ndarray, np.ndarray, np.ndarray]

#: The affine decode's cost per report (its solve) and per match, in scanned pairs
#: (cpp/src/ocms.cpp, kAffineReportCost and kAffineMatchCost).
_AFFINE_REPORT_STEPS, _AFFINE_MATCH_STEPS = 1024.0, 1.25


def _affine(params: Any) -> bool:
    """True where the C++ core may answer a range query with the affine decode."""
    return bool(params.field_kind == "binary" and params.m & (params.m - 1) == 0)


def _frozen(array: np.ndarray) -> np.ndarray:
    """``array``, made read-only (kept reports are shared between merged servers)."""
    array.flags.writeable = False
    return array


def _contiguous_start(candidates: np.ndarray) -> Optional[int]:
    """First value if ``candidates`` is ``[c, c+1, ..., c+k-1]``, else None."""
    if candidates.size == 0:
        return None
    start = int(candidates[0])
    if candidates.size > 1 and not np.array_equal(
            np.diff(candidates), np.ones(candidates.size - 1, dtype=np.uint64)):
        return None
    return start


def _sorted_rows(z: np.ndarray, a0: np.ndarray, a1: np.ndarray, m: int) -> _Columns:
    """The rows sorted by (z, a0, a1), as ``np.lexsort((a1, a0, z))`` orders them, in about a
    third of its time: an unstable sort by ``a0``, then a stable one by ``z < m`` (a radix
    sort when ``m <= 2^16``), then ``a1`` sorted within the rare runs of equal ``(z, a0)``
    (``a0`` is uniform on the field: about ``n^2 / 2^65`` such pairs). Temporaries: 32
    bytes per row."""
    order = np.argsort(a0)
    keys = z.astype(np.uint16 if m <= 1 << 16 else np.uint32 if m <= 1 << 32 else np.uint64)[order]
    order = order[np.argsort(keys, kind="stable")]
    del keys
    z, a0, a1 = (column[order] for column in (z, a0, a1))
    del order
    _sort_ties(z, a0, a1)
    return z, a0, a1


def _sort_ties(z: np.ndarray, a0: np.ndarray, a1: np.ndarray) -> None:
    """Sort ``a1`` in place within each run of rows of equal ``(z, a0)`` (rows ordered by
    ``(z, a0)``)."""
    equal = np.flatnonzero((z[1:] == z[:-1]) & (a0[1:] == a0[:-1]))  # row i + 1 repeats row i's (z, a0)
    if equal.size:
        rows = np.union1d(equal, equal + 1)
        run = np.cumsum(~np.isin(rows, equal + 1))  # a run starts at a row that does not repeat its predecessor
        a1[rows] = a1[rows][np.lexsort((a1[rows], run))]


def _is_sorted(z: np.ndarray, a0: np.ndarray, a1: np.ndarray) -> bool:
    """Whether the rows are in (z, a0, a1) order (one pass; temporaries: a few bytes per row)."""
    if z.size < 2:
        return True
    later = z[1:] > z[:-1]
    same = z[1:] == z[:-1]
    later |= same & (a0[1:] > a0[:-1])
    same &= a0[1:] == a0[:-1]
    later |= same & (a1[1:] >= a1[:-1])
    return bool(later.all())


#: Rows per distinct ``z`` below which sorted chunks are concatenated and sorted rather than
#: merged value by value (a merge step costs about as much as sorting this many rows).
_ROWS_PER_MERGE_STEP = 256


def _merged_rows(chunks: Tuple[_Columns, ...]) -> Optional[_Columns]:
    """Chunks that are each sorted by (z, a0, a1), merged into one sorted set of columns:
    for each value of ``z``, the chunks' runs of ``a0`` (each sorted) are joined and put in
    order by a stable sort, which merges runs in about ``log2(chunks)`` passes. None when
    ``z`` takes too many values for a step per value to pay. Temporaries beside the
    result: 16 bytes per row of the largest ``z`` value. Chunks are never empty (a state keeps none)."""
    values = np.unique(np.concatenate([c[0][np.r_[True, c[0][1:] != c[0][:-1]]] for c in chunks]))
    n = sum(int(c[0].size) for c in chunks)
    if values.size * _ROWS_PER_MERGE_STEP > n:
        return None
    bounds = [np.append(np.searchsorted(c[0], values), c[0].size) for c in chunks]  # each value's rows
    z, a0, a1 = (np.empty(n, dtype=np.uint64) for _ in range(3))
    start = 0
    for i, value in enumerate(values):
        stop = start + sum(int(b[i + 1] - b[i]) for b in bounds)
        z[start:stop] = value
        for merged, column in ((a0, 1), (a1, 2)):
            np.concatenate([c[column][b[i]:b[i + 1]] for c, b in zip(chunks, bounds)], out=merged[start:stop])
        order = np.argsort(a0[start:stop], kind="stable")
        for merged in (a0, a1):
            merged[start:stop] = merged[start:stop][order]
        del order
        start = stop
    _sort_ties(z, a0, a1)
    return z, a0, a1


class HashedReportsServer(_base.Aggregator):
    """Base of :class:`ldpfast.protocols.frequency.ocms.OCMSServer`: keeps the reports or streams candidate match
    counts (see the module docstring); subclasses decode the counts. ``params`` needs
    ``d``, ``m`` and ``field``; ``reports_type`` has the columns ``z, a0, a1`` and
    ``validate(params)``."""

    # the subclass's parameters, read generically (d, m, field, field_kind)
    params: Any

    def __init__(self, params: Any, candidates: Optional[ArrayLike] = None, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        self._candidates: Optional[np.ndarray] = None
        if candidates is None:
            # sorted: every chunk is in (z, a0, a1) order (one chunk: the canonical state)
            self._st = _State(chunks=(), sorted=True)
        else:
            # the candidates (converted, sorted to check they are distinct, kept) and their counts
            count = _length(candidates)
            check_allocation(32 * count, f"an {self.protocol!r} server streaming {count} candidates")
            self._candidates = self._checked_candidates(candidates, distinct=True).copy()
            self._candidates.flags.writeable = False
            self._st = _State(counts=np.zeros(self._candidates.size, dtype=np.uint64),
                              n=np.zeros(1, dtype=np.uint64))

    # -- properties --------------------------------------------------------------------
    @property
    def _counts(self) -> Optional[np.ndarray]:
        counts: Optional[np.ndarray] = self._st.get("counts")
        return counts

    def _streamed(self) -> Tuple[np.ndarray, np.ndarray]:
        """The streamed candidates and their match counts (candidate-count mode only)."""
        candidates, counts = self._candidates, self._counts
        assert candidates is not None and counts is not None, "candidate-count mode"
        return candidates, counts

    @property
    def n(self) -> int:
        """Number of reports aggregated."""
        st = self._st
        if "n" in st:
            return int(st["n"][0])
        return sum(int(chunk[0].size) for chunk in st["chunks"])

    _n = n

    @property
    def keeps_reports(self) -> bool:
        """True in the report-keeping mode, False when streaming into match counts."""
        return self._candidates is None

    @property
    def candidates(self) -> Optional[np.ndarray]:
        """The streamed candidates (a copy), or None when reports are kept."""
        return None if self._candidates is None else self._candidates.copy()

    def reports(self) -> _base.Reports:
        """The kept reports (canonical row order). Report-keeping mode only."""
        if not self.keeps_reports:
            raise ParameterError("this server streams match counts and keeps no reports")
        z, a0, a1 = self._columns()
        batch: _base.Reports = self._batch(z=z.copy(), a0=a0.copy(), a1=a1.copy())
        return batch

    def _batch(self, z: np.ndarray, a0: np.ndarray, a1: np.ndarray) -> Any:
        """A batch of the subclass's ``reports_type`` (columns ``z, a0, a1``, ``validate``)."""
        reports_type: Any = self.reports_type
        return reports_type(z=z, a0=a0, a1=a1)

    # -- aggregation (the template is Aggregator.update / merge) -------------------------
    def _keeps_batch(self) -> bool:
        return self.keeps_reports

    def _validate(self, reports: Any) -> None:
        """``z < m`` and ``a0, a1`` field elements."""
        reports.validate(self.params)

    def _ingest(self, reports: Any) -> Delta:
        st = self._st
        if self.keeps_reports:  # the batch's columns are the library's own copies (see Aggregator.update)
            chunk = tuple(_frozen(column) for column in (reports.z, reports.a0, reports.a1))
            return self._delta().replace("chunks", st["chunks"] + (chunk,)).replace("sorted", False)
        candidates = self._streamed()[0]
        self._check_call(8 * candidates.size,
                         f"matching a batch of {len(reports)} reports against {candidates.size} candidates")
        counts = np.zeros(candidates.size, dtype=np.uint64)
        self._count_into(reports.z, reports.a0, reports.a1, candidates, counts)
        return self._delta().add_nonzero("counts", counts).add("n", [len(reports)])

    def _merged(self, theirs: Mapping[str, Any]) -> Union[Delta, Mapping[str, Any]]:
        mine = self._st
        if "chunks" in mine:
            return (self._delta().replace("chunks", mine["chunks"] + theirs["chunks"])
                    .replace("sorted", mine["sorted"] and theirs["sorted"]))
        return super()._merged(theirs)

    def merge(self: S, other: S) -> S:
        """Add ``other``'s reports into this server (exact; ``other`` is unchanged). Both
        must have equal parameters and the same mode (and equal candidates)."""
        if type(other) is type(self) and other.params == self.params and other is not self:
            if self.keeps_reports != other.keeps_reports:
                raise IncompatibleError("cannot merge a report-keeping server with a candidate-count server")
            if not self.keeps_reports and not np.array_equal(self._streamed()[0], other._streamed()[0]):
                raise IncompatibleError("cannot merge servers that count different candidates")
        return super().merge(other)

    def match_counts(self, candidates: Optional[ArrayLike] = None) -> np.ndarray:
        """``C(x) = #{i : z_i = h_i(x)}`` for each candidate (uint64); ``None`` means the
        whole dictionary (report-keeping mode) or the streamed candidates."""
        # the query holds the values, their counts and positions, and the float estimates
        default = self.params.d if self.keeps_reports else self._streamed()[0].size
        self._check_query(candidates, 40, default, f"an {self.protocol!r} query",
                          extra=self._compaction_bytes() if self.keeps_reports else 0)
        if self.keeps_reports:
            if candidates is None:
                xs = np.arange(self.params.d, dtype=np.uint64)
            else:
                xs = self._checked_candidates(candidates, distinct=False)
            counts = np.zeros(xs.size, dtype=np.uint64)
            if self._n:
                self._count_query(self._columns(canonical=False), xs, counts)
            return counts
        streamed, streamed_counts = self._streamed()
        if candidates is None:
            return streamed_counts.copy()
        xs = self._checked_candidates(candidates, distinct=False)
        order = np.argsort(streamed)
        ordered = streamed[order]
        pos = np.searchsorted(ordered, xs)
        found = pos < ordered.size
        found[found] = ordered[pos[found]] == xs[found]
        if not found.all():
            raise ParameterError(f"candidates must be among the server's streamed candidates; "
                                 f"{int(xs[~found][0])} is not")
        return streamed_counts[order[pos]]

    # -- internals ---------------------------------------------------------------------
    def query_steps(self, candidates: int) -> float:
        """The steps of a query of ``candidates`` contiguous values over the kept reports:
        one per report and candidate (the scan), or, where the affine decode applies
        (``GF(2^l)``, ``m`` a power of two), about ``1024 + 1.25 candidates / m`` per report."""
        p, n = self.params, float(self.n)
        if _affine(p):
            return float(n * (_AFFINE_REPORT_STEPS + _AFFINE_MATCH_STEPS * candidates / p.m))
        return n * candidates

    def _count_query(self, columns: _Columns, xs: np.ndarray, counts: np.ndarray) -> None:
        """:meth:`_count_into` for a query: in pieces with a progress line on stderr when it
        is long and progress is on (:mod:`ldpfast._progress`; the pieces add up to the same
        counts)."""
        n = columns[0].size
        if self.query_steps(xs.size) < _progress.MIN_STEPS or not _progress.get_progress():
            self._count_into(*columns, xs, counts)
            return
        # pieces of whole 4096-candidate tiles; the affine decode pays a per-report solve
        # per piece, so its pieces hold >= 8192 m candidates (<= 10% extra work)
        smallest = 8192 * self.params.m if _affine(self.params) else 1 << 14
        piece = -(-max(smallest, -(-xs.size // 40)) // 4096) * 4096
        bar = _progress.QueryProgress(f"query of {xs.size:,} candidates over {n:,} reports", xs.size)
        try:
            for start in range(0, xs.size, piece):
                stop = min(xs.size, start + piece)
                self._count_into(*columns, xs[start:stop], counts[start:stop])
                bar.advance(stop - start)
        finally:
            bar.close()

    def _checked_candidates(self, candidates: ArrayLike, distinct: bool) -> np.ndarray:
        return check_values(candidates, self.params.d, "candidates", "values in", distinct=distinct)

    def _count_into(self, z: np.ndarray, a0: np.ndarray, a1: np.ndarray, xs: np.ndarray,
                    counts: np.ndarray) -> None:
        p = self.params
        start = _contiguous_start(xs)
        if start is not None:
            _core.ocms_count_range(p.field, z, a0, a1, p.m, start, counts, self.threads)
        elif xs.size:
            _core.ocms_count_list(p.field, z, a0, a1, p.m, xs, counts, self.threads)

    def _compaction_bytes(self, canonical: bool = False) -> int:
        """Temporaries of :meth:`_columns`: one copy of the kept reports when they are in
        several chunks, and for the canonical order a sort order and a sorted copy (sorted
        chunks merge with less, :func:`_merged_rows`, or fall back to that)."""
        st = self._st
        chunks = st.get("chunks", ())
        n = sum(int(chunk[0].size) for chunk in chunks)
        sorting = canonical and (len(chunks) > 1 or not st.get("sorted", True))
        return (24 * n if len(chunks) > 1 else 0) + (32 * n if sorting else 0)

    def _columns(self, canonical: bool = True) -> _Columns:
        """The kept reports as one set of columns; ``canonical`` sorts the rows by
        (z, a0, a1) so that state and bytes do not depend on arrival order (counting does
        not need it). The compacted state (the same reports) is committed."""
        with self._lock:
            st = self._st
            chunks, ordered = st["chunks"], st["sorted"]
            if not chunks:
                empty = np.zeros(0, dtype=np.uint64)
                return empty, empty, empty
            self._check_call(self._compaction_bytes(canonical), f"compacting {self.n} kept reports")
            merged = _merged_rows(chunks) if canonical and ordered and len(chunks) > 1 else None
            if merged is not None:
                chunks = (tuple(_frozen(column) for column in merged),)
            elif len(chunks) > 1:
                chunks, ordered = (tuple(_frozen(np.concatenate([c[i] for c in chunks])) for i in range(3)),), False
            if canonical and not ordered:
                z, a0, a1 = chunks[0]
                chunks, ordered = (tuple(_frozen(column) for column in _sorted_rows(z, a0, a1, self.params.m)),), True
            if chunks is not st["chunks"]:
                self._st = _State(chunks=chunks, sorted=ordered)
            columns: _Columns = chunks[0]
            return columns

    def _state(self) -> Dict[str, np.ndarray]:
        if self.keeps_reports:
            z, a0, a1 = self._columns()
            return {"z": z, "a0": a0, "a1": a1}
        candidates, counts = self._streamed()
        return {"candidates": candidates, "counts": counts, "n": self._st["n"]}

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        def column(name: str) -> np.ndarray:
            arr = state[name]
            if arr.dtype != np.uint64 or arr.ndim != 1:
                raise FormatError(f"stored {name} must be a 1-D uint64 array")
            return arr

        keys = set(state)
        if keys == {"z", "a0", "a1"}:
            z, a0, a1 = column("z"), column("a0"), column("a1")
            if not z.size == a0.size == a1.size:
                raise FormatError("stored report columns have different lengths")
            try:
                self._batch(z, a0, a1).validate(self.params)
            except ReportError as exc:
                raise FormatError(f"stored reports do not fit the parameters: {exc}") from None
        elif keys == {"candidates", "counts", "n"}:
            cands, counts, n = column("candidates"), column("counts"), column("n")
            if n.size != 1 or counts.size != cands.size:
                raise FormatError("stored candidate counts have inconsistent shapes")
            try:
                self._checked_candidates(cands, distinct=True)
            except ParameterError as exc:
                raise FormatError(f"stored candidates are invalid: {exc}") from None
            if int(n[0]) >= 2**63:
                raise FormatError(f"stored report count {int(n[0])} is out of range")
            if counts.size and int(counts.max()) > int(n[0]):
                raise FormatError("stored match counts exceed the number of reports")
        else:
            raise FormatError(f"stored state has unexpected arrays {sorted(keys)}")

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        if "z" in state:
            self._candidates = None
            # from_bytes's arrays are its own copies: kept, not copied again
            z, a0, a1 = (_frozen(np.asarray(state[k], dtype=np.uint64)) for k in ("z", "a0", "a1"))
            # stored bytes are written in canonical order; checked, so that they are not sorted again
            self._st = _State(chunks=((z, a0, a1),) if z.size else (), sorted=_is_sorted(z, a0, a1))
        else:
            self._candidates = np.array(state["candidates"], dtype=np.uint64)
            self._candidates.flags.writeable = False
            self._st = _State(counts=np.array(state["counts"], dtype=np.uint64),
                              n=np.array(state["n"], dtype=np.uint64).reshape(1))

    def _repr_extra(self) -> str:
        candidates = self._candidates
        return "mode='reports'" if candidates is None else f"mode='{candidates.size} candidates'"
