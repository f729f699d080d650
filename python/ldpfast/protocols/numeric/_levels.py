"""The frequency oracle of each level of a tree of intervals, the reports the users of a
level send, and a server keeping them: shared by the hierarchical histogram
(:mod:`.hierarchy`) and AHEAD (:mod:`.ahead`).

A level of ``m`` nodes uses k-ary randomized response over its nodes (GRR) when
``m < 3 e^eps + 2`` and Optimal Local Hashing otherwise (the rule of Wang, Blocki, Li, Jha,
USENIX Security 2017, under which GRR has the smaller variance), as HIO and AHEAD choose.
A report is ``(z, a0, a1)``: GRR's symbol and ``a0 = a1 = 0``, or OLH's randomized hash
``z < g`` of the node and the user's pairwise-independent hash ``(a0, a1)`` over
``F_(2^64-59)`` (the C++ OCMS kernels, as :mod:`ldpfast.protocols.frequency.olh`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from ... import _core
from ..._base import Aggregator, Delta
from ..._delta import _State
from ..._validate import check_below, check_int, probability_threshold, rr_effective_epsilon, rr_threshold
from ...errors import FormatError, ParameterError, ReportError
from ...kernels.field import PRIME
from .._registration import theory
from ._tree import NO_INFORMATION

GRR, OLH = "grr", "olh"


def field() -> Any:
    return _core.Field.prime(PRIME)


@dataclasses.dataclass(frozen=True)
class LevelOracle:
    """The frequency oracle of one level: ``kind`` (GRR or OLH) over ``size`` nodes."""

    kind: str
    size: int
    epsilon: float

    @classmethod
    def choose(cls, epsilon: float, size: int) -> "LevelOracle":
        kind = GRR if size < 3 * math.exp(epsilon) + 2 else OLH
        return cls(kind, size, epsilon)

    @property
    def symbols(self) -> int:
        """Symbols of the randomized response: the nodes (GRR) or the hash range ``g`` (OLH)."""
        return max(self.size, 2) if self.kind == GRR else int(theory().olh_g(self.epsilon))

    @property
    def threshold(self) -> int:
        return rr_threshold(self.epsilon, self.symbols)

    @property
    def effective_epsilon(self) -> float:
        return rr_effective_epsilon(self.threshold, self.symbols)

    @property
    def probabilities(self) -> Tuple[float, float]:
        """``(p, q)``: the chance that a report supports the user's own node, and another one."""
        e, m = math.exp(self.epsilon), self.symbols
        return e / (e + m - 1), (1 / (e + m - 1) if self.kind == GRR else 1 / m)

    def perturb(self, key: bytes, nodes: np.ndarray, threads: int) -> Tuple[np.ndarray, ...]:
        if self.kind == GRR:
            z = _core.randomized_response(key, nodes, self.symbols, self.threshold, threads)
            zeros = np.zeros(nodes.size, dtype=np.uint64)
            return z, zeros, zeros.copy()
        return tuple(_core.ocms_perturb(field(), key, nodes, self.symbols, self.threshold, threads))

    def check(self, z: np.ndarray, a0: np.ndarray, a1: np.ndarray) -> None:
        """ReportError unless the reports fit this oracle."""
        check_below(z, self.symbols, "z", "in", ReportError)
        if self.kind == GRR:
            if a0.size and (a0.any() or a1.any()):
                raise ReportError("a0 and a1 must be 0 in reports of a GRR level")
        else:
            check_below(a0, PRIME, "a0", "field elements in", ReportError)
            check_below(a1, PRIME, "a1", "field elements in", ReportError)

    def support_counts(self, z: np.ndarray, a0: np.ndarray, a1: np.ndarray, threads: int) -> np.ndarray:
        """How many reports support each node."""
        if self.kind == GRR:
            return np.bincount(z.astype(np.int64), minlength=self.symbols)[:self.size].astype(np.float64)
        counts = np.zeros(self.size, dtype=np.uint64)
        if z.size:
            _core.ocms_count_list(field(), z, a0, a1, self.symbols, np.arange(self.size, dtype=np.uint64),
                                  counts, threads)
        return counts.astype(np.float64)

    def estimate(self, counts: np.ndarray, n: int) -> np.ndarray:
        """The unbiased frequencies ``(C/n - q)/(p - q)`` (zeros without reports)."""
        if n == 0:
            return np.zeros(self.size)
        p, q = self.probabilities
        return np.asarray((counts / n - q) / (p - q))

    def noise_variance(self, n: int) -> float:
        """The variance of a node's estimate at frequency 0, ``q(1-q)/(n (p-q)^2)``: the weight
        of the level in constrained inference (:data:`NO_INFORMATION` without reports)."""
        if n == 0:
            return NO_INFORMATION
        p, q = self.probabilities
        return q * (1 - q) / (n * (p - q) ** 2)

    def node_variance(self, f: Any, n: int) -> Any:
        """``Var`` of one node's estimate at frequency ``f`` (the diagonal of
        :meth:`linear_variance`): ``[q(1-q) + f (p-q)(1-p-q)]/(n (p-q)^2)`` for GRR,
        ``[q(1-q) + f (p(1-p) - q(1-q))]/(n (p-q)^2)`` for OLH."""
        p, q = self.probabilities
        slope = (p - q) * (1 - p - q) if self.kind == GRR else p * (1 - p) - q * (1 - q)
        return (q * (1 - q) + np.asarray(f, dtype=np.float64) * slope) / (n * (p - q) ** 2)

    def linear_variance(self, c: np.ndarray, f: np.ndarray, n: int) -> np.ndarray:
        """``Var(c[r] . xhat)`` per row of ``c``, for ``n`` reports of users whose nodes have
        frequencies ``f``. GRR: a user at node v reports y with probability p (y = v) or q,
        so ``E c_y = q A1 + (p-q) c_v`` and ``E c_y^2 = q A2 + (p-q) c_v^2`` (``A1 = sum c``,
        ``A2 = sum c^2``). OLH: a user's match indicators are Bernoulli(p) at its node and
        Bernoulli(q = 1/g) elsewhere, independent over the draw of a pairwise-independent hash."""
        if n == 0:
            return np.asarray((c * c).sum(axis=1) * NO_INFORMATION)
        p, q = self.probabilities
        f = np.clip(f, 0.0, 1.0)
        a2 = (c * c).sum(axis=1)
        if self.kind == GRR:
            mean = q * c.sum(axis=1)[:, None] + (p - q) * c
            per_user = (q * a2[:, None] + (p - q) * c * c - mean * mean) @ f
        else:
            per_user = q * (1 - q) * a2 + (c * c) @ f * (p * (1 - p) - q * (1 - q))
        return np.asarray(per_user / (n * (p - q) ** 2))


#: The report columns every level server keeps.
COLUMNS = ("level", "z", "a0", "a1")


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


class LevelServer(Aggregator):
    """Keeps the reports ``(level, z, a0, a1)`` in canonical order (sorted by every column)
    for bytes and exact merges, and gives each level's node estimates. Subclasses set
    ``oracles(params) -> [LevelOracle]`` (one per reported level) and how their report
    batches map to the four columns (:meth:`_columns_of`)."""

    _ingest_validates: ClassVar[bool] = True

    def __init__(self, params: Any, threads: int = 0):
        super().__init__(params)
        self.threads = check_int("threads", threads, 0)
        self._st = _State(chunks=(), canonical=True)

    # -- to implement --------------------------------------------------------------------
    def _oracles(self) -> Sequence[LevelOracle]:
        raise NotImplementedError

    def _columns_of(self, reports: Any) -> Tuple[np.ndarray, ...]:
        raise NotImplementedError

    # -- aggregation ---------------------------------------------------------------------
    def _check_reports(self, columns: Sequence[np.ndarray]) -> None:
        level, z, a0, a1 = columns
        oracles = self._oracles()
        check_below(level, len(oracles), "level", "in", ReportError)
        for k, oracle in enumerate(oracles):
            rows = level == k
            oracle.check(z[rows], a0[rows], a1[rows])

    def _validate(self, reports: Any) -> None:
        self._check_reports(self._columns_of(reports))

    def _keeps_batch(self) -> bool:
        return True

    def _ingest(self, reports: Any) -> Delta:
        chunk = tuple(_frozen(np.array(column)) for column in self._columns_of(reports))
        self._check_reports(chunk)
        return (self._delta().replace("chunks", self._st["chunks"] + (chunk,)).replace("canonical", False))

    def _merged(self, theirs: Mapping[str, Any]) -> Delta:
        mine = self._st
        return (self._delta().replace("chunks", mine["chunks"] + theirs["chunks"])
                .replace("canonical", mine["canonical"] and not theirs["chunks"]))

    def _reports(self) -> Tuple[np.ndarray, ...]:
        """The kept reports as one set of columns in canonical order (committed compacted)."""
        st = self._st
        chunks = st["chunks"]
        if not chunks:
            return (np.zeros(0, np.uint32),) + tuple(np.zeros(0, np.uint64) for _ in range(3))
        if len(chunks) > 1 or not st["canonical"]:
            n = sum(int(c[0].size) for c in chunks)
            self._check_call(2 * 28 * n + 8 * n, lambda: f"compacting the {n} reports of {self.protocol!r}")
            columns = [np.concatenate([c[i] for c in chunks]) for i in range(4)]
            order = np.lexsort(columns[::-1])
            self._st = _State(chunks=(tuple(_frozen(column[order]) for column in columns),), canonical=True)
        return tuple(self._st["chunks"][0])

    def _state(self) -> Dict[str, np.ndarray]:
        return dict(zip(COLUMNS, self._reports()))

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        columns = tuple(_frozen(np.array(state[name])) for name in COLUMNS)
        self._st = _State(chunks=(columns,) if columns[0].size else (), canonical=False)

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        if set(state) != set(COLUMNS):
            raise FormatError(f"stored state must hold the report columns {list(COLUMNS)}, got {sorted(state)}")
        dtypes = (np.uint32, np.uint64, np.uint64, np.uint64)
        for name, dtype in zip(COLUMNS, dtypes):
            if state[name].dtype != dtype or state[name].ndim != 1 or state[name].size != state["z"].size:
                raise FormatError(f"stored column {name!r} must be 1-D {np.dtype(dtype).name} of one length")
        try:
            self._check_reports([state[name] for name in COLUMNS])
        except (ReportError, ParameterError) as exc:
            raise FormatError(f"stored reports do not fit the parameters: {exc}") from None

    # -- estimates -----------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Reports aggregated."""
        return sum(int(chunk[0].size) for chunk in self._st["chunks"])

    def level_counts(self) -> List[int]:
        """Reports per level."""
        level = self._reports()[0]
        return [int(c) for c in np.bincount(level.astype(np.int64), minlength=len(self._oracles()))]

    def level_estimates(self) -> Tuple[List[np.ndarray], List[np.ndarray], List[int]]:
        """Per level: the unbiased node frequencies, their weights (noise variances) and the
        report counts."""
        level, z, a0, a1 = self._reports()
        bounds = np.searchsorted(level, np.arange(len(self._oracles()) + 1, dtype=np.uint32))
        x, var, counts = [], [], []
        for k, oracle in enumerate(self._oracles()):
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            support = oracle.support_counts(z[lo:hi], a0[lo:hi], a1[lo:hi], self.threads)
            x.append(oracle.estimate(support, hi - lo))
            var.append(np.full(oracle.size, oracle.noise_variance(hi - lo)))
            counts.append(hi - lo)
        return x, var, counts


def perturb_levels(oracles: Sequence[LevelOracle], keys: Any, nodes_of: Any, level: np.ndarray,
                   threads: int) -> Tuple[np.ndarray, ...]:
    """``(z, a0, a1)`` of users at ``level`` (index into ``oracles``) whose node at level k is
    ``nodes_of(k, rows)``: one kernel call per level, each with a fresh key."""
    n = level.size
    z, a0, a1 = (np.zeros(n, dtype=np.uint64) for _ in range(3))
    for k, oracle in enumerate(oracles):
        rows = np.flatnonzero(level == k)
        if rows.size:
            out = oracle.perturb(keys.key(), np.ascontiguousarray(nodes_of(k, rows), dtype=np.uint64), threads)
            z[rows], a0[rows], a1[rows] = out
    return z, a0, a1


def level_support(oracles: Sequence[LevelOracle],
                  node_of: Callable[[int, int], int]) -> Callable[[Any, Any], np.ndarray]:
    """``support(reports, w)`` of an audit plan: the report supports the node holding value
    ``w`` at the report's level k (``node_of(k, w)``): GRR's ``z`` is that node, or OLH's
    user hash of it is ``z``. Reports without a level column are all at level 0."""
    def support(reports: Any, w: Any) -> np.ndarray:
        level = getattr(reports, "level", np.zeros(len(reports.z), dtype=np.uint32)).astype(np.int64)
        hit = np.zeros(level.size, dtype=bool)
        for k, oracle in enumerate(oracles):
            rows = np.flatnonzero(level == k)
            node = np.full(rows.size, node_of(k, int(w)), dtype=np.uint64)
            if oracle.kind == GRR:
                hit[rows] = reports.z[rows] == node
            else:
                hit[rows] = _core.ocms_hash(field(), reports.a0[rows], reports.a1[rows], node,
                                            oracle.symbols) == reports.z[rows]
        return hit
    return support


def uniform_levels(key: bytes, n: int, levels: int, threads: int) -> np.ndarray:
    """``n`` uniform draws on ``[0, levels)`` from ChaCha20: randomized response of 0 moving
    to each other symbol with probability ``1/levels`` (independent of the values)."""
    zeros = np.zeros(n, dtype=np.uint64)
    if levels == 1:
        return zeros.astype(np.uint32)
    draws = _core.randomized_response(key, zeros, levels, probability_threshold((levels - 1) / levels), threads)
    return np.asarray(draws, dtype=np.uint32)


def partition_sampling_variance(per_value: Sequence[np.ndarray], f: np.ndarray, counts: Sequence[int]) -> np.ndarray:
    """The variance the random split of the ``n`` users into levels adds to ``sum_k mean_k``,
    ``mean_k`` the average of ``a_k(v)`` over the users of level k (a uniformly random
    subset of size ``n_k``): ``sum_k S_k^2 / n_k - S^2(sum_k a_k) / n`` (Neyman's formula for
    a completely randomized split; ``S^2`` a population variance with divisor ``n - 1``)."""
    n = sum(counts)
    if n < 2:
        return np.zeros(per_value[0].shape[0]) if per_value else np.zeros(0)

    def spread(a: np.ndarray) -> np.ndarray:
        mean = a @ f
        return np.asarray(((a * a) @ f - mean * mean) * n / (n - 1))
    total = sum(per_value)
    out = -spread(np.asarray(total)) / n
    for a, n_k in zip(per_value, counts):
        if n_k:
            out = out + spread(a) / n_k
    return np.asarray(np.maximum(out, 0.0))
