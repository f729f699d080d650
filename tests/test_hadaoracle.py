"""HadaOracle (ldpfast.protocols.frequency.hadaoracle): per-subset unbiasedness, the median's tail, hashing,
partitioning, validation and serialization.

Z = 5.0 (two-sided normal tail 5.7e-7 per assertion); exceedance counts are compared with
binomial tails at probability 1e-6.
"""

import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from ldpfast.protocols.frequency import hadaoracle as O
from ldpfast.errors import DTypeError, IncompatibleError, ParameterError, ReportError
from ldpfast.theory import hadamard as th

Z = 5.0


def gf64_mul(a, b):
    """Pure-Python GF(2^64) product modulo z^64 + z^4 + z^3 + z + 1."""
    prod = 0
    for i in range(64):
        if (b >> i) & 1:
            prod ^= a << i
    for i in range(127, 63, -1):
        if (prod >> i) & 1:
            prod ^= (1 << i) | (0x1B << (i - 64))
    return prod


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**63), st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=20))
def test_hash_is_low_bits_of_gf64_affine_map(seed, xs):
    params = O.HadaOracleParams(epsilon=1.0, d=2**64, k=3, m=64, hash_seed=seed)
    layout = params.layout()
    x = np.array(xs, dtype=np.uint64)
    for j in range(3):
        a0, a1 = int(layout.table[j, 0]), int(layout.table[j, 1])
        got = layout.group_hashes(np.full(len(x), j), x)
        expected = [(gf64_mul(a1, v) ^ a0) & 63 for v in xs]
        assert [int(v) for v in got] == expected


def test_pairwise_collision_rate_is_one_over_m():
    # over many hash seeds, two fixed values collide with probability 1/m exactly
    m, trials = 16, 4000
    params = O.HadaOracleParams(epsilon=1.0, d=2**40, k=trials - 1, m=m, hash_seed=9)
    layout = params.layout()
    g = np.arange(trials - 1)
    h1 = layout.group_hashes(g, np.full(trials - 1, 12345, np.uint64))
    h2 = layout.group_hashes(g, np.full(trials - 1, 2**39 + 7, np.uint64))
    hits = np.count_nonzero(h1 == h2)
    p = 1 / m
    assert abs(hits - (trials - 1) * p) < Z * math.sqrt((trials - 1) * p * (1 - p))


def _data(rng, n, heavy=(0.3, 0.1), d=2**20):
    counts = [int(n * h) for h in heavy]
    values = [np.full(c, 1000 + 17 * i, dtype=np.uint64) for i, c in enumerate(counts)]
    rest = n - sum(counts)
    values.append(rng.integers(0, d, rest, dtype=np.uint64))
    return np.concatenate(values)


@pytest.mark.parametrize("partition", ["independent", "permutation"])
def test_each_subset_estimate_is_unbiased_for_its_hashed_count(partition):
    eps, n, runs, k, m = 1.0, 3000, 300, 5, 16
    rng = np.random.default_rng(1)
    values = _data(rng, n)
    params = O.HadaOracleParams(epsilon=eps, d=2**20, k=k, m=m, partition=partition, hash_seed=77)
    layout = params.layout()
    client = O.HadaOracleClient(params, rng=5)
    xs = np.array([1000, 31337], dtype=np.uint64)
    acc = np.zeros((k, len(xs)))
    for i in range(runs):
        server = O.HadaOracleServer(params)
        groups, rows = (server.assign(n, rng=100 + i, partition=partition) if partition == "permutation"
                        else (None, None))
        server.update(client.perturb(values, groups=groups, rows=rows))
        acc += server.group_estimates(xs)
    mean = acc / runs
    c = th.c_eps(eps)
    for j in range(k):
        hv = layout.group_hashes(np.full(n, j), values)
        for col, x in enumerate(xs):
            y = layout.group_hashes(np.array([j]), np.array([x], np.uint64))[0]
            hashed_count = np.count_nonzero(hv == y)
            # independent partitioning: Var = n k c^2 - hashed count (an upper bound for permutation)
            var = n * k * c * c - hashed_count
            assert abs(mean[j, col] - hashed_count) < Z * math.sqrt(var / runs), (j, x)


def _binomial_limit(runs, prob, tail=1e-6):
    """Smallest count e with P(Bin(runs, prob) >= e) < tail."""
    return int(stats.binom.isf(tail, runs, prob)) + 1


def test_median_error_tail_within_stated_probability():
    eps, n, runs, beta = 1.0, 20_000, 200, 0.01
    d = 2**20
    rng = np.random.default_rng(2)
    values = _data(rng, n, heavy=(0.2, 0.05))
    counts = {1000: int(0.2 * n), 1017: int(0.05 * n)}
    xs = np.array([1000, 1017, 999_999], dtype=np.uint64)
    truth = np.array([counts[1000], counts[1017], np.count_nonzero(values == 999_999)])
    uniq, cnt = np.unique(values, return_counts=True)
    sum_sq = float(np.sum(cnt.astype(np.float64) ** 2))
    k, _, m = th.hadaoracle_defaults(eps, n, beta, d)
    assert (k, m) == (13, 32)
    # Chebyshev per subset with p = 1/4, then the median needs (k+1)/2 bad subsets
    p_bad = 0.25
    cheb_bounds = []
    for c_x in truth:
        bias, var = th.hadaoracle_group_mse(eps, n, k, m, c_x, sum_sq - c_x * c_x)
        cheb_bounds.append(math.sqrt((var + bias * bias) / p_bad))
    pi_median = stats.binom.sf((k + 1) // 2 - 1, k, p_bad)
    lib_bound, lib_beta = th.hadaoracle_error_bound(eps, n, k, m)
    exceed_cheb = np.zeros(len(xs), int)
    exceed_lib = np.zeros(len(xs), int)
    keys = np.random.default_rng(3)  # one seeded key stream for all runs' clients
    for i in range(runs):
        params = O.HadaOracleParams(epsilon=eps, d=d, k=k, m=m, hash_seed=1 + i)  # fresh hash functions per run
        client = O.HadaOracleClient(params, rng=keys)
        err = np.abs(O.HadaOracleServer(params).update(client.perturb(values)).estimate(xs, counts=True) - truth)
        exceed_cheb += err > np.array(cheb_bounds)
        exceed_lib += err > lib_bound
    assert np.all(exceed_cheb < _binomial_limit(runs, pi_median))
    assert np.all(exceed_lib < _binomial_limit(runs, lib_beta))


def test_whole_domain_and_candidates_agree_and_unhashed_path():
    params = O.HadaOracleParams.create(epsilon=2.0, d=3000, n=5000, beta=0.05, hash_seed=4)
    values = np.random.default_rng(3).integers(0, 3000, 5000)
    server = O.HadaOracleServer(params).update(O.HadaOracleClient(params, rng=1).perturb(values))
    full = server.estimate()
    np.testing.assert_allclose(server.estimate(np.array([0, 2999])), full[[0, 2999]])
    np.testing.assert_allclose(server.estimate(counts=True), full * 5000)
    small = O.HadaOracleParams(epsilon=1.0, d=100, k=3, m=1024, hash_seed=1)
    assert small.m == 128 and not small.hashed
    with pytest.raises(ParameterError, match="candidates must be given"):
        O.HadaOracleServer(O.HadaOracleParams(epsilon=1.0, d=2**40, k=3, m=64, hash_seed=1)).update(
            O.HadaOracleClient(O.HadaOracleParams(epsilon=1.0, d=2**40, k=3, m=64, hash_seed=1),
                               rng=1).perturb(np.arange(5))).estimate()


def test_subset_scaling_and_collision_correction():
    n = 40_000
    values = np.concatenate([np.full(n // 2, 5), np.random.default_rng(8).integers(0, 2**30, n // 2)])
    for kwargs in ({"scaling": "subset"}, {"collision_correction": True}):
        params = O.HadaOracleParams.create(epsilon=2.0, d=2**30, n=n, beta=0.05, hash_seed=6, **kwargs)
        server = O.HadaOracleServer(params).update(O.HadaOracleClient(params, rng=2).perturb(values))
        bound, _ = th.hadaoracle_error_bound(2.0, n, params.k, params.m)
        assert abs(server.estimate(np.array([5]), counts=True)[0] - n // 2) < bound


def test_assign_partitions():
    params = O.HadaOracleParams(epsilon=1.0, d=100, k=7, m=16, partition="permutation", hash_seed=1)
    server = O.HadaOracleServer(params)
    groups, rows = server.assign(1000, rng=3)  # the parameters' partition: permutation
    sizes = np.bincount(groups, minlength=7)
    assert sizes.min() >= 1000 // 7 and sizes.max() <= -(-1000 // 7) and sizes.sum() == 1000
    assert rows.dtype == np.uint32 and rows.max() < 16
    g2, _ = server.assign(70_000, rng=4, partition="independent")
    counts = np.bincount(g2, minlength=7)
    assert np.all(np.abs(counts - 10_000) < Z * math.sqrt(70_000 * (1 / 7) * (6 / 7)))
    with pytest.raises(ParameterError, match="permutation partitioning"):
        O.HadaOracleClient(params, rng=1).perturb(np.arange(5))
    reports = O.HadaOracleClient(params, rng=1).perturb(np.arange(1000) % 100, groups=groups, rows=rows)
    np.testing.assert_array_equal(reports.groups, groups)
    np.testing.assert_array_equal(reports.rows, rows)
    assert np.array_equal(O.HadaOracleServer(params).update(reports).group_sizes, sizes)


def test_params_validation():
    with pytest.raises(ParameterError, match="k must be odd"):
        O.HadaOracleParams(epsilon=1.0, d=100, k=4, m=16)
    with pytest.raises(ParameterError, match="m must be a power of two"):
        O.HadaOracleParams(epsilon=1.0, d=100, k=3, m=24)
    with pytest.raises(ParameterError, match="partition"):
        O.HadaOracleParams(epsilon=1.0, d=100, k=3, m=16, partition="random")
    with pytest.raises(ParameterError, match="scaling"):
        O.HadaOracleParams(epsilon=1.0, d=100, k=3, m=16, scaling="n")
    with pytest.raises(ParameterError, match="epsilon"):
        O.HadaOracleParams(epsilon=float("nan"), d=100, k=3, m=16)
    with pytest.raises(ParameterError, match="d must"):
        O.HadaOracleParams(epsilon=1.0, d=2**64 + 1, k=3, m=16)
    with pytest.raises(ParameterError, match="beta"):
        O.HadaOracleParams.create(1.0, 100, 1000, beta=0)


def test_rejected_batches_leave_state_unchanged():
    params = O.HadaOracleParams(epsilon=1.0, d=1000, k=3, m=16, hash_seed=2)
    server = O.HadaOracleServer(params).update(O.HadaOracleClient(params, rng=1).perturb(np.arange(1000)))
    before = server.to_bytes()
    good = O.HadaOracleClient(params, rng=2).perturb(np.arange(10))
    bad = O.HadaOracleReports(groups=good.groups.copy(), rows=good.rows.copy(), bits=good.bits.copy())
    bad.groups[4] = 3
    with pytest.raises(ReportError, match="report 4: group 3 is out of range"):
        server.update(bad)
    bad = O.HadaOracleReports(groups=good.groups.copy(), rows=good.rows.copy(), bits=good.bits.copy())
    bad.rows[2] = 16
    with pytest.raises(ReportError, match="report 2: row 16"):
        server.update(bad)
    with pytest.raises(DTypeError, match="groups must have dtype uint32"):
        O.HadaOracleReports(groups=good.groups.astype(np.int32), rows=good.rows, bits=good.bits)
    assert server.to_bytes() == before


def test_merge_serialization_and_threads():
    params = O.HadaOracleParams.create(epsilon=1.0, d=2**32, n=100_000, hash_seed=12)
    values = np.random.default_rng(4).integers(0, 2**32, 100_000, dtype=np.uint64)
    reports = O.HadaOracleClient(params, rng=9, threads=2).perturb(values)
    assert np.array_equal(reports.bits, O.HadaOracleClient(params, rng=9, threads=1).perturb(values).bits)
    whole = O.HadaOracleServer(params, threads=1).update(reports)
    assert O.HadaOracleServer(params, threads=3).update(reports) == whole
    half = len(values) // 2
    a = O.HadaOracleServer(params).update(O.HadaOracleReports(groups=reports.groups[:half], rows=reports.rows[:half],
                                          bits=reports.bits[:half]))
    b = O.HadaOracleServer(params).update(O.HadaOracleReports(groups=reports.groups[half:], rows=reports.rows[half:],
                                          bits=reports.bits[half:]))
    assert a.merge(b) == whole
    assert O.HadaOracleServer.from_bytes(whole.to_bytes()) == whole
    assert pickle.loads(pickle.dumps(whole)) == whole
    assert O.HadaOracleParams.from_dict(params.to_dict()) == params
    with pytest.raises(IncompatibleError):
        whole.merge(O.HadaOracleServer(O.HadaOracleParams.create(epsilon=1.0, d=2**32, n=100_000, hash_seed=13)))


def test_direct_query_without_fwht_is_identical():
    params = O.HadaOracleParams.create(epsilon=1.0, d=2**30, n=50_000, hash_seed=21)
    values = np.random.default_rng(9).integers(0, 2**30, 50_000, dtype=np.uint64)
    server = O.HadaOracleServer(params).update(O.HadaOracleClient(params, rng=1).perturb(values))
    xs = np.concatenate([values[:200], np.arange(50, dtype=np.uint64)])
    np.testing.assert_array_equal(server.estimate(xs, method="direct"), server.estimate(xs))
    with pytest.raises(ParameterError, match="method"):
        server.estimate(xs, method="naive")


def _poisson_binomial_at_least(probs, h):
    """P(at least h successes) for independent Bernoulli(probs)."""
    dist = np.zeros(len(probs) + 1)
    dist[0] = 1.0
    for p in probs:
        dist[1:] = dist[1:] * (1 - p) + dist[:-1] * p
        dist[0] *= 1 - p
    return dist[h:].sum()


def test_median_tail_with_fixed_hashes_matches_berry_esseen_bound():
    """With the hash functions fixed, subset j's estimate is its (known) hashed count
    plus a sum of n independent zero-mean terms bounded by M = k c_eps + 1 with variance
    V_j = n k c_eps^2 - hashed count. Berry-Esseen (constant 0.56, third absolute moment
    <= M V_j) bounds each side by the normal tail plus 0.56 M / sqrt(V_j). The median is
    off by more than B only if (k+1)/2 subsets are off on the same side (Poisson-binomial
    tail, subsets treated as independent). B is chosen so this is 5%; exceedances over
    the runs are compared with the binomial tail at 1e-6."""
    eps, n, runs = 1.0, 20_000, 200
    rng = np.random.default_rng(12)
    values = _data(rng, n, heavy=(0.2, 0.05))
    params = O.HadaOracleParams.create(epsilon=eps, d=2**20, n=n, beta=0.01, hash_seed=5)
    k, layout = params.k, params.layout()
    c = th.c_eps(eps)
    xs = np.array([1000, 1017, 424242], dtype=np.uint64)
    truth = np.array([np.count_nonzero(values == x) for x in xs])
    big_m = k * c + 1

    def side(t, var):
        return min(1.0, stats.norm.sf(t / math.sqrt(var)) + 0.56 * big_m / math.sqrt(var))

    bounds, probs = [], []
    for x, c_x in zip(xs, truth):
        hashed = np.array([np.count_nonzero(layout.group_hashes(np.full(n, j), values)
                                            == layout.group_hashes(np.array([j]), np.array([x], np.uint64))[0])
                           for j in range(k)])
        coll = hashed - c_x
        var = n * k * c * c - hashed

        def tail(b, coll=coll, var=var):
            up = [side(b - coll[j], var[j]) for j in range(k)]
            down = [side(b + coll[j], var[j]) for j in range(k)]
            return _poisson_binomial_at_least(up, (k + 1) // 2) + _poisson_binomial_at_least(down, (k + 1) // 2)

        b_lo, b_hi = 0.0, 50.0 * c * math.sqrt(n * k)
        for _ in range(60):  # smallest B with tail(B) <= 0.05
            mid = (b_lo + b_hi) / 2
            b_lo, b_hi = (b_lo, mid) if tail(mid) <= 0.05 else (mid, b_hi)
        bounds.append(b_hi)
        probs.append(tail(b_hi))
    keys = np.random.default_rng(13)
    exceed = np.zeros(len(xs), int)
    for _ in range(runs):
        reports = O.HadaOracleClient(params, rng=keys).perturb(values)
        est = O.HadaOracleServer(params).update(reports).estimate(xs, counts=True)
        exceed += np.abs(est - truth) > np.array(bounds)
    for e, p in zip(exceed, probs):
        assert e < _binomial_limit(runs, p)
