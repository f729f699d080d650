"""The answer to a marginal query: one row per cell of the queried attributes, labelled,
with the estimate, its standard error and an interval."""

from __future__ import annotations

import dataclasses
from statistics import NormalDist
from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..._optional import require
from ..._validate import check_real
from ...errors import ParameterError

__all__ = ["Marginal", "marginal_table", "cell_grid"]


@dataclasses.dataclass(frozen=True)
class Marginal:
    """A k-way marginal table.

    Attributes:
        attributes: the queried attributes' names, in the query's order.
        cells: ``int64[c, k]``, each cell's value of each attribute (C order: the last
            attribute varies fastest).
        labels: per attribute, the labels of its values (the names given to the query, else
            the value ids as strings).
        estimate: the estimated share of users in each cell (post-processed where the
            protocol post-processes: CALM's consistent, non-negative tables).
        raw: the unbiased estimate the standard error is about (NaN for a reconstructed
            marginal); ``estimate`` itself where there is no post-processing.
        std: the standard error of ``raw`` (NaN where the note says there is no closed form).
        ci_low, ci_high: ``raw -+ z std`` at ``confidence``.
        note: where the estimate and its standard error come from.
    """

    attributes: Tuple[str, ...]
    cells: np.ndarray
    labels: Tuple[Tuple[str, ...], ...]
    estimate: np.ndarray
    raw: np.ndarray
    std: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    confidence: float
    note: str

    @property
    def shape(self) -> Tuple[int, ...]:
        """The table's shape, one axis per attribute."""
        return tuple(len(v) for v in self.labels)

    def table(self) -> np.ndarray:
        """The estimates as an array of :attr:`shape`."""
        return self.estimate.reshape(self.shape)

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame``: one column per attribute (its labels), then ``estimate,
        raw, std, ci_low, ci_high``; ``frame.attrs`` holds the note and the confidence."""
        pd = require("pandas", "Marginal.to_pandas()")
        columns = {name: [labels[v] for v in self.cells[:, i]]
                   for i, (name, labels) in enumerate(zip(self.attributes, self.labels))}
        frame = pd.DataFrame({**columns, "estimate": self.estimate, "raw": self.raw, "std": self.std,
                              "ci_low": self.ci_low, "ci_high": self.ci_high})
        frame.attrs.update(note=self.note, confidence=self.confidence)
        return frame


def cell_grid(domains: Sequence[int]) -> np.ndarray:
    """Every cell of the attributes with these domains, ``int64[prod, k]``, in C order."""
    return np.stack(np.unravel_index(np.arange(int(np.prod(domains))), tuple(domains)), axis=1).astype(np.int64)


def marginal_table(params: Any, attributes: List[int], estimate: np.ndarray, std: np.ndarray, confidence: float,
                   labels: Optional[Mapping[str, Sequence[str]]], note: str, raw: Optional[np.ndarray] = None
                   ) -> Marginal:
    """The :class:`Marginal` of ``attributes`` (indices, the query's order) from per-cell
    estimates (C order over those attributes), unbiased ``raw`` ones (default: the estimates)
    and the standard errors of those."""
    confidence = check_real("confidence", confidence, 0.0, 1.0)
    names = [params.attribute_names[j] for j in attributes]
    domains = [params.domains[j] for j in attributes]
    given = dict(labels or {})
    unknown = [name for name in given if name not in params.attribute_names]
    if unknown:
        raise ParameterError(f"labels name unknown attributes {unknown}; the attributes are "
                             f"{list(params.attribute_names)}")
    value_labels = []
    for name, k in zip(names, domains):
        these = tuple(str(v) for v in given.get(name, range(k)))
        if len(these) != k:
            raise ParameterError(f"labels[{name!r}] must have {k} entries (the attribute's domain), got {len(these)}")
        value_labels.append(these)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    estimate = np.asarray(estimate, dtype=np.float64)
    raw = estimate if raw is None else np.asarray(raw, dtype=np.float64)
    std = np.asarray(std, dtype=np.float64)
    return Marginal(tuple(names), cell_grid(domains), tuple(value_labels), estimate, raw, std, raw - z * std,
                    raw + z * std, confidence, note)
