"""The memory budget: parameters whose server state or query would exceed it are refused
with ParameterError naming the size, before anything is allocated."""

import time
import tracemalloc

import numpy as np
import pytest

import ldpfast
from ldpfast.protocols import grr, hadaheavy, hadamard, ocms, privsketch
from ldpfast.errors import ParameterError


@pytest.fixture
def limit():
    """Sets a budget for one test; restores the default afterwards."""
    yield ldpfast.set_memory_limit
    ldpfast.set_memory_limit(None)


def _refused_small(make, match):
    tracemalloc.start()
    try:
        with pytest.raises(ParameterError, match=match):
            make()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_huge_servers_are_refused_before_allocating(limit):
    limit(1 << 30)
    _refused_small(lambda: grr.Server(grr.Params(epsilon=30.0, d=2**62)), r"would need .*TiB .*bytes.*memory limit")
    _refused_small(lambda: grr.Server(grr.Params(epsilon=1.0, d=2**28)), r"2147483648 bytes")
    _refused_small(lambda: privsketch.Server(privsketch.Params.create(epsilon=1.0, d=2**27, K=2, M=8, seed=1)),
                   "privsketch")
    _refused_small(lambda: hadamard.HRRServer(hadamard.HRRParams(epsilon=1.0, d=2**30)), "hrr")
    grr.Server(grr.Params(epsilon=1.0, d=2**20))  # 8 MiB: fine


def test_limit_from_setter_and_environment(limit, monkeypatch):
    monkeypatch.setenv("LDPFAST_MEMORY_LIMIT", "1000")
    assert ldpfast.get_memory_limit() == 1000
    with pytest.raises(ParameterError, match="8000 bytes"):
        grr.Server(grr.Params(epsilon=1.0, d=1000))
    limit(10_000)
    assert ldpfast.get_memory_limit() == 10_000
    grr.Server(grr.Params(epsilon=1.0, d=1000))
    monkeypatch.setenv("LDPFAST_MEMORY_LIMIT", "lots")
    limit(None)
    with pytest.raises(ParameterError, match="LDPFAST_MEMORY_LIMIT"):
        ldpfast.get_memory_limit()
    for bad in (0, -5, "x", 1.5, True):
        with pytest.raises(ParameterError):
            limit(bad)


def test_queries_that_would_exceed_the_budget_are_refused(limit):
    params = ocms.Params.optimal(epsilon=2.0, d=2**40)
    server = ocms.Server(params).update(ocms.Client(params, rng=1).perturb(np.arange(10)))
    limit(1 << 30)
    with pytest.raises(ParameterError, match="whole-dictionary OCMS query"):
        server.estimate()
    assert server.estimate([1, 2, 3]).shape == (3,)


def test_hadaheavy_search_with_a_tiny_threshold_is_refused(limit):
    """The issue's reproducer: a small tau keeps almost every prefix, so the next level's
    children would need tens of GiB; the search stops with ParameterError instead."""
    params = hadaheavy.Params.create(epsilon=1.0, d=2**32, n=20_000, beta=0.05, b=8, hash_seed=1)
    server = hadaheavy.Server(params).update(
        hadaheavy.Client(params, rng=1).perturb(np.random.default_rng(1).integers(0, 2**32, 20_000)))
    limit(1 << 20)
    start = time.perf_counter()
    with pytest.raises(ParameterError, match="HadaHeavy search .*raise tau or set top"):
        server.heavy_hitters(delta=1e-9, tau=1e-8)
    assert time.perf_counter() - start < 30
