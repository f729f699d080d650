"""TDG: the two-dimensional grids of Yang et al. (VLDB 2020), HDG without the 1-D grids
(:mod:`.hdg`): the users split into one group per attribute pair, each reporting its cell
of that pair's ``g2 x g2`` grid over the whole epsilon (GRR or OLH, see :mod:`._grid`). The server makes the grids
consistent and answers a query assuming the values within a cell are uniform."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Optional, Sequence, Tuple

from ..._base import Protocol, register_protocol
from ..._validate import check_int
from ._grid import (MAX_DOMAIN, GridClient, GridParams, GridReports, GridServer, hdg_granularities, pow2_granularity,
                    uniform_cuts)
from ._grid_hooks import (EXAMPLE_DOMAINS, EXAMPLE_NAMES, audit_hooks, cell_variance, example_records, grid_extremes,
                          replaced, wire_fields)

__all__ = ["TDGParams", "TDGReports", "TDGClient", "TDGServer"]


@dataclasses.dataclass(frozen=True)
class TDGParams(GridParams):
    """TDG.

    Attributes:
        epsilon: each user's budget for its whole record.
        domains: each attribute's domain size (values ``[0, d)``), 2 to 64 attributes.
        g2: cells per attribute of the 2-D grids (``min(g2, d)`` used).
        names: optional attribute names.
    """

    protocol: ClassVar[str] = "tdg"
    epsilon: float
    domains: Tuple[int, ...]
    g2: int
    names: Optional[Tuple[str, ...]] = None

    def __post_init__(self) -> None:
        self._check_common()
        object.__setattr__(self, "g2", check_int("g2", self.g2, 2, MAX_DOMAIN))
        self._check_grids()

    @classmethod
    def create(cls, epsilon: float, domains: Sequence[int], n: int, names: Optional[Sequence[str]] = None
               ) -> "TDGParams":
        """The paper's guideline ``g2`` for ``n`` users, rounded to a power of two."""
        domains = tuple(domains)
        _, g2 = hdg_granularities(epsilon, check_int("n", n, 1), len(domains), one_way=False)
        return cls(epsilon=epsilon, domains=domains, g2=pow2_granularity(g2, min(domains)),
                   names=None if names is None else tuple(names))

    def cuts_of(self) -> Tuple[Optional[Tuple[Tuple[int, ...], ...]], Tuple[Tuple[int, ...], ...]]:
        return None, tuple(uniform_cuts(d, min(self.g2, d)) for d in self.domains)


@dataclasses.dataclass(eq=False)
class TDGReports(GridReports):
    protocol: ClassVar[str] = "tdg"


class TDGClient(GridClient):
    """TDG client (see :class:`._grid.GridClient`)."""

    reports_type: ClassVar[Any] = TDGReports


class TDGServer(GridServer):
    """TDG server (see :class:`._grid.GridServer`)."""

    protocol: ClassVar[str] = "tdg"
    params_type: ClassVar[type] = TDGParams
    reports_type: ClassVar[Optional[type]] = TDGReports


def _small(epsilon: float, **changes: Any) -> TDGParams:
    return TDGParams(**{"epsilon": epsilon, "domains": (2, 2), "g2": 2, **changes})


register_protocol(Protocol(
    "tdg", TDGParams, TDGReports, TDGServer, TDGClient, inputs="records",
    example=lambda: (TDGParams(epsilon=1.5, domains=EXAMPLE_DOMAINS, g2=4, names=EXAMPLE_NAMES), example_records()),
    extremes=grid_extremes(lambda p: replaced(p, domains=(2,) * len(p.domains), g2=2),
                           lambda p: replaced(p, domains=(4096, 4096), g2=256, names=None)),
    wire_fields=wire_fields, variance=cell_variance, audit=audit_hooks(_small)))
