"""A minimal protocol used as a test double for the generic scale-out layers (Arrow,
wire, Dask, checkpointed aggregation, the contract tests), independent of the real
protocol families. Not a private protocol: the client sends its value unchanged.

It has two columns of different kinds (an unsigned value ``y < m`` and a sign in
{-1, +1}, sent through a codebook) and two state arrays, to exercise the generic code.
Registered under the id ``"toy-count"`` when imported.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ldpfast._base import Aggregator, ClientBase, Params, Protocol, Reports, _State, register_protocol
from ldpfast.errors import FormatError, ParameterError, ReportError

PROTOCOL_ID = "toy-count"


@dataclasses.dataclass(frozen=True)
class ToyParams(Params):
    protocol = PROTOCOL_ID
    m: int

    def __post_init__(self):
        if not isinstance(self.m, int) or isinstance(self.m, bool) or not 2 <= self.m <= 2**20:
            raise ParameterError(f"m must be an int in [2, 2**20], got {self.m!r}")


@dataclasses.dataclass
class ToyReports(Reports):
    protocol = PROTOCOL_ID
    column_types = {"y": ("uint64", 1), "s": ("int8", 1)}
    y: np.ndarray
    s: np.ndarray

    def __post_init__(self):
        if self.y.dtype != np.uint64 or self.s.dtype != np.int8:
            raise ReportError(f"y must be uint64 and s int8, got {self.y.dtype} and {self.s.dtype}")
        self._check_lengths()

    @classmethod
    def from_columns(cls, columns, params=None):
        y, s = np.asarray(columns["y"]), np.asarray(columns["s"])
        if y.dtype.kind not in "iu" or s.dtype.kind not in "iu":
            raise ReportError("toy columns must be integers")
        return cls(y=y.astype(np.uint64), s=s.astype(np.int8))

    @classmethod
    def wire_fields(cls, params):
        m_bits = (params.m - 1).bit_length()
        return [("y", m_bits), ("s", 1, (-1, 1))]


class ToyClient(ClientBase):
    def perturb(self, values) -> ToyReports:
        values = np.asarray(values, dtype=np.uint64)
        signs = np.where(self._keys.generator().random(len(values)) < 0.5, -1, 1).astype(np.int8)
        return ToyReports(y=values, s=signs)


class ToyServer(Aggregator):
    protocol = PROTOCOL_ID
    params_type = ToyParams

    def __init__(self, params: ToyParams):
        super().__init__(params)
        self._st = _State(counts=np.zeros(params.m, np.int64), signs=np.zeros(2, np.int64))

    def _validate(self, reports: ToyReports) -> None:
        if len(reports) and int(reports.y.max()) >= self.params.m:
            raise ReportError(f"y must be < m={self.params.m}, got {int(reports.y.max())}")
        if not np.isin(reports.s, (-1, 1)).all():
            raise ReportError("s must be -1 or +1")

    def _ingest(self, reports: ToyReports):
        return {"counts": self._st["counts"] + np.bincount(reports.y.astype(np.intp), minlength=self.params.m),
                "signs": self._st["signs"] + np.bincount((reports.s > 0).astype(np.intp), minlength=2)}

    def _check_state(self, state):
        super()._check_state(state)
        if any(np.any(array < 0) for array in state.values()):
            raise FormatError("stored counts must be non-negative")

    @property
    def n(self) -> int:
        return int(self._st["counts"].sum())

    def estimate(self, candidates=None):
        counts = self._st["counts"]
        freq = counts / max(int(counts.sum()), 1)
        return freq if candidates is None else freq[np.asarray(candidates, dtype=np.intp)]


def _example():
    params = ToyParams(m=37)
    values = np.random.default_rng(5).integers(0, 37, size=3000)
    return params, values


PROTOCOL = register_protocol(Protocol(PROTOCOL_ID, ToyParams, ToyReports, ToyServer, ToyClient,
                                      example=_example,
                                      default_candidates=lambda server: np.arange(server.params.m)))
