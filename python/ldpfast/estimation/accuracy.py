"""The standard errors that IBU/MLE estimates carry (``Estimate.std``).

The likelihood estimates live on the simplex, so they are biased: a value whose true
frequency is 0 is estimated at 0 or above, and the mass those estimates take is missing
from the others (measured with GRR, eps = 2, d = 50 of which 25 values are never held,
n = 20,000: the largest frequencies sit 0.3 to 0.6 Fisher standard errors low on average,
and ``estimate +- 1.96 std`` covered them 90.5% to 94%). The Fisher standard error
(:func:`~ldpfast.estimation.solve.fisher_std`) ignores that bias, so where the exact
separable MLE makes refits cheap (symbol and support channels) the standard error is the
**root mean square error** ``sqrt(Fisher variance + bias^2)``, with the bias of each
frequency estimated by a parametric bootstrap: :data:`BOOTSTRAP_FITS` exact refits of
counts drawn from the fitted model (multinomial reports for a symbol channel, independent
binomial support counts for a support channel), less the bootstrap's own Monte Carlo
share ``s^2/B``. The draws use a fixed seed, so the errors are a function of the state
(this randomness is the server's arithmetic, not the users' privacy). Other channels keep
the Fisher standard error, and the note says that it ignores the bias.

``estimate +- 1.96 std`` is a plain normal interval; it covers values never held (an
estimate at or near 0 with a full standard error) conservatively, and the others at
about the nominal rate (``tests/test_estimation_coverage.py``, GRR and OUE, eps = 2,
d = 30 of which 15 never held, n = 5,000, 150 runs: every value covered in at least 92%
(GRR) and 94% (OUE) of runs, the never-held ones in 99% on average; the reported variance
is 0.97 to 1.5 times the measured mean square error at the eight most frequent values, up
to 2.6 times at rarer ones and 2.5 to 5.7 times at the never-held ones).
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from .channel import Channel, Separable
from .solve import _separable_mle, fisher_std

__all__ = ["standard_errors", "bootstrap_bias", "BOOTSTRAP_FITS"]

#: Refits behind the bootstrap bias (each costs one exact separable fit, ``O(columns)``
#: per step of its dual search): the bias estimate's Monte Carlo error is ``1/sqrt(40)``
#: of a standard error, and its expected share of the squared bias is subtracted.
BOOTSTRAP_FITS = 40


def bootstrap_bias(channel: Channel, f: np.ndarray, fits: int = BOOTSTRAP_FITS) -> Optional[np.ndarray]:
    """The parametric bootstrap's estimate of ``bias^2`` of the exact MLE at ``f``, per
    column (Monte Carlo share removed, floored at 0); None for a channel without a
    separable likelihood."""
    s = channel.separable
    if s is None:
        return None
    rng = np.random.default_rng(0)
    k = s.a.size
    hit = np.clip(s.a + s.b * f[:k], 0.0, 1.0)
    refits = []
    for _ in range(fits):
        y0: Optional[np.ndarray] = None
        if s.y0 is None:        # one report per user over the cells
            y1 = rng.multinomial(int(round(float(s.y1.sum()))), hit / hit.sum()).astype(np.float64)
        else:                   # each candidate's support count out of its trials
            trials = np.rint(s.y1 + s.y0).astype(np.int64)
            y1 = rng.binomial(trials, hit).astype(np.float64)
            y0 = trials - y1
        refit = _separable_mle(Separable(y1, y0, s.a, s.b, s.free_rest), channel.columns)
        if refit is not None:
            refits.append(refit)
    if len(refits) < 2:
        return None
    draws = np.asarray(refits)
    bias = draws.mean(axis=0) - f
    return np.asarray(np.maximum(bias * bias - draws.var(axis=0, ddof=1) / len(refits), 0.0))


def standard_errors(channel: Channel, f: np.ndarray) -> Tuple[np.ndarray, str]:
    """The standard errors of the fitted frequencies ``f`` and a note saying what they are
    (module docstring): the root mean square error where the bootstrap bias is available,
    else the Fisher standard error (NaN, with the reason, where that is too)."""
    std, note = fisher_std(channel, f)
    if np.isnan(std).all():
        return std, note
    squared_bias = bootstrap_bias(channel, f)
    if squared_bias is None:
        return std, note + "; this ignores the estimates' bias near 0 (not bootstrapped for this channel)"
    return (np.sqrt(std * std + squared_bias),
            f"root mean square error: {note}, plus the squared bias from {BOOTSTRAP_FITS} parametric bootstrap "
            "refits")
