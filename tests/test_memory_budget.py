"""The memory budget: parameters whose server state or query would exceed it are refused
with ParameterError naming the size, before anything is allocated."""

import time
import tracemalloc

import numpy as np
import pytest

import ldpfast
from ldpfast.protocols.frequency import grr, hadamard, ocms, rappor_cms
from ldpfast.protocols.heavy import hadaheavy
from ldpfast.protocols.sets import privsketch
from ldpfast.errors import ParameterError


@pytest.fixture
def limit():
    """Sets a budget for one test; restores the default afterwards."""
    yield ldpfast.set_memory_limit
    ldpfast.set_memory_limit(None)


def _refused_small(make, match, most=16 << 20):
    tracemalloc.start()
    try:
        with pytest.raises(ParameterError, match=match):
            make()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < most, peak


def test_huge_servers_are_refused_before_allocating(limit):
    limit(1 << 30)
    _refused_small(lambda: grr.GRRServer(grr.GRRParams(epsilon=30.0, d=2**62)),
                   r"would need .*TiB .*bytes.*memory limit")
    _refused_small(lambda: grr.GRRServer(grr.GRRParams(epsilon=1.0, d=2**28)), r"2147483648 bytes")
    _refused_small(lambda: privsketch.PrivSketchServer(privsketch.PrivSketchParams.create(epsilon=1.0, d=2**27, K=2,
                                                                                          M=8, seed=1)),
                   "privsketch")
    _refused_small(lambda: hadamard.HRRServer(hadamard.HRRParams(epsilon=1.0, d=2**30)), "hrr")
    grr.GRRServer(grr.GRRParams(epsilon=1.0, d=2**20))  # 8 MiB: fine


def test_limit_from_setter_and_environment(limit, monkeypatch):
    monkeypatch.setenv("LDPFAST_MEMORY_LIMIT", "1000")
    assert ldpfast.get_memory_limit() == 1000
    with pytest.raises(ParameterError, match="8000 bytes"):
        grr.GRRServer(grr.GRRParams(epsilon=1.0, d=1000))
    limit(10_000)
    assert ldpfast.get_memory_limit() == 10_000
    grr.GRRServer(grr.GRRParams(epsilon=1.0, d=1000))
    monkeypatch.setenv("LDPFAST_MEMORY_LIMIT", "lots")
    limit(None)
    with pytest.raises(ParameterError, match="LDPFAST_MEMORY_LIMIT"):
        ldpfast.get_memory_limit()
    for bad in (0, -5, "x", 1.5, True):
        with pytest.raises(ParameterError):
            limit(bad)


def test_queries_that_would_exceed_the_budget_are_refused(limit):
    params = ocms.OCMSParams.optimal(epsilon=2.0, d=2**40)
    server = ocms.OCMSServer(params).update(ocms.OCMSClient(params, rng=1).perturb(np.arange(10)))
    limit(1 << 30)
    with pytest.raises(ParameterError, match="'ocms' query over all 1099511627776 values"):
        server.estimate()
    assert server.estimate([1, 2, 3]).shape == (3,)


def test_hadaheavy_search_with_a_tiny_threshold_is_refused(limit):
    """The issue's reproducer: a small tau keeps almost every prefix, so the next level's
    children would need tens of GiB; the search stops with ParameterError instead."""
    params = hadaheavy.HadaHeavyParams.create(epsilon=1.0, d=2**32, n=20_000, beta=0.05, b=8, hash_seed=1)
    server = hadaheavy.HadaHeavyServer(params).update(
        hadaheavy.HadaHeavyClient(params, rng=1).perturb(np.random.default_rng(1).integers(0, 2**32, 20_000)))
    limit(1 << 20)
    start = time.perf_counter()
    with pytest.raises(ParameterError, match="HadaHeavy search .*raise tau or set top"):
        server.heavy_hitters(delta=1e-9, tau=1e-8)
    assert time.perf_counter() - start < 30


# The cases (OCMS streaming 2^26 candidates, an OCMS query of 2^25 candidates, a
# PrivSketch update at d = 2^22, HRR update and query at d = 2^24 under a 256 MiB limit),
# scaled down with the limit: each is refused before allocating, naming the size and the
# setting, and a refused call leaves the server unchanged.

def test_a_server_streaming_many_ocms_candidates_is_refused(limit):
    params = ocms.OCMSParams.optimal(epsilon=2.0, d=2**40)
    candidates = np.arange(2**20, dtype=np.uint64)  # 8 MiB; the server would need 4x that
    limit(16 << 20)
    _refused_small(lambda: ocms.OCMSServer(params, candidates=candidates),
                   r"'ocms' server streaming 1048576 candidates")
    ocms.OCMSServer(params, candidates=candidates[:2**16])


def test_an_ocms_query_of_many_candidates_is_refused(limit, monkeypatch):
    params = ocms.OCMSParams.optimal(epsilon=2.0, d=2**40)
    server = ocms.OCMSServer(params).update(ocms.OCMSClient(params, rng=1).perturb(np.arange(1000)))
    candidates = np.arange(2**18, dtype=np.uint64)
    monkeypatch.setenv("LDPFAST_MEMORY_LIMIT", str(8 << 20))  # the environment variable path
    limit(None)  # read again
    _refused_small(lambda: server.estimate(candidates), r"'ocms' query of 262144 candidates would need .*"
                                                        r"LDPFAST_MEMORY_LIMIT")
    assert server.estimate(candidates[:1000]).shape == (1000,)


def test_a_privsketch_update_whose_decode_exceeds_the_budget_is_refused(limit):
    params = privsketch.PrivSketchParams.create(epsilon=2.0, d=2**16, K=4, M=64, seed=1)
    with pytest.warns(privsketch.PrivacyWarning):
        reports = privsketch.PrivSketchClient(params, rng=1).perturb([[1, 2], [3]] * 50)
    limit(4 << 20)  # the state (1.1 MiB) fits; its candidate index (about 10 MiB) does not
    server = privsketch.PrivSketchServer(params)
    before = server.to_bytes()
    _refused_small(lambda: server.update(reports), "bucket index of 65536 PrivSketch candidates")
    assert server.to_bytes() == before
    limit(None)
    assert server.update(reports).n == 100


def test_hrr_update_and_query_beyond_the_budget_are_refused(limit):
    params = hadamard.HRRParams(epsilon=1.0, d=2**16)
    client = hadamard.HRRClient(params, rng=1)
    server = hadamard.HRRServer(params).update(client.perturb(np.arange(10_000) % 2**16))
    before = server.to_bytes()
    limit(1 << 20)  # the state is 512 KiB: its decoded copy and a whole-domain query would pass 1 MiB
    _refused_small(server.estimate, r"an HRR query over all 65536 values \(the default\) would need 2.0 MiB .* "
                                    r"beside the 512.0 KiB the server holds")
    big = client.perturb(np.arange(2**16))  # staging its cells needs 512 KiB more
    _refused_small(lambda: server.update(big), r"adding a batch of 65536 reports")
    assert server.to_bytes() == before
    server.update(client.perturb(np.arange(100)))  # small batches still go in
    assert server.n == 10_100


def test_copying_or_counting_a_batch_larger_than_the_budget_is_refused(limit):
    params = ocms.OCMSParams.optimal(epsilon=2.0, d=2**20)
    reports = ocms.OCMSClient(params, rng=1).perturb(np.arange(2**15))  # 768 KiB of columns, copied first
    limit(512 << 10)
    _refused_small(lambda: ocms.OCMSServer(params).update(reports), r"a copy of a batch of 32768 reports")
    # GRR reads y once (no copy); a batch of under 4 reports per counter is staged at 4 bytes
    # a report: 2^15 reports need 128 KiB beside the 512 KiB state, over a 32 KiB margin
    params = grr.GRRParams(epsilon=1.0, d=2**16)
    limit((512 + 32) << 10)
    reports = grr.GRRClient(params, rng=1).perturb(np.arange(2**15))
    first = grr.GRRReports(y=reports.y[:1])
    _refused_small(lambda: grr.GRRServer(params).update(first).update(reports),
                   r"counting a batch of 32768 GRR reports")
    assert grr.GRRServer(params).update(first).update(grr.GRRReports(y=reports.y[:2**12])).n == 2**12 + 1  # 16 KiB
    # ... unless every counter is 0 (a server's first batch): a failed batch is then taken
    # back by clearing the counts, nothing is staged
    assert grr.GRRServer(params).update(reports).n == 2**15
    # a batch of many reports per counter is counted in a table of the histogram's size
    params = grr.GRRParams(epsilon=1.0, d=16)
    limit(1 << 10)
    assert grr.GRRServer(params).update(grr.GRRClient(params, rng=1).perturb(np.arange(2**17) % 16)).n == 2**17


# The issue-20/21b servers: OUE's column counts (as large as the state: one report is d
# bits), PGR's point histogram for batches of at least K/8 reports, PEM's compaction of
# the reports it keeps; each refused with the state unchanged, smaller calls still pass.

def test_bit_row_counts_beyond_the_budget_are_refused(limit):
    from ldpfast.protocols.frequency import unary

    params = unary.OUEParams(epsilon=1.0, d=2**20)
    client = unary.OUEClient(params, rng=1)
    server = unary.OUEServer(params)
    before = server.to_bytes()
    limit(12 << 20)  # the 8 MiB state fits; its 8 MiB of batch counts beside it do not
    _refused_small(lambda: server.update(client.perturb(np.array([3]))),
                   r"counting a batch of 1 bit rows into 1 x 1048576 counts")
    assert server.to_bytes() == before
    limit(None)
    assert server.update(client.perturb(np.array([3]))).n == 1


def test_pgr_histograms_and_pem_compaction_beyond_the_budget_are_refused(limit):
    from ldpfast._base import protocols

    pgr = protocols()["pgr"]
    params = pgr.params(epsilon=1.0, d=2**16, q=3)  # K = 88573 points: 692 KiB of state
    reports = pgr.client(params, rng=1).perturb(np.arange(2**14))
    server = pgr.aggregator(params)
    limit(1 << 20)
    _refused_small(lambda: server.update(reports), r"counting a batch of 16384 PGR reports into 88573 points")
    assert server.update(pgr.client(params, rng=1).perturb(np.arange(100))).n == 100  # sparse: fits
    pem = protocols()["pem"]
    params, values = pem.example()
    client, server = pem.client(params, rng=1), pem.aggregator(params)
    for _ in range(4):
        server.update(client.perturb(values))
    limit(200 << 10)  # 336 KiB of kept reports to compact: refused; the chunks stay as they were
    _refused_small(server.to_bytes, r"compacting the 12000 reports a PEM server keeps")
    limit(None)
    assert server.n == 12_000 and len(server.to_bytes()) > 12_000 * 28


def test_new_protocol_queries_beyond_the_budget_are_refused(limit):
    from ldpfast.protocols.repeated import dbitflip
    from ldpfast.protocols.frequency import unary

    params = dbitflip.DBitFlipParams(epsilon=1.0, d=2**20, sampled=1)
    server = dbitflip.DBitFlipServer(params).update(dbitflip.DBitFlipClient(params, rng=1).perturb(np.arange(100)))
    limit(24 << 20)  # 16 MiB of state; a query over its 2^20 values would take 56 MiB more
    _refused_small(server.estimate, r"a dBitFlip query over all 1048576 values \(the default\)")
    assert server.estimate([1, 2, 3]).shape == (3,)
    params = unary.OUEParams(epsilon=1.0, d=2**18)
    server = unary.OUEServer(params).update(unary.OUEClient(params, rng=1).perturb(np.arange(10)))
    limit(4 << 20)
    _refused_small(server.estimate, r"a 'oue' query over all 262144 values")
    assert server.estimate([1, 2, 3]).shape == (3,)


def test_label_candidates_are_refused_before_they_are_encoded(limit):
    """The issue's reproducer: 4 million label candidates of a HashedDomain were hashed
    (+285 MiB, +567 MiB from a numpy array) before the query's own check refused them."""
    params = ocms.OCMSParams.optimal(epsilon=3.0, d=2**64 - 60).with_domain(ldpfast.HashedDomain())
    server = ocms.OCMSServer(params).update(ocms.OCMSClient(params, rng=1).perturb(["a", "b", "a"]))
    labels = [f"candidate-{i}" for i in range(4_000_000)]
    as_array = np.array(labels)
    limit(64 << 20)
    for query in (lambda: server.estimate(labels), lambda: server.frequencies(labels),
                  lambda: server.estimate(candidates=as_array)):
        _refused_small(query, r"encoding 4000000 candidate labels would need")
    limit(None)
    assert server.estimate(labels[:3]).shape == (3,)


@pytest.mark.parametrize("n", [2291, 177_033])   # just after a resize of the table of distinct labels (measured)
def test_the_encoding_estimate_bounds_the_memory_encoding_takes(n):
    """What the budget check assumes, against what tracemalloc measures, for every domain and
    the input kinds whose conversion numpy makes (pandas and Arrow allocate outside the
    Python allocator)."""
    labels = [f"label-{i}-é" for i in range(n)]
    forms = {"list": labels, "object array": np.array(labels, dtype=object), "str array": np.array(labels),
             "bytes array": np.array([s.encode() for s in labels])}
    for domain in (ldpfast.HashedDomain(2**40), ldpfast.PrefixDomain(5), ldpfast.Domain(labels)):
        for form, values in forms.items():
            if form == "bytes array" and isinstance(domain, ldpfast.Domain):
                continue        # a str vocabulary does not take bytes
            tracemalloc.start()
            try:
                domain.encode(values)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak <= domain._encode_nbytes(values), (type(domain).__name__, form, peak / n)


# CMS-RAPPOR (issue 29: 2^25 candidates grew the server by 1,889 MiB under a 256 MiB limit):
# building, loading and querying refuse before allocating; scaled down with the limit.

def test_cms_rappor_server_counting_too_many_candidates_is_refused_before_allocating(limit):
    params = rappor_cms.CMSRAPPORParams(epsilon=2.0, d=2**40, m=64)
    candidates = np.arange(2**20)           # 8 MiB; building needs 32 bytes per candidate at its peak
    limit(16 << 20)
    _refused_small(lambda: rappor_cms.CMSRAPPORServer(params, candidates=candidates),
                   r"'cms-rappor' server counting 1048576 candidates would need 32.0 MiB",
                   most=1 << 20)
    as_list = list(range(2**20))
    _refused_small(lambda: rappor_cms.CMSRAPPORServer(params, candidates=as_list), "counting 1048576 candidates",
                   most=1 << 20)
    # within the budget: the build's measured peak stays under what was checked
    tracemalloc.start()
    try:
        server = rappor_cms.CMSRAPPORServer(params, candidates=candidates[:2**18])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 32 * 2**18, peak
    assert server._state_nbytes() >= 16 * 2**18   # the candidates count beside the sums


def test_cms_rappor_queries_and_loads_beyond_the_budget_are_refused(limit):
    params = rappor_cms.CMSRAPPORParams(epsilon=2.0, d=2**16, m=64)
    server = rappor_cms.CMSRAPPORServer(params).update(rappor_cms.CMSRAPPORClient(params,
                                                                                  rng=1).perturb(np.arange(1000)))
    blob = server.to_bytes()
    estimate = server.estimate()
    limit(2 << 20)   # the state (1 MiB: candidates and sums) fits; these calls' temporaries do not
    query = np.arange(2**16, dtype=np.uint64)
    _refused_small(lambda: server.estimate(query), r"CMS-RAPPOR query of 65536 candidates would need .* beside the",
                   most=1 << 20)
    _refused_small(lambda: server.estimate(), r"CMS-RAPPOR query over all 65536 values", most=1 << 20)
    # loading reads the stored arrays and builds an empty server (1 MiB each) before the check
    _refused_small(lambda: rappor_cms.CMSRAPPORServer.from_bytes(blob), r"loading a 'cms-rappor' server counting 65536",
                   most=5 << 19)
    limit(None)
    assert np.array_equal(server.estimate(), estimate)   # refused calls changed nothing
    assert np.array_equal(rappor_cms.CMSRAPPORServer.from_bytes(blob).estimate(), estimate)
