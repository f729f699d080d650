"""Record protocols (protocols/multiattribute): SPL, SMP, RS+FD, CALM and the full joint.

The conformance kit (tests/test_contract.py) runs every generic check on their examples,
variance included; here: the estimators' bias where the derivation is specific (RS+FD's fake
data, SMP's sampling, marginal projections), bad input naming the attribute, CALM's
post-processing, and the privacy claim of RS+FD's amplified budget.

Tolerances: each bias check averages ``R`` independent estimates whose closed-form standard
error ``sd`` is known; the mean is off by more than ``5 sd/sqrt(R)`` with probability below
6e-7 per cell (normal tail), so with at most ~40 cells per check a correct estimator fails
with probability below 3e-5.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ldpfast import audit
from ldpfast._base import protocol
from ldpfast.errors import ParameterError, PrivacyWarning, ReportError
from ldpfast.protocols.multiattribute import _consistency
from ldpfast.protocols.multiattribute._records import record_inputs
from ldpfast.protocols.multiattribute.calm import CALMParams, JointParams
from ldpfast.protocols.multiattribute.multifreq import RSFDParams, SMPParams, SPLParams

DOMAINS = (4, 9, 2)
NAMES = ("colour", "size", "flag")
RUNS = 40
Z = 5.0


def _true_cells(records: np.ndarray, domains=DOMAINS) -> np.ndarray:
    return np.concatenate([np.bincount(records[:, j], minlength=k) / len(records) for j, k in enumerate(domains)])


def _runs(params, records, runs=RUNS, seed=7):
    """``runs`` servers of independent simulated reports of ``records`` (one client call)."""
    proto = protocol(params.protocol)
    reports = proto.client(params, rng=seed).perturb(np.tile(records, (runs, 1)))
    n = len(records)
    columns = reports.columns()
    return [proto.aggregator(params).update(type(reports).from_columns({k: v[r * n:(r + 1) * n]
                                                                         for k, v in columns.items()}))
            for r in range(runs)]


@pytest.fixture(scope="module")
def records():
    return record_inputs(DOMAINS, n=2000)


@pytest.mark.parametrize("params_type,oracle", [(RSFDParams, "grr"), (RSFDParams, "oue"), (RSFDParams, "olh"),
                                                (SMPParams, "oue"), (SPLParams, "olh")])
def test_cell_estimates_are_unbiased_with_their_closed_form_spread(records, params_type, oracle):
    params = params_type(epsilon=2.0, domains=DOMAINS, oracle=oracle, names=NAMES)
    servers = _runs(params, records)
    cells = np.arange(params.d)
    fhat = np.array([s.estimate() for s in servers])
    true = _true_cells(records)
    sd = np.sqrt(np.mean([s.cell_variance(true, cells) for s in servers], axis=0))
    assert np.all(np.abs(fhat.mean(axis=0) - true) < Z * sd / np.sqrt(RUNS)), (fhat.mean(axis=0) - true) / sd


def test_rsfd_estimator_corrects_the_fake_data(records):
    """Without the correction the oracle's estimate is g = f/A + (1 - 1/A)/k, far from f."""
    params = RSFDParams(epsilon=4.0, domains=DOMAINS, names=NAMES)
    server = _runs(params, records, runs=1)[0]
    true = _true_cells(records)
    a = len(DOMAINS)
    diluted = true / a + np.repeat([(a - 1) / (a * k) for k in DOMAINS], DOMAINS)
    sd = np.sqrt(server.cell_variance(true, np.arange(params.d)))
    assert np.abs(server.estimate() - true).max() < Z * sd.max()
    assert np.abs(server._raw_cells() - diluted).max() < Z * sd.max() / a


@pytest.fixture(scope="module")
def calm_runs(records):
    params = CALMParams(epsilon=3.0, domains=DOMAINS, oracle="grr", names=NAMES,
                        marginals=(("colour", "size"), ("size", "flag"), ("colour", "flag")))
    return params, _runs(params, records, runs=30)


def _table(records, attributes):
    shape = [DOMAINS[a] for a in attributes]
    out = np.zeros(shape)
    np.add.at(out, tuple(records[:, a] for a in attributes), 1)
    return out / len(records)


def test_marginal_projection_is_unbiased_with_its_standard_error(records, calm_runs):
    """The ``raw`` projection of a collected marginal onto a sub-marginal, in the query's
    order, and its closed-form standard error (GRR: exact Bernoulli supports)."""
    params, servers = calm_runs
    tables = [s.marginal(["flag", "colour"]) for s in servers]
    true = _table(records, [2, 0]).ravel()
    raw = np.array([t.raw for t in tables])
    sd = np.sqrt(np.mean([t.std ** 2 for t in tables], axis=0))
    assert np.all(np.abs(raw.mean(axis=0) - true) < Z * sd / np.sqrt(len(servers)))
    # the closed form matches the spread: the variance ratio's sd is about sqrt(2/R) over R runs
    ratio = raw.var(axis=0, ddof=1) / sd ** 2
    assert 0.3 < ratio.mean() < 1.7, ratio
    assert tables[0].attributes == ("flag", "colour") and tables[0].shape == (2, 4)
    frame = tables[0].to_pandas()
    assert list(frame.columns[:2]) == ["flag", "colour"] and len(frame) == 8


def test_calm_tables_are_consistent_and_non_negative(calm_runs):
    params, servers = calm_runs
    tables = servers[0].tables()
    for key, table in tables.items():
        assert table.min() >= 0 and abs(table.sum() - 1) < 1e-9, key
    # overlapping marginals agree on their shared attribute up to the last Norm-Sub's change
    colour = [_consistency.project(tables[k], k, (0,)) for k in tables if 0 in k]
    np.testing.assert_allclose(colour[0], colour[1], atol=0.02)


def test_max_entropy_reconstruction_matches_the_collected_projections(calm_runs):
    params, servers = calm_runs
    server = servers[0]
    full = server.marginal(["colour", "size", "flag"])
    assert np.isnan(full.std).all() and "maximum-entropy" in full.note
    table = full.table()
    tables = server.tables()
    for key in tables:
        np.testing.assert_allclose(_consistency.project(table, (0, 1, 2), key), tables[key], atol=1e-6)


def test_independent_attributes_are_reconstructed_as_the_product():
    """Maximum entropy with two disjoint 1-way constraints is the product of the margins."""
    a, b = np.array([0.2, 0.8]), np.array([0.5, 0.3, 0.2])
    out = _consistency.max_entropy((0, 1), (2, 3), {(0,): a, (1,): b})
    np.testing.assert_allclose(out, np.outer(a, b), atol=1e-12)


def test_joint_marginal_is_the_unbiased_sum_of_joint_cells(records):
    params = JointParams(epsilon=4.0, domains=DOMAINS, names=NAMES)
    servers = _runs(params, records, runs=20)
    tables = [s.marginal(["size"]) for s in servers]
    raw = np.array([t.raw for t in tables])
    sd = np.sqrt(np.mean([t.std ** 2 for t in tables], axis=0))
    assert np.all(np.abs(raw.mean(axis=0) - _table(records, [1])) < Z * sd / np.sqrt(len(servers)))
    assert np.all(tables[0].estimate >= 0)


# -- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize("pid", ["spl", "smp", "rsfd", "calm", "joint"])
def test_bad_records_and_queries_name_the_attribute_and_the_value(pid, records):
    proto = protocol(pid)
    params = proto.params(epsilon=1.0, domains=DOMAINS, names=NAMES)
    client = proto.client(params, rng=1)
    with pytest.raises(ParameterError, match=r"attribute 'size' must be in \[0, 9\), got 9 at record 1"):
        client.perturb(np.array([[0, 0, 0], [1, 9, 1]]))
    with pytest.raises(ParameterError, match=r"3 columns\), got shape \(2, 4\): 1 extra"):
        client.perturb(np.zeros((2, 4), dtype=np.int64))
    with pytest.raises(ParameterError, match=r"missing \['flag'\], unknown \['weight'\]"):
        client.perturb({"colour": [0], "size": [1], "weight": [3]})
    with pytest.raises(ParameterError, match="'height'"):
        params.attribute("height")
    server = proto.aggregator(params).update(client.perturb(records[:200]))
    with pytest.raises(ParameterError, match="'height'"):
        server.marginal(["height"])
    before = server.to_bytes()
    bad = client.perturb(records[:50])
    bad.y[7, 0] = np.uint64(2**63)                 # no oracle's first word reaches 2^63
    with pytest.raises(ReportError, match="at report 7"):
        server.update(bad)
    assert server.to_bytes() == before


def test_a_mapping_of_columns_is_read_by_name(records):
    params = SPLParams(epsilon=1.0, domains=DOMAINS, names=NAMES)
    by_name = {"flag": records[:, 2], "colour": records[:, 0], "size": records[:, 1]}
    a = protocol("spl").client(params, rng=3).perturb(by_name)
    b = protocol("spl").client(params, rng=3).perturb(records)
    assert a == b


# -- privacy -------------------------------------------------------------------------------------
def test_rsfd_amplified_budget_costs_a_whole_record_more_than_epsilon():
    """The paper's eps' = ln(A (e^eps - 1) + 1) bounds one attribute's change by eps; two
    records differing in every attribute are told apart at eps' (module doc). The audit of
    the whole record sees it: its lower bound exceeds eps (at 99.9999% confidence)."""
    with pytest.warns(PrivacyWarning, match="a whole record costs eps'"):
        params = RSFDParams(epsilon=1.0, domains=(2, 3), amplified=True)
    assert params.record_epsilon == pytest.approx(np.log(2 * np.expm1(1.0) + 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        result = audit.audit(params, 200_000, rng=5, confidence=1 - 1e-6)
    assert result.eps_lb > 1.0 and result.effective_epsilon <= params.record_epsilon
    honest = audit.audit(RSFDParams(epsilon=1.0, domains=(2, 3)), 200_000, rng=5, confidence=1 - 1e-6)
    assert honest.eps_lb <= 1.0


def test_spl_splits_the_budget_and_smp_spends_it_whole():
    spl = SPLParams(epsilon=1.0, domains=DOMAINS)
    assert [o.params.epsilon for o in spl.oracles()] == [1 / 3] * 3 and audit.effective_epsilon(spl) <= 1.0
    smp = SMPParams(epsilon=1.0, domains=DOMAINS)
    assert {o.params.epsilon for o in smp.oracles()} == {1.0}


# -- simulation ------------------------------------------------------------------------------------
def test_correlated_records_have_dependent_attributes_and_simulate_runs_every_record_protocol():
    from ldpfast import datasets, experiments

    independent = datasets.correlated_records(20_000, domains=(4, 6), correlation=0.0, seed=1)
    dependent = datasets.correlated_records(20_000, domains=(4, 6), correlation=0.8, seed=1)
    for data, dependence in ((independent, False), (dependent, True)):
        joint = data.marginal((0, 1)).reshape(4, 6)
        product = np.outer(data.marginal([0]), data.marginal([1]))
        # independent: each cell's share is off its product by sampling only, sd <= sqrt(f/n) <= 0.007
        assert (0.5 * np.abs(joint - product).sum() > 0.1) == dependence
    result = experiments.simulate_records(["spl", "smp", "rsfd", "calm", "joint"], dependent, [2.0], runs=1, seed=4)
    assert [c.algorithm for c in result.cells] == ["spl", "smp", "rsfd", "calm", "joint"]
    assert all(np.isfinite(c.tv1) for c in result.cells)
    assert [c.tv2 is not None for c in result.cells] == [False, False, False, True, True]
    assert "2-way marginals" in result.table("tv2")
    with pytest.raises(ParameterError, match="correlation"):
        datasets.correlated_records(10, correlation=1.5)


@pytest.mark.parametrize("pid", ["spl", "smp", "rsfd"])
def test_same_reports_give_multi_freq_ldpy_s_estimates(pid, records):
    """multi-freq-ldpy (where installed) on ldpfast's GRR reports: the same estimates after its
    clipping and renormalization (the estimators are the same closed forms)."""
    solutions = pytest.importorskip("multi_freq_ldpy.mdim_freq_est")
    from importlib import import_module

    module, prefix = {"spl": ("SPL_solution", "SPL"), "smp": ("SMP_solution", "SMP"),
                      "rsfd": ("RSpFD_solution", "RSpFD")}[pid]
    aggregate = getattr(import_module(f"{solutions.__name__}.{module}"), f"{prefix}_GRR_Aggregator_MI")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        params = protocol(pid).params(epsilon=2.0, domains=DOMAINS, **({"amplified": True} if pid == "rsfd" else {}))
        reports = protocol(pid).client(params, rng=9).perturb(records)
    tuples = (list(zip(reports.group.astype(int).tolist(), reports.y[:, 0].astype(int).tolist())) if pid == "smp"
              else [tuple(row) for row in reports.y.astype(int).tolist()])
    theirs = np.concatenate(list(aggregate(tuples, list(DOMAINS), len(DOMAINS), 2.0)))
    ours = np.clip(protocol(pid).aggregator(params).update(reports).estimate(), 0, None)
    for lo, hi in zip(params.offsets[:-1], params.offsets[1:]):
        ours[lo:hi] /= ours[lo:hi].sum()
    np.testing.assert_allclose(ours, theirs, atol=1e-9)
