"""k-ary randomized response over the dictionary (GRR, SPEC 1.2): the accuracy baseline.

Statistical checks as in test_ocms_statistics: the count of one symbol in one run is a sum
of independent Bernoullis (p for holders, q for everyone else), fhat is affine in it; the
mean of R runs is checked within Z sd and the sample variance against chi-square quantiles
with kurtosis-corrected degrees of freedom. ALPHA = 1e-8 per assertion, < 1e-6 overall.
"""

import math
import pickle

import numpy as np
import pytest
from scipy import stats

from ldpfast import _base, _core, theory
from ldpfast.protocols.frequency import grr
from ldpfast.errors import FormatError, IncompatibleError, ParameterError, ReportError

ALPHA = 1e-8
Z = stats.norm.isf(ALPHA / 2)


@pytest.mark.parametrize("eps,d", [(0.5, 2), (1.0, 10), (3.0, 100)])
def test_unbiased_with_theoretical_variance(eps, d):
    n, runs = 300, 4000
    params = grr.GRRParams(eps, d)
    values = np.concatenate([np.zeros(180), np.ones(90), np.arange(30) % d]).astype(np.int64)
    reports = grr.GRRClient(params, rng=31).perturb(np.tile(values, runs))
    y = reports.y.reshape(runs, n)
    p, q = params.keep_probability, params.other_probability
    for x in sorted({0, 1, d - 1}):
        fhat = grr.decode_counts(params, (y == x).sum(axis=1), n)
        f = np.mean(values == x)
        variance = theory.grr_variance(eps, d, n, f)
        pi = np.where(values == x, p, q)
        terms = pi * (1 - pi)
        slope = (math.expm1(eps) + d) / (n * math.expm1(eps))
        assert variance == pytest.approx(slope**2 * terms.sum(), rel=1e-9)
        kurt = np.sum(terms * (1 - 6 * terms)) / terms.sum() ** 2
        assert abs(fhat.mean() - f) < Z * math.sqrt(variance / runs)
        nu = 2 / (2 / (runs - 1) + kurt / runs)
        lo, hi = stats.chi2.ppf(ALPHA / 2, nu) / nu, stats.chi2.isf(ALPHA / 2, nu) / nu
        assert lo * variance < fhat.var(ddof=1) < hi * variance


def test_probabilities():
    params = grr.GRRParams(2.0, 5)
    e = math.exp(2.0)
    assert params.keep_probability == pytest.approx(e / (e + 4), rel=1e-15)
    assert params.other_probability == pytest.approx(1 / (e + 4), rel=1e-15)
    assert params.flip_probability == pytest.approx(4 / (e + 4), rel=1e-15)
    assert params.communication_bits == 3
    # Flip probability below 2^-32: the 64-bit sampler cannot represent it (it used to be
    # rounded to 0, a deterministic "eps = 700" mechanism).
    with pytest.raises(ParameterError,
                       match=r"epsilon must be in \[.*, 22.8739\] for randomized response over 3 symbols"):
        grr.GRRParams(30.0, 3)


@pytest.mark.parametrize("kwargs,message", [
    (dict(epsilon=0.0, d=5), r"epsilon must be finite and in \[9.53674e-07, 66.5\], got 0.0"),
    (dict(epsilon=float("nan"), d=5), r"epsilon must be finite"),
    (dict(epsilon=1.0, d=1), r"d must be >= 2, got 1"),
    (dict(epsilon=1.0, d=2.0), r"d must be an integer, got 2.0"),
    (dict(epsilon=1.0, d=2**63), r"d must be < 2\^63"),
])
def test_params_validation(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        grr.GRRParams(**kwargs)


def test_client_and_reports_validation():
    params = grr.GRRParams(1.0, 10)
    with pytest.raises(ParameterError, match=r"values must be integers in \[0, 10\), got 10 at index 1"):
        grr.GRRClient(params, rng=1).perturb([3, 10])
    with pytest.raises(ReportError, match="y must be non-negative integers, got -2"):
        grr.GRRReports(y=[1, -2])
    server = grr.GRRServer(params)
    server.update(grr.GRRClient(params, rng=1).perturb(np.arange(100) % 10))
    before = server.to_bytes()
    with pytest.raises(ReportError, match=r"y must be symbols in \[0, 10\), got 10 at index 2"):
        server.update(grr.GRRReports(y=[0, 1, 10]))
    assert server.to_bytes() == before
    with pytest.raises(ReportError, match="zero reports"):
        grr.GRRServer(params).estimate()


def test_seeded_reproducible_and_entropy_not():
    params = grr.GRRParams(1.0, 1000)
    values = np.arange(10_000) % 1000
    assert grr.GRRClient(params, rng=5).perturb(values) == grr.GRRClient(params, rng=5).perturb(values)
    assert grr.GRRClient(params).perturb(values) != grr.GRRClient(params).perturb(values)


def test_merge_bytes_pickle_and_estimates():
    params = grr.GRRParams(1.5, 20)
    values = np.arange(3000) % 20
    reports = grr.GRRClient(params, rng=8).perturb(values)
    whole = grr.GRRServer(params).update(reports)
    a = grr.GRRServer(params).update(grr.GRRReports(y=reports.y[:1000]))
    b = grr.GRRServer(params).update(grr.GRRReports(y=reports.y[1000:]))
    assert a.merge(b) == whole and a.n == 3000
    assert grr.GRRServer.from_bytes(whole.to_bytes()) == whole
    assert pickle.loads(pickle.dumps(whole)) == whole
    est = whole.estimate()
    assert est.shape == (20,)
    np.testing.assert_array_equal(whole.estimate([3, 4]), est[[3, 4]])
    np.testing.assert_array_equal(whole.estimate(clip=True), np.clip(est, 0, 1))
    np.testing.assert_allclose(whole.estimate_counts(), est * 3000, rtol=1e-15)
    with pytest.raises(IncompatibleError):
        whole.merge(grr.GRRServer(grr.GRRParams(1.5, 21)))
    with pytest.raises(FormatError):
        grr.GRRServer.from_bytes(grr.GRRServer(grr.GRRParams(1.5, 21)).to_bytes()[:-5] + b"\x00" * 5)
    assert _base.protocols()["grr"].aggregator is grr.GRRServer


# histogram_update's paths (cpp/src/histogram.cpp): staged (fewer than 4 values per
# counter), one private table, two tables (threads=2, 2^16 values or more each).
HISTOGRAM_PATHS = [(5_000, 4096, 1), (1 << 16, 64, 1), (1 << 18, 64, 2)]


@pytest.mark.parametrize("n,size,threads", HISTOGRAM_PATHS, ids=["staged", "table", "two-tables"])
def test_histogram_update_adds_exactly_the_bincount(n, size, threads):
    rng = np.random.default_rng(n)
    y = rng.integers(0, size, n, dtype=np.uint64)
    counts = rng.integers(0, 1 << 40, size, dtype=np.uint64)
    expected = counts + np.bincount(y.astype(np.int64), minlength=size).astype(np.uint64)
    assert _core.histogram_update(y, counts, threads) == (n, 0, False)
    np.testing.assert_array_equal(counts, expected)


@pytest.mark.parametrize("n,size,threads", HISTOGRAM_PATHS, ids=["staged", "table", "two-tables"])
def test_histogram_update_refuses_a_bad_value_or_a_wrap_and_changes_nothing(n, size, threads):
    rng = np.random.default_rng(n + 1)
    y = rng.integers(0, size, n, dtype=np.uint64)
    counts = rng.integers(0, 1 << 40, size, dtype=np.uint64)
    before = counts.copy()
    # the first bad value is reported, whichever worker range the later ones fall in
    for first, later in ((0, n - 1), (n // 2 - 1, n - 1), (n - 1, None)):
        bad = y.copy()
        bad[first] = size + first
        if later is not None:
            bad[later] = 2**64 - 1
        assert _core.histogram_update(bad, counts, threads) == (first, size + first, False)
        np.testing.assert_array_equal(counts, before)
    # a counter that would wrap: the batch's last value lands on it
    counts[y[-1]] = 2**64 - 1 - int(np.count_nonzero(y[:-1] == y[-1]))
    before = counts.copy()
    assert _core.histogram_update(y, counts, threads) == (n, 0, True)
    np.testing.assert_array_equal(counts, before)


@pytest.mark.parametrize("n,size,threads", HISTOGRAM_PATHS, ids=["staged", "table", "two-tables"])
def test_histogram_update_into_zero_counts_needs_no_staging_and_clears_a_bad_batch(n, size, threads):
    rng = np.random.default_rng(n + 2)
    y = rng.integers(0, size, n, dtype=np.uint64)
    counts = np.zeros(size, dtype=np.uint64)
    assert _core.histogram_update(y, counts, threads, True) == (n, 0, False)
    np.testing.assert_array_equal(counts, np.bincount(y.astype(np.int64), minlength=size))
    staged = _core.histogram_update_scratch_bytes(n, size, threads)
    assert _core.histogram_update_scratch_bytes(n, size, threads, True) == (0 if n < 4 * size else staged)
    for first in (0, n // 2, n - 1):
        counts[:] = 0
        bad = y.copy()
        bad[first] = size
        assert _core.histogram_update(bad, counts, threads, True) == (first, size, False)
        assert not counts.any()


def test_histogram_update_stages_into_a_given_buffer_and_takes_a_bad_batch_back():
    n, size = 5_000, 4096  # fewer than 4 values per counter: staged
    assert _core.histogram_update_stages(n, size, 1) and not _core.histogram_update_stages(n, size, 1, True)
    assert not _core.histogram_update_stages(1 << 16, 64, 1)  # a table instead
    rng = np.random.default_rng(7)
    y = rng.integers(0, size, n, dtype=np.uint64)
    counts = rng.integers(0, 1 << 40, size, dtype=np.uint64)
    before, staging = counts.copy(), np.empty(n + 3, np.uint32)
    bad = y.copy()
    bad[n - 1] = size
    assert _core.histogram_update(bad, counts, 1, False, staging) == (n - 1, size, False)
    np.testing.assert_array_equal(counts, before)
    assert _core.histogram_update(y, counts, 1, False, staging) == (n, 0, False)
    np.testing.assert_array_equal(counts, before + np.bincount(y.astype(np.int64), minlength=size).astype(np.uint64))
    with pytest.raises(ValueError, match="staging must have room for the 5000 values, got 4999"):
        _core.histogram_update(y, counts, 1, False, staging[:n - 1])
    server = grr.GRRServer(grr.GRRParams(1.0, size)).update(grr.GRRReports(y=y))
    server.update(grr.GRRReports(y=y))
    kept = server._column_buffers["staged values"]  # the staging buffer is kept for the next batch
    server.update(grr.GRRReports(y=y[:4000]))
    assert server._column_buffers["staged values"] is kept and server.n == 2 * n + 4000


def test_server_report_count_follows_updates_refusals_merges_and_loads():
    params = grr.GRRParams(1.0, 1000)  # 300-report batches: below 4 per counter (zero or staged path)
    client = grr.GRRClient(params, rng=5)
    server = grr.GRRServer(params)
    bad = client.perturb(np.arange(300) % 1000)
    bad.y[299] = 1000
    for held in (0, 300):  # refused into zero counts (cleared), then into counts holding reports (staged)
        with pytest.raises(ReportError, match="got 1000 at index 299"):
            server.update(bad)
        assert server.n == int(server.counts.sum()) == held
        server.update(client.perturb(np.arange(300) % 1000))
    assert server.n == int(server.counts.sum()) == 600
    other = grr.GRRServer(params).update(client.perturb(np.arange(50)))
    assert server.merge(other).n == int(server.counts.sum()) == 650
    assert grr.GRRServer.from_bytes(server.to_bytes()).n == 650


def test_server_refuses_a_large_batch_with_one_bad_report_unchanged():
    params = grr.GRRParams(1.0, 16)
    server = grr.GRRServer(params).update(grr.GRRClient(params, rng=2).perturb(np.arange(1000) % 16))
    before = server.to_bytes()
    y = grr.GRRClient(params, rng=3).perturb(np.arange(1 << 16) % 16).y  # counted in a private table
    y[40_000] = 16
    with pytest.raises(ReportError, match=r"y must be symbols in \[0, 16\), got 16 at index 40000"):
        server.update(grr.GRRReports(y=y))
    assert server.to_bytes() == before


def test_histogram_affine_is_numpys_affine_map_of_the_rounded_counts():
    rng = np.random.default_rng(4)
    counts = np.concatenate([rng.integers(0, 1 << 20, 1000, dtype=np.uint64),
                             np.array([0, 2**53 + 1, 2**63 - 1, 2**63 + 3, 2**64 - 1], np.uint64)])
    # equal up to the rounding of the product (a compiler may fuse the multiply-add)
    np.testing.assert_allclose(_core.histogram_affine(counts, 0.37, -1.5), counts.astype(np.float64) * 0.37 - 1.5,
                               rtol=2**-52, atol=2**-50)
    wide = rng.integers(0, 2**64, 5000, dtype=np.uint64, endpoint=False)  # each count rounded to nearest, exactly
    np.testing.assert_array_equal(_core.histogram_affine(np.concatenate([counts, wide]), 1.0, 0.0),
                                  np.concatenate([counts, wide]).astype(np.float64))
    square = counts[:1000].reshape(10, 100)
    np.testing.assert_array_equal(_core.histogram_affine(square, 2.0, 0.0), 2.0 * square)
    params = grr.GRRParams(1.0, 10)  # decode_counts: the histogram path and the numpy path agree
    np.testing.assert_allclose(grr.decode_counts(params, counts[:10], 5000),
                               grr.decode_counts(params, counts[:10].astype(np.int64), 5000), rtol=1e-15)


def test_histogram_update_stops_at_a_wrap_at_the_end_of_a_staged_block():
    """A counter wraps at the last value of the first 2^20-value block; the bad value in the
    next block is never reached: the batch is refused as an overflow, counts unchanged."""
    size, block = 1 << 19, 1 << 20
    y = np.random.default_rng(6).integers(0, size, block + 5, dtype=np.uint64)
    y[block + 2] = size
    counts = np.zeros(size, dtype=np.uint64)
    counts[y[block - 1]] = 2**64 - 1 - int(np.count_nonzero(y[:block - 1] == y[block - 1]))
    before = counts.copy()
    assert _core.histogram_update(y, counts, 1) == (y.size, 0, True)
    np.testing.assert_array_equal(counts, before)
