"""The histogram server of protocols whose report is one integer ``y`` in ``[0, size)``
(GRR and L-GRR over the dictionary, Square Wave over its output buckets): the counts, their
C++ update (each value read once, checked, counted; the counts unchanged unless the whole
batch is valid) and the stored state's checks. A protocol's server adds its estimator."""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Mapping, Optional, Tuple

import numpy as np

from .. import _base, _core
from .._delta import _State
from .._validate import check_below
from ..errors import FormatError, IncompatibleError, ReportError


class HistogramServer(_base.Aggregator):
    """Counts of the reported ``y`` over ``[0, histogram_size(params))``. Subclasses set
    ``values_are`` (how errors name the values, e.g. ``"symbols in"``) and ``reports_name``
    (how the memory budget names a batch)."""

    values_are: ClassVar[str] = "values in"
    reports_name: ClassVar[str] = ""

    @staticmethod
    def histogram_size(params: Any) -> int:
        """The number of counters: ``params.d`` unless a protocol says otherwise."""
        return int(params.d)

    def __init__(self, params: Any):
        super().__init__(params)
        self._st = _State(counts=np.zeros(self.histogram_size(params), dtype=np.uint64))
        self._st.report_count = 0  # type: ignore[attr-defined]  # a cache of the state (_State)

    @classmethod
    def _state_layout(cls, params: Any) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        return {"counts": ((cls.histogram_size(params),), "uint64")}

    @property
    def _counts(self) -> np.ndarray:
        counts: np.ndarray = self._st["counts"]
        return counts

    @property
    def n(self) -> int:
        """The number of reports (the counts' sum, cached with the state: updates keep it)."""
        count: Optional[int] = getattr(self._st, "report_count", None)
        if count is None:
            count = self._st.report_count = int(self._counts.sum(dtype=np.uint64))  # type: ignore[attr-defined]
        return count

    @property
    def counts(self) -> np.ndarray:
        """The report histogram (a copy)."""
        return self._counts.copy()

    # _ingest counts y in C++ (histogram_update), which reads each value once, checks it and
    # leaves the counts unchanged unless the whole batch is valid
    _reads_once: ClassVar[bool] = True
    _ingest_validates: ClassVar[bool] = True

    def _validate(self, reports: Any) -> None:
        check_below(reports.y, self._counts.size, "y", self.values_are, ReportError)

    def _ingest(self, reports: Any) -> None:
        n, st = len(reports), self._st
        counts, count = st["counts"], getattr(st, "report_count", None)
        zero = count == 0  # every counter 0: a failed batch is taken back by clearing them
        what = lambda: f"counting a batch of {n} {self.reports_name} reports"  # noqa: E731
        staging = None
        if _core.histogram_update_stages(n, counts.size, 0, zero):
            staging = self._kept_buffer("staged values", n, np.uint32, what)
        else:
            self._check_call(_core.histogram_update_scratch_bytes(n, counts.size, 0, zero), what)
        st.changed()
        bad, value, overflow = _core.histogram_update(reports.y, counts, 0, zero, staging)
        if bad < n:
            if zero:
                st.report_count = 0  # type: ignore[attr-defined]
            raise ReportError(f"y must be {self.values_are} [0, {counts.size}), got {value} at index {bad}")
        if overflow:
            raise IncompatibleError("adding the batch would overflow the uint64 state array 'counts'")
        if count is not None:
            st.report_count = count + n  # type: ignore[attr-defined]

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State(counts=np.array(state["counts"], dtype=np.uint64))

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        counts = state["counts"]
        if counts.size and float(counts.sum(dtype=np.float64)) >= 2.0**63:
            raise FormatError("stored counts sum to 2^63 or more (the report count would wrap)")
