"""The registration hooks TDG, HDG and the adaptive grid share: example records, extreme
parameters, wire fields, closed-form variance of the cell estimates and the audit plan."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, List, Tuple

import numpy as np

from ... import _core
from ..._base import AuditHooks, Params, WireField, bits_for
from ..._validate import rr_effective_epsilon
from ...estimates import PLUG_IN
from ...uncertainty import PlugIn
from .._hadamard_layout import prime_field
from .._registration import edges
from ._grid import GridParams, group_of_cells

#: The example's attributes: three, one of them of a domain not divisible by its cells.
EXAMPLE_DOMAINS = (8, 8, 6)
EXAMPLE_NAMES = ("age", "hours", "education")


def correlated_records(domains: Tuple[int, ...], n: int, rho: float = 0.8, seed: int = 3) -> np.ndarray:
    """Records of a correlated Gaussian (unit variances, correlation ``rho`` between every
    pair), each attribute mapped to ``[0, d)`` by cutting ``[-3, 3]`` into ``d`` equal bins
    (the tails clipped into the end bins)."""
    k = len(domains)
    cov = np.full((k, k), rho) + (1 - rho) * np.eye(k)
    z = np.random.default_rng(seed).multivariate_normal(np.zeros(k), cov, size=n)
    d = np.array(domains, dtype=np.float64)
    return np.clip(np.floor((z + 3.0) / 6.0 * d), 0, d - 1).astype(np.int64)


def example_records() -> np.ndarray:
    return correlated_records(EXAMPLE_DOMAINS, 3000)


def grid_extremes(small: Callable[[Any], Params], large: Callable[[Any], Params]) -> Callable[[Any], List[Any]]:
    """``Protocol.extremes``: the smallest and largest epsilon (:func:`edges`), and the example
    moved to the smallest domains (2 values, 1-2 cells each) and to large ones."""
    ends = edges()

    def extremes(params: Any) -> List[Any]:
        return [*ends(params), small(params), large(params)]
    return extremes


def wire_fields(params: Any) -> List[WireField]:
    return [WireField("group", bits_for(len(params.grids())), None, "uint32"),
            WireField("z", bits_for(int(params.hash_ranges.max()))), WireField("a0", 64), WireField("a1", 64)]


def cell_variance(server: Any, candidates: Any) -> PlugIn:
    """The closed form of :meth:`GridParams.cell_variance` per candidate cell (its group's users)."""
    p, n = server.params, server.n
    groups = group_of_cells(p, np.asarray(candidates, dtype=np.int64))
    users = server.group_users()[groups]
    return PlugIn(lambda f: p.cell_variance(groups, users, n, f), len(candidates),
                  f"{PLUG_IN} (GRR or OLH on the cell's group plus the group draw, GridParams.cell_variance); "
                  "range answers after consistency have no closed form")


def grid_plan(params: GridParams) -> Any:
    """Two records differing in every attribute (all zeros, all at the top of their domains):
    the report supports the cell of one in its group's grid and not that of the other."""
    from ...audit import Plan

    records = (np.zeros(len(params.domains), dtype=np.int64), np.array(params.domains, dtype=np.int64) - 1)
    cells = [np.array([grid.cell_of(r[None, :])[0] for grid in params.grids()], dtype=np.uint64) for r in records]

    def support(reports: Any, w: int) -> np.ndarray:
        group = reports.group.astype(np.intp)
        hit = np.zeros(len(group), dtype=bool)
        for j, m in enumerate(params.hash_ranges):
            mine = np.flatnonzero(group == j)
            x = np.full(mine.size, cells[w][j], dtype=np.uint64)
            hit[mine] = _core.ocms_hash(prime_field(), reports.a0[mine], reports.a1[mine], x, int(m)) == reports.z[mine]
        return hit

    def events(reports: Any) -> Tuple[np.ndarray, np.ndarray]:
        s0, s1 = support(reports, 0), support(reports, 1)
        return s0 & ~s1, s1 & ~s0
    return Plan(lambda i, n: np.tile(records[i], (n, 1)), events,
                ("H(cell of x0) = z != H(cell of x1)", "H(cell of x1) = z != H(cell of x0)"))


def audit_hooks(small: Callable[..., Params]) -> AuditHooks:
    return AuditHooks(small, grid_plan, lambda p: max(rr_effective_epsilon(t, int(m))
                                                      for t, m in zip(p.flip_thresholds, p.hash_ranges)))


def replaced(params: Any, **changes: Any) -> Any:
    return dataclasses.replace(params, **changes)
