"""Closed forms for PrivSketch ([PS]) and its sketch baselines ([PS] sections 3-4).

Frequencies are fractions of users; variances are of the frequency estimate of one item
from ``n`` users. ``K x M`` is the sketch shape.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .._validate import check_epsilon, check_int, check_real
from ._types import Real, RealLike
from .ocms import _out
from .hadamard import olh_g

__all__ = [
    "privsketch_flip_probability", "privsketch_nosmp_flip_probability", "multi_pcms_mean_flip_probability",
    "multi_pcms_min_flip_probability", "privsketch_variance", "privsketch_centred_variance",
    "privsketch_nosmp_variance", "privsketch_ldp_variance", "multi_pcms_mean_variance", "ps_olh_variance",
    "sampled_report_variance", "bloom_false_positive_rate",
]


def _check(eps: float, K: int, M: int, n: float) -> None:
    check_epsilon(eps)
    check_int("K", K, 1)
    check_int("M", M, 1)
    check_real("n", n)


def _rr_flip(eps: float) -> float:
    return 1.0 / (math.exp(eps) + 1.0)


def _rr_bit_variance(eps: float) -> float:
    """Var of the 0/1 debiased RR bit ``(c b + 1)/2``: ``e^eps/(e^eps-1)^2``."""
    return math.exp(eps) / math.expm1(eps) ** 2


def privsketch_flip_probability(epsilon: float) -> float:
    """Sampled PrivSketch (and its LDP-safe variant): ``1/(e^eps + 1)``."""
    return _rr_flip(epsilon)


def privsketch_nosmp_flip_probability(epsilon: float, K: int = 4, M: int = 128) -> float:
    """PrivSketch-noSmp: ``1/(e^{eps/(KM)} + 1)`` per cell."""
    return _rr_flip(epsilon / (K * M))


multi_pcms_min_flip_probability = privsketch_nosmp_flip_probability


def multi_pcms_mean_flip_probability(epsilon: float, M: int = 128) -> float:
    """Multi-PCMS-Mean: ``1/(e^{eps/M} + 1)`` per cell of the sent row."""
    return _rr_flip(epsilon / M)


def privsketch_variance(epsilon: float, n: float, ftilde: RealLike = 0.0, K: int = 4, M: int = 128) -> Real:
    """Var of the sampled PrivSketch estimate (the estimator of [PS]'s code, R2; derived here):
    ``[KM e^eps/(e^eps-1)^2 + (KM - 1) ftilde] / n``. At ``ftilde = 0`` it is the paper's
    ``KM e^eps/(n (e^eps-1)^2)``. ``ftilde`` (the count-min frequency) may be an array."""
    _check(epsilon, K, M, n)
    KM = K * M
    return (KM * _rr_bit_variance(epsilon) + (KM - 1) * np.asarray(ftilde, dtype=np.float64)) / n


def privsketch_centred_variance(epsilon: float, n: float, K: int = 4, M: int = 128) -> float:
    """Var of the centred alternative ``1/2 + (KM c/(2n)) sum I_i b_i``: ``(KM c^2 - 1)/(4n)``,
    with ``c = (e^eps+1)/(e^eps-1)``, for every ``ftilde`` (derived here)."""
    _check(epsilon, K, M, n)
    c = (math.exp(epsilon) + 1.0) / math.expm1(epsilon)
    return (K * M * c * c - 1.0) / (4.0 * n)


def privsketch_nosmp_variance(epsilon: float, n: float, K: int = 4, M: int = 128) -> float:
    """Var of PrivSketch-noSmp: ``e^{eps/KM} / (n (e^{eps/KM} - 1)^2)`` ([PS] Thm 3.2)."""
    _check(epsilon, K, M, n)
    return _rr_bit_variance(epsilon / (K * M)) / n


def privsketch_ldp_variance(epsilon: float, n: float, fbar: RealLike = 0.0, fbar_sq: Optional[RealLike] = None,
                            M: int = 128, K: int = 4) -> Real:
    """Var of the LDP-safe variant's count-mean estimate (``SafeServer.estimate("mean")``):
    ``[M e^eps/(e^eps-1)^2 + M fbar - mean_i fbar_i^2] / n`` where ``fbar_i`` is the share of
    user i's K cells of x that are 1 and ``fbar`` their mean; ``fbar_sq`` = mean of
    ``fbar_i^2`` (default ``fbar``, exact when every ``fbar_i`` is 0 or 1)."""
    _check(epsilon, K, M, n)
    fbar = np.asarray(fbar, dtype=np.float64)
    fbar_sq = fbar if fbar_sq is None else np.asarray(fbar_sq, dtype=np.float64)
    return _out((M * _rr_bit_variance(epsilon) + M * fbar - fbar_sq) / n)


def multi_pcms_mean_variance(epsilon: float, n: float, fbar: RealLike = 0.0, fbar_sq: Optional[RealLike] = None,
                             M: int = 128, K: int = 4) -> Real:
    """Var of the uncorrected Multi-PCMS-Mean estimate: ``[V + fbar - mean_i fbar_i^2]/n`` with
    ``V = e^{eps/M}/(e^{eps/M}-1)^2`` (the decoded bit's RR variance) and ``fbar_i`` the share
    of user i's K cells of x that are 1; it is unbiased for ``fbar``. ``fbar_sq`` defaults
    to ``fbar``."""
    _check(epsilon, K, M, n)
    fbar = np.asarray(fbar, dtype=np.float64)
    fbar_sq = fbar if fbar_sq is None else np.asarray(fbar_sq, dtype=np.float64)
    return _out((_rr_bit_variance(epsilon / M) + fbar - fbar_sq) / n)


def ps_olh_variance(epsilon: float, n: float, f: RealLike = 0.0, pad_len: int = 1, g: int = 0) -> Real:
    """Var of the PS-OLH estimate ``l chat/n`` of an item with frequency ``f`` when every
    holder's set has at most ``pad_len = l`` items (then it is unbiased for ``f``), with
    ideal pairwise-independent hashing (``g`` default OLH's ``round(e^eps) + 1``,
    :func:`ldpfast.theory.olh_g`):
    ``l^2 g^2 [f a(1-a) + (1-f) b(1-b)] / (n (p g - 1)^2)``, ``b = 1/g``,
    ``a = b + (p - b)/l``, ``p = e^eps/(e^eps + g - 1)``."""
    _check(epsilon, 1, 1, n)
    g = g or olh_g(epsilon)
    p = math.exp(epsilon) / (math.exp(epsilon) + g - 1)
    f = np.asarray(f, dtype=np.float64)
    b = 1.0 / g
    a = b + (p - b) / pad_len
    return pad_len ** 2 * g ** 2 * (f * a * (1 - a) + (1 - f) * b * (1 - b)) / (n * (p * g - 1) ** 2)


def sampled_report_variance(p: float, q: float, n: float, share: RealLike = 0.0) -> Real:
    """Var of ``(C/n - q)/(p - q)`` when user ``i``'s report supports ``x`` with probability
    ``q + s_i (p - q)``, ``s_i`` the chance that ``x`` is the value it samples (one item of
    its set, a padded slot) and ``share`` the mean of the ``s_i``:
    ``P (1 - P)/(n (p - q)^2)`` with ``P = q + share (p - q)`` (derived here). Exact when
    every ``s_i`` equals ``share``, an upper bound otherwise (``P (1 - P)`` is concave); it
    exceeds the fixed-population variance (holders report x for sure) by
    ``share (1 - share)/n``, the sampling's own variance. GRR: ``p = e/(e + m - 1)``,
    ``q = 1/(e + m - 1)``; OLH: ``p = e/(e + g - 1)``, ``q = 1/g``."""
    shares = np.asarray(share, dtype=np.float64)
    support = q + shares * (p - q)
    return _out(support * (1.0 - support) / (float(n) * (p - q) ** 2))


def bloom_false_positive_rate(L: RealLike, K: int = 4, M: int = 128) -> Real:
    """Probability that a non-member looks present in the count-min of a user with ``L``
    items (ideal random hashing): ``(1 - (1 - 1/M)^L)^K``."""
    L = np.asarray(L, dtype=np.float64)
    return (-np.expm1(L * math.log1p(-1.0 / M))) ** K
