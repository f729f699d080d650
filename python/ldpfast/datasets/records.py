"""Records of several categorical attributes (the input of the record protocols,
:mod:`ldpfast.protocols.multiattribute`): correlated synthetic records and Adult's
categorical attributes."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Optional, Sequence, Tuple

import numpy as np

from .._validate import check_int
from ..errors import ParameterError
from .adult import ADULT_CATEGORICAL, load_adult

__all__ = ["RecordData", "correlated_records", "adult_records", "RECORD_DATA"]

#: The record data sets ``ldpfast simulate`` knows by name.
RECORD_DATA = ("correlated", "adult")


@dataclasses.dataclass(frozen=True)
class RecordData:
    """``records`` (``int64[n, A]``, attribute ``j`` in ``[0, domains[j])``), the attributes'
    ``names`` and the data set's ``name``."""

    records: np.ndarray
    domains: Tuple[int, ...]
    names: Tuple[str, ...]
    name: str

    @property
    def n(self) -> int:
        return int(self.records.shape[0])

    def marginal(self, attributes: Sequence[int]) -> np.ndarray:
        """The true shares of the cells of ``attributes`` (C order), flattened."""
        shape = [self.domains[a] for a in attributes]
        cells = np.ravel_multi_index(tuple(self.records[:, a] for a in attributes), shape)
        return np.bincount(cells, minlength=int(np.prod(shape))) / self.n

    def marginals(self, way: int) -> Sequence[Tuple[int, ...]]:
        return list(itertools.combinations(range(len(self.domains)), way))


def correlated_records(n: int, domains: Sequence[int] = (4, 8, 16, 2, 6), correlation: float = 0.6,
                       seed: Optional[int] = 0) -> RecordData:
    """Synthetic records whose attributes depend on each other: each user draws a latent
    class ``z`` uniform on ``[0, 8)``; each attribute ``j`` is, with probability
    ``correlation``, ``z``'s value ``(z * k_j) // 8``, else an independent Zipf-like draw
    (``P(v) ~ 1/(v+1)``). ``correlation=0``: independent attributes; 1: every attribute a
    function of ``z``. Seeded (simulation only)."""
    n = check_int("n", n, 1, 2**31)
    domains = tuple(check_int(f"domains[{j}]", k, 2, 2**20) for j, k in enumerate(domains))
    if not domains:
        raise ParameterError("domains must name at least one attribute, got none")
    if isinstance(correlation, bool) or not (isinstance(correlation, (int, float)) and 0.0 <= correlation <= 1.0):
        raise ParameterError(f"correlation must be a number in [0, 1], got {correlation!r}")
    gen = np.random.default_rng(seed)
    latent = gen.integers(0, 8, size=n)
    columns = []
    for k in domains:
        weights = 1.0 / np.arange(1, k + 1)
        own = gen.choice(k, size=n, p=weights / weights.sum())
        columns.append(np.where(gen.random(n) < correlation, (latent * k) // 8, own))
    names = tuple(f"a{j}" for j in range(len(domains)))
    return RecordData(np.stack(columns, axis=1).astype(np.int64), domains, names,
                      f"correlated records (correlation {float(correlation):g})")


def adult_records(names: Sequence[str] = ADULT_CATEGORICAL, copies: int = 1) -> RecordData:
    """Adult's categorical attributes ``names`` (default all nine), ``copies`` times over
    (papers replicate Adult's rows to reach a million users)."""
    copies = check_int("copies", copies, 1, 1000)
    data = load_adult().categorical
    unknown = [a for a in names if a not in data]
    if unknown or not names:
        raise ParameterError(f"names must be Adult's categorical attributes {list(ADULT_CATEGORICAL)}, got {unknown}")
    records = np.tile(np.stack([data[a][0] for a in names], axis=1), (copies, 1))
    label = "Adult" if copies == 1 else f"Adult x {copies}"
    return RecordData(records, tuple(len(data[a][1]) for a in names), tuple(names), label)

