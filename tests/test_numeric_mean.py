"""The numeric mean protocols (ldpfast.protocols.numeric: mean, multidim): Wang et al.'s closed
forms, the grid rule, unbiasedness at 1, 2, 5 and 10 attributes, interval coverage, the mean
and variance of one number, and refused input. The conformance kit (tests/test_conformance.py)
runs the contract, bytes, batches, variance and the privacy audit (eps 0.5, 1, 4) on each.

Tolerances: an estimate ``m`` of a mean ``mu`` from independent users has standard deviation
``s = sqrt(Var/n)`` with the closed-form ``Var``; the tests allow ``|m - mu| <= Z s`` with
``Z = 5.3`` (two-sided normal tail 1.2e-7 per comparison; under 1e-5 over the ~80 comparisons
of this file)."""

import math

import numpy as np
import pytest

from ldpfast.errors import ParameterError, ReportError
from ldpfast.protocols.numeric import _grid, mean, multidim

Z = 5.3
MECHANISMS = ("duchi", "pm", "hm", "laplace")


def test_worst_case_variances_at_eps_1_are_wang_et_al_s():
    worst = {m: _grid.Mechanism(m, 1.0).worst_variance() for m in ("duchi", "pm", "hm")}
    assert worst == pytest.approx({"duchi": 4.683, "pm": 5.224, "hm": 4.289}, abs=5e-4)
    params = multidim.SampledMeanParams(epsilon=1.0, attributes=10)
    assert params.k == 1 and params.worst_variance() == pytest.approx(51.89, abs=5e-3)
    # HM's variance does not depend on t above eps = 0.61; below it HM is Duchi's mechanism
    assert _grid.Mechanism("hm", 1.0).variance(np.array([0.0, 0.5, 1.0])) == pytest.approx([4.289] * 3, abs=5e-4)
    assert _grid.Mechanism("hm", 0.5).worst_variance() == _grid.Mechanism("duchi", 0.5).worst_variance()


@pytest.mark.parametrize("epsilon", [2.0**-20, 0.1, 1.0, 4.0, 20.0, 66.5])
def test_the_grid_moves_the_variance_by_less_than_a_thousandth(epsilon):
    for name in MECHANISMS:
        mech = _grid.Mechanism(name, epsilon)
        steps = mech.min_steps()
        assert _grid.grid_size(mech, steps) <= _grid.MAX_STEPS
        if name == "laplace":
            # rounding (1/(2K))^2 and the discrete noise against the continuous 8/eps^2
            continuous = 8.0 / epsilon**2
            assert (0.5 / steps) ** 2 <= 1e-3 * continuous
            assert abs(_grid.laplace_noise_variance(epsilon, steps) / continuous - 1.0) <= 1e-3
        elif mech.continuous:
            half_step = mech.half_range / steps
            assert half_step**2 <= 1e-3 * min(mech.variance(np.array([0.0, 1.0])))


def test_duchi_md_constant_makes_the_mechanism_unbiased_exactly():
    """``E[z_1 | v] = B (2p - 1) E[s-agreement of coordinate 1]``: with the weights the client
    samples, exactly 1 per unit of ``v_1`` for every d (the public implementation's 0.076 at
    d = 2 is this constant gone wrong)."""
    for d in range(1, 13):
        weights = multidim._agreement_weights(d)
        agreement = sum(w * (2 * s - d) / d for s, w in enumerate(weights))
        p = math.exp(1.0) / (math.exp(1.0) + 1.0)
        assert abs(weights.sum() - 1.0) < 1e-12
        assert multidim.duchi_md_bound(1.0, d) * (2 * p - 1) * agreement == pytest.approx(1.0, rel=1e-12)


def _z(estimate, truth, variance):
    return np.abs(np.asarray(estimate) - truth) / np.sqrt(variance)


@pytest.mark.parametrize("name", MECHANISMS)
def test_one_dimensional_means_are_unbiased_at_the_ends_and_inside(name):
    n = 20_000
    for t in (-1.0, 0.0, 0.6, 1.0):
        params = mean.params_for(name, 1.0, bounds=(-1.0, 1.0))
        server = mean._CLASSES[name][1](params)
        server.update(mean._CLASSES[name][2](params, rng=11).perturb(np.full(n, t)))
        t_hat = 2.0 * server.estimate()[0] - 1.0
        assert _z(t_hat, t, params.mechanism.variance(t) / n) < Z, (name, t, t_hat)


@pytest.fixture(scope="module")
def multi_runs():
    """Per protocol and d in (1, 2, 5, 10): (estimates of t per attribute, true t, Var)."""
    n, gen, out = 20_000, np.random.default_rng(3), {}
    for d in (1, 2, 5, 10):
        t = gen.uniform(-1.0, 1.0, size=d)
        rows = np.tile(t, (n, 1))
        cases = [("duchi-md", multidim.DuchiMdParams(epsilon=1.0, attributes=d, bounds=(-1.0, 1.0)),
                  multidim.DuchiMdClient, multidim.DuchiMdServer)]
        cases += [(f"sampled-{m}", multidim.SampledMeanParams(epsilon=1.0, attributes=d, mechanism_name=m,
                                                              bounds=(-1.0, 1.0)),
                   multidim.SampledMeanClient, multidim.SampledMeanServer) for m in MECHANISMS]
        for label, params, client, server_type in cases:
            server = server_type(params).update(client(params, rng=d).perturb(rows))
            if label == "duchi-md":
                variance = (params.bound**2 - t**2) / n
            else:
                a, b = params.second_moment
                variance = (d / params.k * (a + b * t**2) - t**2) / n
            out[label, d] = (2.0 * server.estimate() - 1.0, t, variance)
    return out


@pytest.mark.parametrize("label", ["duchi-md"] + [f"sampled-{m}" for m in MECHANISMS])
@pytest.mark.parametrize("d", [1, 2, 5, 10])
def test_multi_attribute_means_are_unbiased(multi_runs, label, d):
    estimates, truth, variance = multi_runs[label, d]
    assert estimates.shape == (d,)
    assert (_z(estimates, truth, variance) < Z).all(), (estimates, truth)


def test_intervals_cover_the_mean():
    """Coverage of the 95% intervals over R = 300 independent collections of n = 1000 users
    (Beta(5, 2) values): the count of covering intervals is Binomial(300, >= 0.95) for a
    correct (or conservative: Duchi's) standard error; below 300 * 0.95 - 4.5 sd (sd =
    sqrt(300 * 0.95 * 0.05) = 3.8), i.e. 268, has probability < 1e-5."""
    runs, n = 300, 1000
    values = np.random.default_rng(4).beta(5.0, 2.0, size=n)
    truth = values.mean()
    for name in MECHANISMS:
        params = mean.params_for(name, 1.0)
        reports = mean._CLASSES[name][2](params, rng=5).perturb(np.tile(values, runs))
        covered = 0
        for r in range(runs):
            server = mean._CLASSES[name][1](params).update(
                type(reports)(index=reports.index[r * n:(r + 1) * n]))
            low, high = server.frequencies().confidence_interval(0.05)
            covered += int(low[0] <= truth <= high[0])
        assert covered >= 268, (name, covered)


def test_moments_estimates_the_variance():
    """The variance of Beta(5, 2) on [10, 90] (80^2 * 10/392 = 163.3): the estimate
    ``(hi - lo)^2 (m2 - m1^2 + Var m1)`` has standard deviation at most
    ``(hi - lo)^2 (sd m2 + 2 |m1| sd m1)`` (delta method, any correlation)."""
    n = 40_000
    values = np.random.default_rng(6).beta(5.0, 2.0, size=n) * 80.0 + 10.0
    for epsilon in (1.0, 8.0):
        params = multidim.MomentsParams(epsilon=epsilon, bounds=(10.0, 90.0))
        assert params.k == (1 if epsilon == 1.0 else 2)   # users split at small eps, budget at large
        server = multidim.MomentsServer(params).update(multidim.MomentsClient(params, rng=7).perturb(values))
        var_t = server.t_variances()[0]
        m1 = server.estimate()[0]
        sd = 80.0**2 * (math.sqrt(var_t[1]) / 2 + 2 * abs(m1) * math.sqrt(var_t[0]) / 2)
        assert abs(server.variance() - values.var()) < Z * sd, (epsilon, server.variance(), values.var())
        assert abs(server.mean() - values.mean()) < Z * 40.0 * math.sqrt(var_t[0])


def test_user_split_and_budget_split_follow_the_closed_forms():
    # HM at eps = 1: 2 (4.289 + 1) - 1 = 9.58 (users) against V(0.5) = 16.67 (budget)
    assert multidim.worst_case("hm", 1.0, 2, 1) == pytest.approx(9.578, abs=1e-3)
    assert multidim.worst_case("hm", 1.0, 2, 2) == pytest.approx(16.67, abs=1e-2)
    assert multidim.best_sampled("hm", 1.0, 2) == 1 and multidim.best_sampled("hm", 8.0, 2) == 2


def test_clipping_is_counted_on_the_client_and_bad_values_are_refused():
    params = mean.PiecewiseParams(epsilon=1.0, bounds=(0.0, 10.0))
    client = mean.PiecewiseClient(params, rng=1)
    client.perturb(np.array([-5.0, 3.0, 12.0, 11.0]))
    assert client.clipped == (1, 2)
    for bad, where in ((np.array([1.0, np.nan]), "index 1"), (np.array([np.inf]), "index 0")):
        with pytest.raises(ParameterError, match=where):
            client.perturb(bad)
    rows = multidim.SampledMeanClient(multidim.SampledMeanParams(epsilon=1.0, attributes=3), rng=1)
    with pytest.raises(ParameterError, match=r"index \(1, 2\)"):
        rows.perturb(np.array([[0.1, 0.2, 0.3], [0.1, 0.2, -np.inf]]))


@pytest.mark.parametrize("fields, match", [
    ({"bounds": (1.0, 1.0)}, "bounds"), ({"bounds": (2.0, 1.0)}, "bounds"), ({"bounds": (0.0, np.inf)}, "bounds"),
    ({"grid": 2**32}, "grid"), ({"grid": 3}, "grid"), ({"grid": 1.5}, "grid")])
def test_bad_parameters_are_refused_by_name(fields, match):
    with pytest.raises(ParameterError, match=match):
        mean.PiecewiseParams(epsilon=1.0, **fields)


def test_reports_off_the_grid_are_refused_and_leave_the_server_unchanged():
    params = mean.HybridParams(epsilon=1.0)
    server = mean.HybridServer(params).update(mean.HybridClient(params, rng=2).perturb(np.full(100, 0.5)))
    before = server.to_bytes()
    with pytest.raises(ReportError, match=f"grid \\[0, {params.largest_index}\\], got {params.largest_index + 1}"):
        server.update(mean.HybridReports(index=np.array([0, params.largest_index + 1])))
    assert server.to_bytes() == before
    rows = multidim.SampledMeanParams(epsilon=1.0, attributes=3, sampled=2)
    agg = multidim.SampledMeanServer(rows)
    with pytest.raises(ReportError, match="distinct and ascending"):
        agg.update(multidim.SampledMeanReports(attributes=np.array([[1, 1]]), index=np.array([[0, 0]])))
    with pytest.raises(ReportError, match="attributes must be < 3"):
        agg.update(multidim.SampledMeanReports(attributes=np.array([[0, 3]]), index=np.array([[0, 0]])))
    assert agg.n == 0


def test_a_split_budget_spends_its_share_on_each_attribute():
    """sampled-mean with k = 2 of 2 at eps = 4 (and moments, which splits the same way):
    one attribute's report alone is (eps/2)-LDP. Clopper-Pearson bounds at level 1e-6 each
    (ldpfast.audit) on the event "attribute 0's value > 1" for all-hi against all-lo users:
    the lower bound of the loss stays below 2 and, with 200,000 reports, above 1.8."""
    from ldpfast import audit

    params = multidim.SampledMeanParams(epsilon=4.0, attributes=2, sampled=2)
    reports = 200_000
    hits = []
    for value in (1.0, 0.0):
        batch = multidim.SampledMeanClient(params, rng=8).perturb(np.full((reports, 2), value))
        y = _grid.values_of(params.mechanism, params.steps, batch.index[:, 0])
        hits.append(int(np.count_nonzero(y > 1.0)))
    low, _ = audit.clopper_pearson(hits[0], reports, 1e-6)
    _, high = audit.clopper_pearson(hits[1], reports, 1e-6)
    assert 1.8 < math.log(low / high) <= 2.0, hits


def test_numeric_data_sets_and_simulate(tmp_path):
    """The synthetic sets are seeded draws: the log-normal's share above 100 is
    P(N(3, 1) > ln 100) = 0.0542 (binomial sd 0.0016 at n = 20,000); Adult's age column is
    whole and inside its declared bounds. ``simulate`` runs mean protocols on them."""
    import json

    from ldpfast.cli import main
    from ldpfast.datasets.numeric import NUMERIC_DATASETS, numeric_dataset

    for name in NUMERIC_DATASETS[:4]:
        data = numeric_dataset(name, n=20_000, rng=1)
        assert data.values.dtype == np.float64 and np.isfinite(data.values).all()
    assert NUMERIC_DATASETS[3] == "age" and data.values.size == 32_561 and data.clipped_share == 0.0
    share = numeric_dataset("lognormal", n=20_000, rng=1).clipped_share
    assert abs(share - 0.0542) < Z * 0.0016
    with pytest.raises(ParameterError, match="data must be one of"):
        numeric_dataset("no-such-data")
    out = tmp_path / "means.json"
    assert main(["simulate", "-p", "pm,hm,sr", "--data", "mixture", "--n", "2000", "--eps", "1,4", "--runs", "3",
                 "--no-plot", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [(c["protocol"], c["epsilon"]) for c in result["cells"]] == [
        ("pm", 1.0), ("pm", 4.0), ("hm", 1.0), ("hm", 4.0), ("sr", 1.0), ("sr", 4.0)]
    assert all(c["closed_form"] > 0 and c["mse"] > 0 for c in result["cells"])


@pytest.mark.parametrize("mechanism", ["pm", "laplace"])
def test_standard_errors_follow_the_users_spread(mechanism):
    """Users split between -1 and 1 on every attribute (mean 0, mean square 1), d = 5,
    k = 1 at eps = 1: the closed form at the users' values, ``((d/k)(a + b) - 1)/n``, not
    the one at the mean (``(d/k) a / n``, 19% lower for PM). The server's estimate uses
    ``M = (d/k) sum y^2 / n``, unbiased for ``a + b Q``, with standard deviation
    ``sd(M)`` computed here from the users' contributions; its variance estimate moves by
    ``((d/k) - 1/b) dM``, so the tolerance is Z times that."""
    n, d = 40_000, 5
    params = multidim.SampledMeanParams(epsilon=1.0, attributes=d, mechanism_name=mechanism, sampled=1)
    rows = np.where(np.arange(n)[:, None] % 2 == 0, 0.0, 1.0) * np.ones((1, d))
    reports = multidim.SampledMeanClient(params, rng=9).perturb(rows)
    server = multidim.SampledMeanServer(params).update(reports)
    a, b = params.second_moment
    share = d / params.k
    expected = (share * (a + b) - 1.0) / n
    y = _grid.values_of(params.mechanism, params.steps, reports.index[:, 0])
    contribution = np.where(reports.attributes[:, 0] == 0, share * y * y, 0.0)
    spread = (share - 1.0 / b) * contribution.std() / math.sqrt(n) / n
    assert abs(server.t_variances([0])[0][0] - expected) < Z * spread, (server.t_variances([0])[0][0], expected)
    assert expected > 1.1 * share * a / n or mechanism == "laplace"
