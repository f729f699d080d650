"""The empirical LDP audit (ldpfast.audit): the bound is tight where the closed form says it
must be (GRR), and it flags the mechanisms that are not LDP (PrivSketch's ordering matrix,
R3's SVIM single dummy, PS-OLH's OLH amplification). That every LDP mechanism's
Clopper-Pearson lower bound stays below its epsilon is a conformance check of
ldpfast.testing, run for every registered protocol by tests/test_conformance.py."""

import json
import math
import warnings

import numpy as np

import pytest
from scipy import stats

from ldpfast import audit
from ldpfast._base import protocols
from ldpfast.cli import main
from ldpfast.errors import ParameterError

NOT_LDP = {"privsketch", "privsketch-nosmp"}
EPSILONS = (0.5, 1.0, 4.0)
REPORTS = 1_000_000
# Memoized protocols' permanent responses (eps_inf; each one-report budget is audited by the
# conformance checks): fewer reports (their clients hash per user), enough for a bound within
# a few percent of eps_inf (tests/test_longitudinal.py checks that tightness with a derived
# margin). Family-wise: len(MEMOIZED) * 3 audits (about 30), each wrong (eps_lb above the
# true loss <= eps_inf) with probability <= 1 - FAMILY_CONFIDENCE; union bound: all pass with
# probability >= 1 - 30 * 2e-5 > 0.999 whatever the seed.
FAMILY_CONFIDENCE = 1 - 2e-5
MEMOIZED = sorted(audit.audited("permanent"))
PERMANENT_REPORTS = 200_000


def test_every_ldpfast_protocol_is_audited():
    ours = {pid for pid, proto in protocols().items() if proto.params.__module__.startswith("ldpfast.")}
    assert ours == set(audit.AUDITED)


@pytest.mark.parametrize("hits, n, alpha", [(0, 10, 0.05), (3, 10, 0.01), (10, 10, 0.05), (480_000, 1_000_000, 0.0025),
                                            (17, 1_000_000, 0.0025), (999_990, 1_000_000, 1e-6)])
def test_clopper_pearson_matches_scipy(hits, n, alpha):
    lo, hi = audit.clopper_pearson(hits, n, alpha)
    ref_lo = 0.0 if hits == 0 else stats.beta.ppf(alpha, hits, n - hits + 1)
    ref_hi = 1.0 if hits == n else stats.beta.ppf(1 - alpha, hits + 1, n - hits)
    assert lo == pytest.approx(ref_lo, rel=1e-9, abs=1e-300) and hi == pytest.approx(ref_hi, rel=1e-9)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("pid", MEMOIZED)
def test_memoized_mechanisms_pass_the_permanent_audit(pid, eps):
    result = audit.audit_protocol(pid, eps, PERMANENT_REPORTS, rng=2027, confidence=FAMILY_CONFIDENCE,
                                  budget="permanent")
    assert result.budget == "permanent" and result.effective_epsilon <= result.epsilon
    assert result.eps_lb <= result.epsilon, result


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("pid", sorted(NOT_LDP))
def test_privsketch_ordering_matrix_leak_is_demonstrated(pid, eps):
    # The order ranks the single item's K cells on top with probability 1, an empty set's
    # with probability 1/C(KM, K) = 1.6e-6: the bound is about log(n / 10) >> eps.
    with pytest.warns(audit_warning()):
        result = audit.audit_protocol(pid, eps, REPORTS, rng=7)
    assert result.eps_lb > 5, result


def audit_warning():
    from ldpfast.errors import PrivacyWarning
    return PrivacyWarning


def test_audit_is_tight_for_grr():
    # GRR over d = 4: the event y = x0 has p = e^eps/(e^eps + 3) under x0 and q = 1/(e^eps + 3)
    # under x1. Each Clopper-Pearson bound sits about z = 2.81 (alpha/4 = 0.0025 one-sided)
    # standard errors from the estimate, and the estimate is within 4 of the truth except
    # with probability 6e-5, so log(lo/hi) >= eps - (2.81 + 4) (sqrt((1-p)/(n p)) + sqrt((1-q)/(n q))).
    eps = 1.0
    result = audit.audit_protocol("grr", eps, REPORTS, rng=11)
    p, q = math.exp(eps) / (math.exp(eps) + 3), 1 / (math.exp(eps) + 3)
    margin = (2.81 + 4) * (math.sqrt((1 - p) / (REPORTS * p)) + math.sqrt((1 - q) / (REPORTS * q)))
    assert eps - margin < result.eps_lb <= eps, (result, margin)
    assert result.event == "y = x0" or result.event == "y = x1"


@pytest.mark.parametrize("pid, change, true_eps", [
    ("svim-padded", {"reference": True}, math.log(5 * math.expm1(1.0) + 1)),   # R3's single dummy: 2.25
    ("ps-olh", {"amplify": True}, math.log(4 * math.expm1(1.0) + 1)),         # OLH does not amplify: 2.06
])
def test_audit_flags_broken_mechanisms(pid, change, true_eps):
    with pytest.warns(audit_warning()):
        result = audit.audit_protocol(pid, 1.0, REPORTS, rng=5, **change)
    assert result.effective_epsilon == pytest.approx(true_eps, rel=1e-9)
    # eps_lb is a 99% lower bound on a loss of 2.06-2.25: far above the claimed 1.
    assert 1.0 < result.eps_lb <= true_eps, result


def test_audit_validation():
    with pytest.raises(ParameterError, match="reports must be >= 1, got 0"):
        audit.audit_protocol("grr", 1.0, 0)
    with pytest.raises(ParameterError, match="confidence must be a float in"):
        audit.audit_protocol("grr", 1.0, 10, confidence=1.0)
    with pytest.raises(ParameterError, match="protocol must be one of"):
        audit.default_params("nope", 1.0)
    with pytest.raises(ParameterError, match="bad parameter for grr"):
        audit.default_params("grr", 1.0, bogus=1)


def test_cli_prints_the_table_and_exits_with_the_verdict(capsys):
    assert main(["audit", "grr", "--eps", "1", "4", "--reports", "2e5", "--seed", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["mechanism", "claimed", "eps", "eps_lb", "(99%)", "reports/input", "detectable",
                                "verdict", "event"]
    assert [ln.split()[:2] for ln in lines[1:]] == [["grr", "1"], ["grr", "4"]]
    assert all(float(ln.split()[2]) <= float(ln.split()[1]) and ln.split()[5] == "passed" for ln in lines[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["audit", "svim-padded", "--eps", "1", "--reports", "50000", "--seed", "1",
                     "--set", "reference=true"]) == 1          # a violation fails the gate
    assert "<-- eps_lb > eps" in capsys.readouterr().out
    assert main(["audit", "grr", "--eps", "1", "--set", "nonsense"]) == 2


def test_cli_refuses_to_pass_an_underpowered_audit(capsys):
    """--reports 1 and 100 used to print -5.99 and 0.35 and exit 0. Now they are
    inconclusive (exit 3) and say what they could detect; 10^6 reports detect 0.012 at eps 1
    (the delta-method margin of the two Clopper-Pearson bounds, module docstring)."""
    for reports, low in (("1", 5.0), ("100", 0.5)):
        assert main(["audit", "grr", "--eps", "1", "--reports", reports, "--seed", "1"]) == 3
        out, err = capsys.readouterr()
        assert "inconclusive" in out and "cannot detect an excess of 0.1" in err
        assert float(out.splitlines()[1].split()[4]) > low
    assert main(["audit", "grr", "--eps", "1", "--reports", "100", "--detect", "5", "--seed", "1"]) == 0


def test_cli_json(capsys):
    assert main(["audit", "grr", "--eps", "1", "--reports", "2e4", "--seed", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == 0 and doc["detect"] == 0.1
    (row,) = doc["results"]
    assert row["protocol"] == "grr" and row["verdict"] == "passed" and row["violation"] is False
    assert row["eps_lb"] < 1.0 < row["eps_lb"] + 2 * row["detectable_excess"] and row["reports"] == 20000
    assert main(["audit", "grr", "--eps", "1", "--reports", "1", "--seed", "1", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["results"][0]["verdict"] == "inconclusive"


def test_a_client_leaking_its_value_fails_the_audit_at_default_settings(monkeypatch, capsys):
    """Mutation test: a GRR client that sends its true value with probability 0.05 (else the
    honest report). Over d = 4 at eps, P(y = x0 | x0) = 0.05 + 0.95 p and
    P(y = x0 | x1) = 0.95 q, a true loss of eps + log(1 + 0.05/(0.95 p)): 1.105 at eps = 1 and
    4.054 at eps = 4, excesses of 0.105 and 0.054, while 10^6 reports per input (the
    default) detect 0.012 and 0.032 with probability 0.9 (test_cli_refuses_...): the
    audit must fail (exit 1)."""
    from ldpfast.protocols.frequency import grr

    honest = grr.GRRClient.perturb

    def leaky(self, values):
        reports = honest(self, values)
        x = np.asarray(values, dtype=np.uint64)
        leak = self._keys.generator().random(x.size) < 0.05
        reports.y[leak] = x[leak]
        return reports

    monkeypatch.setattr(grr.GRRClient, "perturb", leaky)
    assert main(["audit", "grr", "--eps", "1", "4", "--seed", "3"]) == 1
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[5] for row in rows] == ["violation", "violation"]
