"""ldpfast.estimates: standard errors, intervals, heavy hitters with FDR control and the
consistency post-processing, each tested for what it promises (the coverage and FDR of
every protocol against its stated target: tests/test_calibration.py).

Tolerances: every statistical check below fails with probability at most ``DELTA`` (per
check, before Bonferroni over the checks of one test) when the property holds; the
derivation is next to each check. All simulations are seeded, so the tests are
deterministic; the bounds make sure the seed is not what makes them pass.
"""

import itertools
import math
import sys

import numpy as np
import pytest
from scipy import stats

import ldpfast as lf
from ldpfast.protocols.frequency import grr
from ldpfast import estimates, uncertainty
from ldpfast.errors import ParameterError

DELTA = 1e-4
N = 20_000
REPS = 1000


def _values(d, freqs, n=N):
    """A fixed data set of n values with the given frequencies (rounded) on 0..len-1."""
    counts = np.floor(np.asarray(freqs) * n).astype(int)
    counts[-1] += n - counts.sum()
    return np.repeat(np.arange(len(freqs)), counts) % d


PROTOCOLS = {
    "grr": lambda: grr.GRRParams(epsilon=1.5, d=40),
    "hrr": lambda: lf.protocols.frequency.hadamard.HRRParams(epsilon=1.0, d=40),
    "ocms": lambda: lf.protocols.frequency.ocms.OCMSParams.optimal(epsilon=2.0, d=40, field="compact"),
    "olh": lambda: lf.protocols.frequency.olh.OLHParams(epsilon=1.0, d=40),
    "he": lambda: lf.protocols.frequency.hadamard.HEParams(epsilon=1.0, d=40),
    "rhr": lambda: lf.protocols.frequency.rhr.RHRParams(epsilon=3.0, d=40),       # 8 residue classes of 5 values
    "cmshe": lambda: lf.protocols.frequency.hadamard.CMSHEParams(epsilon=2.0, d=40, k=16, m=16, hash_seed=1),
}
TRUE_F = np.array([0.4, 0.2, 0.1, 0.05] + [0.25 / 36] * 36)
CANDIDATES = np.array([0, 1, 3, 39])


def _simulate(name, reps=REPS):
    """Estimates and plug-in standard errors of CANDIDATES over `reps` seeded runs."""
    params = PROTOCOLS[name]()
    family = lf._base.protocols()[params.protocol]
    values = _values(params.d, TRUE_F)
    est, std = np.empty((reps, CANDIDATES.size)), np.empty((reps, CANDIDATES.size))
    for r in range(reps):
        server = family.aggregator(params).update(family.client(params, rng=1000 + r).perturb(values))
        e = server.frequencies(CANDIDATES)
        est[r], std[r] = e.values, e.std
    freqs = np.bincount(values, minlength=params.d) / values.size
    truth = freqs[CANDIDATES]
    if name == "rhr":   # the only closed form that also needs the true residue-class share
        share = np.bincount(np.arange(params.d) % params.base, weights=freqs)[CANDIDATES % params.base]
        var_true = lf.theory.rhr_variance(params.epsilon, N, truth, residue_fraction=share)
    else:
        var_true = estimates._uncertainty_for(server, CANDIDATES)[0].variance(truth)
    return est, std, truth, np.broadcast_to(var_true, truth.shape)


@pytest.fixture(scope="module", params=sorted(PROTOCOLS))
def simulation(request):
    return request.param, _simulate(request.param)


def test_standard_errors_match_the_empirical_spread(simulation):
    """(R-1) s^2 / sigma^2 ~ chi2(R-1) for R independent normal estimates (the estimate is
    a mean of N bounded i.i.d. terms, excess kurtosis O(1/N), so the chi-square law of the
    sample variance holds to that order). Two-sided, Bonferroni over the candidates."""
    name, (est, std, truth, var_true) = simulation
    reps, k = est.shape
    ratio = (reps - 1) * est.var(axis=0, ddof=1) / var_true
    lo, hi = stats.chi2.ppf([DELTA / (2 * k), 1 - DELTA / (2 * k)], reps - 1)
    assert np.all((lo < ratio) & (ratio < hi)), (name, ratio / (reps - 1))
    # The plug-in standard error is the closed form at f = clip(fhat): its relative error
    # is |fhat - f| times d log Var / df, at most 6 sigma x (1/Var) dVar/df ~ 1e-2 here.
    np.testing.assert_allclose((std**2).mean(axis=0), var_true, rtol=0.02)


def test_confidence_interval_api():
    """Score intervals: the endpoints f solve (fhat - f)^2 = z^2 Var(f), so each is z of its
    own standard errors from the estimate (not of the estimate's)."""
    params = lf.protocols.frequency.hadamard.HRRParams(epsilon=2.0, d=16)
    values = _values(16, TRUE_F[:16] / TRUE_F[:16].sum())
    hadamard = lf.protocols.frequency.hadamard
    server = hadamard.HRRServer(params).update(hadamard.HRRClient(params, rng=3).perturb(values))
    e = server.frequencies()
    assert e.target == estimates.TRUE_FREQUENCY
    lo, hi = e.confidence_interval(0.05)
    z = stats.norm.ppf(0.975)
    c = (np.exp(2.0) + 1) / np.expm1(2.0)

    def var(f):   # HRR: (c_eps^2 - f)/n, affine, so also below f = 0
        return (c * c - f) / e.n
    for end in (lo, hi):
        np.testing.assert_allclose(np.abs(e.values - end), z * np.sqrt(var(end)), rtol=1e-9)
    assert np.all(lo < e.values) and np.all(e.values < hi) and (e.values < 0).any()
    np.testing.assert_allclose(e.std, np.sqrt(var(e.values)), rtol=1e-9)    # at the raw estimate
    lo_c, hi_c = e.confidence_interval(0.05, counts=True)
    np.testing.assert_allclose(lo_c, lo * e.n)
    np.testing.assert_allclose(e.counts, server.estimate(counts=True), rtol=1e-12)
    for bad in (0, 1, -0.1, True):
        with pytest.raises(ParameterError, match="alpha"):
            e.confidence_interval(bad)


def test_grr_standard_errors_are_the_variance_at_the_estimate_clipped_at_zero():
    """Var(fhat) of GRR is ``a + b f`` (b > 0): the standard error is its root at
    ``max(fhat, 0)``, so its square has mean ``Var(f) + b E[max(-fhat, 0)]``; with fhat
    normal (``s`` its standard deviation) ``E[max(-fhat, 0)] = s phi(f/s) - f Phi(-f/s)``
    (about 4% of Var at these small f). Mean of R variances with relative spread v: bound
    ``z_{1-delta/d} v/sqrt(R)`` (v measured, Bonferroni over the d values)."""
    d, eps, reps = 40, 1.0, 400
    params = grr.GRRParams(epsilon=eps, d=d)
    values = _values(d, np.r_[[0.3, 0.1], np.full(d - 2, 0.6 / (d - 2))])
    truth = np.bincount(values, minlength=d) / values.size
    runs = [grr.GRRServer(params).update(grr.GRRClient(params, rng=r).perturb(values))
            .frequencies() for r in range(reps)]
    a, slope = (lf.theory.grr_variance(eps, d, values.size, f) for f in (0.0, 1.0))
    slope -= a
    for e in runs[:3]:
        np.testing.assert_allclose(e.std ** 2, a + slope * np.maximum(e.values, 0.0), rtol=1e-9)
    var_est = np.array([e.std ** 2 for e in runs])
    var_true = lf.theory.grr_variance(eps, d, values.size, truth)
    s = np.sqrt(var_true)
    expected = var_true + slope * (s * stats.norm.pdf(truth / s) - truth * stats.norm.sf(truth / s))
    ratio = var_est.mean(axis=0) / expected
    tol = stats.norm.ppf(1 - DELTA / d) * (var_est.std(axis=0, ddof=1) / expected) / np.sqrt(reps)
    assert np.all(np.abs(ratio - 1) <= tol), ratio


def test_standard_errors_do_not_collapse_at_negative_estimates():
    """Issue 29: GRR at a domain larger than n (about one report per value, n q = 0.7) gives
    values nobody holds estimates far below 0, where the closed form a + b f reaches 0; their
    standard error is the one at 0 (never less), and so is the interval's reach below 0."""
    d, n = 10_000, 7_000
    params = grr.GRRParams(epsilon=2.0, d=d)
    server = grr.GRRServer(params).update(grr.GRRClient(params, rng=7).perturb(np.arange(n) % 50))
    e = server.frequencies()
    at_zero = e._std_at(0.0)
    negative = e.values < 0
    a, slope = (lf.theory.grr_variance(2.0, d, n, f) for f in (0.0, 1.0))
    assert a + (slope - a) * e.values.min() < 0.01 * a             # the closed form at fhat has collapsed
    np.testing.assert_allclose(e.std[negative], at_zero[negative], rtol=1e-12)
    assert np.all(e.std >= at_zero * (1 - 1e-12))
    low, high = e.confidence_interval(0.05)
    z = stats.norm.ppf(0.975)
    np.testing.assert_allclose(low[negative], e.values[negative] - z * e.std[negative], rtol=1e-12)
    assert np.all((low <= e.values) & (e.values <= high))


# -- heavy hitters -------------------------------------------------------------------------

def _grr_runs(freqs, reps, d, protocol="grr"):
    """Estimates of `reps` seeded runs on a fixed data set with the given frequencies."""
    params = (grr.GRRParams(epsilon=2.0, d=d) if protocol == "grr"
              else lf.protocols.frequency.hadamard.HRRParams(epsilon=2.0, d=d))
    family = lf._base.protocols()[protocol]
    values = _values(d, freqs)
    for r in range(reps):
        yield family.aggregator(params).update(family.client(params, rng=5000 + r).perturb(values)).frequencies()


@pytest.mark.parametrize("method,protocol", [("bh", "grr"), ("by", "grr"), ("bonferroni", "grr"), ("bh", "hrr")])
def test_heavy_hitters_control_false_discoveries_under_the_null(method, protocol):
    """Every value sits exactly at the threshold (the worst case of H0: f <= t), so every
    declaration is false and FDR = P(any declaration). The number of runs with a
    declaration is Binomial(R, FDR) with FDR <= q: one-sided bound R q + z_{1-delta}
    sqrt(R q (1-q)). Uncorrected per-candidate tests exceed it by far (checked, so the
    bound is not vacuous)."""
    d, q, reps, t = 25, 0.1, REPS, 0.04      # HRR pads d = 25 to 32 Hadamard columns
    any_declared = uncorrected = 0
    for e in _grr_runs(np.full(d, t), reps, d, protocol):
        any_declared += len(e.heavy_hitters(t, fdr=q, method=method)) > 0
        uncorrected += bool((e.p_values(t) < q).any())
    bound = reps * q + stats.norm.ppf(1 - DELTA) * np.sqrt(reps * q * (1 - q))
    assert any_declared <= bound, (method, any_declared / reps)
    assert uncorrected > bound


def test_heavy_hitters_fdr_and_power_with_true_heavy_values():
    """Five values well above the threshold, twenty at it. The false-discovery proportion
    is in [0, 1]; its mean over R runs exceeds the FDR by more than z_{1-delta} s/sqrt(R)
    (CLT for the mean of bounded i.i.d. variables, s = sample standard deviation) with
    probability about delta. BH's FDR here is at most q m0/m = 0.08."""
    t, q = 0.02, 0.1
    freqs = np.array([0.06] * 5 + [t] * 20 + [0.3 / 15] * 15)
    freqs[-1] += 1 - freqs.sum()
    assert np.all(freqs[5:] <= t + 1e-12)
    fdp, found = [], []
    for e in _grr_runs(freqs, REPS, freqs.size):
        hh = e.heavy_hitters(t, fdr=q)
        false = np.count_nonzero(hh.candidates >= 5)
        fdp.append(false / max(len(hh), 1))
        found.append(np.count_nonzero(hh.candidates < 5))
    fdp = np.array(fdp)
    assert fdp.mean() <= q + stats.norm.ppf(1 - DELTA) * fdp.std(ddof=1) / np.sqrt(REPS)
    # Power: at n = 20,000, eps = 2, d = 40 the z-score of f = 0.06 vs t = 0.02 is about 5.4
    # and BH's cut is at most z_{1-q/40} = 3.0, so each is missed with probability below
    # Phi(3.0 - 5.4) = 0.008: on average at least 4.96 of the five are found.
    assert np.mean(found) >= 4.9


def _grr_null_runs(d, n, reps, heavy=0, seed=0):
    """GRR at eps = 2 on d values: ``heavy`` values at 3/d, the others sharing the rest
    equally (all at the threshold 1/d when ``heavy = 0``, below it otherwise)."""
    params = grr.GRRParams(epsilon=2.0, d=d)
    freqs = np.full(d, (1.0 - 3.0 * heavy / d) / (d - heavy))
    freqs[:heavy] = 3.0 / d
    values = _values(d, freqs, n)
    for r in range(reps):
        yield grr.GRRServer(params).update(grr.GRRClient(params, rng=9000 + seed + r).perturb(values)).frequencies()


def _bh_declares(pvals, q):
    k = pvals.size
    return bool(np.any(np.sort(pvals) <= q * np.arange(1, k + 1) / k))


@pytest.mark.parametrize("d, n, reps", [(200, 20_000, 400), (1000, 5000, 200)])
def test_grr_heavy_hitters_keep_their_fdr_with_exact_tests(d, n, reps):
    """The issue's reproducer (d = 200, eps = 2, no heavy value: FDR = P(any declaration) was
    0.087 at level 0.05 with normal p-values) and a sparse regime (d = 1000, n = 5000: about
    5 reports per value), where the count's upper tail is far heavier than the normal one.
    Exact binomial p-values keep P(any) <= q: the number of runs with a declaration is at
    most Binomial(R, q), bound R q + z_{1-delta} sqrt(R q (1-q)). In the sparse regime the
    normal approximation (what p_values computed before) exceeds the bound (checked, so the
    test is not vacuous: it declared in ~half the runs)."""
    q = 0.05
    exact = normal = 0
    for e in _grr_null_runs(d, n, reps):
        exact += len(e.heavy_hitters(1.0 / d, fdr=q)) > 0
        normal += _bh_declares(uncertainty.normal_sf((e.values - 1.0 / d) / e._std_at(1.0 / d)), q)
    bound = reps * q + stats.norm.ppf(1 - DELTA) * np.sqrt(reps * q * (1 - q))
    assert exact <= bound, exact / reps
    if d == 1000:
        assert normal > bound, normal / reps


def test_grr_heavy_hitters_fdr_with_true_heavy_values():
    """Ten values at 3/d, the rest just below the threshold 1/d (the issue measured 0.076
    at level 0.05). The false-discovery proportion is in [0, 1]; its mean over R runs exceeds the FDR
    by more than z_{1-delta} s/sqrt(R) with probability about delta (CLT, s the sample
    standard deviation); BH's FDR is at most q m0/m <= q."""
    q, reps, d = 0.05, 400, 200
    fdp = []
    for e in _grr_null_runs(d, 20_000, reps, heavy=10, seed=50_000):
        hh = e.heavy_hitters(1.0 / d, fdr=q)
        fdp.append(np.count_nonzero(hh.candidates >= 10) / max(len(hh), 1))
    fdp = np.array(fdp)
    assert fdp.mean() <= q + stats.norm.ppf(1 - DELTA) * fdp.std(ddof=1) / np.sqrt(reps), fdp.mean()


def test_heavy_hitters_are_sorted_and_validated():
    e = next(_grr_runs(np.array([0.5, 0.3, 0.2]), 1, 3))
    hh = e.heavy_hitters(0.1)
    assert list(hh.candidates) == [0, 1, 2] and np.all(np.diff(hh.values) <= 0)
    with pytest.raises(ParameterError, match="method"):
        e.heavy_hitters(0.1, method="holm")
    with pytest.raises(ParameterError, match="threshold"):
        e.heavy_hitters(1.5)
    with pytest.raises(ParameterError, match="fdr"):
        e.heavy_hitters(0.1, fdr=0)


def test_top_k():
    e = next(_grr_runs(np.array([0.1, 0.5, 0.15, 0.25]), 1, 4))
    top = e.top_k(2)
    assert list(top.candidates) == [1, 3]
    np.testing.assert_array_equal(top.values, e.values[[1, 3]])
    np.testing.assert_array_equal(top.std, e.std[[1, 3]])
    assert len(e.top_k(10)) == 4
    with pytest.raises(ParameterError, match="k must"):
        e.top_k(0)


# -- post-processing ------------------------------------------------------------------------

def _brute_force_projection(v, total):
    """min ||w - v|| over {w >= 0, sum w = total}: for each support S the optimum on the
    face is v_S - theta_S with theta_S fixing the sum; the answer is the best feasible face."""
    best, best_dist = None, np.inf
    for size in range(1, v.size + 1):
        for support in itertools.combinations(range(v.size), size):
            s = list(support)
            w = np.zeros_like(v)
            w[s] = v[s] - (v[s].sum() - total) / size
            if np.all(w[s] >= -1e-12):
                dist = np.sum((w - v) ** 2)
                if dist < best_dist:
                    best, best_dist = w, dist
    return best


def test_simplex_projection_is_the_nearest_point():
    rng = np.random.default_rng(7)
    for _ in range(300):
        v = rng.normal(0.1, 0.3, size=int(rng.integers(1, 8)))
        total = float(rng.choice([1.0, 0.5, 2.0]))
        w = estimates.project_simplex(v, total)
        np.testing.assert_allclose(w, _brute_force_projection(v, total), atol=1e-12)
        # KKT: w >= 0, sum w = total, and one theta with v - w = theta on the support and
        # v <= theta off it.
        assert np.all(w >= 0) and w.sum() == pytest.approx(total, abs=1e-12)
        theta = (v - w)[w > 0]
        assert np.ptp(theta) < 1e-12 and np.all(v[w == 0] <= theta[0] + 1e-12)


# Literal transcriptions of Wang, Lopuhaa-Zwakenberg, Li, Skoric, Li (NDSS 2020), section IV,
# written with plain Python loops, independently of ldpfast.estimates.
def _literal_norm(v, total):
    delta = (total - sum(v)) / len(v)                 # add the same delta to every estimate
    return [x + delta for x in v]


def _literal_norm_mul(v, total):
    pos = [max(x, 0.0) for x in v]                    # negatives to 0, then multiply by gamma
    gamma = total / sum(pos)
    return [x * gamma for x in pos]


def _literal_norm_sub(v, total):
    out = list(v)
    while True:                                       # negatives to 0; subtract delta from the
        out = [max(x, 0.0) for x in out]              # positives so they sum to total; repeat
        positive = [i for i, x in enumerate(out) if x > 0]
        delta = (sum(out) - total) / len(positive)
        for i in positive:
            out[i] -= delta
        if all(x >= 0 for x in out):
            return out


def _literal_norm_cut(v, total):
    pos = [max(x, 0.0) for x in v]                    # negatives to 0; if the sum exceeds total,
    if sum(pos) <= total:                             # the smallest theta with
        return pos                                    # sum_{x >= theta} x <= total
    theta = min(t for t in set(pos) | {math.inf} if sum(x for x in pos if x >= t) <= total)
    return [x if x >= theta else 0.0 for x in pos]    # and everything below it to 0


def _literal_base_cut(v, sd0, alpha):
    threshold = [stats.norm.ppf(1 - alpha / len(v)) * s for s in sd0]
    return [x if x >= t else 0.0 for x, t in zip(v, threshold)]


def _literal_projection(v, total):
    """CLS: min ||w - v|| subject to w >= 0 and sum w = total, whose solution is
    max(v - theta, 0) with theta fixing the sum (found by bisection: the sum falls with theta)."""
    lo, hi = min(v) - total, max(v)
    for _ in range(200):
        theta = (lo + hi) / 2
        lo, hi = (theta, hi) if sum(max(x - theta, 0.0) for x in v) > total else (lo, theta)
    return [max(x - (lo + hi) / 2, 0.0) for x in v]


LITERAL = {"norm": _literal_norm, "norm-mul": _literal_norm_mul, "norm-sub": _literal_norm_sub,
           "norm-cut": _literal_norm_cut, "simplex": _literal_projection}


def test_postprocessing_matches_the_paper_on_the_issue_example():
    v = [0.5, -0.01, 0.2]
    np.testing.assert_allclose(estimates.norm_sub(v), [0.65, 0.0, 0.35], atol=1e-15)
    theta = (sum(v) - 1.0) / 3                       # no estimate falls below theta
    np.testing.assert_allclose(estimates.project_simplex(v), np.array(v) - theta, atol=1e-15)


@pytest.mark.parametrize("method", sorted(LITERAL))
def test_postprocessing_matches_its_literal_definition(method):
    """Random vectors: positive sums below, at and above the total, ties, all-negative
    ones (for Norm-Sub and Norm-Mul the all-negative case is outside the paper's definition:
    ldpfast spreads the total evenly, tested separately)."""
    rng = np.random.default_rng(11)
    fn = {"norm": estimates.norm, "norm-mul": estimates.norm_mul, "norm-sub": estimates.norm_sub,
          "norm-cut": estimates.norm_cut, "simplex": estimates.project_simplex}[method]
    checked = 0
    for _ in range(400):
        size = int(rng.integers(1, 9))
        v = rng.normal(rng.choice([-0.05, 0.05, 0.2]), 0.3, size=size).round(int(rng.integers(1, 4)))
        total = float(rng.choice([1.0, 0.5, 2.0]))
        if method in ("norm-mul", "norm-sub") and not (v > 0).any():
            continue
        np.testing.assert_allclose(fn(v, total), LITERAL[method](v.tolist(), total), atol=1e-12,
                                   err_msg=f"{method} {v} {total}")
        checked += 1
    assert checked > 300
    for fn_ in (estimates.norm_mul, estimates.norm_sub):
        np.testing.assert_array_equal(fn_([-0.1, -0.2], 1.0), [0.5, 0.5])


def test_postprocessing_of_an_estimate():
    params = grr.GRRParams(epsilon=1.0, d=30)     # noisy: many negative raw estimates
    values = _values(30, np.r_[[0.5, 0.2], np.full(28, 0.3 / 28)])
    e = grr.GRRServer(params).update(grr.GRRClient(params, rng=2).perturb(values)).frequencies()
    assert (e.values < 0).any()
    for method, literal in LITERAL.items():
        out = e.postprocess(method)
        assert out.postprocessing == method
        np.testing.assert_allclose(out.values, literal(e.values.tolist(), 1.0), atol=1e-12)
        if method != "norm":
            assert np.all(out.values >= 0)
        if method != "norm-cut":
            assert out.values.sum() == pytest.approx(1.0, abs=1e-12)
    # Norm-Sub and the projection coincide exactly when the positive estimates sum to at
    # least the total (the paper's equivalence), and differ otherwise
    assert e.values.clip(0).sum() >= 1.0
    np.testing.assert_allclose(e.postprocess("norm-sub").values, e.postprocess("simplex").values, atol=1e-12)
    below = e.postprocess("norm-sub", total=2.0).values - e.postprocess("simplex", total=2.0).values
    assert np.abs(below).max() > 1e-3
    clip = e.postprocess("clip").values
    assert np.all((clip >= 0) & (clip <= 1))
    cut = e.postprocess("base-cut", alpha=0.05)
    sd0 = np.sqrt(lf.theory.grr_variance(1.0, 30, e.n, 0.0))     # 0.023: the cut is at 0.067
    np.testing.assert_array_equal(cut.values, _literal_base_cut(e.values.tolist(), [sd0] * 30, 0.05))
    assert set(np.flatnonzero(cut.values)) >= {0, 1}
    # Post-processed values are biased: no intervals or tests on them.
    with pytest.raises(ParameterError, match="post-processed"):
        e.postprocess("simplex").confidence_interval()
    with pytest.raises(ParameterError, match="method"):
        e.postprocess("norm-magic")


def test_base_cut_bounds_false_survivors():
    """Bonferroni cut: P(any value of frequency 0 survives) <= alpha. Over R runs the
    number of runs with a zero-frequency survivor is at most Binomial(R, alpha): bound
    R alpha + z_{1-delta} sqrt(R alpha (1-alpha))."""
    d, alpha = 20, 0.1
    freqs = np.r_[[0.6, 0.4], np.zeros(d - 2)]
    runs = sum(bool(np.any(e.postprocess("base-cut", alpha=alpha).values[2:] > 0))
               for e in _grr_runs(freqs, REPS, d))
    assert runs <= REPS * alpha + stats.norm.ppf(1 - DELTA) * np.sqrt(REPS * alpha * (1 - alpha))


# -- export and protocols without closed forms -----------------------------------------------

def test_to_pandas(monkeypatch):
    pd = pytest.importorskip("pandas")
    e = next(_grr_runs(np.array([0.5, 0.3, 0.2]), 1, 3))
    frame = e.to_pandas(alpha=0.1)
    assert list(frame.columns) == ["candidate", "estimate", "std", "count", "ci_low", "ci_high"]
    np.testing.assert_array_equal(frame["estimate"].to_numpy(), e.values)
    np.testing.assert_array_equal(frame["std"].to_numpy(), e.std)      # the std of values -+ z std
    np.testing.assert_allclose(frame["ci_low"].to_numpy(), e.confidence_interval(0.1)[0])
    assert frame.attrs["protocol"] == "grr" and isinstance(frame, pd.DataFrame)
    assert "ci_low" not in e.postprocess("clip").to_pandas().columns
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install 'ldpfast\[pandas\]'"):
        e.to_pandas()


def test_median_and_minimum_estimators_state_their_model():
    params = lf.protocols.frequency.hadaoracle.HadaOracleParams.create(epsilon=2.0, d=1000, n=4000, hash_seed=3)
    hadaoracle = lf.protocols.frequency.hadaoracle
    reports = hadaoracle.HadaOracleClient(params, rng=1).perturb(np.arange(4000) % 50)
    server = hadaoracle.HadaOracleServer(params).update(reports)
    e = server.frequencies(np.arange(10))
    assert params.hashed and isinstance(e.uncertainty, uncertainty.MedianOfGroups)
    assert e.target.startswith("theta: the median over the groups") and "MedianOfGroups" in e.note
    np.testing.assert_array_equal(e.values, server.estimate(np.arange(10)))
    # hashed: the groups' expectations may differ, so the standard error is the groups' own
    # (the Poincare bound) and the interval the bound valid for any of them
    sigma = np.sqrt((params.k * ((np.e**2 + 1) / np.expm1(2.0)) ** 2 - e.values.clip(0, 1)) / e.n)
    np.testing.assert_allclose(e.std, sigma, rtol=1e-9)
    lo, hi = e.confidence_interval(0.05)
    z = stats.norm.ppf(0.975 ** (1 / ((params.k + 1) // 2)))
    np.testing.assert_allclose(hi - e.values, z * sigma, rtol=1e-9)
    assert len(e.top_k(3)) == 3 and len(e.heavy_hitters(0.01)) >= 0




def test_minimum_of_rows_standard_error_is_its_root_mean_square_error():
    """The minimum M of k rows of spread sigma around a common theta is biased down, so its
    error bar uses sigma sqrt(E M^2) (Z the rows' standard normals). Two rows: min^2 + max^2
    = Z1^2 + Z2^2 and min, max have mirrored laws, so E M^2 = 1. Five rows: E M^2 against
    the mean of 200,000 simulated M^2, within z_{1-DELTA/2} of its standard error."""
    def model(k):
        return uncertainty.MinimumOfRows(lambda f: np.full(np.shape(f), 4.0), k, 3)
    rows = np.arange(3)
    np.testing.assert_allclose(model(2).std(np.zeros(3), rows), 2.0, rtol=1e-6)
    squares = np.random.default_rng(11).standard_normal((200_000, 5)).min(axis=1) ** 2
    tol = stats.norm.ppf(1 - DELTA / 2) * squares.std(ddof=1) / np.sqrt(squares.size)
    assert abs((model(5).std(np.zeros(3), rows)[0] / 2.0) ** 2 - squares.mean()) <= tol


@pytest.mark.parametrize("coefficients", [(1e-4, 6e-4, 0.0), (1e-4, -5e-5, 0.0), (1e-4, 2e-4, -2.5e-4)])
def test_plug_in_interval_is_the_hull_of_its_score_set(coefficients):
    """The interval is the smallest one holding every f with (fhat - f)^2 <= z^2 V(f), V the
    variance of the standard error (the polynomial, or its value at the nearest point of
    [0, 1] where larger): checked against that set on a grid of step 1e-5 (so within 2e-5)."""
    a, b, c = coefficients
    values = np.linspace(-0.3, 1.3, 17)
    model = uncertainty.PlugIn(lambda f: a + b * np.asarray(f) + c * np.square(f), values.size)
    rows = np.arange(values.size)
    low, high = model.interval(values, rows, 0.05)
    grid = np.arange(-1.0, 2.0, 1e-5)

    def polynomial(f):
        return a + b * f + c * f * f
    variance = np.maximum(polynomial(grid), polynomial(grid.clip(0, 1)))
    np.testing.assert_allclose(model.std(values, rows) ** 2,
                               np.maximum(polynomial(values), polynomial(values.clip(0, 1))), rtol=1e-9)
    for fhat, lo, hi in zip(values, low, high):
        inside = grid[(fhat - grid) ** 2 <= stats.norm.ppf(0.975) ** 2 * variance]
        assert abs(inside.min() - lo) <= 2e-5 and abs(inside.max() - hi) <= 2e-5, (fhat, lo, hi)
