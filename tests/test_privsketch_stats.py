"""Statistical checks: each estimator is unbiased for its target (count-min ftilde, count-mean
fbar, or f) with the variance of ldpfast.theory.privsketch, on a fixed population of users.

Every assertion is calibrated for a false-failure probability below 1e-6: means use
|mean - target| < 5.0 sd (two-sided normal tail 5.7e-7) with sd = sqrt(Var/R) over R
independent replicates; variances use the chi-square(R-1) quantiles at 2.5e-7 per side
for the sample variance (each replicate estimate is a mean of 2000 independent users, so
its excess kurtosis is below 0.01 and the normal-theory chi-square law applies).
"""

import warnings

import numpy as np
from scipy import stats

from ldpfast.protocols.sets import privsketch as ps

from ldpfast.protocols.sets import multi_pcms, privsketch_ldp, ps_olh
from ldpfast import theory

R = 400          # replicates
N_USERS = 2000
D = 20
Z = 5.0
TAIL = 2.5e-7


def population(params):
    """Fixed users and their exact per-user count-min / count-mean indicators."""
    gen = np.random.default_rng(99)
    sets = [gen.choice(D, size=gen.integers(0, 7), replace=False) for _ in range(N_USERS)]
    cells = params.hash(np.arange(D)).astype(np.int64)            # (D, K)
    xstar = np.zeros((N_USERS, D))
    xbar = np.zeros((N_USERS, D))
    member = np.zeros((N_USERS, D))
    for i, s in enumerate(sets):
        X = np.zeros((params.K, params.M))
        for item in s:
            X[np.arange(params.K), cells[item]] = 1
            member[i, item] = 1
        vals = X[np.arange(params.K), cells]                       # (D, K)
        xstar[i] = vals.min(axis=1)
        xbar[i] = vals.mean(axis=1)
    return sets, xstar.mean(0), xbar.mean(0), (xbar ** 2).mean(0), member.mean(0)


def replicate(client_cls, server_cls, params, sets, estimate_kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ps.PrivacyWarning)
        client = client_cls(params, rng=1234)
    out = {name: np.empty((R, D)) for name in estimate_kwargs}
    for r in range(R):
        server = server_cls(params).update(client.perturb(sets))
        for name, kwargs in estimate_kwargs.items():
            out[name][r] = server.estimate(**kwargs)
    return out


def check(samples, target, variance):
    target = np.broadcast_to(target, (D,))
    variance = np.broadcast_to(variance, (D,))
    mean = samples.mean(axis=0)
    assert np.all(np.abs(mean - target) < Z * np.sqrt(variance / R)), (mean, target)
    ratio = samples.var(axis=0, ddof=1) / variance
    low, high = stats.chi2.ppf(TAIL, R - 1) / (R - 1), stats.chi2.isf(TAIL, R - 1) / (R - 1)
    assert np.all((ratio > low) & (ratio < high)), ratio


def coeffs(cls, epsilon):
    return cls.create(epsilon=epsilon, d=D, K=2, M=8, seed=5)


def test_sampled_privsketch_unbiased_for_ftilde_with_derived_variance():
    params = coeffs(ps.PrivSketchParams, 2.0)
    sets, ftilde, _, _, f = population(params)
    assert np.any(ftilde > f)         # the population has Bloom collisions: the target is ftilde
    out = replicate(ps.PrivSketchClient, ps.PrivSketchServer, params, sets, {"r2": {},
                                                                             "centred": {"estimator": "centred"}})
    check(out["r2"], ftilde, theory.privsketch_variance(2.0, N_USERS, ftilde, K=2, M=8))
    check(out["centred"], ftilde, theory.privsketch_centred_variance(2.0, N_USERS, K=2, M=8))


def test_nosmp_unbiased_for_ftilde_with_thm_3_2_variance():
    params = coeffs(ps.NoSmpParams, 4.0)
    sets, ftilde, _, _, _ = population(params)
    out = replicate(ps.NoSmpClient, ps.NoSmpServer, params, sets, {"e": {}})
    check(out["e"], ftilde, theory.privsketch_nosmp_variance(4.0, N_USERS, K=2, M=8))


def test_ldp_safe_variant_unbiased_for_count_mean_frequency():
    params = coeffs(privsketch_ldp.SafeParams, 2.0)
    sets, _, fbar, fbar_sq, _ = population(params)
    out = replicate(privsketch_ldp.SafeClient, privsketch_ldp.SafeServer, params, sets, {"mean": {}})
    check(out["mean"], fbar, theory.privsketch_ldp_variance(2.0, N_USERS, fbar, fbar_sq, M=8, K=2))


def test_multi_pcms_mean_unbiased_for_count_mean_frequency():
    params = coeffs(multi_pcms.MultiPCMSMeanParams, 16.0)
    sets, _, fbar, fbar_sq, _ = population(params)
    out = replicate(multi_pcms.MultiPCMSMeanClient, multi_pcms.MultiPCMSMeanServer, params, sets, {"mean": {}})
    check(out["mean"], fbar, theory.multi_pcms_mean_variance(16.0, N_USERS, fbar, fbar_sq, M=8, K=2))


def test_ps_olh_unbiased_when_sets_fit_the_padding():
    params = ps_olh.PSOLHParams(epsilon=2.0, d=D, pad_len=6)     # every set has <= 6 items
    sets, _, _, _, f = population(coeffs(ps.PrivSketchParams, 2.0))
    out = replicate(ps_olh.PSOLHClient, ps_olh.PSOLHServer, params, sets, {"e": {}})
    check(out["e"], f, theory.ps_olh_variance(2.0, N_USERS, f, pad_len=6))
