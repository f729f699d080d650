"""Projective Geometry Response (ldpfast.protocols.frequency.pgr): the decoder against a brute-force
hyperplane sum on every backend and counter width, the client's output law against the
exact point probabilities, and the estimator's mean and variance against the closed form
(tests/_moments.py: each assertion fails with probability 5e-9 when the closed form holds)."""

import math

import numpy as np
import pytest
from scipy import stats

from _moments import check_mean, check_variance
from ldpfast import _core
from ldpfast.audit import effective_epsilon
from ldpfast.errors import ParameterError, ReportError
from ldpfast.protocols.frequency import pgr
from ldpfast.theory import projective as tp


def brute_force(params, counts):
    vectors = params.vectors(np.arange(params.points))
    orthogonal = (vectors @ vectors.T) % params.q == 0
    return orthogonal.astype(object) @ counts.astype(object)


GEOMETRIES = [(2, 2), (2, 5), (3, 3), (3, 5), (5, 4), (7, 3), (13, 2), (11, 3)]


def params_of(q, t):
    return pgr.PGRParams(epsilon=1.0, d=tp.pgr_points(q, t - 1) + 1, q=q)


@pytest.mark.parametrize("q, t", GEOMETRIES)
def test_vectors_enumerate_the_projective_space(q, t):
    params = params_of(q, t)
    assert params.t == t and params.points == tp.pgr_points(q, t)
    vectors = params.vectors(np.arange(params.points))
    lead = np.argmax(vectors != 0, axis=1)
    assert np.all(vectors[np.arange(len(vectors)), lead] == 1)          # canonical
    assert len({tuple(v) for v in vectors}) == params.points            # every line once
    assert np.all(lead[1:] <= lead[:-1])                               # leading 1 moves left


@pytest.mark.parametrize("q, t", GEOMETRIES)
def test_decoder_is_the_hyperplane_sum_on_every_backend(q, t):
    params = params_of(q, t)
    rng = np.random.default_rng(q * 100 + t)
    small = rng.integers(0, 40, params.points).astype(np.uint64)
    large = small * np.uint64(2**31)                                    # sums past 2^32: the uint64 path
    before = _core.active_backend()
    try:
        for counts in (small, large):
            expected = np.array(brute_force(params, counts), dtype=np.uint64)
            for backend in _core.supported_backends():
                _core.set_backend(backend)
                for threads in (1, 2):
                    assert np.array_equal(_core.pgr_decode(counts, q, t, threads), expected), (backend, threads)
    finally:
        _core.set_backend(before)


@pytest.mark.parametrize("q, t", GEOMETRIES)
def test_real_hyperplane_sums_in_fixed_point(q, t):
    """hyperplane_transform (the IBU/MLE channel's D g) runs the integer decoder on each
    sign's part of g scaled to sum 2^63: each of an output's s terms moves by at most 2^-64
    of its part's sum, so |error| <= s 2^-64 sum|g| plus float64 rounding of the output."""
    params = params_of(q, t)
    vectors = params.vectors(np.arange(params.points))
    incidence = ((vectors @ vectors.T) % q == 0).astype(np.float64)
    rng = np.random.default_rng(q * 10 + t)
    transform = pgr.hyperplane_transform(params)
    for g in (rng.random(params.points), rng.standard_normal(params.points) * 10.0 ** rng.integers(-8, 8)):
        exact = incidence @ g
        bound = params.hyperplane * 2.0**-64 * np.abs(g).sum() + 1e-15 * np.abs(incidence @ np.abs(g))
        assert np.all(np.abs(transform(g) - exact) <= bound)
    assert np.array_equal(transform(np.zeros(params.points)), np.zeros(params.points))
    with pytest.raises(ParameterError, match="finite"):
        transform(np.full(params.points, np.nan))


def test_client_is_identical_on_every_backend_and_thread_count():
    params = pgr.PGRParams(epsilon=2.0, d=500)
    x = np.arange(20_000) % 500
    outputs = []
    before = _core.active_backend()
    try:
        for backend in _core.supported_backends():
            _core.set_backend(backend)
            for threads in (1, 2):
                outputs.append(pgr.PGRClient(params, rng=5, threads=threads).perturb(x).y)
    finally:
        _core.set_backend(before)
    assert all(np.array_equal(outputs[0], out) for out in outputs)


@pytest.mark.parametrize("eps, q, d, value", [(1.0, 5, 8, 7), (2.5, 3, 20, 0), (0.5, 7, 57, 56), (3.0, 13, 6, 5)])
def test_client_draws_each_point_with_its_exact_probability(eps, q, d, value):
    # Each point on the hyperplane of x has probability p/s, each other point (1-p)/(K-s).
    # Pearson's statistic over the K cells is chi-square with K-1 degrees of freedom; the
    # bound is its 1 - 1e-7 quantile, so a correct sampler fails with probability 1e-7.
    params = pgr.PGRParams(epsilon=eps, d=d, q=q)
    n = 300_000
    y = pgr.PGRClient(params, rng=11).perturb(np.full(n, value)).y
    observed = np.bincount(y, minlength=params.points)
    vectors = params.vectors(np.arange(params.points))
    on = vectors @ vectors[value] % q == 0
    p = params.in_threshold / 2**64
    expected = n * np.where(on, p / params.hyperplane, (1 - p) / (params.points - params.hyperplane))
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert chi2 < stats.chi2.isf(1e-7, params.points - 1), chi2


@pytest.mark.parametrize("eps, d, q", [(1.0, 30, 0), (4.0, 200, 0), (2.0, 40, 5)])
def test_unbiased_with_the_closed_form_variance(eps, d, q):
    # C(x) over one run is a sum of independent Bernoullis (p for holders of x, p' for the
    # others) and fhat is affine in it: check_mean / check_variance with the kurtosis of
    # that sum, over `runs` independent runs of n reports.
    params = pgr.PGRParams(epsilon=eps, d=d, q=q)
    n, runs = 200, 1500
    values = np.concatenate([np.zeros(100), np.ones(40), np.arange(60) % d]).astype(np.int64)
    reports = pgr.PGRClient(params, rng=17).perturb(np.tile(values, runs)).y.reshape(runs, n)
    p, po = params.probabilities
    xs = (0, 1, d - 1)
    fhats = np.array([pgr.PGRServer(params).update(pgr.PGRReports(y=row)).estimate(xs) for row in reports])
    for x, fhat in zip(xs, fhats.T):
        f = float(np.mean(values == x))
        variance = params.variance(n, f)
        pi = np.where(values == x, p, po)
        terms = pi * (1 - pi)
        assert variance == pytest.approx(terms.sum() / (n * (p - po)) ** 2, rel=1e-9)
        check_mean(fhat, f, variance)
        check_variance(fhat, variance, float(np.sum(terms * (1 - 6 * terms)) / terms.sum() ** 2))


def test_large_k_variance_reaches_the_optimum():
    # With q near e^eps + 1 and many points, Var(f=0) -> 4 e^eps / (n (e^eps - 1)^2) (the paper's
    # claim) up to the prime rounding of q: within 2% at eps = 4 (q = 53 against 55.6).
    eps = 4.0
    params = pgr.PGRParams(epsilon=eps, d=2**17)
    e = math.exp(eps)
    assert (params.q, params.t) == (53, 4)
    assert params.variance(1, 0.0) == pytest.approx(4 * e / (e - 1) ** 2, rel=0.02)


def test_effective_epsilon_is_exact_and_below_the_claim():
    for eps in (0.01, 1.0, 4.0, 10.0):
        params = pgr.PGRParams(epsilon=eps, d=1000)
        assert eps - 1e-12 < effective_epsilon(params) <= eps


def test_bad_input_leaves_the_server_unchanged():
    params = pgr.PGRParams(epsilon=1.0, d=100)
    server = pgr.PGRServer(params).update(pgr.PGRClient(params, rng=1).perturb(np.arange(100)))
    before = server.to_bytes()
    bad = np.zeros(50, dtype=np.uint32)
    bad[37] = params.points
    with pytest.raises(ReportError, match="report 37 is not"):
        server.update(pgr.PGRReports(y=bad))
    with pytest.raises(ReportError, match="points in"):
        server.validate(pgr.PGRReports(y=bad))
    assert server.to_bytes() == before
    with pytest.raises(ParameterError, match="values must be"):
        pgr.PGRClient(params).perturb([100])
    with pytest.raises(ParameterError, match="q must be a prime"):
        pgr.PGRParams(epsilon=1.0, d=100, q=9)
    with pytest.raises(ParameterError, match="epsilon must be in"):
        pgr.PGRParams(epsilon=40.0, d=100, q=3)
    with pytest.raises(ValueError, match="q must be a prime"):
        _core.pgr_decode(np.zeros(10, dtype=np.uint64), 4, 2)
