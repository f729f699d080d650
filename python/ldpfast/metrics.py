"""Accuracy measures for frequency estimation and frequent items ([PS] section 4, [PAN] section 6).

``est`` and ``truth`` are frequency arrays (fractions of users) indexed by item id over the
same domain. Top-k sets break ties by item id (smaller id first).

* :func:`mse`: ``(1/|D|) sum_x (fhat(x) - f(x))^2`` over the whole domain.
* :func:`var_topk`: [PS] "Var": ``(1/|C_e ∩ C_t|) sum_{x in C_e ∩ C_t} (n fhat - n f)^2``
  (count scale; a mean squared count error, not a variance).
* :func:`ncr`: normalized cumulative rank, ``sum_{x in C_e} q(x) / (k(k+1)/2)`` with
  ``q(x) = k + 1 - rank_t(x)`` for ``x in C_t`` and 0 otherwise.
* R2's variants (reference code ``Lyinger/PrivSketch``): :func:`mse_rounded_r2` rounds the
  count estimates to integers first; :func:`k_mse_r2` averages over the true top-k ``C_t``
  on the frequency scale, with rounded counts.

Over the values of interest ``X`` of a frequency oracle, from ``(runs, |X|)`` estimates
([PAN] section 6): :func:`worst_case_mse` ([PAN] Eq. 19), :func:`l1_loss` and :func:`l2_loss`.

Between two distributions of a number, from their CDFs on one grid of equal steps (the Square
Wave paper's measure, on its 1,024 buckets): :func:`wasserstein1` (``step sum |F - G|``) and
:func:`kolmogorov_smirnov` (``max |F - G|`` on the grid).
"""

from __future__ import annotations

from typing import Tuple

import numpy as np
from numpy.typing import ArrayLike

from .errors import ParameterError

__all__ = ["top_k", "mse", "var_topk", "ncr", "mse_rounded_r2", "k_mse_r2", "worst_case_mse", "l1_loss",
           "l2_loss", "wasserstein1", "kolmogorov_smirnov"]


def _pair(est: ArrayLike, truth: ArrayLike) -> Tuple[np.ndarray, np.ndarray]:
    est_array = np.asarray(est, dtype=np.float64)
    truth_array = np.asarray(truth, dtype=np.float64)
    if est_array.ndim != 1 or est_array.shape != truth_array.shape:
        raise ParameterError(f"est and truth must be 1-D of equal length, got {est_array.shape} and "
                             f"{truth_array.shape}")
    if est_array.size == 0:
        raise ParameterError("est and truth must not be empty")
    return est_array, truth_array


def _check_k(k: object, size: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= size:
        raise ParameterError(f"k must be an int in [1, {size}], got {k!r}")
    return int(k)


def top_k(values: ArrayLike, k: int) -> np.ndarray:
    """Ids of the ``k`` largest values, largest first, ties by smaller id."""
    array = np.asarray(values, dtype=np.float64)
    k = _check_k(k, array.size)
    return np.lexsort((np.arange(array.size), -array))[:k]


def mse(est: ArrayLike, truth: ArrayLike) -> float:
    """Mean squared error over the domain (frequency scale)."""
    fhat, f = _pair(est, truth)
    return float(np.mean((fhat - f) ** 2))


def var_topk(est: ArrayLike, truth: ArrayLike, n: int, k: int) -> float:
    """[PS] Var over ``C_e ∩ C_t`` on the count scale (NaN when the sets are disjoint)."""
    fhat, f = _pair(est, truth)
    common = np.intersect1d(top_k(fhat, k), top_k(f, k))
    if common.size == 0:
        return float("nan")
    return float(np.mean((n * fhat[common] - n * f[common]) ** 2))


def ncr(est: ArrayLike, truth: ArrayLike, k: int) -> float:
    """Normalized cumulative rank of the estimated top-k against the true top-k."""
    fhat, f = _pair(est, truth)
    true_top = top_k(f, k)
    quality = np.zeros(f.size, dtype=np.float64)
    quality[true_top] = k - np.arange(k)          # rank 1 -> k, rank k -> 1
    return float(quality[top_k(fhat, k)].sum() / (k * (k + 1) / 2))


def mse_rounded_r2(est: ArrayLike, truth: ArrayLike, n: int) -> float:
    """R2's MSE: count estimates rounded to integers, then the frequency-scale MSE."""
    fhat, f = _pair(est, truth)
    return float(np.mean((np.round(fhat * n) / n - f) ** 2))


def k_mse_r2(est: ArrayLike, truth: ArrayLike, n: int, k: int) -> float:
    """R2's top-k error: rounded counts, frequency scale, averaged over the true top-k."""
    fhat, f = _pair(est, truth)
    true_top = top_k(f, k)
    return float(np.mean((np.round(fhat[true_top] * n) / n - f[true_top]) ** 2))


def worst_case_mse(estimates: np.ndarray, truth: np.ndarray) -> float:
    """[PAN] Eq. 19 from a ``(runs, |X|)`` array of estimates and the true frequencies."""
    err = np.asarray(estimates, dtype=np.float64) - np.asarray(truth, dtype=np.float64)
    return float(np.max(np.mean(err * err, axis=0)))


def l1_loss(estimates: np.ndarray, truth: np.ndarray) -> float:
    """Mean over runs of ``sum_{x in X} |fhat(x) - f(x)|``."""
    return float(np.mean(np.sum(np.abs(np.atleast_2d(estimates) - truth), axis=1)))


def l2_loss(estimates: np.ndarray, truth: np.ndarray) -> float:
    """Mean over runs of ``sum_{x in X} (fhat(x) - f(x))^2``."""
    err = np.atleast_2d(estimates) - truth
    return float(np.mean(np.sum(err * err, axis=1)))


def wasserstein1(est_cdf: ArrayLike, true_cdf: ArrayLike, step: float) -> float:
    """The W1 (earth mover's) distance ``step * sum_k |F(x_k) - G(x_k)|`` between two CDFs given
    at the ends of grid cells of width ``step`` (exact when both put their mass at those ends)."""
    fhat, f = _pair(est_cdf, true_cdf)
    if not (np.isfinite(step) and step > 0):
        raise ParameterError(f"step must be a finite positive number, got {step!r}")
    return float(step * np.abs(fhat - f).sum())


def kolmogorov_smirnov(est_cdf: ArrayLike, true_cdf: ArrayLike) -> float:
    """``max_k |F(x_k) - G(x_k)|`` of two CDFs given on one grid."""
    fhat, f = _pair(est_cdf, true_cdf)
    return float(np.abs(fhat - f).max())
