"""nPCMS: ``L`` independent Apple Count-Mean Sketch reports per user, the "n x CMS"
baseline of [PS]'s reference code (R2 ``n_pcms_client``/``n_pcms_server``; [PS] compares it
with Multi-PCMS in its "nCMS vs multiCMS" experiment).

Each user splits the budget over ``L`` slots (``eps/L`` each, so the report is eps-LDP by
composition). Slot ``s`` carries one of the user's items, or nothing when the set has fewer
than ``L`` items: the slot picks a row ``j`` uniformly from the ``K`` public hashes and sends
the ``M``-vector that is ``+1`` at ``H_j(item)`` and ``-1`` elsewhere (all ``-1`` for an
empty slot), each entry flipped with probability ``1/(1 + e^(eps/(2L)))`` (Apple's CMS, a
one-hot vector differs in two entries). The server adds ``(c/2) v + 1/2`` with
``c = (e^(eps/(2L)) + 1)/(e^(eps/(2L)) - 1)`` into row ``j`` and estimates the count of
``x`` as ``sum_k Sum[k, H_k(x)]`` (R2's ``(1/K) sum_k M[k, H_k(x)]`` with its ``M = K (.)``):
each slot contributes ``1[H_j(item) = H_j(x)]`` in expectation, so the estimate is biased
upward by the collisions of the other items (no correction, as in R2).

Choices: R2 hashes the string of the whole set in every slot (a bug: every slot of a user
lands in the same cell); here each slot hashes its own item. R2 sends every item of a
set larger than ``L`` and reads only the first ``L``; here a set larger than ``L`` sends a
uniformly chosen ``L`` of its items, so such users' items are under-counted by ``L/|S|``.
``L`` defaults to R2's 78.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from ... import _core
from ..._aggregator import _exact_sum
from ..._base import Aggregator, ClientBase, Delta, Protocol, register_protocol
from ..._delta import _State
from ..._validate import (check_array, check_below, check_bits, check_int, probability_threshold, rr_threshold)
from ...errors import FormatError, ParameterError, ReportError
from ..._base import Reports as _ReportsBase
from ._sets import SetsLike, SketchParams, as_sets
from ...theory.hadamard import c_eps
from ..._base import AuditHooks
from ..._budget import effective, rr_loss, split
from ...audit import Plan, set_inputs, support_events
from ...estimates import PLUG_IN
from ...uncertainty import PlugIn
from .._aliases import deprecated_names
from .._registration import edges, sketch_simulation

__all__ = ["NPCMSParams", "NPCMSReports", "NPCMSClient", "NPCMSServer"]

_KEY_RANGE = 1 << 62
_CHUNK_BITS = 1 << 22


@dataclasses.dataclass(frozen=True)
class NPCMSParams(SketchParams):
    """nPCMS parameters: :class:`ldpfast.protocols.sets.privsketch.SketchParams` (``epsilon``, ``d``, ``K``,
    ``M``, the public hashes; build with :meth:`create`) plus ``L``, the slots per user
    (``1 <= L <= 4096``)."""

    protocol: ClassVar[str] = "npcms"

    L: int = 78

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "L", check_int("L", self.L, 1, 4096))
        _ = self.flip_threshold  # the binary sampler's range: raises ParameterError naming epsilon

    @property
    def entry_epsilon(self) -> float:
        """Budget of every entry: ``eps/(2L)`` rounded down (:func:`ldpfast._budget.split`):
        the ``2L`` entries in which two inputs differ never spend more than ``epsilon``."""
        return split(self.epsilon, 2 * self.L)

    @property
    def flip_probability(self) -> float:
        """Per entry: ``1/(1 + e^(eps/(2L)))``."""
        return 1.0 / (1.0 + math.exp(self.entry_epsilon))

    @property
    def flip_threshold(self) -> int:
        """64-bit flip threshold of every entry (:func:`ldpfast._validate.rr_threshold` with
        budget :attr:`entry_epsilon`: the effective epsilon never exceeds ``epsilon``)."""
        return rr_threshold(self.entry_epsilon, 2, name="epsilon/(2L) (the per-entry budget)")

    @property
    def c(self) -> float:
        """Decoding constant ``(e^(eps/(2L)) + 1)/(e^(eps/(2L)) - 1)``."""
        return c_eps(self.entry_epsilon)

    @property
    def communication_bits(self) -> int:
        """``L (M + ceil(log2 K))`` bits per user."""
        return self.L * (self.M + (self.K - 1).bit_length())


@dataclasses.dataclass
class NPCMSReports(_ReportsBase):
    """nPCMS reports: the slots' rows ``rows`` (uint16, shape (n, L)) and vectors ``bits``
    (int8 +-1, shape (n, L, M))."""

    protocol: ClassVar[str] = "npcms"
    column_types: ClassVar = {"rows": ("uint16", 2), "bits": ("int8", 3)}

    rows: np.ndarray
    bits: np.ndarray

    def __post_init__(self) -> None:
        self.rows = check_array("rows", self.rows, np.uint16, 2)
        self.bits = check_array("bits", self.bits, np.int8, 3)
        self._check_lengths()

    @classmethod
    def wire_fields(cls, params: Any) -> Sequence[Tuple[Any, ...]]:
        """Each slot's row and ``M`` bits: ``L (ceil(log2 K) + M)`` bits."""
        from ..._base import WireField, bits_for

        return [WireField("rows", bits_for(params.K), dtype="uint16", shape=(params.L,)),
                WireField("bits", 1, (-1, 1), "int8", (params.L, params.M))]


def _uniform(key: bytes, count: int, size: int, threads: int) -> np.ndarray:
    zeros = np.zeros(count, dtype=np.uint64)
    if size == 1:
        return zeros
    return _core.randomized_response(key, zeros, size, probability_threshold((size - 1) / size), threads)


class NPCMSClient(ClientBase):
    """nPCMS user side. ``rng=None`` (default) uses OS entropy; a seed is for simulation only."""

    params: NPCMSParams

    def _slots(self, offsets: np.ndarray, items: np.ndarray) -> np.ndarray:
        """``(n, L)`` int64: each user's items (a uniform ``L`` of them for larger sets),
        then ``-1`` for the empty slots."""
        p = self.params
        n = offsets.size - 1
        sizes = np.diff(offsets)
        slots = np.full((n, p.L), -1, dtype=np.int64)
        user = np.repeat(np.arange(n), sizes)
        # rank every item of a user by a uniform 62-bit key and keep the L smallest ranks
        keys = _uniform(self._keys.key(), items.size, _KEY_RANGE, self.threads)
        order = np.lexsort((keys, user))
        rank = np.empty(items.size, dtype=np.int64)
        rank[order] = np.arange(items.size) - np.repeat(offsets[:-1], sizes)
        keep = rank < p.L
        slots[user[keep], rank[keep]] = items[keep].astype(np.int64)
        return slots

    def perturb(self, sets: SetsLike) -> NPCMSReports:
        """NPCMSReports for a batch of users (``sets``: see :func:`ldpfast.protocols.sets.privsketch.as_sets`)."""
        p = self.params
        offsets, items = as_sets(sets, p.d)
        slots = self._slots(offsets, items)
        n = slots.shape[0]
        rows = _uniform(self._keys.key(), n * p.L, p.K, self.threads).astype(np.int64)
        truth = -np.ones((n * p.L, p.M), dtype=np.int8)
        real = np.flatnonzero(slots.ravel() >= 0)
        if real.size:
            cells = p.hash(slots.ravel()[real].astype(np.uint64))          # (real, K)
            truth[real, cells[np.arange(real.size), rows[real]].astype(np.int64)] = 1
        flat = truth.reshape(-1)
        threshold = p.flip_threshold
        for start in range(0, flat.size, _CHUNK_BITS):  # bounds the 16 bytes per bit the sampler uses
            stop = min(flat.size, start + _CHUNK_BITS)
            flips = _core.randomized_response(self._keys.key(), np.zeros(stop - start, dtype=np.uint64), 2,
                                              threshold, self.threads)
            flat[start:stop] *= (1 - 2 * flips.astype(np.int8)).astype(np.int8)
        return NPCMSReports(rows=rows.reshape(n, p.L).astype(np.uint16), bits=truth.reshape(n, p.L, p.M))


class NPCMSServer(Aggregator):
    """nPCMS collector: ``sums`` (K x M, the +-1 entries received per cell), ``rows``
    (slots per row) and ``n`` (users)."""

    protocol: ClassVar[str] = "npcms"
    params_type: ClassVar[type] = NPCMSParams
    reports_type: ClassVar[type] = NPCMSReports
    params: NPCMSParams

    def __init__(self, params: NPCMSParams):
        super().__init__(params)
        self._st = _State(n=np.zeros(1, dtype=np.int64), rows=np.zeros(params.K, dtype=np.int64),
                          sums=np.zeros((params.K, params.M), dtype=np.int64))

    @classmethod
    def _state_layout(cls, params: Any) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        return {"n": ((1,), "int64"), "rows": ((params.K,), "int64"), "sums": ((params.K, params.M), "int64")}

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    # -- aggregation (the template is Aggregator.update / merge) -------------------------
    def _validate(self, reports: NPCMSReports) -> None:
        p = self.params
        if reports.rows.shape[1] != p.L:
            raise ReportError(f"rows must have shape (n, L={p.L}), got {reports.rows.shape}")
        if reports.bits.shape[1:] != (p.L, p.M):
            raise ReportError(f"bits must have shape (n, {p.L}, {p.M}), got {reports.bits.shape}")
        check_below(reports.rows, p.K, "rows", label="K")
        check_bits("bits", reports.bits)

    def _ingest(self, reports: NPCMSReports) -> Delta:
        p = self.params
        rows = reports.rows.reshape(-1).astype(np.int64)
        bits = reports.bits.reshape(-1, p.M)
        sums = np.zeros_like(self._st["sums"])  # K x M: one row of the sketch per value of rows
        for k in range(p.K):
            sums[k] = bits[rows == k].sum(axis=0, dtype=np.int64)
        return self._delta().add("sums", sums).add_counts("rows", rows).add("n", [len(reports)])

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """``sum_k Sum[k, H_k(x)] / n`` (counts with ``counts=True``) for ``candidates``
        (default all of ``[0, d)``); biased upward by collisions, as in R2."""
        self._check_query(candidates, 16 * self.params.K + 24, self.params.d, "an nPCMS query")
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")
        p = self.params
        st = self._st
        decoded = p.c / 2.0 * st["sums"] + st["rows"][:, None] / 2.0
        count: np.ndarray = decoded.ravel()[p.query_cells(candidates)].sum(axis=1)
        return count if counts else count / self.n

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        n, rows, sums = int(state["n"][0]), state["rows"], state["sums"]
        if n < 0 or np.any(rows < 0) or _exact_sum(rows) != n * self.params.L:
            raise FormatError("stored row counts do not add up to L times the number of users")
        # each slot sent to row k adds +-1 to every one of the row's M cells
        if np.any(np.abs(sums.astype(np.float64)) > rows[:, None]) or np.any((sums - rows[:, None]) % 2):
            raise FormatError("stored sums do not fit the stored row counts")

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State(n=np.array(state["n"], dtype=np.int64), rows=np.array(state["rows"], dtype=np.int64),
                          sums=np.array(state["sums"], dtype=np.int64))


def _example() -> Tuple[NPCMSParams, List[List[int]]]:
    rng = np.random.default_rng(2)
    sets = [sorted(rng.choice(60, size=int(rng.integers(0, 5)), replace=False).tolist()) for _ in range(800)]
    return NPCMSParams.create(epsilon=2.0, d=60, K=2, M=8, seed=1, L=3), sets


def _audit_plan(params: NPCMSParams) -> Plan:
    if params.L != 1:
        raise ParameterError(f"the nPCMS audit plan needs L = 1 (one slot carries the whole budget), got {params.L}")
    cells = params.cells(np.arange(params.d, dtype=np.uint64)).astype(np.int64)
    other = int(np.flatnonzero(np.any(cells != cells[0], axis=1))[0])
    items = (0, other)

    def onehot(reports: NPCMSReports, w: int) -> np.ndarray:
        rows = reports.rows.astype(np.int64)                      # (n, L)
        want = -np.ones(reports.bits.shape, dtype=np.int8)
        cell = cells[items[w]][rows[:, 0]] - rows[:, 0] * params.M
        want[np.arange(len(rows)), 0, cell] = 1
        match: np.ndarray = np.all(reports.bits.reshape(len(rows), -1) == want.reshape(len(rows), -1), axis=1)
        return match
    return Plan(set_inputs([0], [other]), support_events(onehot, 0, 1),
                ("bits = one-hot(x0) != one-hot(x1)", "bits = one-hot(x1) != one-hot(x0)"))


def _effective_epsilon(params: NPCMSParams) -> float:
    # L slots, each a one-hot vector whose two differing entries flip independently
    return effective(2 * params.L * rr_loss(params.flip_threshold, 2))


def _variance(server: NPCMSServer, candidates: np.ndarray) -> PlugIn:
    # Per user, sum over its L slots of (c v + 1)/2 at x's cell of the slot's row: each slot
    # adds RR noise of variance (c^2 - 1)/4 and an indicator of mean pi (its item lands in
    # x's cell); when no set exceeds L items the indicators are independent, so a user's
    # variance is L (c^2 - 1)/4 + sum pi (1 - pi) <= L (c^2 - 1)/4 + E[its count], and the
    # average over users gives [L (c^2 - 1)/4 + mu]/n at the estimate's mean mu (derived here).
    p, n = server.params, server.n
    noise = p.L * (p.c * p.c - 1.0) / 4.0
    return PlugIn(lambda f: (noise + np.asarray(f, dtype=np.float64)) / n, len(candidates),
                  f"{PLUG_IN} ([L (c^2 - 1)/4 + mu]/n, derived in protocols.sets.npcms._variance: exact up to "
                  "sum pi^2/n^2 when no set exceeds L items, each larger set adding at most mu/n more)",
                  "mu: the expected number of a user's L slots that fall in x's cell of their row, averaged "
                  "over the users (f plus the collisions of the other items when no set exceeds L items; a "
                  "larger set counts x with probability L/|S|)")


register_protocol(Protocol(
    "npcms", NPCMSParams, NPCMSReports, NPCMSServer, NPCMSClient, example=_example, inputs="sets", variance=_variance,
    extremes=edges(d=(1, 2**64), L=(1, 4096)),
    simulations=sketch_simulation("npcms", "nPCMS",
                                  "L = 78 Apple CMS reports per user with eps/L each (R2's n x CMS baseline)"),
    audit=AuditHooks(lambda e, **kw: NPCMSParams.create(epsilon=e, d=64, K=1, M=2, seed=1, L=1, **kw), _audit_plan,
                     _effective_epsilon)))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "npcms", {"Params": NPCMSParams, "Client": NPCMSClient,
                                                      "Server": NPCMSServer, "Reports": NPCMSReports})
