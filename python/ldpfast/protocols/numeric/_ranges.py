"""Range queries, frequencies and quantiles from the level estimates of a tree of intervals,
with closed-form standard errors (shared by :mod:`.hierarchy` and :mod:`.ahead`)."""

from __future__ import annotations

import dataclasses
from statistics import NormalDist
from typing import Any, List, Sequence, Tuple

import numpy as np

from ..._validate import check_real
from ...errors import ParameterError
from ._levels import LevelOracle, partition_sampling_variance
from ._tree import Inference, Tree, answer, cdf_quantiles

#: The most (query, node) pairs one call's standard errors may cost (each a few float64s).
MAX_PAIRS = 2**26


@dataclasses.dataclass(frozen=True)
class RangeAnswers:
    """Estimated shares of the users in ``[lo, hi]`` (both ends included) with standard errors."""

    lo: np.ndarray
    hi: np.ndarray
    values: np.ndarray
    std: np.ndarray

    def interval(self, alpha: float = 0.05) -> Tuple[np.ndarray, np.ndarray]:
        """Normal ``1 - alpha`` confidence intervals ``values -+ z std`` (the answers are sums
        of many independent reports' contributions)."""
        alpha = check_real("alpha", alpha, 0.0, 1.0)
        z = NormalDist().inv_cdf(1 - alpha / 2)
        return self.values - z * self.std, self.values + z * self.std


def query_bounds(lo: Any, hi: Any, d: int) -> Tuple[np.ndarray, np.ndarray]:
    """``lo`` and ``hi`` as int64 arrays of one shape with ``0 <= lo <= hi < d``
    (ParameterError naming the parameter and the first bad value)."""
    bounds = []
    for name, value in (("lo", lo), ("hi", hi)):
        arr = np.atleast_1d(np.asarray(value))
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise ParameterError(f"{name} must be integers (a 1-D array or a scalar), got {value!r}")
        arr = arr.astype(np.int64)
        bad = np.flatnonzero((arr < 0) | (arr >= d))
        if bad.size:
            raise ParameterError(f"{name} must be in [0, {d}), got {int(arr[bad[0]])}")
        bounds.append(arr)
    lo_arr, hi_arr = np.broadcast_arrays(*bounds) if bounds[0].size == 1 or bounds[1].size == 1 else bounds
    if lo_arr.shape != hi_arr.shape:
        raise ParameterError(f"lo and hi must have one length, got {lo_arr.size} and {hi_arr.size}")
    empty = np.flatnonzero(lo_arr > hi_arr)
    if empty.size:
        i = int(empty[0])
        raise ParameterError(f"the range [lo, hi] must not be empty, got lo={int(lo_arr[i])} > hi={int(hi_arr[i])}")
    return np.array(lo_arr), np.array(hi_arr)


class RangeEstimator:
    """Answers from one tree's level estimates: ``consistent`` (constrained inference, then
    sums of leaves) or direct (sums of the fewest whole nodes covering a range, as HIO).
    ``oracles[k]``, ``x[k]``, ``var[k]`` and ``counts[k]`` describe tree level ``k + 1``."""

    def __init__(self, tree: Tree, oracles: Sequence[LevelOracle], x: Sequence[np.ndarray],
                 var: Sequence[np.ndarray], counts: Sequence[int], consistent: bool = True):
        if sum(counts) == 0:
            raise ParameterError("cannot answer queries from zero reports")
        self.tree, self.oracles, self.counts, self.consistent = tree, list(oracles), list(counts), consistent
        self.x = [np.ones(1)] + [np.asarray(v) for v in x]
        self.inference = Inference(tree, x, var)
        #: Node frequencies at which the closed forms are evaluated (consistent, clipped).
        self.plug_in = [np.clip(h, 0.0, 1.0) for h in self.inference.levels]
        leaves = self.plug_in[-1]
        self.leaf_shares = leaves / leaves.sum() if leaves.sum() > 0 else np.full(leaves.size, 1 / leaves.size)
        self.ancestors = [tree.node_of(k, tree.starts[-1]) for k in range(tree.height + 1)]

    @property
    def leaves(self) -> np.ndarray:
        """The leaf intervals' estimated frequencies (consistent, or the last level's own)."""
        return self.inference.levels[-1] if self.consistent else self.x[-1]

    def _weights(self, lo: np.ndarray, hi: np.ndarray) -> Tuple[np.ndarray, List[np.ndarray]]:
        if self.consistent:
            leaf = self.tree.leaf_weights(lo, hi)
            return leaf @ self.inference.levels[-1], self.inference.coefficients(leaf)
        weights = self.tree.decomposition(lo, hi)
        return answer(self.x, weights), weights

    def _variance(self, c: Sequence[np.ndarray]) -> np.ndarray:
        total = np.zeros(c[0].shape[0])
        for k, oracle in enumerate(self.oracles, start=1):
            total += oracle.linear_variance(c[k], self.plug_in[k], self.counts[k - 1])
        per_value = [c[k][:, self.ancestors[k]] for k in range(1, len(c))]
        return np.asarray(total + partition_sampling_variance(per_value, self.leaf_shares, self.counts))

    def query(self, lo: Any, hi: Any) -> RangeAnswers:
        """The share of users with a value in ``[lo, hi]`` (arrays: one answer per pair)."""
        lo_arr, hi_arr = query_bounds(lo, hi, self.tree.d)
        nodes = sum(s.size for s in self.tree.starts)
        values, std = np.zeros(lo_arr.size), np.zeros(lo_arr.size)
        block = max(1, MAX_PAIRS // (8 * nodes))
        for start in range(0, lo_arr.size, block):
            part = slice(start, start + block)
            values[part], c = self._weights(lo_arr[part], hi_arr[part])
            std[part] = np.sqrt(self._variance(c))
        return RangeAnswers(lo_arr, hi_arr, values, std)

    def check_cost(self, queries: int) -> None:
        """Refuse standard errors of ``queries`` answers that would cost more than
        :data:`MAX_PAIRS` (query, node) pairs: each needs a pass over the whole tree."""
        nodes = sum(s.size for s in self.tree.starts)
        if queries * nodes > MAX_PAIRS * 16:
            raise ParameterError(f"candidates must be at most {MAX_PAIRS * 16 // nodes} values for standard errors "
                                 f"on a tree of {nodes} nodes, got {queries}")

    def quantiles(self, q: Any) -> np.ndarray:
        """The smallest values whose estimated CDF (from the consistent leaves, whatever
        ``consistent``) reaches each ``q`` in ``[0, 1]``."""
        arr = np.atleast_1d(np.asarray(q, dtype=np.float64))
        bad = np.flatnonzero(~((arr >= 0) & (arr <= 1)))
        if bad.size:
            raise ParameterError(f"q must be in [0, 1], got {arr[bad[0]]}")
        return cdf_quantiles(self.tree, self.inference.levels[-1], arr)
