"""Numeric data sets for the mean protocols: one real number per user, with the bounds a
deployment would declare (``bounds=(lo, hi)``; values outside are clipped by the client).

* ``beta``: Beta(5, 2) on [0, 1] (skewed towards 1, mean 5/7).
* ``mixture``: a two-component Gaussian mixture (0.7 N(30, 5^2) + 0.3 N(70, 10^2)) declared
  on [0, 100]; its tails beyond the bounds are clipped.
* ``lognormal``: heavy-tailed, exp(N(3, 1)), declared on [0, 100]: 5.4% of the users
  lie above 100 and are clipped, the case where the bounds matter.
* ``age``, ``hours-per-week``, ``capital-gain``: the UCI Adult extract's columns
  (:func:`ldpfast.datasets.load_adult`), declared on [17, 90], [1, 99] and [0, 99999], their
  observed ranges.
"""

from __future__ import annotations

import dataclasses
from typing import Tuple

import numpy as np

from .._random import KeySource, RngLike
from ..errors import ParameterError
from .adult import load_adult

__all__ = ["NumericData", "numeric_dataset", "NUMERIC_DATASETS"]

NUMERIC_DATASETS = ("beta", "mixture", "lognormal", "age", "hours-per-week", "capital-gain")
_ADULT_BOUNDS = {"age": (17.0, 90.0), "hours-per-week": (1.0, 99.0), "capital-gain": (0.0, 99999.0)}


@dataclasses.dataclass(frozen=True)
class NumericData:
    """``values`` (float64[n]) and the declared ``bounds``."""

    name: str
    values: np.ndarray
    bounds: Tuple[float, float]

    @property
    def clipped_share(self) -> float:
        """The share of users outside the bounds (clipped by their clients)."""
        lo, hi = self.bounds
        return float(np.mean((self.values < lo) | (self.values > hi)))


def numeric_dataset(name: str, n: int = 100_000, rng: RngLike = 0) -> NumericData:
    """The data set ``name`` (:data:`NUMERIC_DATASETS`): ``n`` seeded draws of the synthetic
    ones (simulation only), the whole column of Adult's (``n`` ignored)."""
    if name in _ADULT_BOUNDS:
        return NumericData(name, load_adult().numeric[name].astype(np.float64), _ADULT_BOUNDS[name])
    if name not in NUMERIC_DATASETS:
        raise ParameterError(f"data must be one of {list(NUMERIC_DATASETS)}, got {name!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"n must be a positive integer, got {n!r}")
    gen = KeySource(rng).generator()
    if name == "beta":
        return NumericData(name, gen.beta(5.0, 2.0, size=n), (0.0, 1.0))
    if name == "mixture":
        first = gen.random(n) < 0.7
        values = np.where(first, gen.normal(30.0, 5.0, size=n), gen.normal(70.0, 10.0, size=n))
        return NumericData(name, values, (0.0, 100.0))
    return NumericData(name, np.exp(gen.normal(3.0, 1.0, size=n)), (0.0, 100.0))
