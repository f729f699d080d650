"""Bit rows: the report format and the server state every bit-vector protocol shares
(OUE/SUE, RAPPOR, L-OUE/L-OSUE/L-SUE).

A report is a row of ``k`` bits, least significant bit first, packed in ``ceil(k/8)``
bytes (a ``uint8[n, ceil(k/8)]`` column): bit ``j`` is bit ``j % 8`` of byte ``j // 8``,
i.e. the little-endian bytes of the integer ``sum_j bit_j 2^j`` (RAPPOR's reference clients
use that integer). :func:`pack_bits` and :func:`unpack_bits` convert from and to one byte
per bit.

The server keeps, per group (RAPPOR's cohorts; one group otherwise), the number of reports
and how many of them set each bit, counted by the C++ column-count kernel
(``_core.bitvec_column_counts``: bit-packed, threads, every ISA), which also checks every
group index and the padding bits beyond ``k`` as it reads them, once.
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Mapping, Optional, Tuple

import numpy as np

from .. import _core
from .._aggregator import Aggregator
from .._delta import Delta, _State
from .._validate import check_array, check_threads
from ..errors import FormatError, ReportError

__all__ = ["row_bytes", "bit_rows", "pack_bits", "unpack_bits", "BitCountServer"]


def row_bytes(k: int) -> int:
    """Bytes of one row of ``k`` bits."""
    return (int(k) + 7) // 8


def bit_rows(value: Any, k: int, name: str = "bits") -> np.ndarray:
    """``value`` as a contiguous ``uint8[n, ceil(k/8)]`` array (ReportError naming the shape)."""
    arr = check_array(name, value, np.uint8, 2, cast=True)
    if arr.shape[1] != row_bytes(k):
        raise ReportError(f"{name} must have {row_bytes(k)} bytes per report (k={k} bits), got shape {arr.shape}")
    return arr


def pack_bits(dense: Any) -> np.ndarray:
    """Rows of one 0/1 value per bit (``[n, k]``) packed into bit rows (``uint8[n, ceil(k/8)]``)."""
    arr = np.asarray(dense)
    if arr.ndim != 2 or (arr.size and not np.isin(arr, (0, 1)).all()):
        raise ReportError(f"bits must be a 2-D array of 0/1 values, got shape {arr.shape}")
    return np.packbits(arr.astype(np.uint8), axis=1, bitorder="little")


def unpack_bits(rows: np.ndarray, k: int) -> np.ndarray:
    """Bit rows as one 0/1 ``uint8`` per bit, ``[n, k]``."""
    return np.unpackbits(np.asarray(rows, dtype=np.uint8), axis=1, bitorder="little", count=int(k))


def first_padding_error(rows: np.ndarray, k: int) -> Optional[int]:
    """The first row with a bit set at or beyond ``k`` (in its last byte), or None."""
    spare = 8 * rows.shape[1] - k
    if spare == 0 or not rows.shape[0]:
        return None
    bad = (rows[:, -1] >> np.uint8(8 - spare)) != 0
    return int(np.argmax(bad)) if bad.any() else None


class BitCountServer(Aggregator):
    """Per-group bit counts of bit rows. State: ``counts`` (``uint64[groups, k]``: reports
    of each group with each bit set) and ``reports`` (``uint64[groups]``). Subclasses give
    ``_shape(params) -> (groups, k)`` and, with several groups, ``group_column``."""

    #: The Reports column holding each report's group (None: one group).
    group_column: ClassVar[Optional[str]] = None
    _ingest_validates: ClassVar[bool] = True
    # bitvec_column_counts reads each row word and group once (checked, then counted) into
    # fresh counts: the template need not copy the batch first
    _reads_once: ClassVar[bool] = True

    def __init__(self, params: Any, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        groups, k = self._shape(params)
        self._st = _State(counts=np.zeros((groups, k), dtype=np.uint64), reports=np.zeros(groups, dtype=np.uint64))

    @classmethod
    def _shape(cls, params: Any) -> Tuple[int, int]:
        raise NotImplementedError

    @classmethod
    def _state_layout(cls, params: Any) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        groups, k = cls._shape(params)
        return {"counts": ((groups, k), "uint64"), "reports": ((groups,), "uint64")}

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State(counts=np.array(state["counts"], dtype=np.uint64),
                          reports=np.array(state["reports"], dtype=np.uint64))

    @property
    def n(self) -> int:
        """Number of reports aggregated."""
        return int(self._st["reports"].sum(dtype=np.uint64))

    @property
    def counts(self) -> np.ndarray:
        """Reports with each bit set, per group: ``uint64[groups, k]`` (a copy)."""
        return np.array(self._st["counts"])

    @property
    def group_reports(self) -> np.ndarray:
        """Reports per group: ``uint64[groups]`` (a copy)."""
        return np.array(self._st["reports"])

    def _groups_of(self, reports: Any) -> Optional[np.ndarray]:
        return None if self.group_column is None else np.asarray(getattr(reports, self.group_column))

    def _validate(self, reports: Any) -> None:
        groups, k = self._shape(self.params)
        rows = bit_rows(reports.bits, k)
        bad = first_padding_error(rows, k)
        if bad is not None:
            raise ReportError(f"bits beyond k={k} must be 0, got report {bad} with bits set there")
        column = self._groups_of(reports)
        if column is not None and column.size and int(column.max()) >= groups:
            at = int(np.argmax(column >= groups))
            raise ReportError(f"{self.group_column} must be < {groups}, got {int(column[at])} at index {at}")

    def _ingest(self, reports: Any) -> Delta:
        groups, k = self._shape(self.params)
        rows = reports.bits
        if rows.ndim != 2 or rows.shape[1] != row_bytes(k):
            self._validate(reports)
        column = self._groups_of(reports)
        # the kernel's counts cover the whole state, as one report's k bits do
        self._check_call(8 * groups * (k + 1) + (4 * len(reports) if column is not None else 0),
                         lambda: f"counting a batch of {len(reports)} bit rows into {groups} x {k} counts")
        counts, per_group, first_bad = _core.bitvec_column_counts(
            rows, k, None if column is None else np.ascontiguousarray(column, dtype=np.uint32), groups, self.threads)
        if first_bad < len(reports):
            self._validate(reports)  # names the bad report
            raise ReportError(f"report {first_bad} changed while it was being added")
        return (self._delta().add_dense("counts", counts, "adding the batch")
                .add_dense("reports", per_group, "adding the batch"))

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        counts, reports = state["counts"], state["reports"]
        if counts.size and bool((counts > reports[:, None]).any()):
            raise FormatError("a stored bit count exceeds its group's number of reports")
        if reports.size and float(reports.sum(dtype=np.float64)) >= 2.0**63:
            raise FormatError("stored report counts sum to 2^63 or more")
