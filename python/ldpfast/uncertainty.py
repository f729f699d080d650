"""How an :class:`ldpfast.estimates.Estimate` gets its standard errors, intervals and tests.

Each protocol's registration (``Protocol.variance``) returns one of these models for the
estimates of its default estimator; each model states the quantity its intervals cover
(:attr:`Uncertainty.target`):

* :class:`PlugIn`: an unbiased estimate that is an average of ``n`` independent bounded
  per-user terms, with a closed-form variance ``Var(f)`` (``ldpfast.theory``). The standard
  error is ``sqrt(Var(fhat))``, or ``Var`` at the nearest point of [0, 1] where that is
  larger: below 0 an affine or quadratic closed form that grows with ``f`` falls (to 0 for
  GRR at large ``d``) while the truth there is 0, whose variance is the estimate's spread, so
  ``fhat -+ z std`` keeps its level for every value; one that falls with ``f`` is kept, exact
  for the sketch targets that collisions push below 0 (CMS+HE, Hashtogram's mean).
  Intervals are *score* intervals ``{f : |fhat - f| <= z sqrt(Var(f))}`` (the same ``Var``;
  not ``fhat -+ z std``) and the test of ``f <= t`` uses ``Var(t)``: both evaluate the
  variance at the frequency under test, so they keep their level where the plug-in one
  would not (small counts, where the variance changes fast with ``f``). Optionally an exact
  count test (:class:`BinomialCounts`).
* :class:`BinomialCounts`: the report count of a candidate is a sum of independent
  Bernoullis with two success probabilities (GRR, OLH): exact p-values from that
  Poisson-binomial upper tail, no normal approximation.
* :class:`MedianOfGroups`: the median of ``k`` independent group estimates (HadaOracle,
  HadaHeavy, Hashtogram, TreeHist-CS), each approximately normal with a closed-form
  variance: the median's exact distribution under that model when the groups share their
  expectation (no hashing), bounds valid for any expectations otherwise.
* :class:`MinimumOfRows`: the minimum of ``K`` sketch rows (Multi-PCMS-Min), each unbiased
  for its own row frequency with a known variance: an interval for the smallest row
  frequency that is valid whatever the rows' differences, and a conservative test.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from statistics import NormalDist
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

__all__ = ["Uncertainty", "PlugIn", "BinomialCounts", "MedianOfGroups", "MinimumOfRows", "QuadraticVariance",
           "TRUE_FREQUENCY", "binomial_sum_sf", "normal_sf"]

#: The target of an unbiased frequency oracle.
TRUE_FREQUENCY = "f: the share of the n users holding the value"
#: ``f -> Var(fhat)`` per candidate, for frequencies ``f`` (arrays broadcast).
VarianceFn = Callable[[Any], Any]
Interval = Tuple[np.ndarray, np.ndarray]
_NORMAL = NormalDist()


def normal_sf(z: Any) -> np.ndarray:
    """``P(Z > z)`` for standard normal ``Z``, elementwise (erfc keeps small tails accurate)."""
    arr = np.asarray(z, dtype=np.float64)
    out = np.frompyfunc(lambda v: 0.5 * math.erfc(v / math.sqrt(2.0)), 1, 1)(arr)
    return np.asarray(out, dtype=np.float64).reshape(arr.shape)


class Uncertainty:
    """Standard errors, intervals and one-sided tests of a vector of estimates.

    Every method takes ``rows``, the positions of the estimates among the candidates the
    model was built for (an :class:`~ldpfast.estimates.Estimate` keeps them through
    ``top_k`` and ``heavy_hitters``), and returns one value per row.

    Attributes:
        note: how the standard errors are obtained (formula and source).
        target: the quantity the intervals cover and the tests are about.
    """

    note: str = ""
    target: str = TRUE_FREQUENCY

    def std(self, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Standard errors of the estimates ``values``."""
        raise NotImplementedError

    def interval(self, values: np.ndarray, rows: np.ndarray, alpha: float) -> Interval:
        """Two-sided ``1 - alpha`` intervals for :attr:`target`, per estimate."""
        raise NotImplementedError

    def p_values(self, values: np.ndarray, rows: np.ndarray, threshold: float) -> np.ndarray:
        """P-values of ``H0: target <= threshold`` against ``target > threshold``."""
        raise NotImplementedError

    def std_at(self, frequency: float, rows: np.ndarray) -> np.ndarray:
        """The standard errors the estimates would have if the target were ``frequency``."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True, eq=False)
class QuadraticVariance:
    """``f -> a + b f + c f^2`` per candidate (``coefficients``: ``(3, size)``): a closed form
    that pickles. A model's variance function (often a closure over the server) becomes one
    of these when the model is pickled; the models use nothing else of it."""

    coefficients: np.ndarray

    def __call__(self, f: Any) -> np.ndarray:
        a, b, c = self.coefficients
        f = np.asarray(f, dtype=np.float64)
        return np.asarray(a + f * (b + c * f))


def _quadratic(variance: VarianceFn, size: int, cache: Dict[str, np.ndarray]) -> np.ndarray:
    """``(3, size)``: ``Var(f) = a + b f + c f^2`` per candidate through ``f = 0, 1/2, 1``
    (exact for the affine and quadratic closed forms, an interpolation otherwise)."""
    if isinstance(variance, QuadraticVariance):
        return variance.coefficients
    found = cache.get("quadratic")
    if found is None:
        at = [np.broadcast_to(np.asarray(variance(np.full(size, f)), dtype=np.float64), (size,))
              for f in (0.0, 0.5, 1.0)]
        c = 2.0 * (at[2] - 2.0 * at[1] + at[0])
        found = np.stack([at[0], at[2] - at[0] - c, c])
        cache["quadratic"] = found
    return found


def _picklable_state(model: Any, field: str) -> Dict[str, Any]:
    """``model.__dict__`` for pickling, its variance function ``field`` replaced by the
    :class:`QuadraticVariance` the model evaluates it as (closures over servers and lambdas
    do not pickle; joblib, multiprocessing and Dask pickle estimates)."""
    state = dict(model.__dict__)
    state[field] = QuadraticVariance(_quadratic(state[field], model.size, model._cache))
    state["_cache"] = {}
    return state


# -- plug-in closed forms ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BinomialCounts:
    """Exact tests for estimates that are affine in a report count ``C``, a sum of
    independent Bernoullis: ``p`` for each user holding the value, ``q`` for each other
    user (GRR: the report equals the value, ``p = e^eps/(e^eps + d - 1)``,
    ``q = 1/(e^eps + d - 1)``; OLH: the user's hash of the value equals the report,
    ``p = e^eps/(e^eps + g - 1)``, ``q = 1/g`` over the draw of the user's hash).

    Under ``f <= t`` at most ``m = floor(n t)`` users hold the value and ``C`` is
    stochastically largest at ``m``, where ``C ~ Binomial(m, p) + Binomial(n - m, q)``; the
    p-value is that Poisson-binomial's upper tail at the observed count, computed exactly
    (two binomial pmfs by their ratio recursion in log space, one convolution, a tail sum
    from the far end: relative accuracy ~1e-12, no normal approximation).

    Attributes: ``n``; ``p``, ``q`` (the sampler's probabilities); ``share``: the
    estimator's map ``C/n = share[0] + share[1] fhat``, which recovers each count exactly
    from its estimate (the estimate is ``C`` times a constant plus a constant).
    """

    n: int
    p: float
    q: float
    share: Tuple[float, float]

    def counts(self, values: np.ndarray) -> np.ndarray:
        """The report counts the estimates ``values`` were computed from."""
        exact = self.n * (self.share[0] + self.share[1] * np.asarray(values, dtype=np.float64))
        counts = np.rint(exact)
        if not np.all(np.abs(exact - counts) < 0.01):
            raise RuntimeError("BinomialCounts.share does not map these estimates back to integer counts")
        return counts.astype(np.int64)

    def p_values(self, values: np.ndarray, threshold: float) -> np.ndarray:
        holders = min(self.n, int(math.floor(self.n * threshold + 1e-9)))
        start, tail = binomial_sum_sf(holders, self.p, self.n - holders, self.q)
        index = self.counts(values) - start
        out = np.ones(index.shape, dtype=np.float64)
        inside = index > 0
        beyond = index >= tail.size
        out[inside & ~beyond] = tail[index[inside & ~beyond]]
        out[beyond] = 0.0
        return out


def _binomial_pmf(trials: int, prob: float) -> Tuple[int, np.ndarray]:
    """``(start, pmf)``: the Binomial(trials, prob) pmf on ``[start, start + len)``, the
    support where it exceeds ~1e-320 (log-space ratio recursion from the mode)."""
    if trials == 0 or prob <= 0.0:
        return 0, np.ones(1)
    if prob >= 1.0:
        return trials, np.ones(1)
    mode = min(trials, int(math.floor((trials + 1) * prob)))
    log_mode = (math.lgamma(trials + 1) - math.lgamma(mode + 1) - math.lgamma(trials - mode + 1)
                + mode * math.log(prob) + (trials - mode) * math.log1p(-prob))
    odds = math.log(prob) - math.log1p(-prob)
    spread = int(40 * math.sqrt(trials * prob * (1 - prob)) + 60)
    while True:   # widen until both ends are below ~1e-322 or at the support's ends
        lo, hi = max(0, mode - spread), min(trials, mode + spread)
        up = np.arange(mode, hi, dtype=np.float64)              # k -> k + 1 for k in [mode, hi)
        down = np.arange(mode, lo, -1, dtype=np.float64)        # k -> k - 1 for k in (lo, mode]
        right = log_mode + np.cumsum(np.log((trials - up) / (up + 1.0)) + odds)
        left = log_mode + np.cumsum(np.log(down / (trials - down + 1.0)) - odds)
        if (hi == trials or right[-1] < -742.0) and (lo == 0 or left[-1] < -742.0):
            break
        spread *= 2
    log_pmf = np.concatenate([left[::-1], [log_mode], right])
    keep = np.flatnonzero(log_pmf > -740.0)
    return lo + int(keep[0]), np.exp(log_pmf[keep[0]:keep[-1] + 1])


@functools.lru_cache(maxsize=64)
def binomial_sum_sf(m: int, p: float, rest: int, q: float) -> Tuple[int, np.ndarray]:
    """``(start, tail)`` with ``tail[j] = P(C >= start + j)`` for
    ``C ~ Binomial(m, p) + Binomial(rest, q)``, over the support where the pmf exceeds
    ~1e-320 (``P(C >= c) = 1`` below ``start``, 0 past the end)."""
    s1, pmf1 = _binomial_pmf(m, p)
    s2, pmf2 = _binomial_pmf(rest, q)
    if pmf1.size * pmf2.size <= 50_000_000:
        pmf = np.convolve(pmf1, pmf2)
    else:   # FFT: absolute error ~1e-16 of the mode, so tails below ~1e-13 are not exact
        size = pmf1.size + pmf2.size - 1
        pmf = np.maximum(np.fft.irfft(np.fft.rfft(pmf1, 2 * size) * np.fft.rfft(pmf2, 2 * size))[:size], 0.0)
    tail = np.cumsum(pmf[::-1])[::-1]
    tail = np.minimum(tail / tail[0], 1.0)
    tail.flags.writeable = False
    return s1 + s2, tail


@dataclasses.dataclass(frozen=True, eq=False)
class PlugIn(Uncertainty):
    """Closed-form variance ``variance(f)`` (per candidate, broadcasting; evaluated at
    ``f = 0, 1/2, 1`` only, so it must be a polynomial of degree at most 2 in ``f``, as every
    closed form of ldpfast is, to be exact) of an unbiased, asymptotically normal estimator
    of :attr:`target`, over ``size`` candidates; see the module docstring for the standard
    errors, score intervals and tests. ``counts``: exact p-values instead of the normal test."""

    variance: VarianceFn
    size: int
    note: str = ""
    target: str = TRUE_FREQUENCY
    counts: Optional[BinomialCounts] = None
    _cache: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self) -> Dict[str, Any]:
        return _picklable_state(self, "variance")

    def _variance(self, f: Any, rows: np.ndarray) -> np.ndarray:
        """``Var(f)``, or ``Var`` at the nearest point of [0, 1] where that is larger: below 0
        a closed form that grows with ``f`` falls (to 0 for GRR at large ``d``), while a
        frequency there is 0, whose variance that is."""
        a, b, c = _quadratic(self.variance, self.size, self._cache)[:, rows]
        f = np.asarray(f, dtype=np.float64)
        edge = np.clip(f, 0.0, 1.0)
        return np.asarray(np.maximum(a + f * (b + c * f), a + edge * (b + c * edge)))

    def std(self, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.asarray(np.sqrt(self._variance(values, rows)))

    def std_at(self, frequency: float, rows: np.ndarray) -> np.ndarray:
        return np.asarray(np.sqrt(self._variance(float(frequency), rows)))

    def interval(self, values: np.ndarray, rows: np.ndarray, alpha: float) -> Interval:
        """The hull of ``{f : (fhat - f)^2 <= z^2 V(f)}`` with ``V`` the variance of
        :meth:`std` (the set holds ``fhat``): the roots of
        ``(1 - z^2 c) f^2 - (2 fhat + z^2 b) f + fhat^2 - z^2 a`` (``V`` the polynomial),
        joined below 0 by ``fhat -+ z sd(0)`` and above 1 by ``fhat -+ z sd(1)``."""
        z = _NORMAL.inv_cdf(1.0 - alpha / 2.0)
        a, b, c = _quadratic(self.variance, self.size, self._cache)[:, rows]
        z2 = z * z
        lead = 1.0 - z2 * c
        half = 2.0 * values + z2 * b
        disc = half * half - 4.0 * lead * (values * values - z2 * a)
        quadratic = lead > 1e-9
        safe = np.where(quadratic, lead, 1.0)
        root = np.sqrt(np.maximum(disc, 0.0))
        wald = z * self.std(values, rows)
        # complex roots: no f has (fhat - f)^2 <= z^2 times the polynomial, only the edge pieces count;
        # lead <= 0, a variance growing like f^2 / z^2 or faster (no closed form of ldpfast): the plug-in interval
        pieces = [(np.where(quadratic, np.where(disc >= 0, (half - root) / (2 * safe), np.inf), values - wald),
                   np.where(quadratic, (half + root) / (2 * safe), values + wald))]
        below, above = (z * np.sqrt(self._variance(edge, rows)) for edge in (0.0, 1.0))
        pieces += [(values - below, np.minimum(values + below, 0.0)), (np.maximum(values - above, 1.0), values + above)]
        low = np.min([np.where(lo <= hi, lo, np.inf) for lo, hi in pieces], axis=0)
        high = np.max([np.where(lo <= hi, hi, -np.inf) for lo, hi in pieces], axis=0)
        return low, high

    def p_values(self, values: np.ndarray, rows: np.ndarray, threshold: float) -> np.ndarray:
        if self.counts is not None:
            return self.counts.p_values(values, threshold)
        return normal_sf((values - threshold) / self.std_at(threshold, rows))


# -- order statistics of k independent standard normals ------------------------------------------
def _at_least(k: int, r: int, s: np.ndarray) -> np.ndarray:
    """``P(Binomial(k, s) >= r)`` elementwise (log-space sum; the normal approximation with
    continuity correction for ``k > 401``)."""
    s = np.clip(np.asarray(s, dtype=np.float64), 0.0, 1.0)
    if k > 401:
        return normal_sf((r - 0.5 - k * s) / np.sqrt(np.maximum(k * s * (1 - s), 1e-300)))
    with np.errstate(divide="ignore"):
        log_s, log_t = np.log(s), np.log1p(-s)
    out = np.zeros(s.shape)
    for j in range(r, k + 1):
        log_c = math.lgamma(k + 1) - math.lgamma(j + 1) - math.lgamma(k - j + 1)
        with np.errstate(invalid="ignore"):
            out += np.exp(np.nan_to_num(log_c + j * log_s + (k - j) * log_t, nan=-np.inf, neginf=-np.inf))
    return np.minimum(out, 1.0)


def _median_cdf(k: int, z: Any) -> np.ndarray:
    """``P(median of k standard normals <= z)`` (``k`` odd)."""
    return _at_least(k, (k + 1) // 2, 1.0 - normal_sf(z))


@functools.lru_cache(maxsize=256)
def median_quantile(k: int, p: float) -> float:
    """The ``p``-quantile of the median of ``k`` independent standard normals (bisection)."""
    lo, hi = -12.0, 12.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if float(_median_cdf(k, mid)) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def min_quantile(k: int, p: float) -> float:
    """The ``p``-quantile of the minimum of ``k`` independent standard normals:
    ``Phi^-1(1 - (1 - p)^(1/k))``."""
    return _NORMAL.inv_cdf(-math.expm1(math.log1p(-p) / k))


@functools.lru_cache(maxsize=256)
def _order_sd(k: int, which: str) -> float:
    """The standard deviation of the median (``which="median"``) of ``k`` independent
    standard normals, or the root mean square of their minimum (``"min-rms"``), by
    numerical integration of its density."""
    z = np.linspace(-12.0, 12.0, 24001)
    cdf = 1.0 - normal_sf(z)
    density = np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    if which == "median":
        r = (k + 1) // 2
        log_c = math.log(k) + math.lgamma(k) - math.lgamma(r) - math.lgamma(k - r + 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_weight = log_c + (r - 1) * np.log(cdf) + (k - r) * np.log1p(-cdf)
        weight = np.exp(np.nan_to_num(log_weight, nan=-np.inf)) if k > 1 else np.ones_like(z)
    else:
        weight = k * np.power(1.0 - cdf, k - 1)
    g = weight * density
    g /= g.sum()
    mean = 0.0 if which == "min-rms" else float((z * g).sum())
    return math.sqrt(float(((z - mean) ** 2 * g).sum()))


@dataclasses.dataclass(frozen=True, eq=False)
class MedianOfGroups(Uncertainty):
    """The median of ``groups`` (odd) independent group estimates, each approximately
    normal around its own expectation ``theta_j`` with variance ``sigma^2 =
    group_variance(f)`` (per candidate); the target is ``theta_med``, the median of the
    ``theta_j`` (``f`` when no hashing: every ``theta_j = f``).

    * ``homogeneous=True`` (no hashing, all ``theta_j`` equal): the median is
      ``theta + sigma Z`` with ``Z`` the median of ``k`` standard normals, whose
      distribution is exact (binomial in the normal CDF): standard error ``sigma sd(Z)``,
      interval ``fhat -+ sigma q_Z(1 - alpha/2)``, p-value
      ``P(Binomial(k, P(N > (fhat - t)/sigma)) >= (k + 1)/2)``.
    * ``homogeneous=False`` (hashed: collisions make the ``theta_j`` differ): bounds valid
      whatever the ``theta_j``. The median exceeds ``theta_med + z sigma`` only if one of
      the ``r = (k + 1)/2`` groups with ``theta_j <= theta_med`` does, so
      ``P <= 1 - (1 - P(N > z))^r``: interval ``fhat -+ z sigma`` with that bound at
      ``alpha/2``, p-value ``1 - (1 - P(N > (fhat - t)/sigma))^r``, and standard error
      ``sigma`` (the median of normals with any centres has at most the groups' standard
      deviation: Gaussian Poincare inequality, its gradient is a unit vector)."""

    group_variance: VarianceFn
    groups: int
    size: int
    note: str = ""
    target: str = TRUE_FREQUENCY
    homogeneous: bool = True
    _cache: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self) -> Dict[str, Any]:
        return _picklable_state(self, "group_variance")

    def _sigma(self, f: Any, rows: np.ndarray) -> np.ndarray:
        a, b, c = _quadratic(self.group_variance, self.size, self._cache)[:, rows]
        f = np.clip(f, 0.0, 1.0)
        return np.asarray(np.sqrt(np.maximum(a + f * (b + c * f), 0.0)))

    def _spread(self) -> float:
        return _order_sd(self.groups, "median") if self.homogeneous else 1.0

    def std(self, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self._sigma(values, rows) * self._spread()

    def std_at(self, frequency: float, rows: np.ndarray) -> np.ndarray:
        return self._sigma(float(frequency), rows) * self._spread()

    def interval(self, values: np.ndarray, rows: np.ndarray, alpha: float) -> Interval:
        if self.homogeneous:
            z = median_quantile(self.groups, 1.0 - alpha / 2.0)
        else:
            r = (self.groups + 1) // 2
            z = _NORMAL.inv_cdf(math.exp(math.log1p(-alpha / 2.0) / r))     # (1 - alpha/2)^(1/r)
        half = self._sigma(values, rows) * z
        return values - half, values + half

    def p_values(self, values: np.ndarray, rows: np.ndarray, threshold: float) -> np.ndarray:
        above = normal_sf((values - threshold) / self._sigma(float(threshold), rows))
        r = (self.groups + 1) // 2
        if self.homogeneous:
            return _at_least(self.groups, r, above)
        return np.asarray(-np.expm1(r * np.log1p(-np.minimum(above, 1.0 - 1e-16))))


@dataclasses.dataclass(frozen=True, eq=False)
class MinimumOfRows(Uncertainty):
    """The minimum over ``rows`` sketch rows of row estimates that are unbiased for their
    own row frequencies ``theta_k`` (each ``>= f``: collisions only add) with variance
    ``row_variance(f)``. For the target ``theta_min = min_k theta_k``:
    ``[fhat - sigma z_{1-alpha/2}, fhat - sigma m_{alpha/2}]`` (``m_p`` the ``p``-quantile of
    the minimum of ``rows`` standard normals) covers it with probability ``>= 1 - alpha``
    whatever the differences between the rows (the row attaining ``theta_min`` bounds the
    lower end, the minimum of equal rows the upper one); the p-value of
    ``theta_min <= t`` is the one-row normal tail, conservative for the same reason. The
    standard error is ``sigma sqrt(E min^2)``, the root mean square error when the rows are
    equal (the estimate is then biased down by ``sigma |E min|``): ``fhat -+ z std`` covers
    ``theta_min`` with probability ``P(|min| <= z sqrt(E min^2))`` there, exactly ``1 - alpha``
    for 2 rows and more for more rows at ``alpha <= 0.1`` (the spread ``sigma sd(min)``
    alone covered 80% at 90% for 2 rows)."""

    row_variance: VarianceFn
    rows_per_estimate: int
    size: int
    note: str = ""
    target: str = TRUE_FREQUENCY
    _cache: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self) -> Dict[str, Any]:
        return _picklable_state(self, "row_variance")

    def _sigma(self, f: Any, rows: np.ndarray) -> np.ndarray:
        a, b, c = _quadratic(self.row_variance, self.size, self._cache)[:, rows]
        f = np.clip(f, 0.0, 1.0)
        return np.asarray(np.sqrt(np.maximum(a + f * (b + c * f), 0.0)))

    def std(self, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self._sigma(values, rows) * _order_sd(self.rows_per_estimate, "min-rms")

    def std_at(self, frequency: float, rows: np.ndarray) -> np.ndarray:
        return self._sigma(float(frequency), rows) * _order_sd(self.rows_per_estimate, "min-rms")

    def interval(self, values: np.ndarray, rows: np.ndarray, alpha: float) -> Interval:
        sigma = self._sigma(values, rows)
        return (values - sigma * _NORMAL.inv_cdf(1.0 - alpha / 2.0),
                values - sigma * min_quantile(self.rows_per_estimate, alpha / 2.0))

    def p_values(self, values: np.ndarray, rows: np.ndarray, threshold: float) -> np.ndarray:
        return normal_sf((values - threshold) / self._sigma(float(threshold), rows))
