"""Consistency post-processing of frequency estimates: the methods of Wang,
Lopuhaa-Zwakenberg, Li, Skoric and Li, "Locally Differentially Private Frequency
Estimation with Consistency" (NDSS 2020), as the paper defines them
(:meth:`ldpfast.estimates.Estimate.postprocess` applies them; :mod:`ldpfast.estimates`
re-exports every function)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import ParameterError

__all__ = ["project_simplex", "norm", "norm_sub", "norm_mul", "norm_cut", "base_cut"]


def _vector(values: Any) -> np.ndarray:
    v = np.array(values, dtype=np.float64).ravel()
    if v.size == 0:
        raise ParameterError("cannot post-process an empty vector of estimates")
    return v


def project_simplex(values: Any, total: float = 1.0) -> np.ndarray:
    """The Euclidean projection of ``values`` onto ``{w : w >= 0, sum(w) = total}`` (Wang et
    al.'s CLS): ``w = max(v - theta, 0)`` with ``theta`` found from the sorted values (Held,
    Wolfe and Crowder 1974; Duchi et al. 2008)."""
    v = _vector(values)
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - total
    ranks = np.arange(1, v.size + 1)
    rho = int(np.flatnonzero(u - cumulative / ranks > 0)[-1])
    theta = cumulative[rho] / (rho + 1)
    return np.asarray(np.maximum(v - theta, 0.0))


def norm(values: Any, total: float = 1.0) -> np.ndarray:
    """Norm: ``v + (total - sum v)/k`` for the ``k`` estimates."""
    v = _vector(values)
    return np.asarray(v + (total - v.sum()) / v.size)


def norm_mul(values: Any, total: float = 1.0) -> np.ndarray:
    """Norm-Mul: ``max(v, 0) * total / sum max(v, 0)`` (all ``total/k`` when none is positive)."""
    out = np.maximum(_vector(values), 0.0)
    mass = out.sum()
    return out * (total / mass) if mass > 0 else np.full_like(out, total / out.size)


def norm_sub(values: Any, total: float = 1.0) -> np.ndarray:
    """Norm-Sub: set the negative estimates to 0, add ``(total - sum)/#positive`` to every
    positive one, and repeat until none is negative. Each round that repeats zeroes at
    least one more estimate, so it ends within ``k`` rounds; when no estimate is positive
    the ``k`` estimates share ``total`` equally."""
    out = np.maximum(_vector(values), 0.0)
    for _ in range(out.size + 1):
        positive = out > 0
        if not positive.any():
            return np.full_like(out, total / out.size)
        out[positive] += (total - out.sum()) / np.count_nonzero(positive)
        if not (out < 0).any():
            break
        out = np.maximum(out, 0.0)
    return np.asarray(out)


def norm_cut(values: Any, total: float = 1.0) -> np.ndarray:
    """Norm-Cut: set the negative estimates to 0; then set to 0 every estimate below the
    smallest ``theta`` with ``sum_{v >= theta} v <= total`` (nothing more when the positive
    estimates already sum to at most ``total``)."""
    out = np.maximum(_vector(values), 0.0)
    if out.sum() <= total:
        return np.asarray(out)
    levels = np.unique(out[out > 0])[::-1]                     # candidate thetas, largest first
    mass = np.array([out[out >= level].sum() for level in levels]) if levels.size <= 4096 else \
        _mass_at_or_above(out, levels)
    fits = np.flatnonzero(mass <= total)
    theta = levels[fits[-1]] if fits.size else math.inf        # mass only grows as theta falls
    return np.where(out >= theta, out, 0.0)


def _mass_at_or_above(values: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """``sum(values[values >= level])`` for each of the decreasing ``levels``."""
    order = np.sort(values)[::-1]
    suffix = np.cumsum(order)
    return np.asarray(suffix[np.searchsorted(-order, -levels, side="right") - 1])


def base_cut(values: Any, threshold: Any) -> np.ndarray:
    """Base-Cut: the estimates below ``threshold`` (a scalar or one per estimate) set to 0."""
    v = _vector(values)
    return np.where(v >= threshold, v, 0.0)
