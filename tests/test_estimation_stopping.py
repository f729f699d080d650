"""IBU/MLE stopping: the default rule (a certified gap of c^2/2 nats, so every frequency is
within c standard errors of the MLE), the ConvergenceWarning at the step limit, and the
progress line of long fits (ldpfast._progress)."""

import warnings

import numpy as np
import pytest

import ldpfast
from ldpfast import _progress
from ldpfast import estimation as est
from ldpfast.errors import ConvergenceWarning, ParameterError
from ldpfast.estimation.solve import _fisher_population_std
from ldpfast.protocols.frequency import grr, pgr


def _grr_server(n=20_000, d=50, epsilon=2.0, seed=3):
    params = grr.GRRParams(epsilon=epsilon, d=d)
    values = np.minimum(np.random.default_rng(seed).zipf(1.4, size=n) - 1, d - 1)
    return grr.GRRServer(params).update(grr.GRRClient(params, rng=seed).perturb(values))


def test_default_rule_scales_with_the_observed_weight():
    for n in (2_000, 20_000):
        channel = est.channel_of(_grr_server(n=n))
        total = channel.observed.sum()
        assert est.default_tol(channel, est.IBU_PRECISION) == pytest.approx(0.3**2 / (2 * total), rel=1e-15)
        assert est.ibu(channel).tol == est.default_tol(channel, est.IBU_PRECISION)
        assert est.mle(channel).tol == est.default_tol(channel, est.MLE_PRECISION)


def test_default_ibu_is_within_its_precision_of_the_mle():
    """The rule's claim, checked where the MLE is exact (GRR's separable likelihood) and
    every frequency interior (the quadratic approximation behind the Cauchy-Schwarz bound
    |f_x - f*_x| <= sqrt(2 gap) sd_x holds there): the default IBU lands within IBU_PRECISION = 0.3 sd."""
    params = grr.GRRParams(epsilon=2.0, d=8)
    values = np.repeat(np.arange(8), [6000, 4000, 3000, 2500, 2000, 1500, 1000, 800])
    channel = est.channel_of(grr.GRRServer(params).update(grr.GRRClient(params, rng=2).perturb(values)))
    fit, exact = est.ibu(channel), est.mle(channel)
    assert fit.converged and exact.values.min() > 0.01
    sd, _ = _fisher_population_std(channel, exact.values)
    assert np.abs(fit.values - exact.values).max() <= est.IBU_PRECISION * sd.min()


def test_step_limit_warns_with_the_gap_reached():
    channel = est.channel_of(_grr_server())
    with pytest.warns(ConvergenceWarning, match=r"ibu stopped at max_iter=5 EM steps .* gap of ") as caught:
        fit = est.ibu(channel, max_iter=5)
    assert caught[0].filename == __file__
    assert not fit.converged and fit.iterations == 5
    assert fit.gap == pytest.approx(est.duality_gap(channel, fit.values), rel=1e-12)
    assert f"{fit.gap:.3g} per unit of observed weight" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)      # a converged fit is silent
        assert est.ibu(channel).converged
    with pytest.raises(ParameterError, match=r"tol must be None or in \(0, 1\), got -1"):
        est.ibu(channel, tol=-1)
    with pytest.raises(ParameterError, match="max_iter must be a positive integer, got 0"):
        est.mle(channel, max_iter=0)


@pytest.fixture
def stderr_progress(monkeypatch, capsys):
    """Every fit draws from its first step; what it drew is read from the captured stderr."""
    monkeypatch.setattr(_progress, "FIT_DELAY", 0.0)
    monkeypatch.setattr(_progress.time, "monotonic", iter(np.arange(0.0, 1e6, 0.25)).__next__)
    yield capsys
    ldpfast.set_progress(None)


def test_long_fits_draw_a_progress_line_and_erase_it(stderr_progress):
    params = pgr.PGRParams(epsilon=2.0, d=300, q=3)
    values = np.minimum(np.random.default_rng(1).zipf(1.4, size=5000) - 1, 299)
    server = pgr.PGRServer(params).update(pgr.PGRClient(params, rng=1).perturb(values))
    ldpfast.set_progress(False)
    with pytest.warns(ConvergenceWarning) as caught:
        quiet = server.frequencies(method="ibu", max_iter=40, tol=1e-12)
    assert caught[0].filename == __file__                          # the warning names the caller's line
    assert stderr_progress.readouterr().err == ""
    ldpfast.set_progress(True)
    with pytest.warns(ConvergenceWarning):
        shown = server.frequencies(method="ibu", max_iter=40, tol=1e-12)
    np.testing.assert_array_equal(shown.values, quiet.values)      # drawing changes nothing
    err = stderr_progress.readouterr().err
    assert "ibu over 300 columns: step 40 of at most 40, gap " in err and "(stops at 1e-12)" in err
    assert "step 0 of" in err and "step 41" not in err      # the start's gap, then one line per EM step
    assert err.endswith("\r") and err.rstrip("\r").endswith(" ")     # erased at the end
    with _progress.suppressed(), pytest.warns(ConvergenceWarning, match="mle stopped at max_iter=5"):
        server.frequencies(method="mle", max_iter=5, tol=1e-12)
    assert stderr_progress.readouterr().err == ""
