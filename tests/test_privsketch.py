"""PrivSketch: client encoding, decode-first collector vs a brute-force reference, API
contract (validation, merge, serialization), warnings."""

import dataclasses
import pickle
import warnings

import numpy as np
import pytest

import ldpfast as lf
from ldpfast import _core
from ldpfast.protocols.sets import multi_pcms, privsketch_ldp, ps_olh, svim
from ldpfast.protocols.sets import privsketch as ps
from ldpfast.datasets import SetData
from ldpfast.errors import DTypeError, IncompatibleError, ParameterError, ReportError


@pytest.fixture(autouse=True)
def _quiet_privacy_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ps.PrivacyWarning)
        yield


def py_hash(params, x):
    """H_k(x) with Python integers (independent of the C++ field code)."""
    p = params.field_size
    return [((a0 + a1 * int(x)) % p) % params.M for a0, a1 in zip(params.hash_a0, params.hash_a1)]


def py_sketch(params, items):
    X = np.zeros((params.K, params.M), dtype=np.uint8)
    for s in items:
        for k, h in enumerate(py_hash(params, s)):
            X[k, h] = 1
    return X


def noiseless(params):
    """The same parameters with flip threshold 0 (the sampler never flips), to check the
    encoding alone; epsilon no longer reaches that (it is capped where sampling is faithful)."""
    cls = type(params)
    sub = type("Noiseless" + cls.__name__, (cls,), {"flip_threshold": property(lambda self: 0)})
    return sub(**{f.name: getattr(params, f.name) for f in dataclasses.fields(params)})


def random_sets(gen, n, d, max_len):
    return [gen.choice(d, size=gen.integers(0, max_len + 1), replace=False) for _ in range(n)]


# -- client ----------------------------------------------------------------------------------
@pytest.mark.parametrize("K,M", [(4, 16), (3, 7)])
def test_client_order_matches_sketch(backend, K, M):
    gen = np.random.default_rng(1)
    params = noiseless(ps.PrivSketchParams.create(epsilon=2.0, d=60, K=K, M=M, seed=2))
    sets = random_sets(gen, 150, 60, 12)
    reports = ps.PrivSketchClient(params, rng=3).perturb(sets)
    for i, s in enumerate(sets):
        X = py_sketch(params, s).ravel()
        O = reports.order[i].ravel().astype(np.int64)
        assert np.array_equal(np.sort(O), np.arange(K * M))
        g0 = int((X == 0).sum())
        assert np.all(O[X == 0] < g0) and np.all(O[X == 1] >= g0)    # SPEC 4.3 corrected ranges
        cell = int(reports.k[i]) * M + int(reports.m[i])
        assert reports.bit[i] == 2 * int(X[cell]) - 1


def test_nosmp_and_pcms_clients_send_the_sketch_without_flips():
    gen = np.random.default_rng(4)
    sets = random_sets(gen, 80, 40, 6)
    nosmp = noiseless(ps.NoSmpParams.create(epsilon=2.0, d=40, K=2, M=4, seed=5))
    rep = ps.NoSmpClient(nosmp, rng=6).perturb(sets)
    pcms = noiseless(multi_pcms.MultiPCMSMeanParams.create(epsilon=2.0, d=40, K=2, M=4, seed=5))
    rep_mean = multi_pcms.MultiPCMSMeanClient(pcms, rng=6).perturb(sets)
    for i, s in enumerate(sets):
        X = py_sketch(nosmp, s)
        assert np.array_equal(rep.bits[i], 2 * X.astype(np.int8) - 1)
        assert np.array_equal(rep_mean.bits[i], 2 * X[rep_mean.row[i]].astype(np.int8) - 1)


def test_nosmp_server_takes_the_estimator_argument_of_the_sampled_server():
    """A NoSmpServer is a Server: ``estimate(estimator=...)`` names its one estimator and
    refuses the sampled server's others with a clear message."""
    params = ps.NoSmpParams.create(epsilon=8.0, d=40, K=2, M=4, seed=5)
    sets = random_sets(np.random.default_rng(4), 200, 40, 4)
    server = ps.NoSmpServer(params).update(ps.NoSmpClient(params, rng=6).perturb(sets))
    assert np.array_equal(server.estimate([1, 2], estimator="nosmp"), server.estimate([1, 2]))
    with pytest.raises(ParameterError, match="estimator must be 'nosmp'.*'r2'"):
        server.estimate([1, 2], estimator="r2")


def test_client_is_thread_and_backend_independent():
    params = ps.PrivSketchParams.create(epsilon=1.0, d=500, seed=7)
    sets = random_sets(np.random.default_rng(8), 5000, 500, 20)
    ref = None
    for backend in _core.supported_backends():
        lf.set_backend(backend)
        for threads in (1, 2, 5):
            r = ps.PrivSketchClient(params, rng=9, threads=threads).perturb(sets)
            cols = (r.k, r.m, r.bit, r.order)
            if ref is None:
                ref = cols
            assert all(np.array_equal(a, b) for a, b in zip(cols, ref))


def test_sampled_cell_and_flip_rates():
    # One user type; k, m uniform; flips with probability 1/(e^eps+1). n = 40000 draws;
    # bounds at z = 5.3 (two-sided false-failure probability 1.2e-7 each).
    params = ps.PrivSketchParams.create(epsilon=1.0, d=10, K=2, M=4, seed=10)
    n = 40000
    reports = ps.PrivSketchClient(params, rng=11).perturb([[3]] * n)
    X = py_sketch(params, [3]).ravel()
    cell = reports.k.astype(np.int64) * 4 + reports.m
    counts = np.bincount(cell, minlength=8)
    sd = np.sqrt(n * (1 / 8) * (7 / 8))
    assert np.all(np.abs(counts - n / 8) < 5.3 * sd)
    flipped = reports.bit != 2 * X[cell].astype(np.int8) - 1
    q = 1 / (np.e + 1)
    assert abs(flipped.mean() - q) < 5.3 * np.sqrt(q * (1 - q) / n)


# -- collector vs brute force ------------------------------------------------------------------
def brute_force(params, reports, candidates, sampled):
    """O(n |D| K) reference: kstar = argmin_k O[k, H_k(x)] per user and candidate."""
    pos = np.zeros(len(candidates), dtype=np.int64)
    neg = np.zeros(len(candidates), dtype=np.int64)
    hashes = [py_hash(params, x) for x in candidates]
    for i in range(len(reports)):
        O = reports.order[i]
        for j, h in enumerate(hashes):
            kstar = min(range(params.K), key=lambda k: O[k, h[k]])
            if sampled:
                if (kstar, h[kstar]) != (int(reports.k[i]), int(reports.m[i])):
                    continue
                bit = reports.bit[i]
            else:
                bit = reports.bits[i, kstar, h[kstar]]
            if bit > 0:
                pos[j] += 1
            else:
                neg[j] += 1
    return pos, neg


def random_orders(gen, n, K, M):
    """n uniformly random permutations of [0, K*M), shape (n, K, M)."""
    return np.argsort(gen.random((n, K * M)), axis=1).reshape(n, K, M).astype(np.uint16)


@pytest.mark.parametrize("K,M", [(4, 8), (3, 5)])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_decode_first_equals_brute_force(backend, K, M, threads):
    gen = np.random.default_rng(100 + K + threads)
    d, n = 40, 300
    params = ps.PrivSketchParams.create(epsilon=1.0, d=d, K=K, M=M, seed=12)
    # Arbitrary (not client-generated) valid reports: any permutation may arrive.
    reports = ps.PrivSketchReports(k=gen.integers(0, K, n), m=gen.integers(0, M, n), bit=gen.choice([-1, 1], n),
                         order=random_orders(gen, n, K, M))
    candidates = np.sort(gen.choice(d, 25, replace=False))
    for cand in (None, candidates):
        server = ps.PrivSketchServer(params, candidates=cand, threads=threads).update(reports)
        query = np.arange(d) if cand is None else cand
        pos, neg = brute_force(params, reports, query, sampled=True)
        assert np.array_equal(server._pos[query], pos) and np.array_equal(server._neg[query], neg)
    nosmp = ps.NoSmpParams(epsilon=66.5, **{f: getattr(params, f) for f in ("d", "K", "M", "hash_a0", "hash_a1")})
    full = ps.NoSmpReports(bits=gen.choice(np.array([-1, 1], dtype=np.int8), (n, K, M)), order=reports.order)
    server = ps.NoSmpServer(nosmp, candidates=candidates, threads=threads).update(full)
    pos, neg = brute_force(nosmp, full, candidates, sampled=False)
    assert np.array_equal(server._pos[candidates], pos) and np.array_equal(server._neg[candidates], neg)


def test_estimators_from_counts():
    params = ps.PrivSketchParams.create(epsilon=2.0, d=5, K=2, M=4, seed=13)
    server = ps.PrivSketchServer(params)
    server._set_state({"n": np.array([10]), "bits": np.array([0, 10]),
                       "pos": np.array([3, 0, 1, 0, 2]), "neg": np.array([1, 0, 0, 2, 2]),
                       "tracked": np.ones(5, dtype=np.uint8)})
    c = (np.exp(2) + 1) / np.expm1(2)
    pos, neg = np.array([3, 0, 1, 0, 2.]), np.array([1, 0, 0, 2, 2.])
    np.testing.assert_allclose(server.estimate(), 8 / 10 * (c * (pos - neg) + pos + neg) / 2, rtol=1e-14)
    np.testing.assert_allclose(server.estimate(estimator="centred"), 0.5 + 8 * c / 20 * (pos - neg), rtol=1e-14)
    np.testing.assert_allclose(server.estimate([4, 0]), server.estimate()[[4, 0]])


# -- contract ----------------------------------------------------------------------------------
def make_batch(seed, n=400, d=50):
    params = ps.PrivSketchParams.create(epsilon=2.0, d=d, K=4, M=16, seed=14)
    sets = random_sets(np.random.default_rng(seed), n, d, 8)
    return params, ps.PrivSketchClient(params, rng=seed).perturb(sets)


def test_merge_and_serialization_round_trip():
    params, a = make_batch(1)
    _, b = make_batch(2)
    both = ps.PrivSketchReports(k=np.concatenate([a.k, b.k]), m=np.concatenate([a.m, b.m]),
                      bit=np.concatenate([a.bit, b.bit]), order=np.concatenate([a.order, b.order]))
    cand = np.arange(0, 50, 3)
    whole = ps.PrivSketchServer(params, candidates=cand).update(both)
    left = ps.PrivSketchServer(params, candidates=cand).update(a)
    right = ps.PrivSketchServer(params, candidates=cand).update(b)
    assert left.merge(right) == whole
    restored = ps.PrivSketchServer.from_bytes(whole.to_bytes())
    assert restored == whole and np.array_equal(restored.candidates, cand)
    np.testing.assert_array_equal(restored.estimate(), whole.estimate())
    assert pickle.loads(pickle.dumps(whole)) == whole
    restored.update(a)       # the restored server keeps decoding with its candidate set
    assert restored.n == whole.n + len(a)
    with pytest.raises(IncompatibleError):
        ps.PrivSketchServer(params).merge(right)
    with pytest.raises(IncompatibleError):
        ps.PrivSketchServer(params).merge(ps.PrivSketchServer(ps.PrivSketchParams.create(epsilon=2.0, d=50, K=4, M=16,
                                                                                         seed=15)))


@pytest.mark.parametrize("kind", ["safe", "mean", "min", "nosmp", "psolh"])
def test_other_protocols_merge_and_round_trip(kind):
    gen = np.random.default_rng(16)
    sets = random_sets(gen, 300, 30, 6)
    if kind == "psolh":
        params = ps_olh.PSOLHParams(epsilon=2.0, d=30, pad_len=4)
        client_cls, server_cls = ps_olh.PSOLHClient, ps_olh.PSOLHServer
    else:
        pcls, client_cls, server_cls = {
            "safe": (privsketch_ldp.SafeParams, privsketch_ldp.SafeClient, privsketch_ldp.SafeServer),
            "mean": (multi_pcms.MultiPCMSMeanParams, multi_pcms.MultiPCMSMeanClient, multi_pcms.MultiPCMSMeanServer),
            "min": (multi_pcms.MultiPCMSMinParams, multi_pcms.MultiPCMSMinClient, multi_pcms.MultiPCMSMinServer),
            "nosmp": (ps.NoSmpParams, ps.NoSmpClient, ps.NoSmpServer)}[kind]
        params = pcls.create(epsilon=2.0, d=30, K=3, M=8, seed=17)
    client = client_cls(params, rng=18)
    a, b = client.perturb(sets[:150]), client.perturb(sets[150:])
    left, right = server_cls(params).update(a), server_cls(params).update(b)
    whole = server_cls(params).update(a).update(b)
    assert left.merge(right) == whole
    assert server_cls.from_bytes(whole.to_bytes()) == whole
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(whole)).estimate(), whole.estimate())
    assert whole.n == 300 and whole.estimate().shape == (30,)


def test_rejected_batch_leaves_state_unchanged():
    params, good = make_batch(3)
    server = ps.PrivSketchServer(params).update(good)
    before = server.to_bytes()
    bad_order = good.order.copy()
    bad_order[7, 0, 0] = bad_order[7, 0, 1]          # duplicate rank in user 7
    cases = [
        (ps.PrivSketchReports(k=good.k, m=good.m, bit=good.bit, order=bad_order), "report 7"),
        (ps.PrivSketchReports(k=np.where(np.arange(len(good)) == 5, 4, good.k), m=good.m, bit=good.bit,
                              order=good.order), "k"),
        (ps.PrivSketchReports(k=good.k, m=good.m + 16, bit=good.bit, order=good.order), "m"),
        (ps.PrivSketchReports(k=good.k, m=good.m, bit=np.where(np.arange(len(good)) == 2, 0, good.bit),
                              order=good.order),
         "bit"),
        (ps.PrivSketchReports(k=good.k, m=good.m, bit=good.bit, order=np.zeros((len(good), 4, 8), np.uint16)), "order"),
        (privsketch_ldp.SafeReports(k=good.k, m=good.m, bit=good.bit), "Reports"),
    ]
    for reports, word in cases:
        with pytest.raises(ReportError, match=word):
            server.update(reports)
        assert server.to_bytes() == before
    big = good.order.astype(np.int64)
    big[0, 0, 0] = 70000
    with pytest.raises(ReportError, match="order"):
        ps.PrivSketchReports(k=good.k, m=good.m, bit=good.bit, order=big)
    with pytest.raises(ReportError, match="equal lengths"):
        ps.PrivSketchReports(k=good.k[:-1], m=good.m, bit=good.bit, order=good.order)
    with pytest.raises(DTypeError):
        ps.PrivSketchReports(k=good.k.astype(float), m=good.m, bit=good.bit, order=good.order)


@pytest.mark.parametrize("kwargs,word", [
    (dict(epsilon=0.0), "epsilon"), (dict(epsilon=-1.0), "epsilon"), (dict(epsilon=float("nan")), "epsilon"),
    (dict(epsilon=float("inf")), "epsilon"), (dict(epsilon=1000.0), "epsilon"), (dict(epsilon=True), "epsilon"),
    (dict(epsilon="1"), "epsilon"), (dict(d=0), "d"), (dict(d=2**64), "d"), (dict(K=0), "K"),
    (dict(M=1), "M"), (dict(K=8, M=16384), "K\\*M"), (dict(d=2.5), "d"),
])
def test_params_validation(kwargs, word):
    base = dict(epsilon=1.0, d=100, K=4, M=128)
    base.update(kwargs)
    with pytest.raises(ParameterError, match=word):
        ps.PrivSketchParams.create(**base)


def test_params_hash_validation_and_serialization():
    params = ps.PrivSketchParams.create(epsilon=1.0, d=100, seed=1)
    assert ps.PrivSketchParams.from_dict(params.to_dict()) == params
    assert params.fingerprint == ps.PrivSketchParams.create(epsilon=1.0, d=100, seed=1).fingerprint
    with pytest.raises(ParameterError, match="hash_a0"):
        ps.PrivSketchParams(epsilon=1.0, d=100, K=2, M=8, hash_a0=(1,), hash_a1=(1, 2))
    with pytest.raises(ParameterError, match="hash_a1"):
        ps.PrivSketchParams(epsilon=1.0, d=100, K=1, M=8, hash_a0=(1,), hash_a1=(ps.PRIME,))
    with pytest.raises(ParameterError, match="prime"):
        ps.PrivSketchParams(epsilon=1.0, d=10, K=1, M=8, hash_a0=(1,), hash_a1=(1,), field_size=15)
    for x in range(0, 100, 7):
        assert params.hash(np.array([x]))[0].tolist() == py_hash(params, x)


def test_client_and_server_input_validation():
    params = ps.PrivSketchParams.create(epsilon=1.0, d=10, seed=1)
    client = ps.PrivSketchClient(params, rng=1)
    with pytest.raises(ParameterError, match="items"):
        client.perturb([[1, 10]])
    with pytest.raises(ParameterError, match="items"):
        client.perturb([[-1]])
    with pytest.raises(ParameterError, match="params"):
        ps.PrivSketchClient(privsketch_ldp.SafeParams.create(epsilon=1.0, d=10))
    with pytest.raises(ParameterError, match="candidates"):
        ps.PrivSketchServer(params, candidates=[3, 10])
    server = ps.PrivSketchServer(params, candidates=[1, 2]).update(client.perturb([[1]]))
    with pytest.raises(ParameterError, match="tracked"):
        server.estimate([3])
    with pytest.raises(ParameterError, match="estimator"):
        server.estimate(estimator="foo")
    with pytest.raises(ReportError, match="n = 0"):
        ps.PrivSketchServer(params).estimate()
    empty = client.perturb(SetData.from_lists([[], []], d=10))
    assert len(empty) == 2 and ps.PrivSketchServer(params).update(empty).n == 2


def test_privacy_warning_on_non_ldp_clients_only():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ps.PrivSketchClient(ps.PrivSketchParams.create(epsilon=1.0, d=10))
        ps.NoSmpClient(ps.NoSmpParams.create(epsilon=1.0, d=10))
        privsketch_ldp.SafeClient(privsketch_ldp.SafeParams.create(epsilon=1.0, d=10))
        multi_pcms.MultiPCMSMeanClient(multi_pcms.MultiPCMSMeanParams.create(epsilon=1.0, d=10))
    privacy = [w for w in caught if issubclass(w.category, ps.PrivacyWarning)]
    assert len(privacy) == 4          # building the two non-LDP parameters, then their clients
    assert all("NOT eps-LDP" in str(w.message) and "ordering matrix" in str(w.message) for w in privacy)


def test_privacy_warning_is_shown_once_per_protocol_and_reason():
    """ldpfast's PrivacyWarning filter (installed at import) lets each protocol's reason
    through once per process, whatever eps the message names (Python's default would repeat
    it from every call site); reset_privacy_warnings lets it through again, "always" shows
    every one and an explicit "ignore" silences it. In a fresh interpreter, so that pytest's
    own filters play no part (tests/conftest.py installs the same filter in each test)."""
    import subprocess
    import sys

    script = """
import warnings
from ldpfast.errors import reset_privacy_warnings
from ldpfast.protocols.sets import privsketch as ps
def shown(eps=1.0):
    with warnings.catch_warnings(record=True) as caught:
        for _ in range(3):
            ps.PrivSketchClient(ps.PrivSketchParams.create(epsilon=eps, d=10, seed=1))
    return sum(issubclass(w.category, ps.PrivacyWarning) for w in caught)
first, again, other_eps = shown(), shown(), shown(2.5)
reset_privacy_warnings()
after_reset = shown()
warnings.simplefilter("always", ps.PrivacyWarning)
always = shown()
warnings.simplefilter("ignore", ps.PrivacyWarning)
print(first, again, other_eps, after_reset, always, shown())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    # parameters and client say the same: once; then nothing until reset; six under "always"
    assert out.split() == ["1", "0", "0", "1", "6", "0"]


def test_protocols_registered():
    from ldpfast._base import protocols
    reg = protocols()
    for pid in ("privsketch", "privsketch-nosmp", "privsketch-ldp", "multi-pcms-mean", "multi-pcms-min", "ps-olh"):
        assert pid in reg


def test_bloom_diagnostics_estimate_the_fill():
    # Every user holds the same 20 items: the sketch fill is exact; no flips.
    params = noiseless(ps.PrivSketchParams.create(epsilon=20.0, d=100, K=4, M=32, seed=31))
    items = list(range(20))
    fill = py_sketch(params, items).mean()
    server = ps.PrivSketchServer(params).update(ps.PrivSketchClient(params, rng=32).perturb([items] * 20000))
    diag = server.diagnostics()
    # Each report's bit is X at a uniform cell: Binomial(20000, fill)/20000, z = 5.3.
    assert abs(diag["mean_fill"] - fill) < 5.3 * np.sqrt(fill * (1 - fill) / 20000)
    assert diag["false_positive_rate"] == pytest.approx(diag["mean_fill"] ** 4)
    nosmp = ps.NoSmpParams(epsilon=66.5, **{f: getattr(params, f) for f in ("d", "K", "M", "hash_a0", "hash_a1")})
    full = ps.NoSmpServer(nosmp).update(ps.NoSmpClient(nosmp, rng=33).perturb([items] * 50))
    # noSmp flips each of the 50 * 128 cells with eps/KM = 0.52: the debiased mean has
    # variance V/6400 with V = e^x/(e^x - 1)^2 (binary RR); z = 5.3.
    x = 66.5 / 128
    sd = np.sqrt(np.exp(x) / np.expm1(x) ** 2 / 6400)
    assert abs(full.diagnostics()["mean_fill"] - fill) < 5.3 * sd


def test_padding_length_is_the_nearest_rank_percentile():
    data = SetData.from_lists([list(range(k)) for k in range(1, 11)])     # sizes 1..10
    assert ps_olh.padding_length(data) == 9
    assert ps_olh.padding_length(data, 100) == 10
    assert ps_olh.padding_length(ps.as_sets(data, data.d)) == 9
    assert ps_olh.olh_g(3.0) == 21 and ps_olh.olh_g(8.0) == 2982                   # SPEC 6


def test_svim_finds_the_heavy_items():
    # Seeded functional check: with eps = 8 and clear heavy hitters, SVIM's top-10 is the
    # true top-10 (the NCR of a correct ranking is 1).
    from ldpfast import metrics
    from ldpfast.datasets import zipf_sets
    data = zipf_sets(20000, 500, length=5, seed=41)
    result = svim.svim(data, 8.0, k=10, rng=42)
    assert result.top.size == 10 and result.candidates.size == 20 and result.L >= 1
    assert set(result.top.tolist()) == set(metrics.top_k(data.frequencies(), 10).tolist())


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(K=st.integers(1, 5), M=st.integers(2, 9), n=st.integers(0, 40), d=st.integers(1, 30),
       seed=st.integers(0, 2**32 - 1), threads=st.integers(1, 4))
def test_decode_first_property(K, M, n, d, seed, threads):
    gen = np.random.default_rng(seed)
    params = ps.PrivSketchParams.create(epsilon=1.0, d=d, K=K, M=M, seed=seed)
    reports = ps.PrivSketchReports(k=gen.integers(0, K, n), m=gen.integers(0, M, n), bit=gen.choice([-1, 1], n),
                         order=random_orders(gen, n, K, M))
    server = ps.PrivSketchServer(params, threads=threads).update(reports)
    pos, neg = brute_force(params, reports, np.arange(d), sampled=True)
    assert np.array_equal(server._pos, pos) and np.array_equal(server._neg, neg)
