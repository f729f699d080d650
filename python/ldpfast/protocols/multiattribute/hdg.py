"""HDG: the hybrid-dimensional grids of Yang et al. ("Answering Multi-Dimensional Range
Queries under Local Differential Privacy", VLDB 2020) for box queries over ``k`` numeric
attributes (records ``int64[n, k]``, attribute ``j`` pre-bucketized to ``[0, domains[j])``).

The users are split into ``k + k (k - 1)/2`` groups, one per grid: a 1-D grid of ``g1`` cells
per attribute and a 2-D grid of ``g2 x g2`` cells per attribute pair. Each user reports its
cell in its group's grid spending the whole epsilon (the users are split, not the budget),
with GRR or OLH, whichever has the lower variance for the grid's cells (:mod:`._grid`).
The server makes the grids non-negative and consistent, fits a value-level matrix per pair
to its 2-D grid and the two 1-D grids (the weighted update), and answers box queries from
those matrices (:mod:`._grid_answer`)::

    params = HDGParams.create(epsilon=1.0, domains=(64,) * 6, n=1_000_000)
    server = HDGServer(params).update(HDGClient(params).perturb(records))
    server.range({"a0": (10, 40), "a3": (0, 31)})
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Optional, Sequence, Tuple

from ..._base import Protocol, register_protocol
from ..._validate import check_int
from ._grid import (MAX_DOMAIN, GridClient, GridParams, GridReports, GridServer, hdg_granularities, pow2_granularity,
                    uniform_cuts)
from ._grid_hooks import (EXAMPLE_DOMAINS, EXAMPLE_NAMES, audit_hooks, cell_variance, example_records, grid_extremes,
                          replaced, wire_fields)

__all__ = ["HDGParams", "HDGReports", "HDGClient", "HDGServer"]


@dataclasses.dataclass(frozen=True)
class HDGParams(GridParams):
    """HDG.

    Attributes:
        epsilon: each user's budget for its whole record.
        domains: each attribute's domain size (values ``[0, d)``), 2 to 64 attributes.
        g1: cells per attribute of the 1-D grids (at most the domain: ``min(g1, d)`` used).
        g2: cells per attribute of the 2-D grids.
        names: optional attribute names (queries name attributes by them).
    """

    protocol: ClassVar[str] = "hdg"
    epsilon: float
    domains: Tuple[int, ...]
    g1: int
    g2: int
    names: Optional[Tuple[str, ...]] = None

    def __post_init__(self) -> None:
        self._check_common()
        object.__setattr__(self, "g1", check_int("g1", self.g1, 2, MAX_DOMAIN))
        object.__setattr__(self, "g2", check_int("g2", self.g2, 2, MAX_DOMAIN))
        self._check_grids()

    @classmethod
    def create(cls, epsilon: float, domains: Sequence[int], n: int, names: Optional[Sequence[str]] = None
               ) -> "HDGParams":
        """The paper's guideline granularities for ``n`` users, rounded to powers of two."""
        domains = tuple(domains)
        g1, g2 = hdg_granularities(epsilon, check_int("n", n, 1), len(domains), one_way=True)
        return cls(epsilon=epsilon, domains=domains, g1=pow2_granularity(g1, min(domains)),
                   g2=pow2_granularity(g2, min(domains)), names=None if names is None else tuple(names))

    def cuts_of(self) -> Tuple[Optional[Tuple[Tuple[int, ...], ...]], Tuple[Tuple[int, ...], ...]]:
        return (tuple(uniform_cuts(d, min(self.g1, d)) for d in self.domains),
                tuple(uniform_cuts(d, min(self.g2, d)) for d in self.domains))


@dataclasses.dataclass(eq=False)
class HDGReports(GridReports):
    protocol: ClassVar[str] = "hdg"


class HDGClient(GridClient):
    """HDG client (see :class:`._grid.GridClient`)."""

    reports_type: ClassVar[Any] = HDGReports


class HDGServer(GridServer):
    """HDG server (see :class:`._grid.GridServer`)."""

    protocol: ClassVar[str] = "hdg"
    params_type: ClassVar[type] = HDGParams
    reports_type: ClassVar[Optional[type]] = HDGReports


def _small(epsilon: float, **changes: Any) -> HDGParams:
    return HDGParams(**{"epsilon": epsilon, "domains": (2, 2), "g1": 2, "g2": 2, **changes})


register_protocol(Protocol(
    "hdg", HDGParams, HDGReports, HDGServer, HDGClient, inputs="records",
    example=lambda: (HDGParams(epsilon=0.5, domains=EXAMPLE_DOMAINS, g1=8, g2=2, names=EXAMPLE_NAMES),
                     example_records()),
    extremes=grid_extremes(lambda p: replaced(p, domains=(2,) * len(p.domains), g1=2, g2=2),
                           lambda p: replaced(p, domains=(4096, 4096), g1=4096, g2=256, names=None)),
    wire_fields=wire_fields, variance=cell_variance, audit=audit_hooks(_small)))
