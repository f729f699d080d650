"""Closed forms for the Count-Mean Sketch with RAPPOR perturbation and for Subset Selection.

* CMS + RAPPOR ([PAN] Appendix G): hash to ``[m]``, then one-hot encode and perturb every
  bit. Symmetric RAPPOR ("sRP") flips each bit with probability ``1/(1+e_h)``,
  ``e_h = e^(eps/2)``; asymmetric RAPPOR ("aRP", also called optimized unary encoding)
  keeps a 1 with probability 1/2 and turns a 0 into a 1 with probability ``1/(e+1)``.
  The decoded bit ``(b - q)/(p - q)`` is unbiased, with variance ``V_eq`` on the true
  symbol and ``V_ne`` elsewhere ([PAN] Eqs. 42-43).
* Subset Selection (Ye and Barg 2018; Wang et al. 2016): each user reports ``k`` of the
  ``d`` values, including the true one with probability ``k e/(k e + d - k)``.

Frequencies are fractions in ``[0, 1]``, ``n`` is the number of reports and ``e = e^eps``.
"""

from __future__ import annotations

import math
from typing import Any, Tuple

import numpy as np

from ..errors import ParameterError
from .._validate import check_int
from ._types import Real, RealLike
from .ocms import _eps, _f, _n, _out

__all__ = [
    "RAPPOR_VARIANTS", "rappor_bit_probabilities", "rappor_variances", "cms_rappor_variance",
    "cms_rappor_mse_limit", "cms_rappor_l2_limit", "cms_rappor_optimal_m",
    "subset_selection_probabilities", "subset_selection_variance", "subset_selection_optimal_k",
    "pairwise_assignment_bits", "rhr_original_variance", "hashtogram_variance", "reconstruction_matrix",
    "reconstruction_variances",
]

RAPPOR_VARIANTS = ("symmetric", "asymmetric")


def _variant(variant: str) -> str:
    if variant not in RAPPOR_VARIANTS:
        raise ParameterError(f"variant must be one of {list(RAPPOR_VARIANTS)}, got {variant!r}")
    return variant


def rappor_bit_probabilities(epsilon: float, variant: str) -> Tuple[float, float]:
    """``(p, q)``: the probability that a reported bit is 1 when the true bit is 1 / 0.
    Symmetric: ``(e_h/(1+e_h), 1/(1+e_h))``; asymmetric: ``(1/2, 1/(e+1))``."""
    eps, e, _ = _eps(epsilon)
    if _variant(variant) == "symmetric":
        e_h = math.exp(eps / 2)
        return e_h / (1 + e_h), 1 / (1 + e_h)
    return 0.5, 1 / (e + 1)


def rappor_variances(epsilon: float, variant: str) -> Tuple[float, float]:
    """``(V_eq, V_ne)`` of one decoded RAPPOR bit ([PAN] Eqs. 42-43):
    symmetric ``e_h/(e_h-1)^2`` for both; asymmetric ``(e+1)^2/(e-1)^2`` on the true symbol
    and ``4e/(e-1)^2`` elsewhere."""
    eps, e, em1 = _eps(epsilon)
    if _variant(variant) == "symmetric":
        e_h, eh_m1 = math.exp(eps / 2), math.expm1(eps / 2)
        v = e_h / eh_m1**2
        return v, v
    return (e + 1) ** 2 / em1**2, 4 * e / em1**2


def cms_rappor_variance(epsilon: float, variant: str, collision: RealLike, n: float = 1, f: RealLike = 0.0) -> Real:
    """Variance (= MSE) of the unbiased CMS + RAPPOR estimate of ``f(x)`` when two
    different values collide with probability ``collision`` (``cbar``; ``1/m`` for an
    exactly pairwise-independent family, :func:`ldpfast.kernels.field.collision_probability`
    for the finite-field family) ([PAN] Thm 3.3 with RAPPOR's variances):
    ``[(1-f)(cbar V_eq + (1-cbar) V_ne + cbar(1-cbar)) + f V_eq] / (n (1-cbar)^2)``.

    Each user's term is the variance of its decoded bit at ``h(x)``: ``V_eq`` when it holds
    ``x``; otherwise a mixture that hits the true symbol (mean 1) with probability ``cbar``
    and another symbol (mean 0) otherwise.
    """
    v_eq, v_ne = rappor_variances(epsilon, variant)
    c = float(np.asarray(collision))
    if not 0.0 < c < 1.0:
        raise ParameterError(f"collision must be in (0, 1), got {collision!r}")
    n, f = _n(n), _f(f)
    per_other = c * v_eq + (1 - c) * v_ne + c * (1 - c)
    return _out(((1 - f) * per_other + f * v_eq) / (n * (1 - c) ** 2))


def cms_rappor_mse_limit(epsilon: float, variant: str, n: float = 1, f_star: float = 1.0) -> float:
    """The worst-case MSE over ``f <= f_star`` as ``m -> inf`` ([PAN] Appendix G):
    symmetric ``e_h/(n(e_h-1)^2)``; asymmetric ``(f_star (e-1)^2 + 4e)/(n(e-1)^2)`` (the
    paper prints ``4^eps`` for ``4e``, a typo: it is ``f_star V_eq + (1-f_star) V_ne``)."""
    v_eq, v_ne = rappor_variances(epsilon, variant)
    fs = float(_f(f_star))
    return max(v_eq, v_ne) / _n(n) if variant == "symmetric" else (fs * v_eq + (1 - fs) * v_ne) / _n(n)


def cms_rappor_l2_limit(epsilon: float, variant: str, d: int, n: float = 1) -> float:
    """The expected l2 loss ``sum_x Var(fhat(x))`` as ``m -> inf`` and ``d >> 1``
    ([PAN] Appendix G): ``d V_ne / n`` (symmetric ``d e_h/(n(e_h-1)^2)``, asymmetric
    ``4de/(n(e-1)^2)``), plus the ``sum_x f(x) (V_eq - V_ne) / n <= (V_eq - V_ne)/n`` the
    paper drops."""
    _, v_ne = rappor_variances(epsilon, variant)
    return check_int("d", d, 1) * v_ne / _n(n)


def cms_rappor_optimal_m(epsilon: float, variant: str, tau: float = 0.01, max_m: int = 1 << 16) -> int:
    """The smallest hash range ``m`` whose variance is within ``1 + tau`` of the
    ``m -> inf`` limit for every ``f`` (with ``cbar = 1/m``; [PAN] Eq. 45 gives only its
    order). The ratio is a ratio of linear functions of ``f``, so its maximum is at
    ``f = 0`` or ``f = 1``, and it decreases in ``m``: a bisection finds the answer.

    Raises:
        ParameterError: ``tau <= 0`` or no ``m <= max_m`` is close enough.
    """
    tau = float(tau)
    if not tau > 0:
        raise ParameterError(f"tau must be > 0, got {tau!r}")
    v_eq, v_ne = rappor_variances(epsilon, variant)

    def close_enough(m: int) -> bool:
        c = 1.0 / m
        at_zero = (c * v_eq + (1 - c) * v_ne + c * (1 - c)) / ((1 - c) ** 2 * v_ne)
        return max(at_zero, 1 / (1 - c) ** 2) <= 1 + tau

    if not close_enough(max_m):
        raise ParameterError(f"no hash range m <= {max_m} is within 1 + tau = {1 + tau} of the limit")
    low, high = 2, max_m
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if close_enough(mid) else (mid + 1, high)
    return low


def _ss_args(epsilon: float, d: int, k: int) -> Any:
    _, e, em1 = _eps(epsilon)
    d = check_int("d", d, 2)
    k = check_int("k", k, 1)
    if k >= d:
        raise ParameterError(f"k must be in [1, d-1] = [1, {d - 1}], got {k}")
    return e, em1, d, k


def subset_selection_probabilities(epsilon: float, d: int, k: int) -> Tuple[float, float]:
    """``(p, q)``: the probability that a value is in the reported ``k``-subset when the user
    holds it (``p = k e/(k e + d - k)``) and when the user holds another value
    (``q = [p (k-1) + (1-p) k]/(d-1) = k (k e - e + d - k)/((d-1)(k e + d - k))``)."""
    e, _, d, k = _ss_args(epsilon, d, k)
    p = k * e / (k * e + d - k)
    q = k * (k * e - e + d - k) / ((d - 1) * (k * e + d - k))
    return p, q


def subset_selection_variance(epsilon: float, d: int, k: int, n: float = 1, f: RealLike = 0.0) -> Real:
    """Variance (= MSE) of the Subset Selection estimate ``(C(x)/n - q)/(p - q)``:
    ``[f p(1-p) + (1-f) q(1-q)] / (n (p-q)^2)`` (each user contributes an independent
    indicator with mean ``p`` or ``q``). ``p - q = k (d-k)(e-1)/((d-1)(k e + d - k))`` is
    computed in that form (no cancellation)."""
    e, em1, d, k = _ss_args(epsilon, d, k)
    p, q = subset_selection_probabilities(epsilon, d, k)
    gap = k * (d - k) * em1 / ((d - 1) * (k * e + d - k))
    f = _f(f)
    return _out((f * p * (1 - p) + (1 - f) * q * (1 - q)) / (_n(n) * gap**2))


def subset_selection_optimal_k(epsilon: float, d: int) -> int:
    """The subset size minimising the variance at ``f = 0`` (the dominant term of the l2
    loss), searched exactly over ``k in [1, d-1]`` near ``d/(e+1)`` (the optimum of
    Ye and Barg and of Wang et al.)."""
    _, e, _ = _eps(epsilon)
    d = check_int("d", d, 2)
    guess = d / (e + 1)
    lo, hi = max(1, int(guess) - 2), min(d - 1, int(math.ceil(guess)) + 2)
    ks = range(lo, max(lo, hi) + 1)
    return min(ks, key=lambda k: (subset_selection_variance(epsilon, d, k), k))


def pairwise_assignment_bits(n: int, k: int) -> int:
    """Random bits that suffice to assign ``n`` users to ``k`` hash functions pairwise
    independently ([PAN] Thm 5.2): ``2 ceil(log2(max(n, k) + 1))`` (one function
    ``s(i) = ((b0 + b1 i) mod P) mod k`` of a pairwise-independent family)."""
    n = check_int("n", n, 1)
    k = check_int("k", k, 1)
    return 2 * int(math.ceil(math.log2(max(n, k) + 1)))


def rhr_original_variance(epsilon: float, k: int, n: float = 1, f: RealLike = 0.0,
                          location_fraction: RealLike = 1.0) -> Real:
    """Variance of the original Recursive Hadamard Response estimate (Chen, Kairouz and
    Ozgur 2020) with uniformly random Hadamard rows and ``2^k``-ary randomized response
    (:mod:`ldpfast.protocols.frequency.hadamard_variants`; derived here). With ``K = 2^k``,
    ``c_k = (e + K - 1)/(e - 1)`` and ``F`` the share of users whose value has the
    location ``x // B`` of the queried ``x`` (``x`` included): each user's term is
    ``c_k`` times a sign when its report is one of the two symbols of that location
    (probability ``(e+1)/(e+K-1)`` for those ``F`` users, ``2/(e+K-1)`` for the others),
    else 0, with mean ``1[x_i = x]``:
    ``Var = [c_k^2 (F (e+1) + 2 (1-F))/(e + K - 1) - f] / n``."""
    _, e, em1 = _eps(epsilon)
    k = check_int("k", k, 1)
    symbols = float(1 << k)
    share = _f(location_fraction)
    c_k = (em1 + symbols) / em1
    second = c_k * c_k * (share * (e + 1) + 2 * (1 - share)) / (em1 + symbols)
    return _out((second - _f(f)) / _n(n))


def hashtogram_variance(epsilon: float, R: int, T: int, n: float = 1, f: RealLike = 0.0,
                        sum_sq_other: RealLike = 0.0) -> Real:
    """Variance (fractions) of Hashtogram's mean-combined estimate (:mod:`ldpfast.protocols.frequency.hashtogram`)
    over the randomized response, the Hadamard rows, the users' uniform groups and the draw
    of the pairwise-independent bucket and sign hashes (derived here):
    ``(c_eps^2 - f)/n + (sum_sq_other - (1 - f)/n)/(R T)`` with
    ``sum_sq_other = sum_{x' != x} f(x')^2`` (the frequencies summing to 1).

    Each user's term ``c_eps b g(x) H[s, h(x)]`` is ``+-c_eps``; given the hashes its mean is
    ``g(x_i) g(x) 1[h(x_i) = h(x)]``. Users holding the same other value in the same group
    share that mean (covariance ``1/T``); all other pairs are uncorrelated because the signs
    average out. The ``(n - c(x))/T`` lost from the conditional variances and the
    ``sum c(x')/(T)`` added by the shared means cancel, leaving the pairs term."""
    c = _th_c_eps(epsilon)
    R = check_int("R", R, 1)
    T = check_int("T", T, 2)
    n, f = _n(n), _f(f)
    return _out((c * c - f) / n + (float(np.asarray(sum_sq_other)) - (1 - f) / n) / (R * T))


def _th_c_eps(epsilon: float) -> float:
    _, e, em1 = _eps(epsilon)
    return (e + 1) / em1


def reconstruction_matrix(P: RealLike) -> np.ndarray:
    """[PAN] section 2 / Appendix A: the least-squares decoder ``Q = (P^T P)^-1 P^T`` of a
    mechanism with ``P[u, v] = Pr(M(v) = u)`` (outputs x inputs, each column a distribution,
    full column rank). Decoding output ``u`` returns ``Q[:, u]``; since ``QP = I`` its
    expectation is the one-hot vector of the input (Property 2.1).

    Raises:
        ParameterError: ``P`` is not a 2-D matrix of column distributions with at least as
            many rows as columns, or is rank-deficient.
    """
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] < P.shape[1] or P.shape[1] < 1:
        raise ParameterError(f"P must be a 2-D (outputs x inputs) matrix with outputs >= inputs, got shape {P.shape}")
    if not np.all(np.isfinite(P)) or np.any(P < 0) or not np.allclose(P.sum(axis=0), 1.0, rtol=0, atol=1e-9):
        raise ParameterError("P's columns must be probability distributions (non-negative, summing to 1)")
    if np.linalg.matrix_rank(P) < P.shape[1]:
        raise ParameterError(f"P must have full column rank {P.shape[1]}, got {np.linalg.matrix_rank(P)}")
    return np.linalg.solve(P.T @ P, P.T)


def reconstruction_variances(P: RealLike) -> np.ndarray:
    """``V[a, b] = Var(R(a)[b])`` for the least-squares decoder of ``P``: the variance of
    coordinate ``b`` of the decoded vector when the input is ``a``,
    ``sum_u P[u, a] Q[b, u]^2 - 1[a = b]``. For k-ary RR this is ``V_eq`` on the diagonal
    and ``V_ne`` elsewhere ([PAN] Eq. 12), the inputs of every CMS variance."""
    P = np.asarray(P, dtype=np.float64)
    Q = reconstruction_matrix(P)
    return np.asarray(((Q * Q) @ P).T - np.eye(P.shape[1]))
