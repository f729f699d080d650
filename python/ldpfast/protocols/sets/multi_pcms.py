"""Multi-PCMS: Apple's private Count-Mean Sketch extended to sets, the sketch baselines
[PS] (section 4) compares PrivSketch with (R2 ``multi_pcms_*``); both are eps-LDP:

* ``multi-pcms-mean``: one uniformly chosen row of the user's K x M set sketch, every one
  of its M cells flipped with budget eps/M;
* ``multi-pcms-min``: the whole K x M sketch, every cell flipped with budget eps/(KM),
  aggregate first and take the min.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Tuple, Type

import numpy as np

from ..._base import Aggregator, Delta, Protocol, Reports as _ReportsBase
from ..._delta import _State
from ..._base import register_protocol
from ..._validate import check_array, check_below, check_bits
from ...errors import FormatError, ReportError
from ...theory.hadamard import c_eps
from ._sets import SetsLike, SketchClient, SketchParams
from ..._base import AuditHooks
from ...estimates import PLUG_IN
from ...uncertainty import MinimumOfRows, PlugIn
from ..._base import WireField, bits_for
from .._registration import edges
from .._registration import COUNT_MEAN, SIGN, random_sets, sketch_bits_plan, sketch_epsilon, sketch_simulation, theory

__all__ = [
    "MultiPCMSMeanParams", "MultiPCMSMeanReports", "MultiPCMSMeanClient", "MultiPCMSMeanServer",
    "MultiPCMSMinParams", "MultiPCMSMinReports", "MultiPCMSMinClient", "MultiPCMSMinServer",
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

    def __post_init__(self) -> None:
        self.row = check_array("row", self.row, np.uint16, 1, cast=True)
        self.bits = check_array("bits", self.bits, np.int8, 2, cast=True)
        self._check_lengths()


class MultiPCMSMeanClient(SketchClient):
    """Multi-PCMS-Mean user side (R2 ``multi_pcms_mean_client``). ``rng``: see
    :class:`ldpfast.protocols.sets.privsketch.PrivSketchClient` (None = OS entropy; seeds for simulation only)."""

    params_type: ClassVar[type] = MultiPCMSMeanParams
    _sampling = 2
    _with_order = False

    def perturb(self, sets: SetsLike) -> MultiPCMSMeanReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.protocols.sets.privsketch.as_sets`)."""
        row, bits, _ = self._perturb(sets)
        return MultiPCMSMeanReports(row=row.astype(np.uint16), bits=bits)


class _TableServer(Aggregator):
    """State: ``sums`` (K x M, sum of the +-1 bits received per cell), ``rows`` (K, users
    per row) and ``n``. Thread-safe (see :class:`ldpfast._base.Aggregator`)."""

    params: SketchParams

    def __init__(self, params: SketchParams):
        super().__init__(params)
        self._st = _State(n=np.zeros(1, dtype=np.int64), rows=np.zeros(params.K, dtype=np.int64),
                          sums=np.zeros((params.K, params.M), dtype=np.int64))

    @classmethod
    def _state_layout(cls, params: Any) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        return {"n": ((1,), "int64"), "rows": ((params.K,), "int64"), "sums": ((params.K, params.M), "int64")}

    @property
    def _rows(self) -> np.ndarray:
        rows: np.ndarray = self._st["rows"]
        return rows

    @property
    def _sums(self) -> np.ndarray:
        sums: np.ndarray = self._st["sums"]
        return sums

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State({k: np.array(state[k], dtype=np.int64) for k in ("n", "rows", "sums")})

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
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

    def _require_reports(self) -> None:
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")

    def _cells(self, candidates: Any) -> np.ndarray:
        return self.params.query_cells(candidates)


class MultiPCMSMeanServer(_TableServer):
    """Multi-PCMS-Mean collector (R2 ``multi_pcms_mean_server``): row j collects
    ``K((c/2) vhat + 1/2)`` with ``c = (e^{eps/M}+1)/(e^{eps/M}-1)``; the count of x is
    ``(1/K) sum_k Sum[k, H_k(x)]``."""

    protocol: ClassVar[str] = "multi-pcms-mean"
    params_type: ClassVar[type] = MultiPCMSMeanParams

    reports_type: ClassVar[type] = MultiPCMSMeanReports

    def _validate(self, reports: MultiPCMSMeanReports) -> None:
        p = self.params
        check_below(reports.row, p.K, "row", label="K")
        if reports.bits.shape[1] != p.M:
            raise ReportError(f"bits must have shape (n, M={p.M}), got {reports.bits.shape}")
        check_bits("bits", reports.bits)

    def _ingest(self, reports: MultiPCMSMeanReports) -> Delta:
        p = self.params
        sums = np.zeros_like(self._st["sums"])  # K x M: one row of the sketch per report
        for k in range(p.K):
            sums[k] = reports.bits[reports.row == k].sum(axis=0, dtype=np.int64)
        return self._delta().add("sums", sums).add_counts("rows", reports.row).add("n", [len(reports)])

    def estimate(self, candidates: Any = None, counts: bool = False, correction: bool = False) -> np.ndarray:
        """Frequencies (counts with ``counts=True``). ``correction=False`` (faithful to R2):
        ``count(x)/n`` with no collision correction, so items look more frequent the fuller
        the users' rows are.
        ``correction=True`` (derived here; in neither [PS] nor its code): ``sum_i (bhat_i(x)
        - what_i/M) / (n (1 - wbar/M))`` with ``what_i`` the sum of user i's decoded row."""
        self._check_query(candidates, 16 * self.params.K + 24, self.params.d, "a Multi-PCMS-Mean query")
        self._require_reports()
        p = self.params
        c = c_eps(p.bit_epsilon)
        decoded = c / 2.0 * self._sums + self._rows[:, None] / 2.0   # sum over users of (c v + 1)/2
        count: np.ndarray = decoded.ravel()[self._cells(candidates)].sum(axis=1)
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

    def __post_init__(self) -> None:
        self.bits = check_array("bits", self.bits, np.int8, 3, cast=True)


class MultiPCMSMinClient(SketchClient):
    """Multi-PCMS-Min user side (R2 ``multi_pcms_min_client``)."""

    params_type: ClassVar[type] = MultiPCMSMinParams
    _sampling = 0
    _with_order = False

    def perturb(self, sets: SetsLike) -> MultiPCMSMinReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.protocols.sets.privsketch.as_sets`)."""
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
        check_bits("bits", reports.bits)

    def _ingest(self, reports: MultiPCMSMinReports) -> Delta:
        n = len(reports)
        return (self._delta().add("sums", reports.bits.sum(axis=0, dtype=np.int64))
                .add("rows", np.full(self.params.K, n)).add("n", [n]))

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Frequencies (counts with ``counts=True``) of ``candidates`` (default the whole
        domain)."""
        self._check_query(candidates, 16 * self.params.K + 24, self.params.d, "a Multi-PCMS-Min query")
        self._require_reports()
        p = self.params
        c = c_eps(p.bit_epsilon)
        table = c / 2.0 * self._sums + self.n / 2.0
        est: np.ndarray = table.ravel()[self._cells(candidates)].min(axis=1)
        return est if counts else est / self.n


def _sketch_example(params_type: Type[SketchParams]) -> Callable[[], Tuple[SketchParams, List[List[int]]]]:
    return lambda: (params_type.create(epsilon=2.0, d=60, K=2, M=8, seed=1), random_sets(60))


def _mean_variance(server: MultiPCMSMeanServer, candidates: np.ndarray) -> PlugIn:
    p, n = server.params, server.n
    return PlugIn(lambda f: theory().multi_pcms_mean_variance(p.epsilon, n, f, fbar_sq=np.square(f), M=p.M, K=p.K),
                  len(candidates), f"{PLUG_IN} (theory.multi_pcms_mean_variance, uncorrected estimator, an upper "
                  "bound)", COUNT_MEAN)


def _min_variance(server: MultiPCMSMinServer, candidates: np.ndarray) -> MinimumOfRows:
    # each row is unbiased for its own count of 1-cells; the decoded bit (c v + 1)/2 of
    # every user has variance (c^2 - 1)/4 whatever the true bit (derived here)
    p, n = server.params, server.n
    c = c_eps(p.bit_epsilon)
    return MinimumOfRows(lambda f: np.full(np.shape(f), (c * c - 1.0) / (4.0 * n)), p.K, len(candidates),
                         "minimum over the K rows of row estimates with variance (c^2 - 1)/(4n), "
                         "c = (e^{eps/KM} + 1)/(e^{eps/KM} - 1) (ldpfast.uncertainty.MinimumOfRows)",
                         "theta_min: the smallest over the K rows of the share of users whose sketch has a 1 in "
                         "x's cell (>= f: the other items of a set that share the cell add to it)")


register_protocol(Protocol(
    "multi-pcms-mean", MultiPCMSMeanParams, MultiPCMSMeanReports, MultiPCMSMeanServer, MultiPCMSMeanClient,
    extremes=edges(d=(1, 2**64), M=(2, 65536)),
    example=_sketch_example(MultiPCMSMeanParams), inputs="sets",
    # the row and its M bits
    wire_fields=lambda p: [WireField("row", bits_for(p.K), dtype="uint16"), WireField("bits", 1, SIGN, "int8", (p.M,))],
    variance=_mean_variance,
    simulations=sketch_simulation("multi-pcms-mean", "Multi-PCMS-Mean",
                                  "one sketch row per user, eps/M per cell, count-mean decoding (PS baseline)"),
    audit=AuditHooks(lambda e, **kw: MultiPCMSMeanParams.create(epsilon=e, d=64, K=2, M=4, seed=1, **kw),
                     sketch_bits_plan, sketch_epsilon)))
register_protocol(Protocol(
    "multi-pcms-min", MultiPCMSMinParams, MultiPCMSMinReports, MultiPCMSMinServer, MultiPCMSMinClient,
    extremes=edges(d=(1, 2**64), M=(2, 65536)),
    example=_sketch_example(MultiPCMSMinParams), inputs="sets",
    wire_fields=lambda p: [WireField("bits", 1, SIGN, "int8", (p.K, p.M))],  # the whole K x M sketch
    variance=_min_variance,                    # a minimum over the sketch rows
    simulations=sketch_simulation("multi-pcms-min", "Multi-PCMS-Min",
                                  "whole sketch per user, eps/(KM) per cell, count-min decoding (PS baseline)"),
    audit=AuditHooks(lambda e, **kw: MultiPCMSMinParams.create(epsilon=e, d=64, K=2, M=2, seed=1, **kw),
                     sketch_bits_plan, sketch_epsilon)))
