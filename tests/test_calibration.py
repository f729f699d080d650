"""Every protocol's intervals cover the target its Estimate states at their level, its
estimates are unbiased for that target (where the estimator is linear), and
``heavy_hitters`` keeps its false-discovery rate, all measured on the same seeded runs
(``tests/_calibration.py``; the long characterization with 1,000 runs per case is
``bench/estimates_calibration.py``).

Tolerances (each check fails with probability about DELTA when the property holds):

* coverage: the per-run share ``c_r`` of the k candidates whose 90% interval (or error bar
  ``values -+ z std``) covers the target is bounded in [0, 1]; its mean over R runs is within
  ``z_{1-DELTA/2} s/sqrt(R)`` of 0.9 (CLT for a mean of R i.i.d. bounded variables: the runs
  are independent, the candidates of one run need not be), with
  ``s`` the larger of the sample standard deviation and the binomial value
  ``sqrt(0.09/k)`` (so a lucky small spread cannot make the bound too tight); the same over
  the candidates whose target is 0. Models that are bounds (``Case.exact`` False:
  upper-bound variances, hashed medians, minima) and the error bars are only held to the
  lower side.
* unbiasedness: each candidate's mean estimate is within ``z_{1-DELTA/2k}`` sample
  standard errors of the target (Bonferroni over the candidates).
* FDR at q = 0.1: the mean false-discovery proportion (bounded in [0, 1]) exceeds q by
  at most ``z_{1-DELTA} s/sqrt(R)``.
"""

import numpy as np
import pytest
from scipy import stats

import _calibration as calibration
from ldpfast._base import protocols

DELTA = 1e-4
RUNS = 100
ALPHA = 0.1
FDR = 0.1
CASES = sorted(name for name in calibration.CASES if not name.endswith("/null"))


def test_every_protocol_is_calibrated():
    assert {name.split("/")[0] for name in CASES} == {pid for pid, proto in protocols().items() if proto.builtin}


@pytest.fixture(scope="module", params=CASES)
def runs(request):
    return request.param, calibration.simulate(request.param, RUNS, alpha=ALPHA, fdr=FDR, seed=19)


def check_coverage(what, covered, exact):
    """``covered`` (runs x candidates, bool) has mean 1 - ALPHA (at least, unless ``exact``),
    over all candidates and over those whose target is 0 (none for most hashed targets)."""
    for subset, share in (("all", covered), ("target 0", covered[:, what[2]])):
        if not share.size:
            continue
        per_run = share.mean(axis=1)
        s = max(per_run.std(ddof=1), np.sqrt(ALPHA * (1 - ALPHA) / share.shape[1]))
        tol = stats.norm.ppf(1 - DELTA / 2) * s / np.sqrt(RUNS)
        assert per_run.mean() >= 1 - ALPHA - tol, (*what[:2], subset, per_run.mean(), tol)
        if exact:
            assert per_run.mean() <= 1 - ALPHA + tol, (*what[:2], subset, per_run.mean(), tol)


def test_intervals_cover_the_stated_target(runs):
    name, sim = runs
    covered = (sim.low <= sim.target) & (sim.target <= sim.high)
    check_coverage((name, "confidence_interval", sim.target == 0), covered, calibration.CASES[name].exact)


def test_error_bars_of_the_std_cover_every_value(runs):
    """``values -+ z std``, the error bar ``to_pandas`` prints beside the interval, covers the
    target at least at its level, also where the target is 0 (held to the lower side only:
    below 0 the standard error is the one at 0, and a closed form that grows with f gives
    the positive estimates of a value at 0 wider bars than its spread)."""
    name, sim = runs
    covered = np.abs(sim.values - sim.target) <= stats.norm.ppf(1 - ALPHA / 2) * sim.std
    check_coverage((name, "values -+ z std", sim.target == 0), covered, False)


def test_estimates_are_unbiased_for_the_stated_target(runs):
    name, sim = runs
    if not calibration.CASES[name].linear:
        pytest.skip("a median or a minimum: not unbiased (its intervals are checked above)")
    k = sim.target.size
    se = sim.values.std(axis=0, ddof=1) / np.sqrt(RUNS)
    z = stats.norm.ppf(1 - DELTA / (2 * k))
    assert np.all(np.abs(sim.values.mean(axis=0) - sim.target) <= z * se + 1e-12), name


def test_heavy_hitters_keep_the_false_discovery_rate(runs):
    name, sim = runs
    fdp = sim.false_discovery_proportions
    assert fdp.mean() <= FDR + stats.norm.ppf(1 - DELTA) * fdp.std(ddof=1) / np.sqrt(RUNS), (name, fdp.mean())
