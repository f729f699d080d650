"""Frequency estimates with standard errors, intervals, significance tests and
consistency post-processing.

``server.frequencies(candidates)`` (any aggregator) returns an :class:`Estimate`::

    est = server.frequencies(np.arange(1000))
    est.values, est.std                      # raw unbiased estimates, standard errors
    low, high = est.confidence_interval(0.05)
    est.top_k(10)                            # the 10 largest, best first
    est.heavy_hitters(0.01, fdr=0.05)        # f > 1% with the false-discovery rate <= 5%
    est.postprocess("simplex")               # nearest probability vector (Euclidean)
    est.to_pandas()

Standard errors come from each protocol's closed-form variance (:mod:`ldpfast.theory`)
evaluated at the **plug-in** frequency ``clip(fhat, 0, 1)``: the variance depends on the
unknown true ``f`` only through terms of order ``f/n``, so the plug-in error is small
next to the leading ``1/n`` term. Protocols whose estimator has no closed-form variance
(HadaOracle/HadaHeavy's median, Multi-PCMS-Min's minimum, non-default estimators) get
``std = NaN`` and :attr:`Estimate.note` says why; intervals and tests then raise.

Intervals and tests use the normal approximation: each estimate is an average of ``n``
independent bounded per-user contributions, so by the central limit theorem
``(fhat - f)/std`` is approximately standard normal once ``n`` is in the thousands (for
very small frequencies with large ``n`` the approximation is good as well, since the
per-user terms are bounded randomized-response noise, not rare indicator events).
"""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist
from typing import Any, Callable, Optional, Tuple

import numpy as np

from .errors import ParameterError

__all__ = ["Estimate", "estimate", "project_simplex", "POSTPROCESSING", "FDR_METHODS"]

#: Consistency post-processing methods of :meth:`Estimate.postprocess`.
POSTPROCESSING = ("clip", "norm-sub", "norm-mul", "base-cut", "simplex")
#: Multiple-testing corrections of :meth:`Estimate.heavy_hitters`.
FDR_METHODS = ("bh", "by", "bonferroni")

_MAX_WHOLE_DOMAIN = 2**24
#: f (per-candidate true frequencies) -> Var(fhat) per candidate; the theory functions broadcast.
VarianceFn = Callable[[Any], Any]


def _normal_quantile(p: float) -> float:
    return NormalDist().inv_cdf(p)


def _upper_tail(z: np.ndarray) -> np.ndarray:
    """``P(Z > z)`` for standard normal Z (erfc keeps small tails accurate)."""
    scaled = np.asarray(z, dtype=np.float64) / math.sqrt(2.0)
    return np.array([0.5 * math.erfc(v) for v in scaled.ravel()], dtype=np.float64).reshape(scaled.shape)


def _check_alpha(name: str, alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) or not 0.0 < alpha < 1.0:
        raise ParameterError(f"{name} must be in (0, 1), got {alpha!r}")
    return float(alpha)


@dataclasses.dataclass(frozen=True, eq=False)
class Estimate:
    """Frequency estimates (fractions of ``n`` reports) of ``candidates``.

    Attributes:
        candidates: the values estimated (int64 or uint64).
        values: the estimates (raw and unbiased unless :attr:`postprocessing` says otherwise).
        std: plug-in standard errors of the raw estimates (NaN without a closed form).
        n: the number of reports aggregated.
        protocol: the protocol id.
        postprocessing: ``"raw"`` or the :meth:`postprocess` method applied.
        note: how the standard errors were obtained.
    """

    candidates: np.ndarray
    values: np.ndarray
    std: np.ndarray
    n: int
    protocol: str
    postprocessing: str = "raw"
    note: str = ""
    variance: Optional[VarianceFn] = dataclasses.field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.values.size)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.values, dtype=dtype)

    def __repr__(self) -> str:
        labels = self.candidates[:3]   # integers, or strings (RAPPOR's dictionaries)
        shown = ", ".join(f"{int(c) if np.asarray(labels).dtype.kind in 'iu' else c!s}: {v:.4g}"
                          for c, v in zip(labels, self.values[:3]))
        more = ", ..." if len(self) > 3 else ""
        return (f"Estimate(protocol={self.protocol!r}, n={self.n}, {len(self)} candidates "
                f"{{{shown}{more}}}, postprocessing={self.postprocessing!r})")

    # -- derived quantities ---------------------------------------------------------
    @property
    def counts(self) -> np.ndarray:
        """Estimated numbers of users: ``n * values``."""
        return self.values * self.n

    @property
    def count_std(self) -> np.ndarray:
        """Standard errors of :attr:`counts`: ``n * std``."""
        return self.std * self.n

    def _require_raw(self, what: str) -> None:
        if self.postprocessing != "raw":
            raise ParameterError(f"{what} needs the raw (unbiased) estimates; this Estimate was post-processed "
                                 f"with {self.postprocessing!r}: call it on the Estimate before postprocess()")
        if self.variance is None or np.isnan(self.std).any():
            raise ParameterError(f"{what} needs standard errors, which {self.protocol!r} does not have: {self.note}")

    def confidence_interval(self, alpha: float = 0.05, counts: bool = False) -> Tuple[np.ndarray, np.ndarray]:
        """Two-sided ``1 - alpha`` intervals ``values -+ z_{1-alpha/2} std`` (normal
        approximation, per candidate, not simultaneous; for simultaneous coverage of ``k``
        candidates pass ``alpha / k``). ``counts=True`` scales them by ``n``.

        Raises:
            ParameterError: alpha not in (0, 1); no standard errors; post-processed values.
        """
        alpha = _check_alpha("alpha", alpha)
        self._require_raw("confidence_interval")
        half = _normal_quantile(1.0 - alpha / 2.0) * self.std
        scale = float(self.n) if counts else 1.0
        return (self.values - half) * scale, (self.values + half) * scale

    def p_values(self, threshold: float) -> np.ndarray:
        """One-sided p-values of ``H0: f(x) <= threshold`` against ``f(x) > threshold``:
        ``P(Z > (fhat - threshold)/sd_threshold)`` with ``sd_threshold`` the standard error
        at ``f = threshold`` (the boundary of the null hypothesis)."""
        threshold = float(threshold)
        if not 0.0 <= threshold <= 1.0:
            raise ParameterError(f"threshold must be a frequency in [0, 1], got {threshold!r}")
        self._require_raw("p_values")
        return _upper_tail((self.values - threshold) / self._std_at(threshold))

    def _std_at(self, frequency: float) -> np.ndarray:
        """Standard errors of every candidate's estimate if its frequency were ``frequency``."""
        assert self.variance is not None  # checked by _require_raw
        variance = self.variance(np.full(len(self), frequency))
        return np.sqrt(np.broadcast_to(np.asarray(variance, dtype=np.float64), self.values.shape))

    # -- selections -----------------------------------------------------------------
    def _subset(self, index: np.ndarray) -> "Estimate":
        return dataclasses.replace(self, candidates=self.candidates[index], values=self.values[index],
                                   std=self.std[index])

    def sorted(self) -> "Estimate":
        """The candidates by decreasing estimate (ties by candidate order)."""
        return self._subset(np.argsort(-self.values, kind="stable"))

    def top_k(self, k: int) -> "Estimate":
        """The ``k`` candidates with the largest estimates, best first (ties by candidate
        order); fewer when there are fewer candidates."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ParameterError(f"k must be a positive integer, got {k!r}")
        return self._subset(np.argsort(-self.values, kind="stable")[:int(k)])

    def heavy_hitters(self, threshold: float, fdr: float = 0.05, method: str = "bh") -> "Estimate":
        """The candidates declared to have ``f(x) > threshold``, best first, with the
        expected share of false declarations controlled.

        Each candidate gets the one-sided test of :meth:`p_values`; the p-values are then
        corrected for testing all candidates at once:

        * ``"bh"`` (default): Benjamini-Hochberg step-up at level ``fdr``. Controls the
          false-discovery rate ``E[#false / max(#declared, 1)] <= fdr`` when the test
          statistics are independent or positively dependent; the estimates of different
          candidates are only weakly correlated (through the shared ``n`` and, for hashed
          protocols, collisions).
        * ``"by"``: Benjamini-Yekutieli, valid under any dependence, more conservative
          (level ``fdr / sum_{i<=k} 1/i``).
        * ``"bonferroni"``: reject when ``p < fdr / k``; controls the probability of any
          false declaration (family-wise error), hence also the FDR.

        Validity rests on the normal approximation (see the module docstring).

        Raises:
            ParameterError: bad arguments; no standard errors; post-processed values.
        """
        fdr = _check_alpha("fdr", fdr)
        if method not in FDR_METHODS:
            raise ParameterError(f"method must be one of {FDR_METHODS}, got {method!r}")
        pvals = self.p_values(threshold)
        k = pvals.size
        if k == 0:
            return self._subset(np.zeros(0, dtype=np.int64))
        if method == "bonferroni":
            declared = np.flatnonzero(pvals < fdr / k)
        else:
            level = fdr if method == "bh" else fdr / float(np.sum(1.0 / np.arange(1, k + 1)))
            order = np.argsort(pvals, kind="stable")
            passing = np.flatnonzero(pvals[order] <= level * np.arange(1, k + 1) / k)
            declared = order[:passing[-1] + 1] if passing.size else np.zeros(0, dtype=np.int64)
        chosen = self._subset(np.sort(declared))
        return chosen.sorted()

    # -- consistency post-processing --------------------------------------------------
    def postprocess(self, method: str, total: float = 1.0, alpha: float = 0.05) -> "Estimate":
        """Estimates made consistent (biased, but often more accurate; Wang et al., "Locally
        Differentially Private Frequency Estimation with Consistency", NDSS 2020):

        * ``"clip"``: clip to ``[0, 1]``.
        * ``"norm-sub"``: Wang et al.'s Norm-Sub: set negatives to 0 and subtract the same
          amount from every positive estimate, repeated until all are non-negative and they
          sum to ``total``.
        * ``"simplex"``: the Euclidean projection onto ``{w >= 0, sum w = total}`` (the
          nearest consistent vector). It coincides with Norm-Sub, computed in one sort.
        * ``"norm-mul"``: set negatives to 0 and rescale the rest to sum to ``total``.
        * ``"base-cut"``: set to 0 every estimate below the significance threshold
          ``z_{1-alpha/k} sd_0`` (``sd_0`` = standard error at ``f = 0``, Bonferroni over the
          ``k`` candidates) and keep the others; non-negative, not normalized.

        ``total`` is 1 when the candidates are the whole domain; pass the share of users
        they cover otherwise.

        Raises:
            ParameterError: unknown method, bad ``total``/``alpha``, or base-cut without
                standard errors.
        """
        if method not in POSTPROCESSING:
            raise ParameterError(f"method must be one of {POSTPROCESSING}, got {method!r}")
        total = float(total)
        if not (math.isfinite(total) and total > 0):
            raise ParameterError(f"total must be a positive number, got {total!r}")
        v = np.asarray(self.values, dtype=np.float64)
        if method == "clip":
            out = np.clip(v, 0.0, 1.0)
        elif method == "simplex":
            out = project_simplex(v, total)
        elif method == "norm-sub":
            out = _norm_sub(v, total)
        elif method == "norm-mul":
            out = np.maximum(v, 0.0)
            mass = out.sum()
            out = out * (total / mass) if mass > 0 else np.full_like(v, total / max(v.size, 1))
        else:
            alpha = _check_alpha("alpha", alpha)
            self._require_raw("base-cut")
            cut = _normal_quantile(1.0 - alpha / max(v.size, 1)) * self._std_at(0.0)
            out = np.where(v >= cut, v, 0.0)
        return dataclasses.replace(self, values=out, postprocessing=method)

    # -- export ----------------------------------------------------------------------
    def to_pandas(self, alpha: float = 0.05) -> Any:
        """A ``pandas.DataFrame`` with columns ``candidate, estimate, std, count`` and, for
        raw estimates with standard errors, ``ci_low, ci_high`` (``1 - alpha``).

        Raises:
            ImportError: pandas is not installed.
        """
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Estimate.to_pandas() needs pandas, which is not installed: "
                              "pip install pandas") from None
        frame = pd.DataFrame({"candidate": self.candidates, "estimate": self.values, "std": self.std,
                              "count": self.counts})
        if self.postprocessing == "raw" and self.variance is not None and not np.isnan(self.std).any():
            frame["ci_low"], frame["ci_high"] = self.confidence_interval(alpha)
        frame.attrs.update(protocol=self.protocol, n=self.n, postprocessing=self.postprocessing)
        return frame


def project_simplex(values: Any, total: float = 1.0) -> np.ndarray:
    """The Euclidean projection of ``values`` onto ``{w : w >= 0, sum(w) = total}``:
    ``w = max(v - theta, 0)`` with ``theta`` found from the sorted values (Held, Wolfe and
    Crowder 1974; Duchi et al. 2008)."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        raise ParameterError("cannot project an empty vector onto the simplex")
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - total
    ranks = np.arange(1, v.size + 1)
    rho = int(np.flatnonzero(u - cumulative / ranks > 0)[-1])
    theta = cumulative[rho] / (rho + 1)
    return np.asarray(np.maximum(v - theta, 0.0))


def _norm_sub(values: np.ndarray, total: float) -> np.ndarray:
    """Norm-Sub as Wang et al. state it (iterative; at most ``len(values)`` rounds, since
    each round that changes anything zeroes at least one more estimate)."""
    if values.size == 0:
        raise ParameterError("cannot normalize an empty vector")
    out = values.copy()
    active = np.ones(out.size, dtype=bool)
    for _ in range(out.size + 1):
        out[~active] = 0.0
        out[active] -= (out[active].sum() - total) / active.sum()
        negative = active & (out < 0)
        if not negative.any():
            break
        active &= ~negative
    return out


# -- per-protocol closed-form variances (each protocol's registration) ------------------------
#: The note of a standard error from a registered closed form, followed by its source.
PLUG_IN = "closed form of ldpfast.theory at the plug-in f = clip(estimate, 0, 1)"


def _variance_for(server: Any, candidates: np.ndarray) -> Tuple[Optional[VarianceFn], str]:
    """``(f -> Var(fhat) per candidate, note)`` from the protocol's registered closed form
    (``Protocol.variance``), or ``(None, reason)`` where none fits the default estimator."""
    from ._base import protocol

    hook = protocol(server.protocol).variance
    if hook is None:
        return None, (f"no closed-form variance for {server.protocol!r}'s estimator (the protocol registers "
                      "none); measure its error by simulation (ldpfast.experiments)")
    return hook(server, candidates)


def _default_candidates(server: Any) -> np.ndarray:
    """What ``server.estimate()`` answers for: the registration's ``default_candidates``
    (when it gives any), else the whole domain ``[0, d)``."""
    from ._base import protocol

    hook = protocol(server.protocol).default_candidates
    labels = None if hook is None else hook(server)
    if labels is not None:
        return np.asarray(labels)
    if server.params.d > _MAX_WHOLE_DOMAIN:
        raise ParameterError(f"candidates must be given when d > 2^24, got d={server.params.d}")
    return np.arange(server.params.d, dtype=np.int64)


def estimate(server: Any, candidates: Any = None) -> Estimate:
    """The :class:`Estimate` of ``server`` (any aggregator) for ``candidates`` (``None``:
    what ``server.estimate()`` answers for, e.g. the whole domain or the tracked items).
    Same as ``server.frequencies(candidates)``.

    Raises:
        ReportError: no reports aggregated. ParameterError: invalid candidates.
    """
    labels = _default_candidates(server) if candidates is None else np.asarray(candidates)
    if labels.ndim == 0:
        labels = labels.reshape(1)
    values = np.asarray(server.estimate(labels), dtype=np.float64)
    variance, note = _variance_for(server, labels)
    if variance is None:
        std = np.full(values.shape, np.nan)
    else:
        std = np.sqrt(np.broadcast_to(variance(np.clip(values, 0.0, 1.0)), values.shape)).astype(np.float64)
    return Estimate(candidates=labels, values=values, std=std, n=int(server.n), protocol=server.protocol,
                    note=note, variance=variance)
