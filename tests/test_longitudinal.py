"""Unary encodings and the memoized (longitudinal) protocols: the budgets each spends
(computed exactly from the samplers' thresholds: at most, and to 2^-40 of, what was asked),
the k-ary two-stage channel against multi-freq-ldpy's two-value formula, unbiasedness and
variance against the closed forms, what memoization does over repeated reports, and
audits of both budgets within a derived margin.

Statistics: per run, a candidate's count is a sum of independent Bernoullis (users draw
their own secrets), so fhat (affine in it) has the closed-form variance and excess
kurtosis sum(k4)/sum(var)^2; the mean of R runs is checked within Z sd and the sample
variance against chi-square quantiles (tests/_moments.py, ALPHA = 5e-9 per assertion).
"""

import math

import numpy as np
import pytest
from _moments import check_mean, check_variance

from ldpfast import audit
from ldpfast.errors import ParameterError
from ldpfast.protocols.repeated import dbitflip, longitudinal as lg, longitudinal_unary as lu
from ldpfast.protocols.frequency import unary
from ldpfast.protocols._bitvec import unpack_bits
from ldpfast.protocols._memo import new_secrets

UE_TYPES = [lu.LOUEParams, lu.LOSUEParams, lu.LSUEParams]


@pytest.mark.parametrize("params_type", [lg.LGRRParams, *UE_TYPES])
@pytest.mark.parametrize("eps_inf, eps_1, d", [(2.0, 1.0, 2), (4.0, 0.5, 100), (1.0, 0.7, 1000), (8.0, 3.0, 17)])
def test_both_budgets_are_spent_as_asked(params_type, eps_inf, eps_1, d):
    p = params_type(eps_inf=eps_inf, eps_1=eps_1, d=d)
    assert p.effective_eps_inf <= eps_inf and p.effective_eps_1 <= eps_1 and p.epsilon == eps_1
    # integer bisection: one threshold step away from the budget asked for (2^-64 relative
    # probabilities: far below 2^-40 in epsilon)
    assert eps_1 - p.effective_eps_1 < 2.0**-40 and eps_inf - p.effective_eps_inf < 2.0**-40


def test_lolh_uses_the_exact_channel_and_the_olh_range():
    p = lg.LOLHParams(eps_inf=3.0, eps_1=1.0, d=1000)
    assert p.g == round(math.e) + 1 and p.effective_eps_1 == pytest.approx(1.0, abs=2.0**-40)
    assert p.effective_eps_inf == pytest.approx(3.0, abs=2.0**-40)


def test_two_stage_grr_is_grr_at_eps_1_unlike_the_two_value_formula():
    # multi-freq-ldpy's L-GRR solves p2 from the two-value equation; with the composite
    # k-ary channel (P = p1 p2 + (d-1) q1 q2, Q = p1 q2 + q1 p2 + (d-2) q1 q2) its single
    # report spends far less than eps_1 for d > 2 (TOOLBOX: 0.166 at d = 100).
    eps_inf, eps_1 = 2.0, 1.0
    for d, theirs in ((100, 0.166), (1000, 0.019)):
        p1 = math.exp(eps_inf) / (math.exp(eps_inf) + d - 1)
        q1 = (1 - p1) / (d - 1)
        e1 = math.exp(eps_1)
        p2 = (q1 - e1 * p1) / (-p1 * e1 + d * q1 * e1 - q1 * e1 - p1 * (d - 1) + q1)
        q2 = (1 - p2) / (d - 1)
        big_p, big_q = p1 * p2 + (d - 1) * q1 * q2, p1 * q2 + q1 * p2 + (d - 2) * q1 * q2
        assert math.log(big_p / big_q) == pytest.approx(theirs, abs=0.001)
        ours = lg.LGRRParams(eps_inf=eps_inf, eps_1=eps_1, d=d)
        assert math.log(ours.keep_probability / ours.other_probability) == pytest.approx(eps_1, rel=1e-12)
        assert ours.keep_probability + (d - 1) * ours.other_probability == pytest.approx(1.0, rel=1e-14)


def test_parameters_are_checked():
    with pytest.raises(ParameterError, match="eps_1 .* must be <= eps_inf"):
        lg.LGRRParams(eps_inf=1.0, eps_1=2.0, d=10)
    # L-OUE's second stage (p2 = 1/2) spends at most ln((2 - q1)/(3 q1)) = 0.7636 at eps_inf = 1
    with pytest.raises(ParameterError, match=r"at most 0.763\d+, with p2 = 1/2"):
        lu.LOUEParams(eps_inf=1.0, eps_1=0.9, d=10)
    assert lu.LOSUEParams(eps_inf=1.0, eps_1=0.9, d=10).effective_eps_1 == pytest.approx(0.9, abs=2.0**-40)
    with pytest.raises(ParameterError, match="d must be"):
        lu.LOUEParams(eps_inf=2.0, eps_1=1.0, d=1)
    with pytest.raises(ParameterError, match="secrets must be a uint8 array of shape"):
        lg.LGRRClient(lg.LGRRParams(2.0, 1.0, 4)).perturb([1, 2], secrets=np.zeros((3, 32), np.uint8))
    with pytest.raises(ParameterError, match="eps_1 must be <= eps_inf"):
        dbitflip.OneBitMeanParams(eps_inf=1.0, eps_1=1.5, m=10)


# -- unbiasedness and variance ---------------------------------------------------------------
VALUES = np.concatenate([np.zeros(150), np.ones(100), np.arange(50) % 12]).astype(np.int64)   # n = 300


def _bernoulli_moments(p_holder, p_other, f_holders, n):
    """(sum of variances, sum of 4th cumulants) of a count of n independent Bernoullis."""
    terms = np.where(np.arange(n) < round(f_holders * n), p_holder * (1 - p_holder), p_other * (1 - p_other))
    return terms.sum(), np.sum(terms * (1 - 6 * terms))


def _unary_case(params, client, server_type, runs):
    reports = client(params, rng=11).perturb(np.tile(VALUES, runs))
    bits = unpack_bits(reports.bits, params.d).reshape(runs, VALUES.size, params.d)
    n = VALUES.size
    for x in (0, 1, 11):
        fhat = (bits[:, :, x].sum(axis=1) / n - params.q) / (params.p - params.q)
        f = np.mean(VALUES == x)
        variance = params.variance(n, f)
        spread, k4 = _bernoulli_moments(params.p, params.q, f, n)
        assert variance == pytest.approx(spread / (n * (params.p - params.q)) ** 2, rel=1e-9)
        check_mean(fhat, f, variance)
        check_variance(fhat, variance, k4 / spread**2)
    one_run = server_type(params).update(type(reports)(bits=reports.bits[:n]))
    expected = (unpack_bits(reports.bits[:n], params.d).sum(axis=0) / n - params.q) / (params.p - params.q)
    np.testing.assert_allclose(one_run.estimate(), expected, rtol=1e-12)


@pytest.mark.parametrize("params, client, server", [
    (unary.OUEParams(1.0, 12), unary.OUEClient, unary.OUEServer),
    (unary.SUEParams(2.0, 12), unary.SUEClient, unary.SUEServer),
    (lu.LOUEParams(4.0, 1.0, 12), lu.LOUEClient, lu.LOUEServer),
    (lu.LOSUEParams(3.0, 2.0, 12), lu.LOSUEClient, lu.LOSUEServer),
    (lu.LSUEParams(2.0, 0.5, 12), lu.LSUEClient, lu.LSUEServer),
])
def test_unary_estimates_are_unbiased_with_the_closed_form_variance(params, client, server):
    _unary_case(params, client, server, runs=3000)


def test_lgrr_is_unbiased_with_the_grr_variance_at_eps_1():
    params, runs = lg.LGRRParams(eps_inf=3.0, eps_1=1.0, d=12), 3000
    y = lg.LGRRClient(params, rng=5).perturb(np.tile(VALUES, runs)).y.reshape(runs, -1)
    n, big_p, big_q = VALUES.size, params.keep_probability, params.other_probability
    for x in (0, 1, 11):
        fhat = ((y == x).sum(axis=1) / n - big_q) / (big_p - big_q)
        f = np.mean(VALUES == x)
        spread, k4 = _bernoulli_moments(big_p, big_q, f, n)
        variance = params.variance(n, f)
        assert variance == pytest.approx(spread / (n * (big_p - big_q)) ** 2, rel=1e-9)
        check_mean(fhat, f, variance)
        check_variance(fhat, variance, k4 / spread**2)


def test_lolh_is_unbiased():
    # Mean within Z of the runs' own standard error (each run's estimate averages n
    # independent users' bounded contributions).
    params, runs, n = lg.LOLHParams(eps_inf=3.0, eps_1=1.5, d=40), 400, 300
    values = VALUES % 40
    reports = lg.LOLHClient(params, rng=6).perturb(np.tile(values, runs))
    estimates = []
    for r in range(runs):
        part = lg.LOLHReports(z=reports.z[r * n:(r + 1) * n], a0=reports.a0[r * n:(r + 1) * n],
                              a1=reports.a1[r * n:(r + 1) * n])
        estimates.append(lg.LOLHServer(params).update(part).estimate(np.array([0, 1, 11])))
    estimates = np.array(estimates)
    for j, x in enumerate((0, 1, 11)):
        check_mean(estimates[:, j], np.mean(values == x), estimates[:, j].var(ddof=1))


def test_dbitflip_is_unbiased_with_the_closed_form_variance():
    # Each user contributes Z = [v sampled] (bit - q)/(p - q), independent across users;
    # E[Z^2] and E[Z^4] give the variance and kurtosis of the sum exactly.
    params, runs = dbitflip.DBitFlipParams(epsilon=2.0, d=12, sampled=3), 3000
    reports = dbitflip.DBitFlipClient(params, rng=7).perturb(np.tile(VALUES, runs))
    n, (t_hot, t_cold) = VALUES.size, params.thresholds
    p, q = t_hot / 2**64, t_cold / 2**64
    for x in (0, 1, 11):
        sampled = (reports.buckets == x).reshape(runs, n, 3).any(axis=2)
        ones = ((reports.buckets == x) & (reports.bits == 1)).reshape(runs, n, 3).any(axis=2)
        fhat = params.d / (n * params.sampled) * (ones.sum(axis=1) - q * sampled.sum(axis=1)) / (p - q)
        f = np.mean(VALUES == x)
        check_mean(fhat, f, params.variance(n, f))
        check_variance(fhat, params.variance(n, f), 6.0 / n)   # bounded per-user terms: O(1/n)


def test_one_bit_mean_is_unbiased():
    params, runs = dbitflip.OneBitMeanParams(eps_inf=2.0, eps_1=1.0, m=20), 3000
    values = np.arange(300) % 21
    bits = dbitflip.OneBitMeanClient(params, rng=8).perturb(np.tile(values, runs)).bit.reshape(runs, -1)
    one, zero = params._report_probabilities()
    fhat = (bits.mean(axis=1) - zero) / (one - zero)
    # each user's bit: probability zero + (x/m)(one - zero), marginally over alpha
    pi = zero + values / 20 * (one - zero)
    variance = np.sum(pi * (1 - pi)) / (300 * (one - zero)) ** 2
    check_mean(fhat, values.mean() / 20, variance)
    check_variance(fhat, variance, 0.0)
    assert params.variance(300, values.mean() / 20) >= variance   # the registered form is an upper bound


# -- memoization ------------------------------------------------------------------------------
def test_repeated_reports_reveal_the_permanent_response_not_the_value():
    # One user, one value, 4000 reports: the most frequent report is its permanent response
    # (kept with probability 1 - t2/2^64 > 1/2 of the time), which is the value only with
    # probability p1 (e^2/(e^2 + 9) = 0.45 here): averaging reports converges to the PRR.
    params = lg.LGRRParams(eps_inf=2.0, eps_1=1.0, d=10)
    client = lg.LGRRClient(params, rng=1)
    hits = 0
    for user in range(60):
        secret = np.repeat(new_secrets(1, rng=user), 4000, axis=0)
        reports = client.perturb(np.full(4000, 3), secrets=secret)
        prr = client.permanent([3], secrets=secret[:1]).y[0]
        assert np.bincount(reports.y.astype(np.int64), minlength=10).argmax() == prr
        hits += int(prr == 3)
    # hits ~ Binomial(60, 0.45): within 4.5 sd
    assert abs(hits - 60 * 0.45) < 4.5 * math.sqrt(60 * 0.45 * 0.55)


# -- audits of both budgets, tight -----------------------------------------------------------
def _margin(p0, p1, n):
    # as tests/test_audit.py: Clopper-Pearson at alpha/4 (z = 2.81) plus 4 sd of estimation
    return (2.81 + 4) * (math.sqrt((1 - p0) / (n * p0)) + math.sqrt((1 - p1) / (n * p1)))


@pytest.mark.parametrize("pid", ["l-grr", "l-oue", "l-osue", "l-sue", "1bitmean", "dbitflip"])
@pytest.mark.parametrize("budget", ["report", "permanent"])
def test_audits_of_both_budgets_are_tight(pid, budget):
    eps, n = 1.0, 300_000
    params = audit.default_params(pid, eps)
    result = audit.audit(params, n, rng=4, budget=budget)
    if pid == "l-grr":
        if budget == "report":
            p0, p1 = params.keep_probability, params.other_probability
        else:
            flip = params.thresholds[0] / 2**64
            p0, p1 = 1 - flip, flip / (params.d - 1)
    elif pid == "1bitmean":
        top, bottom, flip = (t / 2**64 for t in params.thresholds)
        if budget == "report":
            top, bottom = top * (1 - flip) + (1 - top) * flip, bottom * (1 - flip) + (1 - bottom) * flip
        p0, p1 = top, bottom      # the event "bit = 1"; "bit = 0" has the same ratio here
    else:
        if pid == "dbitflip":
            one, zero = (t / 2**64 for t in params.thresholds)
        elif budget == "report":
            one, zero = params.p, params.q
        else:
            one, zero = (t / 2**64 for t in params.thresholds[:2])
        p0, p1 = one * (1 - zero), zero * (1 - one)
    claimed = result.epsilon
    assert math.log(p0 / p1) == pytest.approx(claimed, abs=1e-9)
    assert claimed - _margin(p0, p1, n) < result.eps_lb <= claimed, result


def test_permanent_audit_needs_a_memoized_protocol():
    with pytest.raises(ParameterError, match="has no permanent response"):
        audit.audit_protocol("grr", 1.0, 10, budget="permanent")
    assert set(audit.audited("permanent")) == {"rappor", "l-grr", "l-oue", "l-osue", "l-sue", "l-olh", "dbitflip",
                                               "1bitmean"}
