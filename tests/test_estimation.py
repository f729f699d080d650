"""IBU and maximum-likelihood estimation (ldpfast.estimation) against dense references.

Each protocol's implicit channel is rebuilt here as a dense matrix from the protocol's
definition (not from the channel's own operators); forward/adjoint products, EM iterates
and the KKT conditions of the MLE are compared to 1e-10 (rounding of sums over at most a
few thousand terms of order 1 stays below 1e-12). Where the likelihood maximiser is
interior, it must equal the unbiased estimate exactly, and the Fisher standard errors
the protocol's closed-form variance (identities, not statistical tolerances).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ldpfast as lf
from ldpfast import estimation as est
from ldpfast.errors import ConvergenceWarning, ParameterError
from ldpfast.protocols.frequency import blh, grr, hadamard, ocms, olh, pgr, subset_selection as ss, unary
from ldpfast.protocols.repeated import longitudinal as lg, longitudinal_unary as lue, rappor


def _values(d, n, seed=3):
    rng = np.random.default_rng(seed)
    return np.minimum(rng.zipf(1.4, size=n) - 1, d - 1)


def _server(params, server_type, client_type, n=3000, **kw):
    return server_type(params, **kw).update(client_type(params, rng=5).perturb(_values(params.d, n)))


def _walsh(size):
    rows = np.arange(size)
    return np.array([[(-1) ** bin(r & c).count("1") for c in rows] for r in rows], dtype=np.float64)


def _two_stage(t1, t2, m):
    """(P, Q) of k-ary RR on m symbols with flip thresholds t1 then t2 (the samplers' t / 2^64)."""
    f1, f2 = t1 / 2.0**64, t2 / 2.0**64
    p1, q1, p2, q2 = 1 - f1, f1 / (m - 1), 1 - f2, f2 / (m - 1)
    return p1 * p2 + (m - 1) * q1 * q2, p1 * q2 + q1 * p2 + (m - 2) * q1 * q2


def _unary_bits(p):
    """(P(bit 1 | value's bit), P(bit 1 | other bit)) of one report, from the samplers' thresholds."""
    thresholds = p.thresholds() if p.protocol in ("oue", "sue") else p.thresholds
    t = np.array(thresholds, dtype=np.float64) / 2.0**64
    if t.size == 2:
        return t[0], t[1]
    hot, cold, one, zero = t                  # permanent encoding, then each bit's response
    return hot * one + (1 - hot) * zero, cold * one + (1 - cold) * zero


def _rappor_reference(server, xs, rest):
    """Cells (cohort, bit, 1) then (cohort, bit, 0) of the cohorts with reports; Bloom bits
    from the client's own Bloom filters."""
    p, n = server.params, server.n
    sizes = server.group_reports.astype(np.float64)
    live = np.flatnonzero(sizes > 0)
    client = rappor.RAPPORClient(p, rng=0)
    one, zero = [], []
    t_q, t_p = (v / 2.0**64 for v in p.irr_thresholds())
    half = p.f128 / 256
    q_star, p_star = (1 - half) * t_q + half * t_p, half * t_q + (1 - half) * t_p
    other = 1 - (1 - 1 / p.k) ** p.h
    for c in live:
        bloom = np.unpackbits(client.bloom(xs, np.full(xs.size, c)).bits, axis=1, bitorder="little")[:, :p.k].T
        if rest:
            bloom = np.column_stack([bloom, np.full(p.k, other)])
        hit = sizes[c] / n * (p_star + (q_star - p_star) * bloom)
        one.append(hit)
        zero.append(sizes[c] / n - hit)
    counts = server.counts[live].astype(np.float64)
    return np.vstack(one + zero), np.concatenate([counts.ravel(), (sizes[live, None] - counts).ravel()])


def _pgr_reference(server, xs, rest):
    p = server.params
    on = p.in_threshold / 2.0**64
    vectors = p.vectors(np.arange(p.points))
    incidence = (vectors @ vectors.T) % p.q == 0            # <y, x> = 0
    a = np.where(incidence, on / p.hyperplane, (1 - on) / (p.points - p.hyperplane))[:, :p.d]
    columns = a[:, xs]
    if rest:
        columns = np.column_stack([columns, a[:, np.setdiff1d(np.arange(p.d), xs)].mean(axis=1)])
    return columns, server.counts.astype(np.float64)


def _dense_reference(server, candidates):
    """(A, y) from the protocol definitions, with the rest column when candidates < d."""
    p, n = server.params, server.n
    xs = np.arange(p.d) if candidates is None else np.asarray(candidates)
    rest = xs.size < p.d
    if server.protocol == "rappor":
        return _rappor_reference(server, xs, rest)
    if server.protocol == "pgr":
        return _pgr_reference(server, xs, rest)
    if server.protocol in ("grr", "l-grr"):
        keep, other = (p.keep_probability, p.other_probability) if server.protocol == "grr" else \
            _two_stage(*p.thresholds, p.d)
        full = np.full((p.d, p.d), other) + (keep - other) * np.eye(p.d)     # report y | value x
        counts = server.counts.astype(np.float64)
        if not rest:
            return full, counts
        outside = np.setdiff1d(np.arange(p.d), xs)
        a = np.vstack([full[xs][:, xs], full[outside][:, xs].sum(axis=0)])
        rest_col = np.append(full[xs][:, outside[0]], full[outside][:, outside[0]].sum())
        return np.column_stack([a, rest_col]), np.append(counts[xs], counts[outside].sum())
    if server.protocol in ("ss", "olh", "blh", "ocms", "oue", "sue", "l-oue", "l-osue", "l-sue", "l-olh"):
        if server.protocol == "ss":
            s1, s0 = p.probabilities
            support = server.counts[xs].astype(np.float64)
        elif server.protocol in ("oue", "sue", "l-oue", "l-osue", "l-sue"):
            s1, s0 = _unary_bits(p)
            support = server.counts[0, xs].astype(np.float64)
        elif server.protocol == "l-olh":
            big_p, big_q = _two_stage(*p.thresholds, p.g)      # a report is GRR on g symbols of h(x)
            s1, s0 = big_p, big_q + (big_p - big_q) / p.g       # another value collides with probability 1/g
            support = server._reports.match_counts(xs.astype(np.uint64)).astype(np.float64)
        else:
            m, mu = (p.g, float(p.g)) if server.protocol in ("olh", "blh") else (p.m, p.estimator_m)
            e = math.exp(p.epsilon)
            s1, s0 = e / (e + m - 1), (1 + (e - 1) / mu) / (e + m - 1)
            inner = server._reports if server.protocol in ("olh", "blh") else server
            support = inner.match_counts(xs.astype(np.uint64)).astype(np.float64)
        hit = np.full((xs.size, xs.size), s0) + (s1 - s0) * np.eye(xs.size)
        if rest:
            hit = np.column_stack([hit, np.full(xs.size, s0)])
        return np.vstack([hit, 1 - hit]), np.concatenate([support, n - support])
    # Hadamard layouts: cells (group, row, +-1)
    layout = p.layout()
    table = layout.table
    groups, width = layout.n_groups, int(table[0, 4])
    h = _walsh(width)
    contrast = (math.exp(p.epsilon) - 1) / (math.exp(p.epsilon) + 1)
    sizes = server.group_sizes.astype(np.float64)
    plus, minus, y_plus, y_minus = [], [], [], []
    z = server.z.reshape(groups, width).astype(np.float64)
    for g in range(groups):
        cols = layout.group_hashes(np.full(xs.size, g), xs.astype(np.uint64)).astype(np.int64) + int(table[g, 3])
        signs = h[:, cols]
        if rest:
            profile = np.zeros(width)
            modulus, offset = int(table[g, 2]), int(table[g, 3])
            if modulus:
                profile[offset:offset + modulus] = 1 / modulus
            else:
                outside = np.setdiff1d(np.arange(p.d), xs)
                profile[outside + offset] = 1 / outside.size
            signs = np.column_stack([signs, h @ profile])
        scale = sizes[g] / (n * width * 2)
        plus.append(scale * (1 + contrast * signs))
        minus.append(scale * (1 - contrast * signs))
        y_plus.append(np.maximum((sizes[g] / width + z[g]) / 2, 0))
        y_minus.append(np.maximum((sizes[g] / width - z[g]) / 2, 0))
    return np.vstack(plus + minus), np.concatenate(y_plus + y_minus)


def _cases():
    return [
        ("grr", lambda: _server(grr.GRRParams(epsilon=1.0, d=40), grr.GRRServer, grr.GRRClient)),
        ("ss", lambda: _server(ss.SubsetSelectionParams(epsilon=1.0, d=40), ss.SubsetSelectionServer,
                               ss.SubsetSelectionClient)),
        ("olh", lambda: _server(olh.OLHParams(epsilon=1.0, d=40), olh.OLHServer, olh.OLHClient, n=1500)),
        ("blh", lambda: _server(blh.BLHParams(epsilon=1.0, d=40), blh.BLHServer, blh.BLHClient, n=1500)),
        ("ocms", lambda: _server(ocms.OCMSParams.optimal(epsilon=2.0, d=40, field="compact"), ocms.OCMSServer,
                                 ocms.OCMSClient,
                                 n=1500)),
        ("hrr", lambda: _server(hadamard.HRRParams(epsilon=1.0, d=40), hadamard.HRRServer, hadamard.HRRClient)),
        ("he", lambda: _server(hadamard.HEParams(epsilon=1.0, d=40), hadamard.HEServer, hadamard.HEClient)),
        ("cmshe", lambda: _server(hadamard.CMSHEParams(epsilon=2.0, d=40, k=4, m=8, hash_seed=3),
                                  hadamard.CMSHEServer, hadamard.CMSHEClient)),
        ("oue", lambda: _server(unary.OUEParams(epsilon=1.0, d=40), unary.OUEServer, unary.OUEClient)),
        ("sue", lambda: _server(unary.SUEParams(epsilon=1.0, d=40), unary.SUEServer, unary.SUEClient)),
        ("l-oue", lambda: _server(lue.LOUEParams(eps_inf=2.0, eps_1=0.5, d=40), lue.LOUEServer, lue.LOUEClient)),
        ("l-osue", lambda: _server(lue.LOSUEParams(eps_inf=2.0, eps_1=1.0, d=40), lue.LOSUEServer,
                                   lue.LOSUEClient)),
        ("l-sue", lambda: _server(lue.LSUEParams(eps_inf=2.0, eps_1=1.0, d=40), lue.LSUEServer, lue.LSUEClient)),
        ("l-grr", lambda: _server(lg.LGRRParams(eps_inf=3.0, eps_1=2.0, d=40), lg.LGRRServer, lg.LGRRClient)),
        ("l-olh", lambda: _server(lg.LOLHParams(eps_inf=3.0, eps_1=1.0, d=40), lg.LOLHServer, lg.LOLHClient,
                                  n=1500)),
        # 5 cohorts of which one gets no reports (its cells are dropped)
        ("rappor", lambda: rappor.RAPPORServer(rappor.RAPPORParams(k=16, h=2, m=5, p=0.25, q=0.75, f=0.25,
                                                                   d=40)).update(
            rappor.RAPPORClient(rappor.RAPPORParams(k=16, h=2, m=5, p=0.25, q=0.75, f=0.25, d=40), rng=5).perturb(
                _values(40, 3000), cohorts=np.arange(3000) % 4))),
        ("pgr", lambda: _server(pgr.PGRParams(epsilon=3.0, d=40, q=3), pgr.PGRServer, pgr.PGRClient)),
    ]


@pytest.fixture(scope="module", params=_cases(), ids=lambda case: case[0])
def server(request):
    return request.param[1]()


@pytest.mark.parametrize("candidates", [None, np.array([3, 0, 17, 5, 9])], ids=["domain", "subset"])
def test_channel_matches_dense_reference(server, candidates):
    channel = est.channel_of(server, candidates)
    a, y = _dense_reference(server, candidates)
    np.testing.assert_allclose(channel.observed, y, rtol=0, atol=1e-10)
    np.testing.assert_allclose(channel.dense(), a, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.sum(axis=0), channel.column_sum, rtol=1e-12)
    rng = np.random.default_rng(0)
    w = rng.random(a.shape[0])
    np.testing.assert_allclose(channel.adjoint(w), a.T @ w, rtol=0, atol=1e-10)
    # 25 EM steps from uniform, densely
    f = np.full(a.shape[1], 1 / a.shape[1])
    for _ in range(25):
        f = f * (a.T @ (y / (a @ f))) / y.sum()
    with pytest.warns(ConvergenceWarning, match="max_iter=25 EM steps"):
        fit = est.ibu(channel, tol=1e-15, max_iter=25)
    np.testing.assert_allclose(fit.values, f, rtol=0, atol=1e-10)


def test_mle_satisfies_kkt_on_the_dense_likelihood(server):
    for candidates in (None, np.array([1, 2, 30])):
        channel = est.channel_of(server, candidates)
        a, y = _dense_reference(server, candidates)
        fit = est.mle(channel)
        f = fit.values
        assert f.min() >= 0 and f.sum() == pytest.approx(1, abs=1e-12)
        g = a.T @ (y / (a @ f))                   # gradient of sum y log(Af)
        # KKT of max sum y log(Af) on the simplex (the multiplier is sum(y), since
        # sum_x f_x g_x = sum(y)): complementary slackness f_x (sum(y) - g_x) = 0 and
        # g_x <= sum(y); the exact separable solver meets them to rounding, EM to its gap
        tol = (1e-8 if channel.separable is not None else 1e-6) * y.sum()
        assert np.abs(f * (y.sum() - g)).max() <= tol
        assert g.max() <= y.sum() + tol
        assert fit.converged and fit.gap <= fit.tol == est.default_tol(channel, est.MLE_PRECISION)


def test_rappor_string_values_channel():
    """String values (d = 0): the candidates are a dictionary and a rest column (uniform
    Bloom bits) is always present; same dense reference as integer values."""
    params = rappor.RAPPORParams(k=16, h=2, m=3, p=0.25, q=0.75, f=0.25)
    words = np.array(["alpha", "beta", "gamma", "delta", "omega"])
    values = words[_values(5, 2000)]
    server = rappor.RAPPORServer(params).update(rappor.RAPPORClient(params, rng=2).perturb(values,
                                                                                           cohorts=np.arange(2000) % 3))
    candidates = words[[1, 0, 3]]
    channel = est.channel_of(server, candidates)
    a, y = _rappor_reference(server, candidates, rest=True)
    assert channel.rest and channel.likelihood == "composite"
    np.testing.assert_allclose(channel.observed, y, rtol=0, atol=1e-10)
    np.testing.assert_allclose(channel.dense(), a, rtol=0, atol=1e-12)
    fit = server.frequencies(candidates, method="mle")
    f = est.mle(channel).values
    g = a.T @ (y / (a @ f))
    assert np.abs(f * (y.sum() - g)).max() <= 1e-6 * y.sum() and g.max() <= y.sum() * (1 + 1e-6)
    np.testing.assert_allclose(fit.values, f[:3], rtol=0, atol=1e-12)
    with pytest.raises(ParameterError, match="needs candidates"):
        est.channel_of(server, None)
    with pytest.raises(ParameterError, match="distinct"):
        server.frequencies(["beta", "beta"], method="ibu")


@pytest.mark.parametrize("make", [lambda p: grr.GRRParams(epsilon=3.0, d=6),
                                  lambda p: ss.SubsetSelectionParams(epsilon=3.0, d=6)])
def test_interior_mle_is_the_unbiased_estimate_and_fisher_is_the_closed_form(make):
    """With every frequency well inside (0, 1) the separable likelihood's maximiser solves
    the unbiased estimating equations, and the Fisher information's standard errors equal
    the closed-form variance at the same frequencies (GRR: exactly; SS's composite ones
    ignore the k-subset's negative correlations, so only GRR is compared)."""
    params = make(None)
    server_type, client_type = ((grr.GRRServer, grr.GRRClient) if params.protocol == "grr"
                                else (ss.SubsetSelectionServer, ss.SubsetSelectionClient))
    values = np.repeat(np.arange(6), [4000, 3000, 2500, 2000, 1500, 1000])
    server = server_type(params).update(client_type(params, rng=2).perturb(values))
    debiased = server.frequencies()
    fit = server.frequencies(method="mle")
    assert debiased.values.min() > 0.02
    np.testing.assert_allclose(fit.values, debiased.values, rtol=0, atol=1e-12)
    fisher, _ = est.fisher_std(est.channel_of(server), fit.values)
    if params.protocol == "grr":
        np.testing.assert_allclose(fisher, np.sqrt(lf.theory.grr_variance(
            params.epsilon, params.d, server.n, fit.values)), rtol=1e-9)
    # the reported error adds the bootstrap's squared bias, 0 in the interior: what is left is
    # its Monte Carlo part, (s^2/B)(chi2_1 - 1) <= 15 s^2/B at 4 sds, with s^2 the refits'
    # variance (Fisher's plus the population draw's f(1 - f)/n)
    spread = fisher**2 + fit.values * (1 - fit.values) / server.n
    assert np.all(fisher <= fit.std) and np.all(fit.std**2 <= fisher**2 + 15 * spread / est.BOOTSTRAP_FITS)


def test_candidate_subsets_and_rest_mass():
    server = _server(grr.GRRParams(epsilon=2.0, d=50), grr.GRRServer, grr.GRRClient, n=5000)
    whole = server.frequencies(method="mle")
    part = server.frequencies([0, 1, 2], method="mle")
    assert part.values.sum() < 1 and "mass outside the candidates" in part.note
    assert np.all(np.abs(part.values - whole.values[:3]) < 0.05)


def test_methods_and_errors():
    server = _server(grr.GRRParams(epsilon=1.0, d=20), grr.GRRServer, grr.GRRClient)
    with pytest.raises(ParameterError, match="method"):
        server.frequencies(method="em")
    with pytest.raises(ParameterError, match="options"):
        server.frequencies(tol=1e-3)
    with pytest.raises(ParameterError, match="tol"):
        server.frequencies(method="ibu", tol=0)
    with pytest.raises(ParameterError, match="distinct"):
        server.frequencies([1, 1], method="mle")
    with pytest.warns(ConvergenceWarning, match="ibu stopped at max_iter=3 EM steps"):
        fit = server.frequencies(method="ibu", max_iter=3)
    assert "max_iter reached" in fit.note and fit.method == "ibu"
    with pytest.raises(ParameterError, match="debiased"):
        fit.confidence_interval()
    from ldpfast._base import protocol
    params, inputs = protocol("hadaoracle").example()      # a median estimator: no channel
    other = protocol("hadaoracle").aggregator(params).update(protocol("hadaoracle").client(params, rng=1)
                                                             .perturb(inputs))
    with pytest.raises(NotImplementedError, match="registers no report channel"):
        other.frequencies(method="mle")


@pytest.mark.parametrize("protocol_id", ["olh", "ocms"])
def test_full_report_likelihood_matches_dense_reference(protocol_id):
    """likelihood="full": one cell per kept report, probability e/(e+m-1) under a candidate
    whose hash matches the report and 1/(e+m-1) otherwise; 1/m under the rest."""
    if protocol_id == "olh":
        params = olh.OLHParams(epsilon=1.0, d=30)
        server = _server(params, olh.OLHServer, olh.OLHClient, n=400)
        inner, m = server._reports, params.g
    else:
        params = ocms.OCMSParams.optimal(epsilon=2.0, d=30, field="compact")
        server = _server(params, ocms.OCMSServer, ocms.OCMSClient, n=400)
        inner, m = server, params.m
    z, a0, a1 = inner.reports().z, inner.reports().a0, inner.reports().a1
    e = math.exp(params.epsilon)
    for candidates in (None, np.array([4, 0, 11])):
        xs = np.arange(params.d) if candidates is None else candidates
        hashed = np.stack([lf._core.ocms_hash(inner.params.field, a0, a1, np.full(z.size, x, dtype=np.uint64), m)
                           for x in xs.astype(np.uint64)], axis=1)
        a = np.where(hashed == z[:, None], e / (e + m - 1), 1 / (e + m - 1))
        if candidates is not None:
            a = np.column_stack([a, np.full(z.size, 1 / m)])
        channel = est.channel_of(server, candidates, likelihood="full")
        assert channel.column_sum is None and channel.likelihood == "full"
        rng = np.random.default_rng(1)
        f = rng.random(a.shape[1])
        # channel cells follow the kept reports' canonical order; compare order-free sums
        np.testing.assert_allclose(np.sort(channel.forward(f)), np.sort(a @ f), rtol=0, atol=1e-12)
        order_free = channel.adjoint(np.ones(z.size))
        np.testing.assert_allclose(order_free, a.sum(axis=0), rtol=0, atol=1e-9)
        with pytest.warns(ConvergenceWarning):
            fit = est.ibu(channel, tol=1e-15, max_iter=10)
        ref = np.full(a.shape[1], 1 / a.shape[1])
        for _ in range(10):
            ref = ref * (a.T @ (1 / (a @ ref))) / z.size
        np.testing.assert_allclose(fit.values, ref, rtol=0, atol=1e-10)
    with pytest.raises(ParameterError, match="likelihood"):
        server.frequencies(method="mle", likelihood="exact")
