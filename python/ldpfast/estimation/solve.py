"""IBU (expectation-maximisation) and maximum-likelihood frequency estimates from a
:class:`~ldpfast.estimation.channel.Channel`.

Both maximise the channel's log-likelihood ``L(f) = sum_j y_j log (A f)_j`` over the
probability simplex (the candidates' frequencies and, when present, the rest column):

* :func:`ibu` runs the EM / iterative Bayesian update ``f <- f * A^T(y/(Af)) / sum(y)``
  from the uniform vector (Agrawal and Aggarwal 2001; ElSalamouny and Palamidessi 2020).
  Each step costs one ``forward`` and one ``adjoint`` and never decreases ``L``.
* :func:`mle` returns the maximiser itself: exactly (to rounding) by a one-dimensional
  dual search when the likelihood is separable (symbol and support channels), else by EM
  accelerated with SQUAREM, run to a tight gap.

**Convergence rule.** ``L`` is concave, so with the gradient ``g = A^T(y/(Af))`` at ``f``,
``L(f*) - L(f) <= max_x g_x - sum_x f_x g_x = max_x g_x - sum(y)`` (the Frank-Wolfe
duality gap). Iteration stops when that certified gap per unit of observed weight,
``(max g - sum y)/sum y`` (per report for a categorical channel, per report and candidate
for support counts), is below ``tol`` (or after ``max_iter`` steps, with a
:class:`~ldpfast.errors.ConvergenceWarning`; the result records the gap reached).

**Default stopping rule** (``tol=None``): a total gap of ``c^2/2`` nats, i.e.
``tol = c^2 / (2 sum(y))``, with ``c = 0.3`` for IBU and ``0.01`` for the MLE. Why: near
the maximiser ``L(f*) - L(f) ~ e' H e / 2`` (``e = f - f*``, ``H`` the observed
information of all the reports), and by Cauchy-Schwarz every linear functional obeys
``(a'e)^2 <= (a' H^-1 a)(e' H e)``, where ``a' H^-1 a`` is the Fisher variance of ``a'f*``.
So a gap ``<= c^2/2`` puts every frequency (and every sum of frequencies) within ``c``
standard errors of the maximum-likelihood estimate, to the quadratic approximation: the
rule follows the statistical noise, ``1/n``, for every ``n`` and ``d``. The chi-square
scale ``(columns - 1)/2`` (the mean log-likelihood ratio of the truth) would only bound
the sum over all directions; on sparse data the uniform start already meets it (GRR,
eps = 4, ``d = 73,446``, ``n = 10^5`` Zipf users: a gap of 998 nats against 36,722, with
the most frequent value 1.7 standard errors from its MLE). The bound is loose: GRR,
eps = 2, ``d = 50``, ``n = 20,000`` Zipf users, IBU meets ``c = 0.3`` after 5,374 steps
at 0.022 standard errors from the MLE. Plain EM approaches frequencies of 0 slowly, so
IBU may need many steps (``d = 1000``, ``n = 10^5``: 67,000); the MLE's accelerated EM
needs far fewer.

Fits that run longer than a second draw a progress line on stderr
(:mod:`ldpfast._progress`: the step, the gap and its target).

**Uncertainty.** (What estimates carry: :mod:`ldpfast.estimation.accuracy`, which adds
the bootstrap bias where it can.) :func:`fisher_std` gives standard errors from the expected Fisher
information at the estimate, restricted to the simplex:
``Cov = (D^-1 - D^-1 1 1' D^-1 / 1'D^-1 1) / n`` for a diagonal information ``D`` (the
symbol and support channels), or the same projection of a dense information matrix for
other channels with few columns, less the users' own multinomial variance
``f (1 - f)/n`` (the estimates are of the users who reported, not of a population).
These are asymptotic (interior-point) standard errors; near the boundary ``f = 0`` the
estimates are biased upwards and the normal approximation is poor. For a composite
likelihood they ignore the correlation between candidates' counts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import warnings
from typing import Iterator, Optional, Tuple

import numpy as np

from .. import _progress
from ..errors import ConvergenceWarning, ParameterError
from .channel import Channel, Separable

__all__ = ["Fit", "ibu", "mle", "fisher_std", "log_likelihood", "duality_gap", "default_tol", "IBU_PRECISION",
           "MLE_PRECISION"]

_TINY = 1e-300

#: The default stopping rules, in standard errors of the MLE (module docstring).
IBU_PRECISION = 0.3
MLE_PRECISION = 0.01


@dataclasses.dataclass(frozen=True)
class Fit:
    """A fitted frequency vector.

    Attributes:
        values: the frequencies of the channel's columns (the candidates, then the rest
            column when the channel has one); non-negative, summing to 1.
        iterations: EM steps taken (0 for the exact separable solver).
        gap: the certified log-likelihood gap per unit of observed weight at ``values``
            (see the module docstring); rounding-level for the exact solver.
        converged: whether ``gap <= tol`` was reached.
        method: ``"ibu"`` or ``"mle"``.
        tol: the stopping rule's gap per unit of observed weight.
    """

    values: np.ndarray
    iterations: int
    gap: float
    converged: bool
    method: str
    tol: float = math.nan


def default_tol(channel: Channel, precision: float) -> float:
    """The gap per unit of observed weight, ``precision^2 / (2 sum(y))``, that puts every
    frequency within ``precision`` standard errors of the MLE (module docstring)."""
    return precision * precision / (2.0 * float(channel.observed.sum()))


def _check_options(channel: Channel, tol: Optional[float], max_iter: int, precision: float) -> Tuple[float, int]:
    if tol is None:
        tol = default_tol(channel, precision)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0.0 < tol < 1.0:
        raise ParameterError(f"tol must be None or in (0, 1), got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ParameterError(f"max_iter must be a positive integer, got {max_iter!r}")
    return float(tol), int(max_iter)


@contextlib.contextmanager
def _watched(channel: Channel, method: str, tol: float, max_iter: int) -> Iterator[Channel]:
    """``channel``, whose adjoint (one per EM step) draws the fit's progress line when
    progress is on (:class:`ldpfast._progress.IterationProgress`)."""
    if not _progress.get_progress():
        yield channel
        return
    line = _progress.IterationProgress(f"{method} over {channel.columns:,} columns", max_iter, tol)
    total = float(channel.observed.sum())

    def adjoint(w: np.ndarray) -> np.ndarray:
        g = channel.adjoint(w)
        line.advance(max(float(g.max()) - total, 0.0) / total)
        return g
    try:
        yield dataclasses.replace(channel, adjoint=adjoint)
    finally:
        line.close()


def _checked(fit: Fit, channel: Channel, tol: float, max_iter: int) -> Fit:
    """``fit`` with its stopping rule; a :class:`ConvergenceWarning` when it stopped at the
    step limit."""
    if not fit.converged:
        nats = fit.gap * float(channel.observed.sum())
        warnings.warn(f"{fit.method} stopped at max_iter={max_iter} EM steps with a certified log-likelihood gap of "
                      f"{fit.gap:.3g} per unit of observed weight ({nats:.3g} nats), above tol={tol:.3g}: each "
                      f"frequency is within about {math.sqrt(2.0 * nats):.3g} standard errors of the "
                      f"maximum-likelihood estimate; raise max_iter" + (" or use method='mle'" if fit.method == "ibu"
                                                                         else ""),
                      ConvergenceWarning, stacklevel=_outside_the_package())
    return dataclasses.replace(fit, tol=tol)


def _outside_the_package() -> int:
    """The ``stacklevel`` of ``warnings.warn`` called here that names the first caller
    outside ldpfast (the user's ``server.frequencies(...)`` or ``ibu(...)`` line)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(2), 2          # 1: the function that warns
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def log_likelihood(channel: Channel, f: np.ndarray) -> float:
    """``sum_j y_j log (A f)_j`` (cells with ``y_j = 0`` contribute nothing)."""
    y = channel.observed
    used = y > 0
    return float(np.dot(y[used], np.log(np.maximum(channel.forward(f)[used], _TINY))))


def _gradient(channel: Channel, f: np.ndarray) -> np.ndarray:
    y = channel.observed
    return channel.adjoint(np.divide(y, np.maximum(channel.forward(f), _TINY)))


def duality_gap(channel: Channel, f: np.ndarray) -> float:
    """The certified bound ``(max_x g_x - sum y)/sum y >= (L(f*) - L(f))/sum y``."""
    g = _gradient(channel, f)
    total = float(channel.observed.sum())
    return max(float(g.max()) - total, 0.0) / total


def _em(channel: Channel, f: np.ndarray, tol: float, max_iter: int, method: str) -> Fit:
    total = float(channel.observed.sum())
    gap = math.inf
    for it in range(max_iter + 1):
        g = _gradient(channel, f)
        gap = max(float(g.max()) - total, 0.0) / total
        if gap <= tol or it == max_iter:
            return Fit(f, it, gap, gap <= tol, method)
        f = f * g / total
        f /= f.sum()                # keeps rounding from drifting off the simplex
    raise AssertionError("unreachable")


def ibu(channel: Channel, tol: Optional[float] = None, max_iter: int = 10_000,
        start: Optional[np.ndarray] = None) -> Fit:
    """Iterative Bayesian update (EM) from ``start`` (default uniform over the columns),
    until the certified gap per unit of observed weight is ``<= tol`` (None: within
    :data:`IBU_PRECISION` standard errors of the MLE, :func:`default_tol`) or ``max_iter``
    steps (then a :class:`~ldpfast.errors.ConvergenceWarning`)."""
    tol, max_iter = _check_options(channel, tol, max_iter, IBU_PRECISION)
    f = np.full(channel.columns, 1.0 / channel.columns) if start is None else np.asarray(start, dtype=np.float64)
    with _watched(channel, "ibu", tol, max_iter) as watched:
        fit = _em(watched, f.copy(), tol, max_iter, "ibu")
    return _checked(fit, channel, tol, max_iter)


def mle(channel: Channel, tol: Optional[float] = None, max_iter: int = 100_000) -> Fit:
    """The maximum-likelihood frequencies: exact for a separable channel, else EM from the
    uniform vector to a certified gap ``<= tol`` per unit of observed weight (None: within
    :data:`MLE_PRECISION` standard errors, :func:`default_tol`), at most ``max_iter`` EM
    steps (then a :class:`~ldpfast.errors.ConvergenceWarning`)."""
    tol, max_iter = _check_options(channel, tol, max_iter, MLE_PRECISION)
    if channel.separable is not None:
        values = _separable_mle(channel.separable, channel.columns)
        if values is not None:
            return Fit(values, 0, duality_gap(channel, values), True, "mle", tol)
    with _watched(channel, "mle", tol, max_iter) as watched:
        fit = _squarem(watched, np.full(channel.columns, 1.0 / channel.columns), tol, max_iter)
    return _checked(fit, channel, tol, max_iter)


def _squarem(channel: Channel, f: np.ndarray, tol: float, max_iter: int) -> Fit:
    """EM accelerated by SQUAREM (Varadhan and Roland 2008, scheme S3): two EM steps give
    ``r = f1 - f0`` and ``v = f2 - 2 f1 + f0``; the step ``f0 - 2 a r + a^2 v`` with
    ``a = -|r|/|v|`` (floored at ``1e-8 f``, renormalized) is kept only when one EM step from it does
    not lower the likelihood, else the plain EM iterate is. ``iterations`` counts EM steps."""
    total = float(channel.observed.sum())

    def step(x: np.ndarray) -> Tuple[np.ndarray, float]:
        g = _gradient(channel, x)
        out = x * g / total
        return out / out.sum(), max(float(g.max()) - total, 0.0) / total

    steps = 0
    while True:
        f1, gap = step(f)
        steps += 1
        if gap <= tol or steps >= max_iter:
            return Fit(f, steps - 1, gap, gap <= tol, "mle")
        with np.errstate(divide="ignore", invalid="ignore"):
            steepest = int(np.argmax(np.where(f > 0, f1 / f, -np.inf)))     # argmax g where f > 0
        if f[steepest] < _STARVED * float(f.max()):
            f = _frank_wolfe_step(channel, f, steepest)
            continue
        f2, _ = step(f1)
        r, v = f1 - f, f2 - 2.0 * f1 + f
        norm_v = float(np.linalg.norm(v))
        alpha = -float(np.linalg.norm(r)) / norm_v if norm_v > 0 else -1.0
        alpha = min(alpha, -1.0)
        # never exactly 0: EM cannot revive a zeroed coordinate
        jump = np.maximum(f - 2.0 * alpha * r + alpha * alpha * v, 1e-8 * f)
        candidate, _ = step(jump / jump.sum())
        steps += 2
        f = candidate if log_likelihood(channel, candidate) >= log_likelihood(channel, f2) else f2


_STARVED = 1e-6


def _frank_wolfe_step(channel: Channel, f: np.ndarray, column: int) -> np.ndarray:
    """The likelihood's maximum on the segment from ``f`` to the vertex ``e_column``.

    SQUAREM's extrapolation can push a column to ~1e-100, where EM's multiplicative step
    ``f_x g_x / sum(y)`` cannot revive it even when its gradient says it should grow (the
    certified gap then stalls for 1e5 steps). A Frank-Wolfe step along ``e_column - f``
    restores it at once; it never lowers ``L``, as ``L`` is concave along the segment and
    its slope at ``f`` is ``g_column - sum(y) > 0``. The step is found by bisection on
    that slope, ``sum_j y_j (c_j - u_j)/(u_j + t (c_j - u_j))`` with ``u = A f``,
    ``c = A e_column``."""
    y = channel.observed
    used = y > 0
    vertex = np.zeros_like(f)
    vertex[column] = 1.0
    u = channel.forward(f)[used]
    direction = channel.forward(vertex)[used] - u
    weights = y[used]

    def slope(t: float) -> float:
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = weights * direction / (u + t * direction)
        return float(np.where(np.isnan(terms), -np.inf, terms).sum())

    lo, hi = 0.0, 1.0
    if slope(hi) < 0.0:
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if slope(mid) > 0.0:
                lo = mid
            else:
                hi = mid
        hi = lo
    moved = (1.0 - hi) * f + hi * vertex
    return np.asarray(moved / moved.sum())


# -- the separable likelihood: one-dimensional dual search ---------------------------------------
def _column_optimum(s: Separable, lam: float) -> np.ndarray:
    """Per column, the ``f_x >= 0`` where the derivative of its term equals ``lam``."""
    b = s.b
    mu = lam / b
    if s.y0 is None:
        # y1 b/(a + b f) = lam  ->  pi = y1 / mu
        with np.errstate(divide="ignore", invalid="ignore"):
            pi = np.where(mu > 0, s.y1 / mu, np.inf)
    else:
        # y1/pi - y0/(1 - pi) = mu  ->  mu pi^2 - (mu + t) pi + y1 = 0, t = y1 + y0 (stable root)
        t = s.y1 + s.y0
        disc = np.sqrt(np.maximum((mu + t) ** 2 - 4.0 * mu * s.y1, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            pi = np.where(mu + t + disc > 0, 2.0 * s.y1 / (mu + t + disc), 1.0)
    return np.asarray(np.maximum((pi - s.a) / b, 0.0))


def _separable_mle(s: Separable, columns: int) -> Optional[np.ndarray]:
    k = s.a.size

    def mass(lam: float) -> float:
        return float(_column_optimum(s, lam).sum())

    if s.free_rest and mass(0.0) <= 1.0:
        lam = 0.0                   # the unconstrained optimum already leaves room for the rest
    else:
        # mass() decreases in lam; bracket the root of mass(lam) = 1, then bisect to rounding
        total = float(s.y1.sum() + (0.0 if s.y0 is None else s.y0.sum()))
        lo, hi = (-total, 0.0) if s.y0 is not None else (0.0, total)
        if s.y0 is None:
            hi = max(hi, 1e-300)
            while mass(hi) > 1.0:
                lo, hi = hi, hi * 2.0
        else:
            step = max(total, 1.0)
            lo, hi = -step, step
            for _ in range(60):
                if mass(lo) >= 1.0:
                    break
                lo *= 4.0
            else:
                return None         # no reports support any candidate: no dual bracket
            while mass(hi) > 1.0:
                hi *= 2.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            if mass(mid) > 1.0:
                lo = mid
            else:
                hi = mid
        lam = hi
    f = _column_optimum(s, lam)
    if s.free_rest:
        f = np.append(f, max(1.0 - float(f.sum()), 0.0))
    f = f / f.sum()
    assert f.size == columns == k + int(s.free_rest)
    return np.asarray(f)


# -- standard errors --------------------------------------------------------------------------
_DENSE_COLUMNS = 4096
_DENSE_CELLS = 1 << 24


def fisher_std(channel: Channel, f: np.ndarray) -> Tuple[np.ndarray, str]:
    """Standard errors of the columns' frequencies from the expected Fisher information
    at ``f`` on the simplex (see the module docstring), and a note. NaN when the
    information is dense and the channel has more than 4096 columns.

    The information treats the users as drawn from a population with frequencies ``f``;
    the estimates describe the users who reported, so the multinomial variance of that
    draw, ``f (1 - f)/n``, is subtracted (for GRR in the interior this gives exactly the
    closed-form variance of the unbiased estimate, which the MLE then equals)."""
    std, note = _fisher_population_std(channel, f)
    if np.isnan(std).all():
        return std, note
    fixed = np.maximum(std * std - f * (1.0 - f) / channel.n, 0.0)
    return np.sqrt(fixed), note + ", less the users' own sampling variance"


def _fisher_population_std(channel: Channel, f: np.ndarray) -> Tuple[np.ndarray, str]:
    n = channel.n
    if channel.information is not None:
        info = channel.information(f)
        with np.errstate(divide="ignore"):
            inv = np.where(info > 0, 1.0 / info, np.inf)
        finite = np.isfinite(inv)
        if finite.all():
            s = float(inv.sum())
            var = inv - inv * inv / s
        else:                       # a column the likelihood leaves free absorbs the constraint
            var = np.where(finite, inv, np.nan)
        return np.sqrt(np.maximum(var, 0.0) / n), "expected Fisher information at the estimate (diagonal)"
    if channel.columns > _DENSE_COLUMNS or channel.observed.size * channel.columns > _DENSE_CELLS:
        return (np.full(channel.columns, np.nan),
                f"no Fisher standard errors: the information matrix is dense and the channel has more than "
                f"{_DENSE_COLUMNS} columns or 2^24 cells x columns")
    a = channel.dense()
    if channel.column_sum is None:      # cells are reports: the observed information per report
        pi = np.maximum(a @ f, _TINY)
        info = (a.T / (pi * pi)) @ a / n
    else:
        info = (a.T / np.maximum(a @ f, _TINY)) @ a     # E[y] = n A f: per report, A' diag(1/(Af)) A
    # tangent space of the simplex: the columns' deviations from their mean
    k = channel.columns
    basis = np.eye(k)[:, :-1] - np.eye(k)[:, -1:]
    cov_t = np.linalg.pinv(basis.T @ info @ basis)
    cov = basis @ cov_t @ basis.T
    return np.sqrt(np.maximum(np.diag(cov), 0.0) / n), "expected Fisher information at the estimate (dense)"
