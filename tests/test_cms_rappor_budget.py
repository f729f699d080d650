"""The memory budget on the CMS-RAPPOR server (issue 29: 2^25 candidates grew it by
1,889 MiB under a 256 MiB limit): building, loading and querying refuse, before
allocating, what would take the server over the budget. The issue's case is scaled down
with the limit (2^20 candidates under 16 MiB)."""

import tracemalloc

import numpy as np
import pytest

import ldpfast
from ldpfast.errors import ParameterError
from ldpfast.protocols import rappor_cms


@pytest.fixture
def limit():
    yield ldpfast.set_memory_limit
    ldpfast.set_memory_limit(None)


def _refused_small(make, match, most=1 << 20):
    tracemalloc.start()
    try:
        with pytest.raises(ParameterError, match=match):
            make()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < most, peak


def test_a_server_counting_too_many_candidates_is_refused_before_allocating(limit):
    params = rappor_cms.Params(epsilon=2.0, d=2**40, m=64)
    candidates = np.arange(2**20)           # 8 MiB; building needs 32 bytes per candidate at its peak
    limit(16 << 20)
    _refused_small(lambda: rappor_cms.Server(params, candidates=candidates),
                   r"'cms-rappor' server counting 1048576 candidates would need 32.0 MiB")
    as_list = list(range(2**20))
    _refused_small(lambda: rappor_cms.Server(params, candidates=as_list), "counting 1048576 candidates")
    # within the budget: the build's measured peak stays under what was checked
    tracemalloc.start()
    try:
        server = rappor_cms.Server(params, candidates=candidates[:2**18])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 32 * 2**18, peak
    assert server._state_nbytes() >= 16 * 2**18   # the candidates count beside the sums


def test_queries_and_loads_beyond_the_budget_are_refused(limit):
    params = rappor_cms.Params(epsilon=2.0, d=2**16, m=64)
    server = rappor_cms.Server(params).update(rappor_cms.Client(params, rng=1).perturb(np.arange(1000)))
    blob = server.to_bytes()
    estimate = server.estimate()
    limit(2 << 20)   # the state (1 MiB: candidates and sums) fits; these calls' temporaries do not
    query = np.arange(2**16, dtype=np.uint64)
    _refused_small(lambda: server.estimate(query), r"CMS-RAPPOR query of 65536 candidates would need .* beside the")
    _refused_small(lambda: server.estimate(), r"CMS-RAPPOR query over all 65536 values")
    # loading reads the stored arrays and builds an empty server (1 MiB each) before the check
    _refused_small(lambda: rappor_cms.Server.from_bytes(blob), r"loading a 'cms-rappor' server counting 65536",
                   most=5 << 19)
    limit(None)
    assert np.array_equal(server.estimate(), estimate)   # refused calls changed nothing
    assert np.array_equal(rappor_cms.Server.from_bytes(blob).estimate(), estimate)
