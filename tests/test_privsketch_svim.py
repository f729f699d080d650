"""SVIM's three phases (SPEC 4.6): each server is unbiased for its target, API contract
(validation, rejected batches, merge, serialization, registry), and svim() is the three
Client/Server phases run in turn."""

import math
import pickle
import warnings

import numpy as np
import pytest

from ldpfast import _base

from ldpfast.protocols.sets import ps_olh, svim
from ldpfast.protocols.sets import privsketch as ps
from ldpfast.datasets import SetData, zipf_sets
from ldpfast.errors import IncompatibleError, ParameterError, ReportError

# Per-assertion bound |estimate - truth| < Z sd: P(|N(0,1)| > 6) = 2e-9, so even the
# ~30 coordinates of one test together fail by chance with probability < 1e-7.
Z = 6.0
D = 16
CAND = (3, 0, 7, 12, 5, 9, 1, 14, 2, 10)      # |C| = 10, in "rank order" (not sorted)


def make_sets(n, seed, max_size=6):
    gen = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, D + 1)
    sets = []
    for size in gen.integers(0, max_size + 1, n):       # some empty
        sets.append(gen.choice(D, size=size, replace=False, p=weights / weights.sum()))
    return SetData.from_lists(sets, d=D)


def as_lists(data):
    return [data.user(i).tolist() for i in range(data.n)]


def check_unbiased(est, truth, q, n, scale):
    """``est = scale (count/n - offset)`` with count a sum of independent Bernoulli(q_i)
    per coordinate (q: shape (n, coords)): Var(est) = scale^2 sum q(1-q) / n^2."""
    sd = scale * np.sqrt((q * (1 - q)).sum(axis=0)) / n
    assert np.all(np.abs(est - truth) < Z * sd), np.max(np.abs(est - truth) / sd)


def olh_match_prob(holds, g, eps):
    """P(user's hash of x matches the report): p when the reported value is x, else 1/g
    (``holds`` = P(value = x))."""
    p = np.exp(eps) / (np.exp(eps) + g - 1)
    return holds * p + (1 - holds) / g


def olh_scale(g, eps):
    p = np.exp(eps) / (np.exp(eps) + g - 1)
    return g / (p * g - 1)


def test_phase1_estimates_the_item_sampling_frequency():
    data = make_sets(30000, 1)
    params = svim.SVIMItemParams(epsilon=2.0, d=D, k=4)
    assert params.g == 8                                        # int(e^2) + 1, R3's truncation
    reports = svim.SVIMItemClient(params, rng=2).perturb(data)
    assert np.count_nonzero(data.sizes()) < data.n == len(reports)   # empty sets report too (the dummy d)
    server = svim.SVIMItemServer(params).update(reports)
    users = [data.user(i) for i in range(data.n)]
    holds = np.zeros((len(users), D))                           # P(sampled item = x) per user
    for i, s in enumerate(users):
        holds[i, s] = 1.0 / max(s.size, 1)
    check_unbiased(server.estimate(), holds.mean(axis=0), olh_match_prob(holds, params.g, 2.0), len(users),
                   olh_scale(params.g, 2.0))
    assert np.array_equal(server.estimate([4, 2]), server.estimate()[[4, 2]])
    cand = server.candidates()
    assert cand.size == 8 and np.array_equal(cand, np.argsort(-server.estimate(), kind="stable")[:8])
    lp = server.length_params(max_length=5)
    assert lp.candidates == tuple(cand.tolist()) and lp.max_length == 5 and lp.epsilon == 2.0


@pytest.mark.parametrize("max_length", [0, 3])
def test_phase2_estimates_the_length_histogram(max_length):
    data = make_sets(30000, 3)
    params = svim.SVIMLengthParams(epsilon=1.5, d=D, candidates=CAND, max_length=max_length)
    assert params.max_length == (max_length or len(CAND))      # default |C|: never clips
    reports = svim.SVIMLengthClient(params, rng=4).perturb(as_lists(data))
    server = svim.SVIMLengthServer(params).update(reports)
    lengths = np.minimum([len(set(s) & set(CAND)) for s in as_lists(data)], params.max_length)
    holds = (lengths[:, None] == np.arange(params.max_length + 1)).astype(float)
    check_unbiased(server.estimate(), holds.mean(axis=0), olh_match_prob(holds, params.g, 1.5), data.n,
                   olh_scale(params.g, 1.5))
    # L: the first l >= 1 whose cumulative share of the raw histogram exceeds 0.9.
    share = np.cumsum(server.estimate()) / server.estimate().sum()
    expected = next((l for l in range(1, params.max_length + 1) if share[l] > 0.9), params.max_length)
    assert server.length() == expected
    # max_L only changes the server's choice of L, so the batch is reused as a hand-built
    # one (without the fingerprint of the parameters that made it)
    reports.params_fingerprint = None
    assert expected > 1 and svim.SVIMLengthServer(dataclass_replace(params, max_L=1)).update(reports).length() == 1
    padded = server.padded_params()
    assert (padded.L, padded.candidates, padded.epsilon, padded.coverage) == (expected, CAND, 1.5, 0.9)


def test_phase2_length_of_a_clear_histogram():
    # Every user holds exactly 2 candidates: the histogram is (0, 0, 1, 0, ...); each bin's
    # estimate has sd < 0.01 here, so L = 2 unless the 11 bins are off by > 0.1 together (z > 3 sqrt(11)).
    sets = [[CAND[i % 10], CAND[(i + 1) % 10], 4, 6] for i in range(20000)]
    params = svim.SVIMLengthParams(epsilon=4.0, d=D, candidates=CAND)
    server = svim.SVIMLengthServer(params).update(svim.SVIMLengthClient(params, rng=5).perturb(sets))
    assert server.length() == 2


@pytest.mark.parametrize("L, eps, grr, reference", [(2, 1.0, True, False), (1, 1.0, False, False),
                                                    (2, 1.0, True, True)])
def test_phase3_estimates_the_padded_sampling_frequency(L, eps, grr, reference):
    # |C| = 10 < L e^eps (4L-1) + 1 is 39.1 for L = 2 (GRR) and 9.15 for L = 1 (OLH).
    # Small sets, so that padding (L = 2) and sampling (|S ∩ C| > L) both matter.
    data = make_sets(40000, 6, max_size=3)
    params = svim.SVIMPaddedParams(epsilon=eps, d=D, candidates=CAND, L=L, reference=reference)
    assert params.uses_grr is grr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ps.PrivacyWarning)
        reports = svim.SVIMPaddedClient(params, rng=7).perturb(data)
    server = svim.SVIMPaddedServer(params).update(reports)
    holds = np.zeros((data.n, len(CAND)))                       # P(padded sample = C[j])
    for i, s in enumerate(as_lists(data)):
        inter = [j for j, c in enumerate(CAND) if c in s]
        holds[i, inter] = 1.0 / max(L, len(inter))
    if grr:
        assert not reports.a0.any() and not reports.a1.any()
        e = np.exp(params.grr_epsilon)
        assert params.grr_epsilon == pytest.approx(np.log(L * np.expm1(eps) + 1))
        assert params.domain == len(CAND) + (1 if reference else L)   # L distinct dummies (R3: one)
        keep, other = e / (e + params.domain - 1), 1 / (e + params.domain - 1)
        q, scale = holds * keep + (1 - holds) * other, 1 / (keep - other)
    else:
        q, scale = olh_match_prob(holds, params.g, eps), olh_scale(params.g, eps)
    check_unbiased(server.sampling_frequencies(), holds.mean(axis=0), q, data.n, scale)
    assert np.allclose(server.estimate(), L * server.sampling_frequencies() / 0.9, rtol=1e-15, atol=0)
    top, est = server.top(3)
    order = np.argsort(-server.estimate(), kind="stable")[:3]
    assert np.array_equal(top, np.array(CAND)[order]) and np.array_equal(est, server.estimate()[order])


def test_groups_partition_the_users():
    data = make_sets(1001, 8)
    groups = svim.svim_groups(data, rng=9)
    assert [g[0].size - 1 for g in groups] == [400, 100, 501]
    assert sum(g[1].size for g in groups) == data.items.size
    merged = sorted(tuple(sorted(g[1][g[0][i]:g[0][i + 1]].tolist())) for g in groups for i in range(g[0].size - 1))
    assert merged == sorted(tuple(sorted(s)) for s in as_lists(data))
    again = svim.svim_groups(data, rng=9)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(groups, again))
    assert [g[0].size - 1 for g in svim.svim_groups(data, shares=(0.2, 0.3, 0.5), rng=9)] == [200, 300, 501]
    with pytest.raises(ParameterError, match="shares"):
        svim.svim_groups(data, shares=(0.5, 0.5, 0.5))


def test_svim_is_the_three_phases_by_hand():
    data = zipf_sets(5000, 300, length=5, seed=10)
    result = svim.svim(data, 3.0, k=8, rng=11)
    gen = np.random.default_rng(11)
    g1, g2, g3 = svim.svim_groups(data, rng=gen)
    p1 = svim.SVIMItemParams(epsilon=3.0, d=data.d, k=8)
    s1 = svim.SVIMItemServer(p1).update(svim.SVIMItemClient(p1, rng=gen).perturb(g1))
    p2 = s1.length_params()
    s2 = svim.SVIMLengthServer(p2).update(svim.SVIMLengthClient(p2, rng=gen).perturb(g2))
    p3 = s2.padded_params()
    s3 = svim.SVIMPaddedServer(p3).update(svim.SVIMPaddedClient(p3, rng=gen).perturb(g3))
    top, est = s3.top(8)
    assert np.array_equal(result.candidates, p2.candidates) and result.L == p3.L
    assert np.array_equal(result.top, top) and np.array_equal(result.estimates, est)


def test_reports_do_not_depend_on_threads():
    data = make_sets(3000, 12)
    for params, client in [(svim.SVIMItemParams(epsilon=2.0, d=D), svim.SVIMItemClient),
                           (svim.SVIMLengthParams(epsilon=2.0, d=D, candidates=CAND), svim.SVIMLengthClient),
                           (svim.SVIMPaddedParams(epsilon=1.0, d=D, candidates=CAND, L=2), svim.SVIMPaddedClient),
                           (svim.SVIMPaddedParams(epsilon=1.0, d=D, candidates=CAND, L=1), svim.SVIMPaddedClient)]:
        a, b = client(params, rng=13, threads=1).perturb(data), client(params, rng=13, threads=3).perturb(data)
        assert all(np.array_equal(x, y) for x, y in zip(a.columns().values(), b.columns().values()))


PHASES = [
    (svim.SVIMItemParams(epsilon=2.0, d=D, k=3), svim.SVIMItemClient, svim.SVIMItemServer),
    (svim.SVIMLengthParams(epsilon=2.0, d=D, candidates=CAND), svim.SVIMLengthClient, svim.SVIMLengthServer),
    (svim.SVIMPaddedParams(epsilon=1.0, d=D, candidates=CAND, L=2), svim.SVIMPaddedClient, svim.SVIMPaddedServer),
    (svim.SVIMPaddedParams(epsilon=1.0, d=D, candidates=CAND, L=1), svim.SVIMPaddedClient, svim.SVIMPaddedServer),
]


@pytest.mark.parametrize("params, client_cls, server_cls", PHASES)
def test_merge_bytes_pickle_registry(params, client_cls, server_cls):
    data = make_sets(2000, 14)
    client = client_cls(params, rng=15)
    r1, r2 = client.perturb(data), client.perturb(data)
    whole = server_cls(params).update(r1).update(r2)
    merged = server_cls(params).update(r1).merge(server_cls(params).update(r2))
    assert merged == whole and merged.n == len(r1) + len(r2)
    assert server_cls.from_bytes(whole.to_bytes()) == whole
    assert pickle.loads(pickle.dumps(whole)) == whole
    assert server_cls(params).merge(whole) == whole                  # empty = identity
    assert type(params).from_dict(params.to_dict()) == params and hash(params) == hash(type(params).from_dict(
        params.to_dict()))
    proto = _base.protocols()[params.protocol]
    assert (proto.params, proto.client, proto.aggregator) == (type(params), client_cls, server_cls)
    if hasattr(params, "candidates"):
        other = dataclass_replace(params, candidates=CAND[::-1])
        with pytest.raises(IncompatibleError):
            whole.merge(server_cls(other))


def dataclass_replace(params, **changes):
    import dataclasses
    return dataclasses.replace(params, **changes)


@pytest.mark.parametrize("params, client_cls, server_cls", PHASES)
def test_rejected_batch_leaves_the_state_unchanged(params, client_cls, server_cls):
    data = make_sets(500, 16)
    server = server_cls(params).update(client_cls(params, rng=17).perturb(data))
    before = server.to_bytes()
    good = client_cls(params, rng=18).perturb(data)
    bound = params.domain if getattr(params, "uses_grr", False) else params.g
    bad_z = type(good)(z=np.where(np.arange(len(good)) == len(good) - 1, bound, good.z), a0=good.a0, a1=good.a1)
    with pytest.raises(ReportError, match="z must be <"):
        server.update(bad_z)
    if getattr(params, "uses_grr", False):
        bad_a = type(good)(z=good.z, a0=np.where(np.arange(len(good)) == 3, 1, good.a0), a1=good.a1)
        with pytest.raises(ReportError, match="a0 = a1 = 0"):
            server.update(bad_a)
    else:
        bad_a = type(good)(z=good.z, a0=good.a0, a1=np.full(len(good), params.field_size, dtype=np.uint64))
        with pytest.raises(ReportError, match="a1 must be <"):
            server.update(bad_a)
    with pytest.raises(ReportError, match="reports must be"):
        server.update(ps_olh.PSOLHReports(z=good.z, a0=good.a0, a1=good.a1))
    assert server.to_bytes() == before
    with pytest.raises(ReportError, match="n = 0"):
        server_cls(params).estimate()


def test_parameter_validation():
    with pytest.raises(ParameterError, match="epsilon"):
        svim.SVIMItemParams(epsilon=0.0, d=D)
    with pytest.raises(ParameterError, match="k must be"):
        svim.SVIMItemParams(epsilon=1.0, d=D, k=0)
    with pytest.raises(ParameterError, match="not be empty"):
        svim.SVIMLengthParams(epsilon=1.0, d=D, candidates=())
    with pytest.raises(ParameterError, match="distinct"):
        svim.SVIMLengthParams(epsilon=1.0, d=D, candidates=(1, 1))
    with pytest.raises(ParameterError, match="candidates must lie in"):
        svim.SVIMPaddedParams(epsilon=1.0, d=D, candidates=(1, D), L=1)
    with pytest.raises(ParameterError, match="L must be"):
        svim.SVIMPaddedParams(epsilon=1.0, d=D, candidates=CAND, L=0)
    with pytest.raises(ParameterError, match="coverage"):
        svim.SVIMLengthParams(epsilon=1.0, d=D, candidates=CAND, coverage=1.5)
    with pytest.raises(ParameterError, match="params must be SVIMLengthParams"):
        svim.SVIMLengthClient(svim.SVIMItemParams(epsilon=1.0, d=D))
    with pytest.raises(IncompatibleError):
        svim.SVIMPaddedServer(svim.SVIMItemParams(epsilon=1.0, d=D))
    with pytest.raises(ParameterError, match="items must be in"):
        svim.SVIMItemClient(svim.SVIMItemParams(epsilon=1.0, d=D), rng=1).perturb([[D]])
    with pytest.raises(ParameterError, match="k must be"):
        svim.SVIMPaddedServer(svim.SVIMPaddedParams(epsilon=1.0, d=D, candidates=CAND, L=1)).top(0)
    # numpy candidates become a tuple of ints (hashable, JSON-serializable).
    p = svim.SVIMLengthParams(epsilon=1.0, d=D, candidates=np.array(CAND))
    assert p.candidates == CAND and isinstance(p.candidates[0], int)


def test_phase3_olh_branch_with_dummies_is_unbiased():
    # |C| = 40 >= L e^eps (4L - 1) + 1 = 24.1 at L = 2, eps = 0.5: OLH over |C| + L values.
    d, cand = 64, tuple(range(5, 45))
    gen = np.random.default_rng(21)
    sets = [gen.choice(d, size=int(gen.integers(0, 4)), replace=False).tolist() for _ in range(40000)]
    params = svim.SVIMPaddedParams(epsilon=0.5, d=d, candidates=cand, L=2)
    assert not params.uses_grr and params.domain == 42
    server = svim.SVIMPaddedServer(params).update(svim.SVIMPaddedClient(params, rng=22).perturb(sets))
    holds = np.zeros((len(sets), len(cand)))
    for i, s in enumerate(sets):
        inter = [j for j, c in enumerate(cand) if c in s]
        holds[i, inter] = 1.0 / max(2, len(inter))
    check_unbiased(server.sampling_frequencies(), holds.mean(axis=0), olh_match_prob(holds, params.g, 0.5),
                   len(sets), olh_scale(params.g, 0.5))


def test_phase1_reports_every_user():
    params = svim.SVIMItemParams(epsilon=1.0, d=10)
    reports = svim.SVIMItemClient(params, rng=1).perturb([[], [3]])
    assert len(reports) == 2          # R3 sent one report: its presence revealed the empty set


@pytest.mark.parametrize("reference", [False, True])
def test_phase3_dummies_are_each_sampled_at_most_one_in_L(reference):
    # The configuration: |C| = 100, L = 5, eps = 1 (GRR branch). An empty set samples
    # one of the L dummies uniformly (reference: always the single dummy), so each dummy's
    # report frequency is q + (p - q)/L (reference: p for the dummy). Counts are binomial:
    # a 6-sigma band fails by chance with probability < 1e-8 per value.
    params = svim.SVIMPaddedParams(epsilon=1.0, d=1000, candidates=tuple(range(100, 200)), L=5, reference=reference)
    assert params.uses_grr
    n = 200000
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = svim.SVIMPaddedClient(params, rng=3)
    assert [w.category for w in caught] == ([ps.PrivacyWarning] if reference else [])
    z = client.perturb([[]] * n).z.astype(np.int64)
    e, m = math.exp(params.grr_epsilon), params.domain
    p, q = e / (e + m - 1), 1 / (e + m - 1)
    sampled = np.full(m, 0.0)
    sampled[100:] = 1.0 / params.dummies
    expected = q + (p - q) * sampled
    counts = np.bincount(z, minlength=m)
    assert np.all(np.abs(counts - n * expected) < 6 * np.sqrt(n * expected * (1 - expected)))
    # True privacy loss at the dummy (empty set vs. L candidates, which never sample it):
    # e^eps for L dummies, e^eps' = L (e^eps - 1) + 1 for R3's one.
    worst = (q + (p - q) * sampled[100:].max()) / q
    assert math.log(worst) == pytest.approx(params.true_epsilon, rel=1e-12)
    assert params.true_epsilon == (params.grr_epsilon if reference else 1.0)


def test_ps_olh_amplify_warns_with_its_true_epsilon():
    params = ps_olh.PSOLHParams(epsilon=1.0, d=30, pad_len=4, amplify=True)
    assert params.true_epsilon == pytest.approx(math.log(4 * math.expm1(1.0) + 1))
    with pytest.warns(ps.PrivacyWarning, match="NOT 1-LDP"):
        ps_olh.PSOLHClient(params)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ps_olh.PSOLHClient(ps_olh.PSOLHParams(epsilon=1.0, d=30, pad_len=4))
        assert ps_olh.PSOLHParams(epsilon=1.0, d=30, pad_len=4).true_epsilon == 1.0
