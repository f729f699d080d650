"""The original RHR layout and Apple's HCMS layout (ldpfast.protocols.frequency.hadamard_variants) against
their closed forms.

Tolerances are derived as in tests/test_pan_baselines.py: in one run on fixed data (and,
for HCMS, fixed hash-function choices), the estimate is the mean of independent per-user
terms whose distributions are known exactly (two or three points), which gives the exact
mean, variance and fourth cumulant of one estimate. The mean of ``R`` runs is checked at
``Z`` sd and the sample variance inside the chi-square quantiles with the kurtosis-corrected
degrees of freedom; each check has false-failure probability ``ALPHA = 5e-9`` (< 60 checks).
"""

import math

import numpy as np
import pytest

from ldpfast import theory
from ldpfast.protocols.frequency import hadamard, hadamard_variants as hv
from ldpfast.errors import ParameterError, ReportError
from _moments import Z, check_mean, check_variance



def point_moments(points, probs):
    """Per-user (mean, variance, fourth central moment) of discrete distributions:
    ``points`` (P,), ``probs`` (users, P)."""
    mean = probs @ points
    centred = points[None, :] - mean[:, None]
    return mean, np.sum(probs * centred**2, axis=1), np.sum(probs * centred**4, axis=1)


def sum_kurtosis(var, fourth):
    return np.sum(fourth - 3 * var**2) / np.sum(var) ** 2


def parity(v):
    """popcount(v) mod 2 for uint64 values, by unpacking bits (independent of the library)."""
    v = np.ascontiguousarray(np.asarray(v, dtype=np.uint64).reshape(-1))
    return (np.unpackbits(v.view(np.uint8)).reshape(-1, 64).sum(axis=1) & 1).astype(np.int64)


# --- original RHR --------------------------------------------------------------------

def test_rhr_original_layout_matches_the_reference_formulas():
    p = hv.RHROriginalParams(epsilon=2.0, d=300)
    assert (p.D, p.k, p.B, p.symbols) == (512, 3, 128, 8)       # k = ceil(2 log2 e) = 3
    p = hv.RHROriginalParams(epsilon=5.0, d=20)
    assert (p.D, p.k, p.B) == (32, 6, 1)                         # k capped at ceil(log2 d) + 1
    p = hv.RHROriginalParams(epsilon=5.0, d=300, comm=2)
    assert (p.k, p.B) == (2, 256)
    assert hv.RHROriginalClient.deterministic_rows(p, 5, start=254).tolist() == [254, 255, 0, 1, 2]


@pytest.mark.parametrize("eps, d", [(2.0, 300), (0.5, 100), (5.0, 20), (4.0, 1000)])
def test_rhr_original_is_unbiased_with_the_closed_form_variance(eps, d):
    params = hv.RHROriginalParams(epsilon=eps, d=d)
    n, runs = 1000, 400
    rng = np.random.default_rng(3)
    values = np.concatenate([np.zeros(500), np.full(250, d - 1), rng.integers(0, d, 250)]).astype(np.int64)
    reports = hv.RHROriginalClient(params, rng=4).perturb(np.tile(values, runs))
    B, K, e = params.B, params.symbols, math.exp(eps)
    c_k = (e + K - 1) / (e - 1)
    p_true, p_other = e / (e + K - 1), 1 / (e + K - 1)
    for x in (0, d - 1, 1):
        low, high = x % B, x // B
        sign = 1 - 2 * parity(reports.rows & np.uint64(low)).astype(np.int64)
        hit = (reports.z == 2 * high).astype(np.int64) - (reports.z == 2 * high + 1).astype(np.int64)
        fhat = (c_k * sign * hit).reshape(runs, n).mean(axis=1)
        f = float(np.mean(values == x))
        same_location = values // B == high
        # P(term = +c_k), P(term = -c_k) per user, rows uniform (see the module docstring).
        plus = np.where(values == x, p_true, np.where(same_location, (p_true + p_other) / 2, p_other))
        minus = np.where(values == x, p_other, np.where(same_location, (p_true + p_other) / 2, p_other))
        probs = np.stack([plus, minus, 1 - plus - minus], axis=1)
        mean, var, fourth = point_moments(np.array([c_k, -c_k, 0.0]), probs)
        assert mean.mean() == pytest.approx(f, abs=1e-12)
        variance = params.variance(n=n, f=f, location_fraction=float(same_location.mean()))
        assert variance == pytest.approx(var.sum() / n**2, rel=1e-9)
        check_mean(fhat, f, variance)
        check_variance(fhat, variance, sum_kurtosis(var, fourth))
    first = hv.RHROriginalReports(rows=reports.rows[:n], z=reports.z[:n])
    server = hv.RHROriginalServer(params).update(first)
    sign = 1 - 2 * parity(first.rows & np.uint64(1 % B)).astype(np.int64)
    hit = (first.z == 2 * (1 // B)).astype(np.int64) - (first.z == 2 * (1 // B) + 1).astype(np.int64)
    np.testing.assert_allclose(server.estimate([1]), [c_k * np.mean(sign * hit)], rtol=1e-12)
    np.testing.assert_allclose(server.estimate()[[0, 1, d - 1]], server.estimate([0, 1, d - 1]))


def test_rhr_original_deterministic_rows_are_attackable():
    """[PAN] Thm 5.1 on the original assignment j = i mod B: every user holds a value with
    the target's location whose sign agrees with the target's in its own row, so the
    expected estimate is 1 although nobody holds the target. Random rows: unbiased."""
    params = hv.RHROriginalParams(epsilon=2.0, d=1000)
    B, target, n = params.B, 5, 20000
    rows = hv.RHROriginalClient.deterministic_rows(params, n)
    low = target % B
    partner = np.array([next(v for v in range(B) if v != low and parity(j & (v ^ low)) == 0) for j in range(B)])
    values = (target // B) * B + partner[rows.astype(np.int64)]
    assert np.all(values != target) and np.all(values // B == target // B)
    sd = math.sqrt(params.variance(n=n, f=0.0, location_fraction=1.0))
    attacked = hv.RHROriginalServer(params).update(
        hv.RHROriginalClient(params, rng=1).perturb(values, rows=rows)).estimate([target])[0]
    protected = hv.RHROriginalServer(params).update(hv.RHROriginalClient(params, rng=2).perturb(values)).estimate(
        [target])[0]
    assert abs(attacked - 1.0) < Z * sd
    assert abs(protected) < Z * sd
    assert Z * sd < 0.2


def test_rhr_original_rejects_bad_input():
    params = hv.RHROriginalParams(epsilon=2.0, d=300)
    server = hv.RHROriginalServer(params)
    with pytest.raises(ReportError, match="symbols in"):
        server.update(hv.RHROriginalReports(rows=[0], z=[8]))
    with pytest.raises(ReportError, match="Hadamard rows in"):
        server.update(hv.RHROriginalReports(rows=[128], z=[0]))
    assert server.n == 0
    with pytest.raises(ParameterError, match="rows must have one entry"):
        hv.RHROriginalClient(params).perturb([1, 2], rows=[0])
    with pytest.raises(ParameterError, match="comm"):
        hv.RHROriginalParams(epsilon=2.0, d=300, comm=-1)


# --- Apple's HCMS layout -----------------------------------------------------------------

@pytest.mark.parametrize("family", ["apple", "r1"])
def test_hcms_layouts_are_unbiased_given_the_hash_choice_with_equal_variance(family):
    """Given each user's hash function ``g_i`` the per-user term is ``a T - 1/(m-1)`` with
    ``T = +-c_eps``, ``P(T = c_eps) = (1 + mu_i/c_eps)/2``, ``mu_i = 1[h_g(x_i) = h_g(x)]``:
    so the estimate's conditional mean is ``a mean(mu) - 1/(m-1)`` and its variance
    ``a^2 sum(c^2 - mu^2)/n^2`` for both layouts (column offset and Hadamard size do not
    enter). With ``g_i`` uniform that is :func:`ldpfast.theory.cmshe_variance`."""
    eps, d, k, m = 1.0, 200, 8, 16
    if family == "apple":
        params = hv.AppleCMSHEParams(epsilon=eps, d=d, k=k, m=m, hash_seed=11)
        client, server_cls, offset = hv.AppleCMSHEClient, hv.AppleCMSHEServer, 0
        assert params.hadamard_size == m
    else:
        params = hadamard.CMSHEParams(epsilon=eps, d=d, k=k, m=m, hash_seed=11)
        client, server_cls, offset = hadamard.CMSHEClient, hadamard.CMSHEServer, 1
        assert params.hadamard_size == 32
    n, runs = 1000, 400
    rng = np.random.default_rng(5)
    values = np.concatenate([np.zeros(400), np.ones(300), rng.integers(2, d, 300)]).astype(np.uint64)
    groups = rng.integers(0, k, n).astype(np.uint32)
    reports = client(params, rng=6).perturb(np.tile(values, runs), groups=np.tile(groups, runs))
    layout = params.layout()
    c, a, beta = theory.c_eps(eps), m / (m - 1), 1 / (m - 1)
    own = layout.group_hashes(groups.astype(np.int64), values)
    for x in (0, 1, 7):
        hx = layout.group_hashes(groups.astype(np.int64), np.full(n, x, dtype=np.uint64))
        mu = (own == hx).astype(np.float64)
        col = np.tile(hx, runs) + np.uint64(offset)
        h_entry = 1 - 2 * parity(reports.rows.astype(np.uint64) & col).astype(np.int64)
        fhat = (a * c * reports.bits * h_entry - beta).reshape(runs, n).mean(axis=1)
        plus = (1 + mu / c) / 2
        mean, var, fourth = point_moments(np.array([a * c - beta, -a * c - beta]), np.stack([plus, 1 - plus], 1))
        expected, variance = mean.mean(), var.sum() / n**2
        assert variance == pytest.approx(a * a * np.sum(c * c - mu * mu) / n**2, rel=1e-9)
        check_mean(fhat, expected, variance)
        check_variance(fhat, variance, sum_kurtosis(var, fourth))
    first = type(reports)(groups=reports.groups[:n], rows=reports.rows[:n], bits=reports.bits[:n])
    server = server_cls(params).update(first)
    hx = layout.group_hashes(groups.astype(np.int64), np.full(n, 7, dtype=np.uint64)) + np.uint64(offset)
    h_entry = 1 - 2 * parity(first.rows.astype(np.uint64) & hx).astype(np.int64)
    np.testing.assert_allclose(server.estimate([7]), [np.mean(a * c * first.bits * h_entry - beta)], rtol=1e-9)


def test_apple_hcms_needs_a_power_of_two_m():
    with pytest.raises(ParameterError, match="power of two"):
        hv.AppleCMSHEParams(epsilon=1.0, d=100, k=4, m=24, hash_seed=1)
