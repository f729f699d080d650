"""Range queries from grid estimates (Yang et al., VLDB 2020, sections 4-5): the grids made
non-negative and consistent, a value-level matrix per attribute pair, and box answers.

1. **Norm-Sub** per grid: the cell frequencies moved by one common shift and clipped at 0 so
   they sum to 1 (the Euclidean projection onto the simplex, the fixed point of the paper's
   iteration).
2. **Consistency** per attribute: the grids holding it give its marginal over the intervals
   all of them share; their weighted mean (weights ``1/(C v)``, ``C`` the cells summed into
   an interval and ``v`` one cell estimate's variance in that grid, by its group's size and
   oracle: the sum's variance is about ``C v``; the paper's ``1/C`` for equal groups and
   oracles; a group without users weighs 0) replaces each grid's, spread equally over the
   summed cells. Steps 1 and 2
   alternate until no cell moves by more than ``1/n`` (at most ``ROUNDS``), Norm-Sub last.
3. **Matrices**: per pair ``(a, b)`` a ``d_a x d_b`` matrix of value frequencies. TDG spreads
   each 2-D cell uniformly over its values. HDG and the adaptive grid run the **weighted
   update** (iterative proportional fitting from the uniform matrix): the rows fitted to the
   1-D grid of ``a``, the columns to that of ``b``, the blocks to the 2-D cells, until the
   matrix moves by less than ``1/n`` (L1).
4. **Answers**: a 1-D query from the mean marginal of the matrices holding its attribute, a
   2-D query from its pair's matrix (prefix sums), a query over ``lambda >= 3`` attributes by
   the paper's estimation: the ``2^lambda`` table of "inside/outside each range" fitted
   (iterative proportional fitting) to every pair's 2 x 2 table from the 2-D and 1-D answers.
"""

from __future__ import annotations

import itertools
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

#: Most rounds of consistency and of each iterative fit (the paper's code: 100).
ROUNDS = 100


def norm_sub(table: np.ndarray) -> np.ndarray:
    """``max(x + delta, 0)`` with ``delta`` making the sum 1 (Norm-Sub's fixed point)."""
    flat = table.ravel()
    ordered = np.sort(flat)[::-1]
    tops = np.cumsum(ordered) - 1.0
    ranks = np.arange(1, flat.size + 1)
    last = int(np.flatnonzero(ordered - tops / ranks > 0)[-1])   # the largest entry always qualifies
    return np.asarray(np.maximum(table - tops[last] / ranks[last], 0.0))


def make_consistent(grids: List[Any], tables: List[np.ndarray], k: int, tolerance: float,
                    noise: np.ndarray) -> List[np.ndarray]:
    """Steps 1 and 2 (module docstring) on the grids' cell tables; ``noise``: per grid the
    variance of one cell's estimate (``inf``: no users)."""
    plans = []
    for a in range(k):
        members = [(j, grid.attributes.index(a)) for j, grid in enumerate(grids) if a in grid.attributes]
        if len(members) < 2:
            continue
        common = grids[members[0][0]].edges[members[0][1]]
        for j, axis in members[1:]:
            common = np.intersect1d(common, grids[j].edges[axis])
        plan = []
        for j, axis in members:
            edge = grids[j].edges[axis]
            interval = np.searchsorted(common, edge[:-1], side="right") - 1   # the common interval of each cell row
            cells = np.bincount(interval, minlength=common.size - 1) * (grids[j].cells // (edge.size - 1))
            plan.append((j, axis, interval, cells.astype(np.float64), 1.0 / (cells * noise[j])))
        plans.append((common.size - 1, plan))
    tables = [norm_sub(t) for t in tables]
    for _ in range(ROUNDS):
        before = [t.copy() for t in tables]
        for size, plan in plans:
            sums = []
            for j, axis, interval, _cells, _weight in plan:
                other = tuple(i for i in range(tables[j].ndim) if i != axis)
                sums.append(np.bincount(interval, tables[j].sum(axis=other), minlength=size))
            total = sum(weight for *_, weight in plan)
            if not np.all(total > 0):
                continue                                   # no grid of this attribute has users
            mean = sum(s * weight for s, (*_, weight) in zip(sums, plan)) / total
            for (j, axis, interval, cells, _weight), s in zip(plan, sums):
                shape = [1] * tables[j].ndim
                shape[axis] = -1
                tables[j] = tables[j] + ((mean - s) / cells)[interval].reshape(shape)
        tables = [norm_sub(t) for t in tables]
        if max(float(np.abs(t - b).max()) for t, b in zip(tables, before)) <= tolerance:
            break
    return tables


def block_sums(matrix: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return np.asarray(np.add.reduceat(np.add.reduceat(matrix, rows[:-1], axis=0), cols[:-1], axis=1))


def _scaled(total: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Factors taking ``total`` to ``target`` (1 where ``total`` is 0: nothing to scale)."""
    safe = np.where(total > 0, total, 1.0)
    return np.where(total > 0, target / safe, 1.0)


def fitted_matrix(rows: np.ndarray, cols: np.ndarray, table: np.ndarray, row_grid: Optional[Tuple[np.ndarray,
                  np.ndarray]], col_grid: Optional[Tuple[np.ndarray, np.ndarray]], tolerance: float) -> np.ndarray:
    """Step 3: the pair's value matrix (``rows``/``cols``: the 2-D grid's edges; ``row_grid``/
    ``col_grid``: ``(edges, table)`` of the 1-D grids, None for TDG's uniform spread)."""
    widths_r, widths_c = np.diff(rows), np.diff(cols)
    if row_grid is None or col_grid is None:
        area = np.outer(widths_r, widths_c).astype(np.float64)
        return np.repeat(np.repeat(table / area, widths_r, axis=0), widths_c, axis=1)
    matrix = np.full((int(rows[-1]), int(cols[-1])), 1.0 / (rows[-1] * cols[-1]))
    (edges_a, one_a), (edges_b, one_b) = row_grid, col_grid
    for _ in range(ROUNDS):
        before = matrix.copy()
        matrix *= np.repeat(_scaled(np.add.reduceat(matrix.sum(axis=1), edges_a[:-1]), one_a),
                            np.diff(edges_a))[:, None]
        matrix *= np.repeat(_scaled(np.add.reduceat(matrix.sum(axis=0), edges_b[:-1]), one_b),
                            np.diff(edges_b))[None, :]
        factor = _scaled(block_sums(matrix, rows, cols), table)
        matrix *= np.repeat(np.repeat(factor, widths_r, axis=0), widths_c, axis=1)
        matrix /= matrix.sum()
        if float(np.abs(matrix - before).sum()) < tolerance:
            break
    return matrix


class Answers:
    """Steps 1-3 done once for a server's state; :meth:`boxes` answers queries."""

    def __init__(self, params: Any, cells: np.ndarray, n: int, weighted: bool, noise: np.ndarray):
        grids = params.grids()
        offsets = params.offsets
        k = len(params.domains)
        self.domains = np.array(params.domains, dtype=np.int64)
        self.tolerance = 1.0 / n
        tables = [cells[offsets[j]:offsets[j + 1]].reshape(grid.shape) for j, grid in enumerate(grids)]
        self.tables = make_consistent(grids, tables, k, self.tolerance, noise)
        one_way = {grid.attributes[0]: (grid.edges[0], self.tables[j]) for j, grid in enumerate(grids)
                   if len(grid.attributes) == 1}
        self.prefix: Dict[Tuple[int, int], np.ndarray] = {}
        margins: List[List[np.ndarray]] = [[] for _ in range(k)]
        for j, grid in enumerate(grids):
            if len(grid.attributes) != 2:
                continue
            a, b = grid.attributes
            matrix = fitted_matrix(grid.edges[0], grid.edges[1], self.tables[j], one_way.get(a) if weighted else None,
                                   one_way.get(b) if weighted else None, self.tolerance)
            margins[a].append(matrix.sum(axis=1))
            margins[b].append(matrix.sum(axis=0))
            self.prefix[(a, b)] = np.pad(matrix.cumsum(axis=0).cumsum(axis=1), ((1, 0), (1, 0)))
        self.margins = [np.mean(m, axis=0) for m in margins]
        self.margin_prefix = [np.concatenate(([0.0], np.cumsum(m))) for m in self.margins]

    def marginal(self, attribute: int) -> np.ndarray:
        return np.array(self.margins[attribute], dtype=np.float64)

    def one(self, a: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        prefix = self.margin_prefix[a]
        return np.asarray(prefix[hi + 1] - prefix[lo])

    def two(self, a: int, b: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Queries ``lo``/``hi`` (columns a and b of ``(q, k)`` bounds) over the pair ``a < b``."""
        s = self.prefix[(a, b)]
        la, ha, lb, hb = lo[:, a], hi[:, a] + 1, lo[:, b], hi[:, b] + 1
        return np.asarray(s[ha, hb] - s[la, hb] - s[ha, lb] + s[la, lb])

    def boxes(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        out = np.ones(len(lo), dtype=np.float64)
        constrained = (lo > 0) | (hi < self.domains - 1)
        keys: Dict[Tuple[int, ...], List[int]] = {}
        for row, mask in enumerate(constrained):
            keys.setdefault(tuple(np.flatnonzero(mask).tolist()), []).append(row)
        for attrs, rows in keys.items():
            index = np.array(rows)
            if len(attrs) == 1:
                out[index] = self.one(attrs[0], lo[index, attrs[0]], hi[index, attrs[0]])
            elif len(attrs) == 2:
                out[index] = self.two(attrs[0], attrs[1], lo[index], hi[index])
            elif attrs:
                out[index] = self.many(attrs, lo[index], hi[index])
        return np.clip(out, 0.0, 1.0)

    def many(self, attrs: Tuple[int, ...], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Step 4 for ``lambda >= 3`` attributes: index 0 of each axis is "inside the range"."""
        q, lam = len(lo), len(attrs)
        singles = [self.one(a, lo[:, a], hi[:, a]) for a in attrs]
        targets = []
        for i, j in itertools.combinations(range(lam), 2):
            both = self.two(attrs[i], attrs[j], lo, hi)
            table = np.empty((q, 2, 2))                       # (q, in/out of i, in/out of j)
            table[:, 0, 0], table[:, 0, 1] = both, singles[i] - both
            table[:, 1, 0], table[:, 1, 1] = singles[j] - both, 1.0 - singles[i] - singles[j] + both
            table = np.clip(table, 0.0, None)
            table /= np.maximum(table.sum(axis=(1, 2), keepdims=True), 1e-300)
            targets.append((i, j, table))
        joint = np.full((q,) + (2,) * lam, 1.0 / 2 ** lam)
        for _ in range(ROUNDS):
            before = joint.copy()
            for i, j, table in targets:
                other = tuple(1 + m for m in range(lam) if m not in (i, j))
                margin = joint.sum(axis=other)
                shape = [q] + [1] * lam
                shape[1 + i], shape[1 + j] = 2, 2
                joint = joint * _scaled(margin, table).reshape(shape)
            if float(np.abs(joint - before).sum(axis=tuple(range(1, lam + 1))).max()) < self.tolerance:
                break
        return np.asarray(joint[(slice(None),) + (0,) * lam])
