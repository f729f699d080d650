"""Binned frequency oracles for the distribution of a number: the value's bucket among ``B``
equal bins, sent through a registered frequency oracle (``grr``, ``oue``, ``olh``, ``pgr``)
over ``[0, B)``, and the oracle's debiased estimates made a distribution by Norm-Sub
(:func:`ldpfast.postprocessing.norm_sub`). A composition of registered protocols, not a
protocol of its own: the reports, servers, bytes and audits are the oracle's.

The bin count trades the within-bin error (the estimate spreads a bin's mass uniformly) for
noise. With bins of width ``h = 1/B`` on the unit interval, the CDF of a smooth density ``f``
interpolated linearly inside bins errs by about ``h^2 |f'|/12`` on average, so the W1 bias is
``~ h^2/12 int |f'|``; each bin's estimate has variance ``v/n`` (``v`` the oracle's
per-user variance at frequency 0), and the CDF at bin ``k`` sums ``k`` of them, so the noise
adds ``~ h sum_k sqrt(k v/n) ~ (2/3) sqrt(B v/n)`` (times ``sqrt(2/pi)``). Minimizing
``a/B^2 + c sqrt(B v/n)`` gives ``B ~ (n/v)^(1/5)``; :func:`bin_count` takes
``B = BIN_SCALE (n/v)^(1/5)``, its constant fitted on Beta(5, 2) (``bench/numeric_distribution.py``:
the W1-optimal OUE bin counts of the grid 8..64 over eps in {0.5, 1, 2, 4} and n in {1e5, 1e6},
5 runs each, are 1.2 to 1.8 times ``(n/v)^(1/5)``, geometric mean 1.5).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._registry import protocol
from ..._validate import check_epsilon, check_int
from ...errors import ParameterError
from ...postprocessing import norm_sub

__all__ = ["ORACLES", "BIN_SCALE", "MAX_BINS", "oracle_variance", "bin_count", "oracle_params",
           "binned_distribution"]

ORACLES = ("grr", "oue", "olh", "pgr")
#: The constant of :func:`bin_count` (fitted on Beta(5, 2), see the module docstring).
BIN_SCALE = 1.5
MAX_BINS = 1024


def _check_oracle(oracle: Any) -> str:
    if oracle not in ORACLES:
        raise ParameterError(f"oracle must be one of {ORACLES}, got {oracle!r}")
    return str(oracle)


def oracle_variance(oracle: str, epsilon: float, bins: int) -> float:
    """``n Var(fhat)`` of a bin at frequency 0: ``(e^eps + B - 2)/(e^eps - 1)^2`` for GRR,
    ``4 e^eps/(e^eps - 1)^2`` for OUE, OLH and PGR (their common optimum, [WBLJ] 2017)."""
    oracle = _check_oracle(oracle)
    eps = check_epsilon(epsilon)
    bins = check_int("bins", bins, 2)
    em1 = math.expm1(eps)
    if oracle == "grr":
        return (em1 + bins - 1) / (em1 * em1)
    return 4.0 * (em1 + 1.0) / (em1 * em1)


def bin_count(epsilon: float, n: int, oracle: str = "oue") -> int:
    """``B = BIN_SCALE (n/v)^(1/5)`` rounded, in ``[2, MAX_BINS]`` (``v``:
    :func:`oracle_variance`, which for GRR grows with ``B``: a few fixed-point steps)."""
    n = check_int("n", n, 1)
    bins = 16
    for _ in range(8):
        v = oracle_variance(oracle, epsilon, bins)
        bins = int(min(MAX_BINS, max(2, round(BIN_SCALE * (n / v) ** 0.2))))
    return bins


def oracle_params(oracle: str, epsilon: float, bins: int) -> Any:
    """The registered oracle's parameters over ``[0, bins)``."""
    return protocol(_check_oracle(oracle)).params(epsilon=epsilon, d=check_int("bins", bins, 2, MAX_BINS))


def binned_distribution(server: Any) -> np.ndarray:
    """The bin probabilities from a binned oracle's server: Norm-Sub of its debiased estimates."""
    return np.asarray(norm_sub(server.estimate()), dtype=np.float64)
