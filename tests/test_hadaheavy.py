"""HadaHeavy / TreeHist (ldpfast.protocols.heavy.hadaheavy): recall and precision guarantees on planted
Zipf data (n = 1e6, domain 2^32), search mechanics, validation, serialization."""

import pickle

import numpy as np
import pytest

from ldpfast.protocols.heavy import hadaheavy as HH
from ldpfast.errors import IncompatibleError, ParameterError, ReportError
from ldpfast.theory import hadamard as th

N = 1_000_000
D = 2**32


def planted(seed, n=N, d=D):
    """Planted items with 30%, 20%, 14% of the users (above tau at n = 1e6, eps = 1),
    9% and 6% (between Delta and tau), and a Zipf(1.5) tail over random domain values."""
    rng = np.random.default_rng(seed)
    planted_counts = [int(n * share) for share in (0.30, 0.20, 0.14, 0.09, 0.06)]
    items = rng.choice(d, size=len(planted_counts) + 5000, replace=False).astype(np.uint64)
    heavy, tail_items = items[:len(planted_counts)], items[len(planted_counts):]
    rest = n - sum(planted_counts)
    ranks = np.minimum(rng.zipf(1.5, rest), len(tail_items)) - 1
    values = np.concatenate([np.repeat(heavy, planted_counts), tail_items[ranks]])
    rng.shuffle(values)
    uniq, cnt = np.unique(values, return_counts=True)
    return values, dict(zip(uniq.tolist(), cnt.tolist()))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_finds_every_heavy_item_and_no_light_one(seed):
    values, truth = planted(seed)
    params = HH.HadaHeavyParams.create(epsilon=1.0, d=D, n=N, beta=0.05, hash_seed=seed)
    assert (params.b, params.t, params.k, params.m) == (10, 4, 63, 32)
    reports = HH.HadaHeavyClient(params, rng=100 + seed).perturb(values)
    hh = HH.HadaHeavyServer(params).update(reports).heavy_hitters()
    found = set(hh.items.tolist())
    # (1) recall: every x with c(x) >= tau is output
    heavy = {x for x, c in truth.items() if c >= params.tau}
    assert len(heavy) == 3 and heavy <= found
    # (2) precision: every output has c(x) >= tau - 2 Delta, and its estimate is within Delta
    for x, est in zip(hh.items.tolist(), hh.counts):
        assert truth.get(x, 0) >= params.tau - 2 * params.delta
        assert abs(est - truth[x]) <= params.delta
    assert len(hh) <= N / params.delta
    assert np.all(np.diff(hh.counts) <= 0)


def test_permutation_partitioning_and_overrides():
    values, truth = planted(4, n=200_000, d=2**24)
    params = HH.HadaHeavyParams.create(epsilon=2.0, d=2**24, n=200_000, beta=0.05, hash_seed=4, partition="permutation")
    server = HH.HadaHeavyServer(params)
    groups, rows = server.assign(200_000, rng=5, partition="permutation")
    level_sizes = np.bincount(groups // params.k, minlength=params.t)
    assert level_sizes.max() - level_sizes.min() <= 1
    server.update(HH.HadaHeavyClient(params, rng=6).perturb(values, groups=groups, rows=rows))
    hh = server.heavy_hitters()
    heavy = {x for x, c in truth.items() if c >= params.tau}
    assert len(heavy) >= 2 and heavy <= set(hh.items.tolist())
    # a smaller delta/tau at query time finds more, top-T pruning caps each level
    loose = server.heavy_hitters(delta=params.delta / 4, tau=params.tau / 4)
    assert set(hh.items.tolist()) <= set(loose.items.tolist())
    assert len(server.heavy_hitters(delta=params.delta / 4, tau=params.tau / 4, top=2)) <= 2
    with pytest.raises(ParameterError, match="groups must be given"):
        HH.HadaHeavyClient(params, rng=1).perturb(values[:10])


def test_treehist_is_the_binary_special_case():
    n, d = 200_000, 2**20
    values, truth = planted(5, n=n, d=d)
    params = HH.HadaHeavyParams.treehist(epsilon=4.0, d=d, n=n, beta=0.05, hash_seed=5)
    assert params.b == 1 and params.t == 20
    dflt = th.hadaheavy_defaults(4.0, n, 0.05, d, b=1)
    assert params.delta == dflt["delta"] and params.k == dflt["k"]
    server = HH.HadaHeavyServer(params).update(HH.HadaHeavyClient(params, rng=7).perturb(values))
    hh = server.heavy_hitters()
    heavy = {x for x, c in truth.items() if c >= params.tau}
    assert len(heavy) >= 1 and heavy <= set(hh.items.tolist())
    for x in hh.items.tolist():
        assert truth.get(x, 0) >= params.tau - 2 * params.delta


def test_prefixes_and_level_estimates():
    params = HH.HadaHeavyParams(epsilon=1.0, d=1000, b=4, k=3, m=8, delta=10.0, tau=40.0, hash_seed=1)
    assert (params.L, params.t, params.B) == (10, 3, 16)
    assert [params.shift(level) for level in (1, 2, 3)] == [8, 4, 0]
    assert [params.prefix_domain(level) for level in (1, 2, 3)] == [4, 63, 1000]
    # level 1 has 4 prefixes: no hashing, HRR on 4 rows
    layout = params.layout()
    assert int(layout.table[0, 2]) == 0 and int(layout.table[0, 4]) == 4
    assert int(layout.table[3, 2]) == 8
    values = np.full(30_000, 777)
    server = HH.HadaHeavyServer(params).update(HH.HadaHeavyClient(params, rng=2).perturb(values))
    est = server.level_estimates(1, np.arange(4))
    assert np.argmax(est) == 777 >> 8
    with pytest.raises(ParameterError, match="level"):
        server.level_estimates(4, np.arange(2))
    with pytest.raises(ParameterError, match="prefixes"):
        server.level_estimates(1, np.array([4]))


def test_params_validation():
    with pytest.raises(ParameterError, match="tau must exceed delta"):
        HH.HadaHeavyParams(epsilon=1.0, d=1000, b=4, k=3, m=8, delta=10.0, tau=5.0)
    with pytest.raises(ParameterError, match="b must"):
        HH.HadaHeavyParams(epsilon=1.0, d=1000, b=0, k=3, m=8, delta=10.0, tau=50.0)
    with pytest.raises(ParameterError, match="delta"):
        HH.HadaHeavyParams(epsilon=1.0, d=1000, b=2, k=3, m=8, delta=float("inf"), tau=50.0)
    with pytest.raises(ParameterError, match="top"):
        HH.HadaHeavyParams(epsilon=1.0, d=1000, b=2, k=3, m=8, delta=1.0, tau=5.0, top=0)
    with pytest.raises(ParameterError, match="epsilon"):
        HH.HadaHeavyParams.create(epsilon=-1, d=1000, n=100)
    with pytest.raises(ReportError, match="no reports"):
        HH.HadaHeavyServer(HH.HadaHeavyParams.create(epsilon=1.0, d=1000, n=100)).heavy_hitters()


def test_rejected_batch_merge_serialization():
    params = HH.HadaHeavyParams.create(epsilon=1.0, d=2**32, n=10_000, hash_seed=3)
    values = np.random.default_rng(1).integers(0, 2**32, 10_000, dtype=np.uint64)
    reports = HH.HadaHeavyClient(params, rng=3).perturb(values)
    whole = HH.HadaHeavyServer(params).update(reports)
    before = whole.to_bytes()
    bad = HH.HadaHeavyReports(groups=reports.groups.copy(), rows=reports.rows.copy(), bits=reports.bits.copy())
    bad.groups[7] = params.t * params.k
    with pytest.raises(ReportError, match="report 7: group"):
        whole.update(bad)
    assert whole.to_bytes() == before
    a = HH.HadaHeavyServer(params).update(HH.HadaHeavyReports(groups=reports.groups[:3000], rows=reports.rows[:3000],
                                            bits=reports.bits[:3000]))
    b = HH.HadaHeavyServer(params).update(HH.HadaHeavyReports(groups=reports.groups[3000:], rows=reports.rows[3000:],
                                            bits=reports.bits[3000:]))
    assert a.merge(b) == whole
    assert HH.HadaHeavyServer.from_bytes(before) == whole
    assert pickle.loads(pickle.dumps(whole)) == whole
    assert HH.HadaHeavyServer(params, threads=1).update(reports) == HH.HadaHeavyServer(params,
                                                                                       threads=3).update(reports)
    with pytest.raises(IncompatibleError):
        whole.merge(HH.HadaHeavyServer(HH.HadaHeavyParams.create(epsilon=1.0, d=2**32, n=10_000, hash_seed=4)))


def test_direct_level_oracle_gives_the_same_output():
    values, _ = planted(6, n=100_000, d=2**20)
    for params in (HH.HadaHeavyParams.treehist(epsilon=4.0, d=2**20, n=100_000, hash_seed=6),
                   HH.HadaHeavyParams.create(epsilon=4.0, d=2**20, n=100_000, hash_seed=6)):
        server = HH.HadaHeavyServer(params).update(HH.HadaHeavyClient(params, rng=8).perturb(values))
        a, b = server.heavy_hitters(), server.heavy_hitters(method="direct")
        np.testing.assert_array_equal(a.items, b.items)
        np.testing.assert_array_equal(a.counts, b.counts)
        assert len(a) >= 1


def test_full_64_bit_domain():
    n = 200_000
    values = np.random.default_rng(7).integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    values[:80_000] = np.uint64(2**64 - 1)
    values[80_000:130_000] = np.uint64(12345678901234567890)
    params = HH.HadaHeavyParams.create(epsilon=2.0, d=2**64, n=n, hash_seed=7)
    assert params.L == 64 and params.prefix_domain(params.t) == 2**64
    hh = HH.HadaHeavyServer(params).update(HH.HadaHeavyClient(params, rng=9).perturb(values)).heavy_hitters()
    assert params.tau < 50_000
    assert set(hh.items.tolist()) == {2**64 - 1, 12345678901234567890}
