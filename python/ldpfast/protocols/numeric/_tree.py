"""Trees of intervals over an ordered domain ``[0, d)`` and their constrained inference.

A tree is a list of levels; level 0 is the root ``[0, d)`` and each next level is a
partition of ``[0, d)`` that refines the previous one: a node is either split into its
children or carried down as itself (a single child). Splitting ``[s, e)`` cuts it into
pieces of width ``W / B``, ``W`` the smallest power of the branching ``B`` with ``W >= e - s``
and ``s`` a multiple of ``W`` (the nodes of a complete ``B``-ary tree over ``[0, B^L)``,
cut at ``d``). Every level but the root carries one unbiased estimate per node, with a
known variance; the root's frequency is 1.

Constrained inference (Hay, Rastogi, Miklau, Suciu, VLDB 2010; with unequal variances as
in Cormode, Kulkarni, Srivastava, VLDB 2019): bottom up, each node's estimate is averaged
with the sum of its children's, weighted by inverse variances; top down, each node's
children are shifted, in proportion to their variances, so that they sum to their parent
(the root to 1). The result is the least-squares (minimum-variance unbiased linear) fit of
the tree's estimates under the constraints, and stays linear in them, so the variance of
any linear answer is ``sum_level Var(c_level . x_level)`` with ``c`` from the adjoint of the
two passes (:meth:`Inference.coefficients`).
"""

from __future__ import annotations

from typing import List, Sequence

import numpy as np

from ...errors import ParameterError

#: Variance given to the nodes of a level no user reported on: they carry no information.
NO_INFORMATION = 1e100


def split_starts(starts: np.ndarray, d: int, branching: int, split: np.ndarray) -> np.ndarray:
    """The next level's starts: each node with ``split`` true and width > 1 cut into its
    children, the others carried down."""
    ends = np.append(starts[1:], d)
    pieces: List[np.ndarray] = []
    for s, e, cut in zip(starts.tolist(), ends.tolist(), split.tolist()):
        if not cut or e - s <= 1:
            pieces.append(np.array([s], dtype=np.int64))
            continue
        width = 1
        while width < e - s:                # the node's nominal width (ahead.AHEADParams checks s % width == 0)
            width *= branching
        pieces.append(np.arange(s, e, width // branching, dtype=np.int64))
    return np.concatenate(pieces)


def complete_levels(d: int, branching: int) -> List[np.ndarray]:
    """The starts of every level of the complete tree: nodes split until all have width 1."""
    levels = [np.zeros(1, dtype=np.int64)]
    while levels[-1].size < d:
        levels.append(split_starts(levels[-1], d, branching, np.ones(levels[-1].size, dtype=bool)))
    return levels


def complete_height(d: int, branching: int) -> int:
    """Levels below the root of the complete tree: ``ceil(log_B d)``."""
    height, width = 0, 1
    while width < d:
        width *= branching
        height += 1
    return height


class Tree:
    """Levels of interval starts (level 0: ``[0]``), each refining the previous one."""

    def __init__(self, d: int, levels: Sequence[np.ndarray]):
        self.d = d
        self.starts = [np.asarray(s, dtype=np.int64) for s in levels]
        self.ends = [np.append(s[1:], d) for s in self.starts]
        self.parents: List[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        for upper, lower in zip(self.starts[:-1], self.starts[1:]):
            parent = np.searchsorted(upper, lower, side="right") - 1
            if not np.all(np.isin(upper, lower)):
                raise ParameterError("every level of a tree must refine the one above it")
            self.parents.append(parent.astype(np.int64))
        # first child of each node: children of a node are consecutive
        self.first_child = [np.searchsorted(self.parents[k + 1], np.arange(self.starts[k].size))
                            for k in range(len(self.starts) - 1)]

    @property
    def height(self) -> int:
        return len(self.starts) - 1

    def node_of(self, level: int, values: np.ndarray) -> np.ndarray:
        """The level-``level`` node holding each value."""
        return np.searchsorted(self.starts[level], values.astype(np.int64), side="right") - 1

    def leaf_weights(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """``w[q, leaf]``: the share of each leaf interval inside ``[lo_q, hi_q]`` (1 for a
        leaf wholly inside; a partial leaf counts in proportion to its overlap, the
        uniformity assumption of a leaf wider than one value)."""
        s, e = self.starts[-1][None, :], self.ends[-1][None, :]
        overlap = np.minimum(e, hi[:, None] + 1) - np.maximum(s, lo[:, None])
        return np.asarray(np.clip(overlap, 0, None) / (e - s))

    def decomposition(self, lo: np.ndarray, hi: np.ndarray) -> List[np.ndarray]:
        """Per level, ``w[q, node]``: the fewest whole nodes covering ``[lo_q, hi_q]`` (a node
        inside the range whose parent is not), plus partial leaves by their overlap."""
        inside = [(s[None, :] >= lo[:, None]) & (e[None, :] <= hi[:, None] + 1)
                  for s, e in zip(self.starts, self.ends)]
        out = [inside[0].astype(np.float64)]
        for k in range(1, self.height + 1):
            out.append((inside[k] & ~inside[k - 1][:, self.parents[k]]).astype(np.float64))
        partial = self.leaf_weights(lo, hi)
        out[-1] = np.where(inside[-1], out[-1], partial) if self.height else out[-1]
        return out


class Inference:
    """Constrained inference on ``tree`` of the level estimates ``x[k]`` (k >= 1) with
    per-node variances ``var[k]`` (the weights; any positive weights keep the result
    unbiased, inverse variances make it the least-squares fit)."""

    def __init__(self, tree: Tree, x: Sequence[np.ndarray], var: Sequence[np.ndarray]):
        self.tree = tree
        height = tree.height
        self.x = [np.ones(1)] + [np.asarray(v, dtype=np.float64) for v in x]
        self.var = [np.zeros(1)] + [np.asarray(v, dtype=np.float64) for v in var]
        z: List[np.ndarray] = [np.zeros(0)] * (height + 1)
        v: List[np.ndarray] = [np.zeros(0)] * (height + 1)
        self.alpha: List[np.ndarray] = [np.ones(1)] * (height + 1)
        self.child_sum: List[np.ndarray] = [np.zeros(0)] * (height + 1)
        self.child_var: List[np.ndarray] = [np.zeros(0)] * (height + 1)
        z[height], v[height] = self.x[height], self.var[height]
        for k in range(height - 1, -1, -1):
            first = tree.first_child[k]
            self.child_sum[k] = np.add.reduceat(z[k + 1], first)
            self.child_var[k] = np.add.reduceat(v[k + 1], first)
            own = self.var[k]
            self.alpha[k] = self.child_var[k] / (own + self.child_var[k])  # weight of the node's own estimate
            z[k] = self.alpha[k] * self.x[k] + (1 - self.alpha[k]) * self.child_sum[k]
            v[k] = self.alpha[k] * own
        self.beta = [np.zeros(1)] + [v[k] / self.child_var[k - 1][tree.parents[k]] for k in range(1, height + 1)]
        h = [np.ones(1)]
        for k in range(1, height + 1):
            gap = (h[k - 1] - self.child_sum[k - 1])[tree.parents[k]]
            h.append(z[k] + self.beta[k] * gap)
        #: The consistent estimates, per level (each node the sum of its children; root 1).
        self.levels = h

    def coefficients(self, leaf_weights: np.ndarray) -> List[np.ndarray]:
        """``c[k][q, node]`` with ``leaf_weights[q] . h_leaves = const + sum_k c[k][q] . x[k]``:
        the adjoint of the two passes."""
        tree, height = self.tree, self.tree.height
        rows = leaf_weights.shape[0]
        h_bar = [np.zeros((rows, s.size)) for s in tree.starts]
        z_bar = [np.zeros((rows, s.size)) for s in tree.starts]
        s_bar = [np.zeros((rows, s.size)) for s in tree.starts]
        h_bar[height] = np.array(leaf_weights, dtype=np.float64)
        for k in range(height, 0, -1):                    # the top-down pass, reversed
            z_bar[k] += h_bar[k]
            pushed = np.add.reduceat(self.beta[k] * h_bar[k], tree.first_child[k - 1], axis=1)
            h_bar[k - 1] += pushed
            s_bar[k - 1] -= pushed
        x_bar = [np.zeros((rows, s.size)) for s in tree.starts]
        for k in range(0, height):                        # the bottom-up pass, reversed
            if k:
                x_bar[k] += self.alpha[k] * z_bar[k]
                s_bar[k] += (1 - self.alpha[k]) * z_bar[k]
            z_bar[k + 1] += s_bar[k][:, tree.parents[k + 1]]
        x_bar[height] += z_bar[height]
        return x_bar


def answer(levels: Sequence[np.ndarray], weights: Sequence[np.ndarray], skip_root: bool = False) -> np.ndarray:
    """``sum_k weights[k] . levels[k]`` per query row."""
    start = 1 if skip_root else 0
    return np.asarray(sum((w @ x for w, x in zip(weights[start:], levels[start:])), np.zeros(weights[0].shape[0])))


def cdf_quantiles(tree: Tree, leaves: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The smallest values ``v`` whose estimated CDF ``F(v) >= q``: ``F(v)`` the estimated
    share of ``[0, v]`` (each leaf spread uniformly over its interval), made non-decreasing
    by a running maximum, so the quantiles are monotone in ``q``."""
    widths = tree.ends[-1] - tree.starts[-1]
    cdf = np.maximum.accumulate(np.cumsum(np.repeat(leaves / widths, widths)))
    return np.minimum(np.searchsorted(cdf, q - 1e-12, side="left"), tree.d - 1).astype(np.int64)
