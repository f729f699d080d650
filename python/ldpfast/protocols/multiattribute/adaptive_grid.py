"""An adaptive grid: HDG (:mod:`.hdg`) with data-dependent cells. Equal-width cells put
few cells where the users are and many where they are not; the error of a range answer
comes from the noise of the cells it covers and from the non-uniformity of the cells it cuts
through, which is largest in the dense cells. The adaptive grid cuts every attribute at
quantiles of an estimate of its distribution (equi-depth cells, mixed with equal-width ones
so that sparse tails keep some cells): each 1-D cell holds about ``1/g1`` of the users and
each 2-D row of cells about ``1/g2``, and every ``g1/g2``-th 1-D boundary is a 2-D one, so
the grids stay consistent on the 2-D intervals.

The estimate comes from users that reported before (a phase of HDG or TDG on a share of the
users, a previous collection): ``AdaptiveGridParams.plan(epsilon, domains, n, marginals)``
takes one estimated distribution per attribute (e.g. ``[first.marginal(a) for a in
range(k)]`` of a phase-1 server). The cuts are public parameters: they depend on the earlier
users' reports only through their privatized estimate (post-processing), and the users of
this phase spend their whole epsilon on their own record, as in HDG.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Optional, Sequence, Tuple

import numpy as np

from ..._base import Protocol, register_protocol
from ..._validate import check_int, check_real
from ...errors import ParameterError
from ._grid import (GridClient, GridParams, GridReports, GridServer, check_cuts, hdg_granularities, pow2_granularity,
                    uniform_cuts)
from ._grid_hooks import (EXAMPLE_DOMAINS, EXAMPLE_NAMES, audit_hooks, cell_variance, example_records, grid_extremes,
                          replaced, wire_fields)

__all__ = ["AdaptiveGridParams", "AdaptiveGridReports", "AdaptiveGridClient", "AdaptiveGridServer"]


@dataclasses.dataclass(frozen=True)
class AdaptiveGridParams(GridParams):
    """The adaptive grid.

    Attributes:
        epsilon: each user's budget for its whole record.
        domains: each attribute's domain size (values ``[0, d)``).
        cuts1: per attribute, the inner boundaries of its 1-D grid (strictly increasing in
            ``(0, d)``; cell ``i`` holds the values ``[c_i, c_(i+1))``).
        cuts2: per attribute, the inner boundaries of the 2-D grids it is in.
        names: optional attribute names.
    """

    protocol: ClassVar[str] = "adaptive-grid"
    epsilon: float
    domains: Tuple[int, ...]
    cuts1: Tuple[Tuple[int, ...], ...]
    cuts2: Tuple[Tuple[int, ...], ...]
    names: Optional[Tuple[str, ...]] = None

    def __post_init__(self) -> None:
        self._check_common()
        k = len(self.domains)
        for field in ("cuts1", "cuts2"):
            given = getattr(self, field)
            if isinstance(given, (str, bytes)) or not hasattr(given, "__iter__") or len(tuple(given)) != k:
                raise ParameterError(f"{field} must hold one tuple of boundaries per attribute ({k}), got {given!r}")
            object.__setattr__(self, field, tuple(check_cuts(f"{field}[{j}]", c, d)
                                                  for j, (c, d) in enumerate(zip(given, self.domains))))
        self._check_grids()

    @classmethod
    def plan(cls, epsilon: float, domains: Sequence[int], n: int, marginals: Sequence[Any],
             names: Optional[Sequence[str]] = None, uniform_share: float = 0.25) -> "AdaptiveGridParams":
        """Cuts for ``n`` users from estimated ``marginals`` (one distribution per attribute over
        its domain; negative entries count as 0): HDG's guideline granularities (powers of
        two), cells of equal mass under ``(1 - uniform_share) marginal + uniform_share / d``."""
        domains = tuple(domains)
        share = check_real("uniform_share", uniform_share, 0.0, 1.0, high_closed=True)
        if len(marginals) != len(domains):
            raise ParameterError(f"marginals must hold one distribution per attribute ({len(domains)}), "
                                 f"got {len(marginals)}")
        g1, g2 = hdg_granularities(epsilon, check_int("n", n, 1), len(domains), one_way=True)
        cuts1, cuts2 = [], []
        for j, (d, marginal) in enumerate(zip(domains, marginals)):
            m = np.clip(np.asarray(marginal, dtype=np.float64), 0.0, None)
            if m.shape != (d,) or not np.isfinite(m).all():
                raise ParameterError(f"marginals[{j}] must be {d} finite frequencies, got shape {m.shape}")
            fine = pow2_granularity(g1, d)
            step = max(1, fine // pow2_granularity(g2, d))
            mass = (1 - share) * m / max(m.sum(), 1e-300) + share / d
            cuts = equal_mass_cuts(mass, fine)
            cuts1.append(cuts)
            cuts2.append(cuts[step - 1::step])
        return cls(epsilon=epsilon, domains=domains, cuts1=tuple(cuts1), cuts2=tuple(cuts2),
                   names=None if names is None else tuple(names))

    def cuts_of(self) -> Tuple[Optional[Tuple[Tuple[int, ...], ...]], Tuple[Tuple[int, ...], ...]]:
        return self.cuts1, self.cuts2


def equal_mass_cuts(mass: np.ndarray, cells: int) -> Tuple[int, ...]:
    """Inner boundaries cutting ``mass`` (positive, over ``[0, d)``) into ``cells`` intervals of
    about equal mass (fewer where a single value holds more than one share; at least two)."""
    cumulative = np.cumsum(mass) / mass.sum()
    cuts = np.searchsorted(cumulative, np.arange(1, cells) / cells, side="left") + 1
    inner = tuple(int(c) for c in np.unique(cuts) if 0 < c < mass.size)
    return inner or (mass.size // 2,)           # one value holding nearly all: still two cells


@dataclasses.dataclass(eq=False)
class AdaptiveGridReports(GridReports):
    protocol: ClassVar[str] = "adaptive-grid"


class AdaptiveGridClient(GridClient):
    """Adaptive-grid client (see :class:`._grid.GridClient`)."""

    reports_type: ClassVar[Any] = AdaptiveGridReports


class AdaptiveGridServer(GridServer):
    """Adaptive-grid server (see :class:`._grid.GridServer`; HDG's post-processing)."""

    protocol: ClassVar[str] = "adaptive-grid"
    params_type: ClassVar[type] = AdaptiveGridParams
    reports_type: ClassVar[Optional[type]] = AdaptiveGridReports


def _uniform(epsilon: float, domains: Tuple[int, ...], g1: int, g2: int, **changes: Any) -> AdaptiveGridParams:
    return AdaptiveGridParams(**{"epsilon": epsilon, "domains": domains,
                                 "cuts1": tuple(uniform_cuts(d, min(g1, d)) for d in domains),
                                 "cuts2": tuple(uniform_cuts(d, min(g2, d)) for d in domains), **changes})


def _example() -> Tuple[AdaptiveGridParams, np.ndarray]:
    records = example_records()
    prior = [np.bincount(records[:300, j], minlength=d) for j, d in enumerate(EXAMPLE_DOMAINS)]
    return (AdaptiveGridParams.plan(1.5, EXAMPLE_DOMAINS, 3000, prior, names=EXAMPLE_NAMES), records)


register_protocol(Protocol(
    "adaptive-grid", AdaptiveGridParams, AdaptiveGridReports, AdaptiveGridServer, AdaptiveGridClient,
    inputs="records", example=_example,
    extremes=grid_extremes(lambda p: replaced(_uniform(p.epsilon, (2,) * len(p.domains), 2, 2), names=p.names),
                           lambda p: _uniform(p.epsilon, (4096, 4096), 4096, 256)),
    wire_fields=wire_fields, variance=cell_variance,
    audit=audit_hooks(lambda e, **kw: _uniform(e, (2, 2), 2, 2, **kw))))
