"""Post-processing of noisy marginal tables (CALM, Zhang et al. CCS 2018, section 4.4, after
PriView, Qardaji et al. SIGMOD 2014): mutual consistency across overlapping marginals,
non-negativity (Norm-Sub), and the maximum-entropy reconstruction of a marginal that no
collected one contains.

A table is an ndarray with one axis per attribute of its marginal (attribute indices
ascending, the same order as its key).
"""

from __future__ import annotations

import itertools
from typing import Dict, List, Sequence, Tuple

import numpy as np

from ...postprocessing import norm_sub

__all__ = ["project", "make_consistent", "consistent_tables", "max_entropy"]

Key = Tuple[int, ...]
#: Rounds of consistency + Norm-Sub (CALM alternates them; each round moves the tables less).
ROUNDS = 20
#: Iterations of iterative proportional fitting in :func:`max_entropy`.
IPF_ROUNDS = 200


def project(table: np.ndarray, key: Key, onto: Key) -> np.ndarray:
    """``table`` (of marginal ``key``) summed onto the attributes ``onto`` (a subset)."""
    axes = tuple(i for i, a in enumerate(key) if a not in onto)
    return np.asarray(table.sum(axis=axes)) if axes else table


def _expand(values: np.ndarray, onto: Key, key: Key) -> np.ndarray:
    """``values`` (a table of ``onto``) shaped to broadcast over a table of ``key``."""
    return values.reshape([values.shape[onto.index(a)] if a in onto else 1 for a in key])


def _intersections(keys: Sequence[Key]) -> List[Key]:
    """Every attribute set that is the intersection of two or more marginals, smallest first
    (the empty set included)."""
    found = {tuple(sorted(set(a) & set(b))) for a, b in itertools.combinations(keys, 2)}
    while True:
        more = {tuple(sorted(set(s) & set(k))) for s in found for k in keys} - found
        if not more:
            return sorted(found, key=lambda s: (len(s), s))
        found |= more


def make_consistent(tables: Dict[Key, np.ndarray], weights: Dict[Key, float]) -> None:
    """Overall consistency, in place: for each attribute set ``A`` shared by several marginals,
    smallest first, their projections onto ``A`` are replaced by their weighted mean, each
    marginal moving every cell of ``A``'s cell by the same amount. The projection of ``M``
    sums ``|M|/|A|`` cells, so its variance is ``|M|/|A|`` times a cell's: the weights are
    ``weights[M] |A|/|M|`` (``weights[M]``: the inverse of a cell's variance). Sets are
    processed from the smallest, so later steps keep earlier sets consistent."""
    keys = list(tables)
    for subset in _intersections(keys):
        holders = [k for k in keys if set(subset) <= set(k)]
        if len(holders) < 2:
            continue
        sizes = {k: tables[k].size / max(1, project(tables[k], k, subset).size) for k in holders}
        projections = {k: project(tables[k], k, subset) for k in holders}
        w = np.array([weights[k] / sizes[k] for k in holders])
        mean = sum(wi * projections[k] for wi, k in zip(w, holders)) / w.sum()
        for k in holders:
            tables[k] = tables[k] + _expand((mean - projections[k]) / sizes[k], subset, k)


def consistent_tables(tables: Dict[Key, np.ndarray], weights: Dict[Key, float]) -> Dict[Key, np.ndarray]:
    """CALM's post-processing: consistency and Norm-Sub (every table non-negative, summing to
    1) alternated :data:`ROUNDS` times, ending with Norm-Sub, so the tables are non-negative
    and consistent up to the last Norm-Sub's change."""
    out = {k: np.array(v, dtype=np.float64) for k, v in tables.items()}
    for _ in range(ROUNDS):
        make_consistent(out, weights)
        before = {k: v.copy() for k, v in out.items()}
        for k, v in out.items():
            out[k] = norm_sub(v).reshape(v.shape)
        if max(float(np.abs(out[k] - before[k]).max()) for k in out) < 1e-12:
            break
    return out


def max_entropy(query: Key, domains: Sequence[int], tables: Dict[Key, np.ndarray]) -> np.ndarray:
    """The maximum-entropy table of ``query`` whose projections onto ``query``'s overlap with
    each collected marginal match that marginal's (iterative proportional fitting from the
    uniform table: Csiszar's I-projection, the paper's reconstruction)."""
    shape = [domains[a] for a in query]
    out = np.full(shape, 1.0 / float(np.prod(shape)))
    constraints = []
    for key, table in tables.items():
        shared = tuple(a for a in query if a in key)
        if shared:
            constraints.append((shared, project(table, key, shared)))
    for _ in range(IPF_ROUNDS):
        moved = 0.0
        for shared, target in constraints:
            current = project(out, query, shared)
            ratio = np.divide(target, current, out=np.zeros_like(target), where=current > 0)
            scaled = out * _expand(ratio, shared, query)
            moved = max(moved, float(np.abs(scaled - out).max()))
            out = scaled
        if moved < 1e-12:
            break
    return out
