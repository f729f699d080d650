"""Coverage of the IBU/MLE standard errors over the whole domain, values never held
included: ``estimate +- 1.96 std`` (std: the root mean square error of
ldpfast.estimation.accuracy) must cover the reporting users' true frequency in 95% of
seeded runs. Each coverage is a binomial proportion over R runs; a check fails only
below ``0.95 - z sqrt(0.95 * 0.05 / R)`` with z = 4 (one-sided 3e-5 per check, 1e-3 over
the 30 values and the two averages: Bonferroni). The intervals are conservative where the
truth is 0 (measured coverage about 0.99 there; see ldpfast.estimation.accuracy)."""

import math
import warnings

import numpy as np
import pytest

from ldpfast.errors import ConvergenceWarning
from ldpfast.protocols.frequency import grr, pgr, unary

RUNS = 150
Z = 4.0


def _floor(runs=RUNS):
    return 0.95 - Z * math.sqrt(0.95 * 0.05 / runs)


def _coverage(make, method, d=30, n=5000):
    """Per value, the share of runs whose interval covers the truth; half the domain is never held."""
    params, server_type, client_type = make(d)
    values = np.minimum(np.random.default_rng(0).zipf(1.6, size=n) - 1, d // 2 - 1)
    truth = np.bincount(values, minlength=d) / n
    covered, reported, squared = np.zeros(d), np.zeros(d), np.zeros(d)
    for run in range(RUNS):
        server = server_type(params).update(client_type(params, rng=1000 + run).perturb(values))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fit = server.frequencies(method=method)
        assert np.isfinite(fit.std).all()
        covered += np.abs(fit.values - truth) <= 1.96 * fit.std
        reported += fit.std**2
        squared += (fit.values - truth) ** 2
    return covered / RUNS, truth, reported / squared


@pytest.mark.slow
@pytest.mark.parametrize("make", [
    lambda d: (grr.GRRParams(epsilon=2.0, d=d), grr.GRRServer, grr.GRRClient),
    lambda d: (unary.OUEParams(epsilon=2.0, d=d), unary.OUEServer, unary.OUEClient)], ids=["grr", "oue"])
def test_separable_mle_intervals_cover_the_whole_domain(make):
    coverage, truth, variance_ratio = _coverage(make, "mle")
    zero = truth == 0
    assert zero.sum() == 15
    assert coverage.min() >= _floor(), (coverage, truth)
    assert coverage[zero].mean() >= _floor() and coverage[~zero].mean() >= _floor()
    # the reported variance is not below the measured mean square error: the latter is a
    # mean of R squared errors, whose relative sd is at most sqrt(2/R) (normal errors)
    assert variance_ratio.min() >= 1.0 - Z * math.sqrt(2.0 / RUNS), variance_ratio


def test_wide_dense_channels_carry_the_debiased_closed_form():
    """PGR over more than 4096 candidates has a dense information matrix too wide to invert:
    its std is the debiased estimator's closed form at the estimates (never NaN)."""
    params = pgr.PGRParams(epsilon=2.0, d=5000, q=3)
    values = np.minimum(np.random.default_rng(0).zipf(1.6, size=20_000) - 1, 2499)
    server = pgr.PGRServer(params).update(pgr.PGRClient(params, rng=1).perturb(values))
    with pytest.warns(ConvergenceWarning):
        fit = server.frequencies(method="ibu", max_iter=20)
    model = server.frequencies().uncertainty
    np.testing.assert_allclose(fit.std, model.std(fit.values, np.arange(params.d)), rtol=1e-12)
    np.testing.assert_allclose(fit.std, np.sqrt(params.variance(server.n, fit.values)), rtol=1e-12)
    assert "debiased estimator's standard errors evaluated at the estimates" in fit.note
