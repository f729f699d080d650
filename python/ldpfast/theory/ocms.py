"""Closed forms for OCMS+RR, k-ary randomized response and the Count-Mean Sketch framework.

Everything follows [PAN] (M. Pan, "Improving Count-Mean Sketch as the Leading Locally
Differentially Private Frequency Estimator for Large Dictionaries", CSF 2025) with its
errata corrected (the RR decode constant is ``(e+m-2)/(e-1)``; Thm 3.5
without the stray ``n``; Eq. 9 reads ``E[g] = f``). Frequencies are fractions in ``[0, 1]``;
``n`` is the number of reports; ``e = e^eps`` and ``e_h = e^(eps/2)``. Functions accept
numpy arrays for ``f`` (and for ``m`` where it says so) and broadcast.

Variance and MSE coincide for the unbiased estimators here (pairwise-independent hashing,
or the ``m'`` estimator of an approximately pairwise-independent family).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Optional, Tuple, Union

import numpy as np

from .._validate import MAX_EPSILON as EPSILON_MAX  # noqa: F401  (public name)
from .._validate import check_epsilon, check_int
from .hadamard import he_variance  # noqa: F401  (HE is CMS+RR with m = 2: one function, exported by both)
from ..errors import ParameterError
from ._types import Real, RealLike

__all__ = [
    "EPSILON_MAX", "rr_variances", "rr_decode_constants", "ocms_variance", "ocms_variance_rr",
    "ocms_variance_imperfect", "ocms_variance_general", "ocms_expectation_general",
    "ocms_optimal_m", "ocms_worst_case_mse", "ocms_worst_case_variance", "ocms_l2", "ocms_l1_bound", "affine_l2",
    "ocms_l2_asymptote", "ocms_l1_asymptote", "ocms_mse_asymptote", "ocms_concentration_bound",
    "ocms_imperfect_variance_ratio", "ocms_min_field_quotient", "worst_case_mse_upper_factor",
    "grr_variance", "he_variance",
]



def _eps(epsilon: float) -> Tuple[float, float, float]:
    """Validated (eps, e^eps, e^eps - 1) with e - 1 from expm1 (no cancellation)."""
    eps = check_epsilon(epsilon)
    return eps, math.exp(eps), math.expm1(eps)


def _m(m: RealLike) -> np.ndarray:
    arr = np.asarray(m, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 1):
        raise ParameterError(f"m must be finite and > 1, got {m!r}")
    return arr


def _n(n: float) -> float:
    if isinstance(n, bool) or not isinstance(n, (int, float, np.integer, np.floating)) or not n > 0:
        raise ParameterError(f"n must be a positive number of reports, got {n!r}")
    return float(n)


def _f(f: RealLike) -> np.ndarray:
    arr = np.asarray(f, dtype=float)
    if not np.all((arr >= 0) & (arr <= 1)):
        raise ParameterError(f"f must be frequencies in [0, 1], got {f!r}")
    return arr


def _out(value: Any) -> Real:
    return float(value) if np.ndim(value) == 0 else value


def rr_variances(epsilon: float, m: RealLike) -> Tuple[Real, Real]:
    """``(V_eq, V_ne)`` of the decoded k-ary RR vector ([PAN] Eq. 12):
    ``V_eq = e(m-1)/(e-1)^2`` (queried symbol = true symbol), ``V_ne = (e+m-2)/(e-1)^2``."""
    _, e, em1 = _eps(epsilon)
    m = _m(m)
    return _out(e * (m - 1) / em1**2), _out((em1 + m - 1) / em1**2)


def rr_decode_constants(epsilon: float, m: RealLike) -> Tuple[Real, float]:
    """``(Q[v,v], Q[u,v])`` = ``((e+m-2)/(e-1), -1/(e-1))``: the inverse of the RR matrix
    ([PAN] section 2.1; Algorithm 1's ``(e+m-1)/(e-1)`` is an erratum: biased, e.g. mean
    1.0437 instead of 1 at eps = 3, m = 5)."""
    _, _, em1 = _eps(epsilon)
    m = _m(m)
    return _out((em1 + m - 1) / em1), -1.0 / em1


def _variance(epsilon: float, m: Any, cbar: Any, m_used: Any, n: float, f: Any) -> Any:
    """Var of the CMS+RR estimator that scales by ``m_used/(m_used-1)`` when two different
    values collide with probability ``cbar`` ([PAN] Thm 3.3 with constant cbar)."""
    v_eq, v_ne = rr_variances(epsilon, m)
    per_other = cbar * v_eq + (1 - cbar) * v_ne + cbar * (1 - cbar)
    scale = (m_used / (m_used - 1)) ** 2
    return scale * ((1 - f) * per_other + f * v_eq) / n


def ocms_variance(epsilon: Any, m: Optional[RealLike] = None, n: float = 1, f: RealLike = 0.0) -> Real:
    """Variance (= MSE) of the OCMS+RR estimate of ``f(x)``.

    * ``ocms_variance(epsilon, m, n, f)``: a pairwise-independent family ([PAN] Cor 3.3,
      Eq. 6): ``m/((m-1)^2 n) [(1-f)(V_eq + (m-1)V_ne + (m-1)/m) + m f V_eq]``. ``m`` may be
      real-valued (the theory's optimum) or an array.
    * ``ocms_variance(params, n=n, f=f)`` with an ``ldpfast.protocols.frequency.ocms.OCMSParams``: exact for its
      finite field and estimator: Eq. 8 ``MSE(g)`` with ``cbar`` from [PAN] Lemma 3.2 when
      ``params.use_m_prime`` (the default); with the plain-``m`` estimator (R1) the
      variance of that (then slightly biased) estimator. ``a_range="nonzero"`` is not
      covered (its collision probability is not constant) and raises.
    """
    n, f = _n(n), _f(f)
    if hasattr(epsilon, "field_size") and hasattr(epsilon, "m"):
        params = epsilon
        if m is not None:
            raise ParameterError("pass either params or (epsilon, m), not both")
        if getattr(params, "a_range", "full") != "full":
            raise ParameterError("the closed forms need a0, a1 drawn from the whole field "
                                 f"(a_range='full'), got a_range={params.a_range!r}")
        q, r = divmod(params.field_size, params.m)
        cbar = float(Fraction((2 * q + 1) * r + params.m * q * q, params.field_size**2))
        m_used = 1.0 / cbar if params.use_m_prime else float(params.m)
        return _out(_variance(params.epsilon, float(params.m), cbar, m_used, n, f))
    if m is None:
        raise ParameterError("m is required when epsilon is a number")
    m = _m(m)
    return _out(_variance(epsilon, m, 1.0 / m, m, n, f))


def ocms_variance_rr(epsilon: float, m: RealLike, n: float = 1, f: RealLike = 0.0) -> Real:
    """[PAN] Eq. 20 (Eq. 6 with RR substituted; numerically the same):
    ``(1-f)/(n(m-1)) + m[(1-f)(e-1)(2-m) + m e] / (n (m-1) (e-1)^2)``."""
    _, e, em1 = _eps(epsilon)
    m, n, f = _m(m), _n(n), _f(f)
    return _out((1 - f) / (n * (m - 1)) + m * ((1 - f) * em1 * (2 - m) + m * e) / (n * (m - 1) * em1**2))


def ocms_variance_imperfect(epsilon: float, m: int, field_size: int, n: float = 1, f: RealLike = 0.0) -> Real:
    """``MSE(g)`` of the ``m'`` estimator for the family ``((a0 + a1 x) mod pH) mod m``
    ([PAN] Eq. 8 / Thm 3.4 with Lemma 3.2's ``cbar``):
    ``1/(n(1-cbar)^2) [(1-f)(cbar V_eq + (1-cbar) V_ne + cbar(1-cbar)) + f V_eq]``."""
    m = check_int("m", m, 2)
    p = check_int("field_size", field_size, m + 1)
    q, r = divmod(p, m)
    cbar = float(Fraction((2 * q + 1) * r + m * q * q, p * p))
    return _out(_variance(epsilon, float(m), cbar, 1.0 / cbar, _n(n), _f(f)))


def ocms_variance_general(epsilon: float, m: float, n: float, f_x: float, f_others: RealLike,
                          collision: RealLike) -> float:
    """[PAN] Thm 3.3 (Eq. 5), any hash family: ``m^2/((m-1)^2 n) [sum_{x'!=x} f(x')
    (cbar V_eq + (1-cbar) V_ne + cbar(1-cbar)) + f(x) V_eq]`` with ``collision[i] =
    cbar(x, x'_i)`` and ``f_others[i] = f(x'_i)``."""
    v_eq, v_ne = rr_variances(epsilon, m)
    m, n = float(_m(m)), _n(n)
    fo, cb = _f(f_others), np.asarray(collision, dtype=float)
    total = np.sum(fo * (cb * v_eq + (1 - cb) * v_ne + cb * (1 - cb))) + float(_f(f_x)) * v_eq
    return float(m * m / ((m - 1) ** 2 * n) * total)


def ocms_expectation_general(m: float, f_x: float, f_others: RealLike, collision: RealLike) -> float:
    """``E[fhat(x)]`` for any hash family ([PAN] Thm 3.2) when the estimator scales with
    ``m`` (the hash range, or ``m'`` for Algorithm 2's estimator; the decoded RR vector is
    unbiased whatever the range): ``m/(m-1) [f(x) + sum cbar(x,x') f(x')] - 1/(m-1)`` with
    ``collision[i] = cbar(x, x'_i)``. Unbiased iff ``cbar = 1/m`` for every pair (Cor 3.1)."""
    mu = float(_m(m))
    mixed = float(_f(f_x)) + float(np.sum(_f(f_others) * np.asarray(collision, dtype=float)))
    return mu / (mu - 1) * mixed - 1 / (mu - 1)


def ocms_optimal_m(epsilon: float, mode: str = "mse", d: Optional[int] = None, f_star: float = 1.0,
                   rounded: bool = False) -> Union[float, int]:
    """The optimal hash range: real-valued, or with ``rounded=True`` the closest integer
    (exact ``.5`` ties round upward, our choice as the paper does not say; at least 2),
    which is [PAN]'s ``HashRange`` (also :func:`ldpfast.protocols.frequency.ocms.hash_range`).

    * ``mode="mse"`` ([PAN] Thm 3.6, Eq. 13): ``1 + e_h`` if ``f_star >= 1/2``, else
      ``1 + Delta_MSE / (f_star e + 1 - f_star)`` with
      ``Delta_MSE = e_h sqrt(((1-f*)e + f*)(f* e + 1 - f*))``.
    * ``mode="l"`` ([PAN] Thm 3.8): ``1 + Delta_l/(e + d - 1)``,
      ``Delta_l = e_h sqrt((e+d-1)(de - e + 1))`` (equal to mse with ``f_star = 1/d``).

    Square roots are taken factor by factor so nothing overflows for any accepted eps.
    """
    if rounded:
        return max(2, math.floor(ocms_optimal_m(epsilon, mode, d, f_star) + 0.5))
    eps, e, em1 = _eps(epsilon)
    e_h = math.exp(eps / 2)
    if mode == "mse":
        fs = float(f_star)
        if not math.isfinite(fs) or not 0.0 <= fs <= 1.0:
            raise ParameterError(f"f_star must be in [0, 1], got {f_star!r}")
        if fs >= 0.5:
            return 1.0 + e_h
        a = (1 - fs) * e + fs
        b = fs * em1 + 1.0
        return 1.0 + e_h * math.sqrt(a) / math.sqrt(b)
    if mode == "l":
        d = check_int("d", d, 1)
        return 1.0 + e_h * math.sqrt((d - 1) * e + 1.0) / math.sqrt(em1 + d)
    raise ParameterError(f"mode must be 'mse' or 'l', got {mode!r}")


def _delta_mse(eps: float, e: float, em1: float, fs: float) -> float:
    return math.exp(eps / 2) * math.sqrt((1 - fs) * e + fs) * math.sqrt(fs * em1 + 1.0)


def ocms_worst_case_mse(epsilon: float, n: float = 1, f_star: float = 1.0, max_f: Optional[float] = None) -> float:
    """Worst-case MSE over the values of interest at the real-valued optimal ``m``.

    [PAN] Thm 3.6: ``2(Delta_MSE + e)/(n(e-1)^2)`` if ``f_star <= 1/2``, else
    ``e_h/(n(e_h-1)^2)``. With ``max_f`` (the true ``max_x f(x)``) above a prior
    ``f_star < 1/2``, [PAN] Thm 3.7 adds ``delta(1-2f*) e/(n Delta_MSE)``,
    ``delta = max_f - f_star`` (``f_star = 0`` gives ``(max_f + 4e/(e-1)^2)/n``).
    """
    eps, e, em1 = _eps(epsilon)
    n = _n(n)
    fs = float(f_star)
    if not 0.0 <= fs <= 1.0:
        raise ParameterError(f"f_star must be in [0, 1], got {f_star!r}")
    if fs > 0.5:
        e_h1 = math.expm1(eps / 2)
        return math.exp(eps / 2) / (n * e_h1**2)
    delta_mse = _delta_mse(eps, e, em1, fs)
    mse = 2 * (delta_mse + e) / (n * em1**2)
    if max_f is not None:
        mf = float(max_f)
        if not 0.0 <= mf <= 1.0:
            raise ParameterError(f"max_f must be in [0, 1], got {max_f!r}")
        if mf > fs and fs < 0.5:
            mse += (mf - fs) * (1 - 2 * fs) * e / (n * delta_mse)
    return mse


def ocms_worst_case_variance(epsilon: float, m: float, n: float, frequencies: RealLike) -> float:
    """``max_x Var(fhat(x))`` over the given true frequencies for an integer (or any) ``m``
    (Eq. 6 is linear in ``f``, so only the extremes matter). This is the "calculated"
    curve of R1's experiments."""
    freqs = _f(frequencies)
    if freqs.size == 0:
        raise ParameterError("frequencies must not be empty")
    return float(np.max(ocms_variance(epsilon, m, n, np.array([freqs.min(), freqs.max()]))))


def ocms_l2(epsilon: float, d: int, n: float = 1, m: Optional[RealLike] = None) -> Real:
    """l2 loss ``max_X sum_x MSE(fhat(x))`` over a dictionary (or a value set) of size ``d``.
    ``m=None``: the optimum ([PAN] Thm 3.8) ``2(Delta_l + d e)/(n(e-1)^2)``; otherwise
    [PAN] Eq. 22: ``(d+e-1) m^2/(n(m-1)(e-1)^2) + (d-1)(2m+e-1)/(n(m-1)(e-1))``."""
    eps, e, em1 = _eps(epsilon)
    d, n = check_int("d", d, 1), _n(n)
    if m is None:
        delta_l = math.exp(eps / 2) * math.sqrt(em1 + d) * math.sqrt((d - 1) * e + 1.0)
        return 2 * (delta_l + d * e) / (n * em1**2)
    ms = _m(m)
    return _out((d + em1) * ms**2 / (n * (ms - 1) * em1**2) + (d - 1) * (2 * ms + em1) / (n * (ms - 1) * em1))


def affine_l2(variance: Any, d: int) -> float:
    """Worst-case l2 loss ``max sum_x Var(fhat(x))`` over distributions on a dictionary of
    size ``d`` for a ``variance(f)`` affine in ``f`` (``sum f = 1``: the extreme point puts
    all mass on one value, so ``d Var(0) + max(0, Var(1) - Var(0))``)."""
    at_zero, at_one = variance(0.0), variance(1.0)
    return float(d * at_zero + max(0.0, at_one - at_zero))


def ocms_l1_bound(epsilon: float, d: int, n: float = 1, m: Optional[RealLike] = None) -> Real:
    """Upper bound of the l1 loss by Cauchy-Schwarz, ``sqrt(d * l2)`` ([PAN] Thm 3.8)."""
    return _out(np.sqrt(check_int("d", d, 1) * np.asarray(ocms_l2(epsilon, d, n, m))))


def ocms_l2_asymptote(epsilon: float, d: int, n: float = 1) -> float:
    """[PAN] Cor 3.4: ``l2 -> 4de/(n(e-1)^2)`` as ``d >> e``."""
    _, e, em1 = _eps(epsilon)
    return 4 * check_int("d", d, 1) * e / (_n(n) * em1**2)


def ocms_l1_asymptote(epsilon: float, d: int, n: float = 1) -> float:
    """[PAN] Cor 3.4: ``l1 <= 2 d e_h/(sqrt(n)(e-1))`` as ``d >> e``."""
    eps, _, em1 = _eps(epsilon)
    return 2 * check_int("d", d, 1) * math.exp(eps / 2) / (math.sqrt(_n(n)) * em1)


def ocms_mse_asymptote(epsilon: float, n: float = 1) -> float:
    """[PAN] Table I, OCMS+RR worst-case MSE ``e_h/(n(e_h-1)^2)`` (the ``f* > 1/2`` optimum)."""
    return ocms_worst_case_mse(epsilon, n, f_star=1.0)


def ocms_concentration_bound(epsilon: float, m: RealLike, n: float, alpha: float) -> Real:
    """[PAN] Thm 3.5 (corrected: Appendix F's proof has a stray ``n`` in the exponent): for
    ``alpha in [0, sqrt(e n/(m-1))]``, ``Pr[|fhat - f| >= alpha sqrt(Var)] <= 2
    exp(-(alpha^2/3)(m-1)/(e+m-1))``."""
    _, e, em1 = _eps(epsilon)
    m, n = _m(m), _n(n)
    a = np.asarray(alpha, dtype=float)
    limit = np.sqrt(e * n / (m - 1))
    if np.any(a < 0) or np.any(a > limit):
        raise ParameterError(f"alpha must be in [0, sqrt(e n/(m-1))] = [0, {float(np.min(limit)):.6g}], got {alpha!r}")
    return _out(np.minimum(1.0, 2 * np.exp(-(a**2 / 3) * (m - 1) / (em1 + m))))


def ocms_imperfect_variance_ratio(epsilon: float, m: int, field_size: int, f: RealLike = 0.0) -> Real:
    """``Var(g) / Var(fhat_perfect)`` for the field family ([PAN] Thm 3.9); by Cor 3.5 it is
    below ``1 + tau`` once ``2q+1 > sqrt(1/tau)``, ``q = floor(pH/m)``."""
    return _out(np.asarray(ocms_variance_imperfect(epsilon, m, field_size, 1, f))
                / np.asarray(ocms_variance(epsilon, m, 1, f)))


def ocms_min_field_quotient(tau: float = 0.01) -> int:
    """Smallest ``q = floor(pH/m)`` with ``2q+1 > sqrt(1/tau)`` ([PAN] Cor 3.5; 5 for tau=0.01,
    hence Algorithm 1's ``5m``). The corollary is first order in ``1/(2q+1)^2``: the exact
    ratio (:func:`ocms_imperfect_variance_ratio`) stays below ``1 + tau`` for ``m >= 3`` but
    reaches 1.0167 for ``m = 2``, ``pH = 11``."""
    tau = float(tau)
    if not 0.0 < tau:
        raise ParameterError(f"tau must be > 0, got {tau!r}")
    return max(0, math.floor((math.sqrt(1 / tau) - 1) / 2) + 1)


def worst_case_mse_upper_factor(num_values: int, runs: int) -> float:
    """[PAN] App. K: the measured worst-case MSE ``max_x (1/t) sum_runs err^2`` stays below
    ``[1 + (2/t)(sqrt(t log(20|X|)) + log(20|X|))] * V`` with probability 95%, ``V`` the
    largest theoretical variance over ``X`` (1.7034 for ``|X| = t = 100``)."""
    k = check_int("num_values", num_values, 1)
    t = check_int("runs", runs, 1)
    lg = math.log(20 * k)
    return 1 + (2 / t) * (math.sqrt(t * lg) + lg)


def grr_variance(epsilon: float, d: int, n: float = 1, f: RealLike = 0.0) -> Real:
    """Variance of k-ary RR as a frequency oracle on ``d`` symbols ([PAN] section 2.1):
    ``[q(1-q) + f(p-q)(1-p-q)] / (n (p-q)^2)`` with ``p = e/(e+d-1)``, ``q = 1/(e+d-1)``."""
    _, e, em1 = _eps(epsilon)
    d = check_int("d", d, 2)
    n, f = _n(n), _f(f)
    denom = em1 + d
    p, q = e / denom, 1 / denom
    pq = em1 / denom
    return _out((q * (1 - q) + f * pq * (1 - p - q)) / (n * pq**2))
