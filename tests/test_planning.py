"""ldpfast.recommend: ranked protocol configurations with their closed-form errors, report
sizes and server costs, and the constraints that rule options out."""

import json
import math

import pytest

import ldpfast
from ldpfast import planning
from ldpfast.errors import ParameterError
from ldpfast.theory import ocms as theory

EPS, D, N = 2.0, 100_000, 1_000_000


def test_every_builtin_comparison_states_its_server_cost():
    for pid, row in planning.comparison_rows(EPS, D, N):
        assert row.server_ops is not None and row.state_bytes is not None, pid
        assert row.server_ops(N, D) >= N and row.state_bytes(N, D) > 0, pid


def test_options_carry_the_closed_forms_and_the_cost_models():
    options = {o.name: o for o in ldpfast.recommend(EPS, D, N, query="candidates", candidates=1000)}
    ocms = options["MSE-OCMS+RR"]
    assert ocms.protocol == "ocms" and ocms.bits == 130
    params = ldpfast.protocols.frequency.ocms.OCMSParams.optimal(EPS, D)
    assert ocms.mse == pytest.approx(max(theory.ocms_variance(params, n=N, f=0.0),
                                         theory.ocms_variance(params, n=N, f=1.0)), rel=1e-12)
    assert ocms.error == ocms.mse
    # kept reports: one hashed pair per report and candidate, 24 bytes a report
    assert ocms.server_ops == N * 1000 and ocms.state_bytes == 24 * N
    assert ocms.server_seconds == ocms.server_ops / planning.STEPS_PER_SECOND
    assert options["GRR"].server_ops == N + 1000     # one counter update per report, one read per candidate


def test_ranking_weighs_bits_within_the_tolerance():
    options = ldpfast.recommend(EPS, D, N, query="all")
    best = min(o.error for o in options)
    close = [o for o in options if o.error <= 1.1 * best]
    assert options[:len(close)] == sorted(close, key=lambda o: (o.bits, o.server_ops))
    assert [o.error for o in options[len(close):]] == sorted(o.error for o in options[len(close):])
    assert options[0].protocol == "pgr" and options[0].bits == 18    # 1.1% above the lowest l2, 18 bits
    exact = ldpfast.recommend(EPS, D, N, query="all", tolerance=0.0)
    assert exact[0].error == best


def test_constraints_rule_options_out_and_say_why():
    options = ldpfast.recommend(EPS, D, N, query="top-k", max_report_bits=64, server_budget=1.0)
    fitting = [o for o in options if o.fits]
    assert fitting and all(o.bits <= 64 and o.server_seconds <= 1.0 for o in fitting)
    assert options[:len(fitting)] == fitting
    olh = next(o for o in options if o.protocol == "olh")
    assert not olh.fits and olh.why_not == "131 bits > max_report_bits=64; 100 s of server work > server_budget=1 s"
    assert {o.protocol for o in ldpfast.recommend(EPS, D, N, protocols=["cms-he", "ocms-l"])} == {"cmshe", "ocms"}


@pytest.mark.parametrize("kwargs,match", [
    ({"query": "some"}, "query must be one of"),
    ({"query": "candidates"}, "candidates must be given"),
    ({"candidates": 10}, "candidates is for query='candidates'"),
    ({"max_report_bits": 0}, "max_report_bits must be a positive integer"),
    ({"server_budget": math.inf}, "server_budget must be a positive number"),
    ({"tolerance": -1}, "tolerance must be"),
    ({"protocols": ["nope"]}, "protocol must be one of"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        ldpfast.recommend(EPS, D, N, **kwargs)


# -- from a recommendation to code (issue 30) ---------------------------------------------------
@pytest.mark.parametrize("epsilon, d", [(2.0, 1000), (0.5, 100_000), (4.0, 2**30)])
def test_every_option_carries_buildable_params_of_its_configuration(epsilon, d):
    options = ldpfast.recommend(epsilon, d, 10**6)
    assert len({o.protocol for o in options}) >= 9
    for o in options:
        if "not buildable" in o.why_not:   # HE's Params stop at d < 2^30; the option says so and does not fit
            assert o.params is None and not o.fits and o.protocol == "he" and d >= 2**30
            continue
        params = o.params
        assert type(params) is ldpfast.protocol(o.protocol).Params, o.name
        assert (params.epsilon, params.d) == (epsilon, d)
        # the row's configuration, not the class defaults: its symbols and report size
        assert getattr(params, "m", getattr(params, "g", o.m)) == o.m, o.name
        assert getattr(params, "communication_bits", o.bits) == o.bits, o.name
        assert eval(o.code, {"ldpfast": ldpfast}) == params                   # the printed line builds it
        assert ldpfast._registry.params_from_json(json.dumps(o.to_dict()["params"])) == params


@pytest.mark.parametrize("epsilon, d, cms_rappor", [(7.0, 10_000, {"CMS+aRP", "CMS+sRP"}), (8.0, 10_000, {"CMS+sRP"}),
                                                   (20.0, 10_000, set()), (1.0, 2**40, {"CMS+aRP", "CMS+sRP"})])
def test_configurations_that_cannot_be_built_are_left_out_not_fatal(epsilon, d, cms_rappor):
    """A CMS+RAPPOR variant has no m <= 65536 within 1% of its m -> inf error at large eps
    (aRP from eps = 8, sRP by eps = 20), and PGR no Params for d >= 2^32: recommend leaves
    those rows out and ranks the rest (it raised before)."""
    options = ldpfast.recommend(epsilon, d, 10**6)
    assert options and options[0].fits
    assert {o.name for o in options if o.protocol == "cms-rappor"} == cms_rappor
    assert any(o.protocol == "pgr" for o in options) == (d < 2**32)


def test_params_command_prints_the_line_that_builds_the_recommendation(capsys):
    from ldpfast.cli import main

    assert main(["params", "--eps", "2", "--d", "100000", "--n", "1000000", "--f-star", "0.05",
                 "--max-report-bits", "64"]) == 0
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("build it: "))
    best = ldpfast.recommend(2.0, 100_000, 1_000_000, f_star=0.05, max_report_bits=64)[0]
    assert line == f"build it: {best.code}" and eval(line[len("build it: "):], {"ldpfast": ldpfast}) == best.params
