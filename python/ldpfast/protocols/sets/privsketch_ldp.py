"""The LDP-safe PrivSketch variant ``privsketch-ldp``, for users holding *sets* of items
from ``[0, d)``.

PrivSketch ([PS]: Li, Lee, Peng, Palpanas, Xue, DEXA 2023) sends an ordering matrix that
reveals the user's sketch support (:mod:`ldpfast.protocols.sets.privsketch`), so it is not LDP. This variant
keeps its sketch (``K`` public hash functions into ``M`` cells each) and its sampled cell with
one binary randomized-response bit, and drops the ordering matrix: the cell is chosen
independently of the data and only its bit depends on it, so the report is eps-LDP. The
collector decodes count-mean style (:meth:`SafeServer.estimate`)::

    params = lf.protocols.sets.privsketch_ldp.SafeParams.create(epsilon=2.0, d=10**4, K=4, M=128)
    reports = lf.protocols.sets.privsketch_ldp.SafeClient(params).perturb(sets)
    freq = lf.protocols.sets.privsketch_ldp.SafeServer(params).update(reports).estimate()
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Dict, List, Mapping, Tuple

import numpy as np

from ..._base import Aggregator, AuditHooks, Delta, Protocol, Reports as _ReportsBase, register_protocol
from ..._delta import _State
from ..._validate import check_array, check_below, check_bits
from ...errors import FormatError, ParameterError, ReportError
from ...estimates import PLUG_IN
from ...uncertainty import PlugIn
from ...theory.hadamard import c_eps
from ..._base import WireField, bits_for
from .._registration import edges
from .._registration import COUNT_MEAN, SIGN, random_sets, sketch_bits_plan, sketch_epsilon, sketch_simulation, theory
from ._sets import SetsLike, SketchClient, SketchParams

__all__ = ["SafeParams", "SafeReports", "SafeClient", "SafeServer"]


@dataclasses.dataclass(frozen=True)
class SafeParams(SketchParams):
    """The LDP-safe PrivSketch variant: one uniformly sampled cell, binary RR with eps, no
    ordering matrix. The cell is chosen independently of the data and only its bit is
    randomized, so the report is eps-LDP (binary
    randomized response: the bit is kept with probability e^eps/(e^eps + 1))."""

    protocol: ClassVar[str] = "privsketch-ldp"


@dataclasses.dataclass
class SafeReports(_ReportsBase):
    """LDP-safe variant reports: sampled ``k``, ``m`` (uint16) and the RR bit (int8 +-1)."""

    protocol: ClassVar[str] = "privsketch-ldp"
    column_types: ClassVar = {"k": ("uint16", 1), "m": ("uint16", 1), "bit": ("int8", 1)}
    k: np.ndarray
    m: np.ndarray
    bit: np.ndarray

    def __post_init__(self) -> None:
        self.k = check_array("k", self.k, np.uint16, 1, cast=True)
        self.m = check_array("m", self.m, np.uint16, 1, cast=True)
        self.bit = check_array("bit", self.bit, np.int8, 1, cast=True)
        self._check_lengths()


class SafeClient(SketchClient):
    """LDP-safe variant user side: one uniformly sampled cell of the sketch, binary RR with
    eps, no ordering matrix (eps-LDP)."""

    params_type: ClassVar[type] = SafeParams
    _sampling = 1
    _with_order = False
    params: SafeParams

    def perturb(self, sets: SetsLike) -> SafeReports:
        """Reports for a batch of users (``sets``: see :func:`as_sets`)."""
        cell, bits, _ = self._perturb(sets)
        return SafeReports(k=(cell // self.params.M).astype(np.uint16),
                           m=(cell % self.params.M).astype(np.uint16), bit=bits[:, 0])


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
    params: SafeParams

    def __init__(self, params: SafeParams):
        super().__init__(params)
        self._st = _State(n=np.zeros(1, dtype=np.int64), pos=np.zeros((params.K, params.M), dtype=np.int64),
                          neg=np.zeros((params.K, params.M), dtype=np.int64))

    @classmethod
    def _state_layout(cls, params: Any) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        shape = (params.K, params.M)
        return {"n": ((1,), "int64"), "pos": (shape, "int64"), "neg": (shape, "int64")}

    @property
    def _pos(self) -> np.ndarray:
        pos: np.ndarray = self._st["pos"]
        return pos

    @property
    def _neg(self) -> np.ndarray:
        neg: np.ndarray = self._st["neg"]
        return neg

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State({k: np.array(state[k], dtype=np.int64) for k in ("n", "pos", "neg")})

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        n, pos, neg = int(state["n"][0]), state["pos"], state["neg"]
        if n < 0 or int(pos.min()) < 0 or int(neg.min()) < 0 or float(pos.sum(dtype=np.float64) + neg.sum()) != n:
            raise FormatError(f"stored cell counts do not add up to the stored n = {n}")

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    def _validate(self, reports: SafeReports) -> None:
        check_below(reports.k, self.params.K, "k", label="K")
        check_below(reports.m, self.params.M, "m", label="M")
        check_bits("bit", reports.bit)

    def _ingest(self, reports: SafeReports) -> Delta:
        p = self.params
        cell = reports.k.astype(np.int64) * p.M + reports.m
        up = reports.bit > 0
        return self._delta().add_counts("pos", cell[up]).add_counts("neg", cell[~up]).add("n", [len(reports)])

    def _cell_sums(self) -> np.ndarray:
        """Per cell, the sum of the debiased bits ``(c b + 1)/2`` of the users that sampled it."""
        c = c_eps(self.params.epsilon)
        sums: np.ndarray = (c * (self._pos - self._neg) + (self._pos + self._neg)) / 2.0
        return sums

    def mean_fill(self) -> float:
        """Unbiased estimate of the average share of 1-cells in the users' sketches."""
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")
        return float(self._cell_sums().sum() / self.n)

    def estimate(self, candidates: Any = None, counts: bool = False, estimator: str = "mean") -> np.ndarray:
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
        self._check_query(candidates, 16 * self.params.K + 32, self.params.d, "a PrivSketch-LDP query")
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")
        p = self.params
        sums = self._cell_sums().ravel()[p.query_cells(candidates)]  # (D, K)
        est: np.ndarray
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


def _example() -> Tuple[SafeParams, List[List[int]]]:
    return SafeParams.create(epsilon=2.0, d=60, K=2, M=8, seed=1), random_sets(60)


def _safe_variance(server: SafeServer, candidates: np.ndarray) -> PlugIn:
    p, n = server.params, server.n
    return PlugIn(lambda f: theory().privsketch_ldp_variance(p.epsilon, n, f, fbar_sq=np.square(f), M=p.M, K=p.K),
                  len(candidates), f"{PLUG_IN} (theory.privsketch_ldp_variance, mean estimator, with "
                  "mean(fbar_i^2) >= fbar^2: an upper bound)", COUNT_MEAN)


register_protocol(Protocol(
    "privsketch-ldp", SafeParams, SafeReports, SafeServer, SafeClient, extremes=edges(d=(1, 2**20)), example=_example,
    inputs="sets",
    # the sampled cell (k, m) and one bit
    wire_fields=lambda p: [WireField("k", bits_for(p.K), dtype="uint16"), WireField("m", bits_for(p.M), dtype="uint16"),
                           WireField("bit", 1, SIGN, "int8")],
    variance=_safe_variance,
    simulations=sketch_simulation("privsketch-ldp", "PrivSketch-LDP", "LDP-safe PrivSketch: no ordering matrix, "
                                  "one sampled cell, fill-corrected count-mean", estimator="mean-corrected"),
    audit=AuditHooks(lambda e, **kw: SafeParams.create(epsilon=e, d=64, K=2, M=4, seed=1, **kw), sketch_bits_plan,
                     sketch_epsilon)))
