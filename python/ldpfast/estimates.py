"""Frequency estimates with standard errors, intervals, significance tests and
consistency post-processing.

``server.frequencies(candidates)`` (any aggregator) returns an :class:`Estimate`::

    est = server.frequencies(np.arange(1000))
    est.values, est.std                      # raw estimates, standard errors
    est.target                               # the quantity the intervals and tests are about
    low, high = est.confidence_interval(0.05)
    est.top_k(10)                            # the 10 largest, best first
    est.heavy_hitters(0.01, fdr=0.05)        # target > 1% with the false-discovery rate <= 5%
    est.postprocess("norm-sub")              # Wang et al.'s consistency methods
    est.to_pandas()

The standard errors, intervals and tests come from the protocol's registered model
(``Protocol.variance``, see :mod:`ldpfast.uncertainty`): a closed-form variance evaluated
at the estimate (standard errors; at 0 for a negative estimate where the variance grows
with ``f``, so ``values -+ z std`` covers values whose truth is 0 too) and at the frequency
under test (score intervals and tests), exact count tests where the estimate is affine in a count of independent reports
(GRR, OLH), the exact distribution of a median of group estimates (HadaOracle, HadaHeavy,
Hashtogram, TreeHist-CS) or of a minimum of sketch rows (Multi-PCMS-Min). :attr:`Estimate.target` says
what they cover: the true frequency ``f`` for unbiased oracles, a sketch frequency (at
least ``f``: collisions add to it) where the estimator is biased by hash collisions.
Protocols without a model get ``std = NaN`` and :attr:`Estimate.note` says why; intervals
and tests then raise.
"""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union, overload

import numpy as np

from ._aggregator import set_estimator
from ._labels import _flat, is_labels
from ._methods import _check_encoding
from ._optional import require
from ._registry import protocol
from .errors import ParameterError
from .postprocessing import base_cut, norm, norm_cut, norm_mul, norm_sub, project_simplex
from .uncertainty import TRUE_FREQUENCY, PlugIn, Uncertainty

__all__ = ["Estimate", "estimate", "project_simplex", "norm", "norm_sub", "norm_mul", "norm_cut", "base_cut",
           "POSTPROCESSING", "FDR_METHODS"]

#: Consistency post-processing methods of :meth:`Estimate.postprocess`.
POSTPROCESSING = ("clip", "norm", "norm-sub", "norm-mul", "norm-cut", "base-cut", "simplex")
#: Multiple-testing corrections of :meth:`Estimate.heavy_hitters`.
FDR_METHODS = ("bh", "by", "bonferroni")

_MAX_WHOLE_DOMAIN = 2**24


def _normal_quantile(p: float) -> float:
    return NormalDist().inv_cdf(p)


def _interval_alpha(alpha: Optional[float], confidence: Optional[float]) -> float:
    """The miss probability of an interval from ``alpha`` or ``confidence`` (scipy's
    keyword), refusing ``alpha > 0.5``, which is almost surely a confidence level."""
    if alpha is not None and confidence is not None:
        raise ParameterError(f"pass alpha or confidence, not both (got alpha={alpha!r}, confidence={confidence!r})")
    if confidence is not None:
        level = _check_alpha("confidence", confidence)
        if level < 0.5:
            raise ParameterError(f"confidence must be in [0.5, 1) (e.g. 0.95 for 95% intervals), got {confidence!r}")
        return 1.0 - level
    alpha = 0.05 if alpha is None else _check_alpha("alpha", alpha)
    if alpha > 0.5:
        raise ParameterError(f"alpha is the probability that an interval misses: alpha={alpha!r} asks for "
                             f"{1 - alpha:.0%} intervals. For {alpha:.0%} intervals pass confidence={alpha!r} "
                             f"(or alpha={1 - alpha:.3g})")
    return alpha


def _check_alpha(name: str, alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) or not 0.0 < alpha < 1.0:
        raise ParameterError(f"{name} must be in (0, 1), got {alpha!r}")
    return float(alpha)


@dataclasses.dataclass(frozen=True, eq=False)
class Estimate:
    """Frequency estimates (fractions of ``n`` reports) of ``candidates``.

    Attributes:
        candidates: the values estimated (int64 or uint64).
        values: the estimates (raw unless :attr:`postprocessing` says otherwise).
        std: standard errors of the raw estimates (NaN without a registered model):
            ``values -+ z std`` are normal-approximation error bars (see :mod:`ldpfast.uncertainty`);
            :meth:`confidence_interval` gives the model's intervals, which are not always those.
        n: the number of reports aggregated.
        protocol: the protocol id.
        postprocessing: ``"raw"`` or the :meth:`postprocess` method applied.
        note: how the standard errors were obtained.
        target: the quantity the intervals cover and the tests are about (``f``, the true
            frequency, for unbiased oracles; a sketch frequency where collisions bias the
            estimator; see :mod:`ldpfast.uncertainty`).
        uncertainty: the protocol's model (:class:`ldpfast.uncertainty.Uncertainty`), or None.
        rows: the positions of these candidates among those the model was built for.
        labels: the candidates' labels (object array) when the parameters have a domain
            (``params.with_domain``, :mod:`ldpfast.domain`) that decodes them, or when the
            candidates were given as labels; else None.
        method: the estimator: ``"debiased"`` (unbiased), ``"ibu"`` or ``"mle"``
            (likelihood-based, :mod:`ldpfast.estimation`; on the simplex, so biased near 0,
            with standard errors from the Fisher information).

    An Estimate behaves like its values: ``len(est)``, ``np.asarray(est)``, ``est[3]`` (the
    fourth estimate, a float), ``est["apple"]`` (a label's estimate), and ``est[1:5]``,
    ``est[mask]`` or ``est[[0, 2]]`` (an Estimate of those candidates). It pickles (joblib,
    multiprocessing, Dask), intervals and tests included.
    """

    candidates: np.ndarray
    values: np.ndarray
    std: np.ndarray
    n: int
    protocol: str
    postprocessing: str = "raw"
    note: str = ""
    target: str = TRUE_FREQUENCY
    uncertainty: Optional[Uncertainty] = dataclasses.field(default=None, repr=False)
    rows: Optional[np.ndarray] = dataclasses.field(default=None, repr=False)
    labels: Optional[np.ndarray] = dataclasses.field(default=None, repr=False)
    method: str = "debiased"

    def __len__(self) -> int:
        return int(self.values.size)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.values, dtype=dtype)

    def __iter__(self) -> Iterator[float]:
        return iter(self.values.tolist())

    @overload
    def __getitem__(self, key: Union[int, np.integer, str, bytes]) -> float: ...

    @overload
    def __getitem__(self, key: Union[slice, List[int], np.ndarray]) -> "Estimate": ...

    def __getitem__(self, key: Any) -> Any:
        """``est[i]``: the ``i``-th estimate (a float); ``est[label]``: the estimate of that
        label; a slice, integer array or boolean mask: an Estimate of those candidates."""
        if isinstance(key, (str, bytes)):
            if self.labels is None:
                raise KeyError(f"{key!r}: this Estimate has no labels (its parameters have no domain)")
            found = np.flatnonzero(self.labels == key)
            if not found.size:
                raise KeyError(key)
            return float(self.values[found[0]])
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            return float(self.values[int(key)])
        index = np.arange(len(self))[key]
        return self._subset(np.atleast_1d(index))

    def __repr__(self) -> str:
        if self.labels is not None:
            shown = ", ".join(f"{name!r}: {v:.4g}" for name, v in zip(self.labels[:3], self.values[:3]))
        else:
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

    def _model(self, what: str) -> Tuple[Uncertainty, np.ndarray]:
        if self.method != "debiased":
            raise ParameterError(f"{what} needs the debiased estimates; this Estimate holds {self.method!r} "
                                 f"estimates: use server.frequencies(method='debiased')")
        if self.postprocessing != "raw":
            raise ParameterError(f"{what} needs the raw (unbiased) estimates; this Estimate was post-processed "
                                 f"with {self.postprocessing!r}: call it on the Estimate before postprocess()")
        if self.uncertainty is None or self.rows is None:
            raise ParameterError(f"{what} needs standard errors, which {self.protocol!r} does not have: {self.note}")
        return self.uncertainty, self.rows

    def confidence_interval(self, alpha: Optional[float] = None, counts: bool = False, *,
                            confidence: Optional[float] = None) -> Tuple[np.ndarray, np.ndarray]:
        """Two-sided intervals for :attr:`target` at ``confidence`` (as scipy: ``0.95``) or,
        equivalently, ``1 - alpha`` (default 95%), per candidate (not simultaneous; for
        simultaneous coverage of ``k`` candidates pass ``alpha / k``). ``alpha`` above 0.5
        is refused: ``confidence_interval(0.95)`` would ask for 5% intervals (pass
        ``confidence=0.95``).
        For closed-form variances they are score intervals ``{f : |fhat - f| <= z_{1-alpha/2}
        sd(f)}`` (the variance at each candidate frequency, not only at the estimate), so
        they are not always ``values -+ z std``; medians and minima use their exact
        distributions (:mod:`ldpfast.uncertainty`). ``counts=True`` scales them by ``n``.

        Raises:
            ParameterError: alpha not in (0, 0.5], confidence not in [0.5, 1), both given;
                no standard errors; post-processed values.
        """
        alpha = _interval_alpha(alpha, confidence)
        model, rows = self._model("confidence_interval")
        low, high = model.interval(np.asarray(self.values, dtype=np.float64), rows, alpha)
        scale = float(self.n) if counts else 1.0
        return low * scale, high * scale

    def p_values(self, threshold: float) -> np.ndarray:
        """One-sided p-values of ``H0: target <= threshold`` against ``target > threshold``
        (:attr:`target` is the true frequency for unbiased oracles): the probability of an
        estimate at least this large at the boundary ``target = threshold``, from the exact
        count distribution where the protocol registers one (GRR, OLH), else from the normal
        model with the standard error at ``threshold``."""
        threshold = float(threshold)
        if not 0.0 <= threshold <= 1.0:
            raise ParameterError(f"threshold must be a frequency in [0, 1], got {threshold!r}")
        model, rows = self._model("p_values")
        return model.p_values(np.asarray(self.values, dtype=np.float64), rows, threshold)

    def _std_at(self, frequency: float) -> np.ndarray:
        """Standard errors of every candidate's estimate if its frequency were ``frequency``."""
        model, rows = self._model("base-cut")
        return np.broadcast_to(model.std_at(frequency, rows), self.values.shape)

    # -- selections -----------------------------------------------------------------
    def _subset(self, index: np.ndarray) -> "Estimate":
        rows = None if self.rows is None else self.rows[index]
        labels = None if self.labels is None else self.labels[index]
        return dataclasses.replace(self, candidates=self.candidates[index], values=self.values[index],
                                   std=self.std[index], rows=rows, labels=labels)

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
        """The candidates declared to have ``target > threshold`` (the true frequency for
        unbiased oracles, see :attr:`target`), best first, with the expected share of false
        declarations controlled.

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
        """Estimates made consistent (biased, but often more accurate), the methods of Wang,
        Lopuhaa-Zwakenberg, Li, Skoric and Li, "Locally Differentially Private Frequency
        Estimation with Consistency" (NDSS 2020), as the paper defines them (each is also
        a function of this module):

        * ``"base-cut"`` (Base-Cut, :func:`base_cut`): an estimate below the significance
          threshold ``T = Phi^-1(1 - alpha/k) sd_0`` (``sd_0`` its standard error at
          frequency 0, Bonferroni over the ``k`` candidates) becomes 0, the others stay.
        * ``"norm"`` (Norm, :func:`norm`): add the same ``delta`` to every estimate so they
          sum to ``total`` (may stay negative).
        * ``"norm-mul"`` (Norm-Mul, :func:`norm_mul`): negatives to 0, the rest scaled to
          sum to ``total``.
        * ``"norm-cut"`` (Norm-Cut, :func:`norm_cut`): negatives to 0; then, if the rest sum
          to more than ``total``, every estimate below the smallest ``theta`` with
          ``sum_{fhat >= theta} fhat <= total`` becomes 0 too (the sum may stay below ``total``).
        * ``"norm-sub"`` (Norm-Sub, :func:`norm_sub`): negatives to 0, then the same amount
          subtracted from (or added to) every positive estimate so they sum to ``total``,
          repeated until none is negative. Before ldpfast 0.2 this name returned the
          Euclidean projection, which differs whenever the positive estimates sum to less
          than ``total`` (the projection then lifts small negatives too).
        * ``"simplex"`` (the constrained least squares of the paper, :func:`project_simplex`):
          the Euclidean projection onto ``{w >= 0, sum w = total}``, the nearest consistent
          vector; equal to Norm-Sub when the positive estimates sum to at least ``total``.
        * ``"clip"``: clip to ``[0, 1]``.

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
        if method == "base-cut":
            alpha = _check_alpha("alpha", alpha)
            cut = _normal_quantile(1.0 - alpha / max(v.size, 1)) * self._std_at(0.0)
            out = base_cut(v, cut)
        elif method == "clip":
            out = np.clip(v, 0.0, 1.0)
        else:
            out = {"norm": norm, "norm-sub": norm_sub, "norm-mul": norm_mul, "norm-cut": norm_cut,
                   "simplex": project_simplex}[method](v, total)
        return dataclasses.replace(self, values=out, postprocessing=method)

    # -- export ----------------------------------------------------------------------
    def to_pandas(self, alpha: Optional[float] = None, *, confidence: Optional[float] = None) -> Any:
        """A ``pandas.DataFrame`` with columns ``candidate`` (and ``label`` when the
        estimate has labels), ``estimate, std, count`` and, for raw estimates with standard
        errors, ``ci_low, ci_high`` (at ``confidence``, or ``1 - alpha``; default 95%, for
        :attr:`target`, which ``frame.attrs["target"]`` names). ``ci_low, ci_high`` are
        :meth:`confidence_interval` (score intervals ``{f : |estimate - f| <= z sd(f)}`` for
        closed-form variances, the exact distribution of a median or a minimum otherwise),
        not ``estimate -+ z std``, the normal error bar of the ``std`` column: both cover
        every value at their level (the score interval more closely at small counts).

        Raises:
            MissingDependencyError: pandas is not installed (an ImportError).
        """
        pd = require("pandas", "Estimate.to_pandas()")
        columns: Dict[str, Any] = {"candidate": self.candidates}
        if self.labels is not None:
            columns["label"] = self.labels
        frame = pd.DataFrame({**columns, "estimate": self.values, "std": self.std, "count": self.counts})
        if self.postprocessing == "raw" and self.uncertainty is not None:
            frame["ci_low"], frame["ci_high"] = self.confidence_interval(alpha, confidence=confidence)
        frame.attrs.update(protocol=self.protocol, n=self.n, postprocessing=self.postprocessing, target=self.target)
        return frame


# -- each protocol's registered model -------------------------------------------------------------
#: The note of a standard error from a registered closed form, followed by its source.
PLUG_IN = ("closed form of ldpfast.theory at the estimate (standard error; at 0 or 1 outside [0, 1] where the "
           "variance is larger there) and at the frequency under test (score intervals and tests)")


def _uncertainty_for(server: Any, candidates: np.ndarray, registered: Any = None) -> Tuple[Optional[Uncertainty], str]:
    """The protocol's model for ``candidates`` (``Protocol.variance``: an
    :class:`~ldpfast.uncertainty.Uncertainty`, or ``(f -> Var(fhat), note)`` for a plug-in
    closed form), or ``(None, reason)`` where none fits the default estimator."""
    hook = (registered or protocol(server.protocol)).variance
    if hook is None:
        return None, (f"no standard errors for {server.protocol!r}'s estimator (the protocol registers none: "
                      "Protocol.variance); measure its error by simulation (ldpfast.experiments)")
    found = hook(server, candidates)
    if isinstance(found, Uncertainty):
        return found, found.note
    variance, note = found
    if variance is None:
        return None, note
    return PlugIn(variance, size=len(candidates), note=note), note


def _default_candidates(server: Any, registered: Any = None) -> np.ndarray:
    """What ``server.estimate()`` answers for: the registration's ``default_candidates``
    (when it gives any), else the whole domain ``[0, d)``."""
    hook = (registered or protocol(server.protocol)).default_candidates
    labels = None if hook is None else hook(server)
    if labels is not None:
        return np.asarray(labels)
    if server.params.d > _MAX_WHOLE_DOMAIN:
        raise ParameterError(f"candidates must be given when d > 2^24, got d={server.params.d}")
    return np.arange(server.params.d, dtype=np.int64)


def estimate(server: Any, candidates: Any = None, method: str = "debiased", **options: Any) -> Estimate:
    """The :class:`Estimate` of ``server`` (any aggregator) for ``candidates`` (``None``:
    what ``server.estimate()`` answers for, e.g. the whole domain or the tracked items).
    Same as ``server.frequencies(candidates, method, **options)``; ``method`` is one of
    ``ldpfast.estimation.METHODS`` (``options``: ``tol``, ``max_iter`` of IBU/MLE, and
    ``likelihood="full"`` for OLH/OCMS's kept reports).

    Raises:
        ReportError: no reports aggregated. ParameterError: invalid candidates or method.
        NotImplementedError: IBU/MLE for a protocol that registers no channel.
    """
    from .estimation import METHODS

    if method not in METHODS:
        raise ParameterError(f"method must be one of {METHODS}, got {method!r}")
    registered = protocol(server.protocol)
    domain = getattr(server.params, "label_domain", None)
    names = None
    if candidates is not None and domain is not None and is_labels(candidates):
        _check_encoding(server, domain, candidates)
        names = np.asarray(_flat(candidates), dtype=object)
        candidates = domain.encode(names)
    ids = _default_candidates(server, registered) if candidates is None else np.asarray(candidates)
    if ids.ndim == 0:
        ids = ids.reshape(1)
    if names is None and domain is not None and domain.decodes:
        names = domain.decode(ids)
    if method != "debiased":
        found = _likelihood_estimate(server, ids, method, **options)
    else:
        if options:
            raise ParameterError(f"options {sorted(options)} apply to method='ibu' or 'mle' only")
        values = np.asarray(server.estimate(ids), dtype=np.float64)
        found = _with_model(server, ids, values, *_uncertainty_for(server, ids, registered))
    return found if names is None else dataclasses.replace(found, labels=names)


def _with_model(server: Any, labels: np.ndarray, values: np.ndarray, model: Optional[Uncertainty],
                note: str) -> Estimate:
    """The :class:`Estimate` of ``values`` with the standard errors of ``model`` (None: NaN)."""
    rows = np.arange(values.size)
    std = np.full(values.shape, np.nan) if model is None else \
        np.broadcast_to(model.std(values, rows), values.shape).astype(np.float64)
    return Estimate(candidates=labels, values=values, std=std, n=int(server.n), protocol=server.protocol,
                    note=note, target=TRUE_FREQUENCY if model is None else model.target, uncertainty=model,
                    rows=None if model is None else rows)


def _likelihood_estimate(server: Any, labels: np.ndarray, method: str, **options: Any) -> Estimate:
    """IBU or MLE through the protocol's registered channel (:mod:`ldpfast.estimation`)."""
    from . import estimation

    hook_options = {key: options.pop(key) for key in ("likelihood",) if key in options}
    channel = estimation.channel_of(server, labels, **hook_options)
    fit = estimation.ibu(channel, **options) if method == "ibu" else estimation.mle(channel, **options)
    std, how = estimation.standard_errors(channel, fit.values)
    k = labels.size
    values, std = np.asarray(fit.values[:k]), np.asarray(std[:k])
    if np.isnan(std).any():
        # inside the simplex the MLE of a saturated channel is the debiased estimate: its closed form applies
        model, _ = _uncertainty_for(server, labels)
        if model is not None:
            std = np.broadcast_to(model.std(values, np.arange(k)), values.shape).astype(np.float64)
            how = (f"debiased estimator's standard errors evaluated at the estimates (interior approximation, "
                   f"which ignores the bias near 0), since there are {how}")
    rest = f"; mass outside the candidates {fit.values[k]:.4g}" if channel.rest else ""
    note = (f"{method}: {channel.note}; {fit.iterations} EM steps, relative log-likelihood gap "
            f"{fit.gap:.2g} (tol {fit.tol:.2g}){'' if fit.converged else ' (max_iter reached)'}{rest}; "
            f"std from the {how}")
    return Estimate(candidates=labels, values=values, std=std, n=int(server.n), protocol=server.protocol, note=note,
                    method=method)


set_estimator(estimate)
