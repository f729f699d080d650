"""pytest-benchmark microbenchmarks for PrivSketch (run: PYTHONPATH=python pytest bench/bench_privsketch.py).

Baseline named in each group: the brute-force numpy collector (O(n d K)) on the same
reports, so the group table shows the decode-first speed-up measured in the same run.
"""

import warnings

import numpy as np
import pytest

from ldpfast.protocols.sets import privsketch as ps
from ldpfast.datasets import load_sets

N_USERS = 20_000


@pytest.fixture(scope="module")
def setup():
    data = load_sets("kosarak-prefix")
    sets = (data.offsets[:N_USERS + 1], data.items[:data.offsets[N_USERS]])
    params = ps.PrivSketchParams.create(epsilon=3.0, d=data.d, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ps.PrivacyWarning)
        client = ps.PrivSketchClient(params, rng=2)
    return params, client, sets, client.perturb(sets)


@pytest.mark.benchmark(group="privsketch-client")
def test_client_perturb(benchmark, setup):
    params, client, sets, _ = setup
    benchmark(client.perturb, sets)


def subsample(reports, n=500):
    return ps.PrivSketchReports(k=reports.k[:n], m=reports.m[:n], bit=reports.bit[:n], order=reports.order[:n])


@pytest.mark.benchmark(group="privsketch-collector-20k-users")
def test_decode_first_cpp_20k(benchmark, setup):
    params, _, _, reports = setup
    benchmark(lambda: ps.PrivSketchServer(params).update(reports))


@pytest.mark.benchmark(group="privsketch-collector-500-users")
def test_decode_first_cpp(benchmark, setup):
    params, _, _, reports = setup
    sub = subsample(reports)
    benchmark(lambda: ps.PrivSketchServer(params).update(sub))


@pytest.mark.benchmark(group="privsketch-collector-500-users")
def test_brute_force_numpy_baseline(benchmark, setup):
    params, _, _, reports = setup
    sub = subsample(reports)
    cells = params.cells(np.arange(params.d)).astype(np.int64)

    def brute():
        flat = sub.order.reshape(len(sub), -1)
        sampled = sub.k.astype(np.int64) * params.M + sub.m
        counts = np.zeros((2, params.d), dtype=np.int64)
        for b in range(0, len(sub), 100):
            ranks = flat[b:b + 100][:, cells]
            kstar = ranks.argmin(axis=2)
            hit = cells[np.arange(params.d), kstar] == sampled[b:b + 100, None]
            up = sub.bit[b:b + 100, None] > 0
            counts[0] += (hit & up).sum(axis=0)
            counts[1] += (hit & ~up).sum(axis=0)
        return counts

    server = ps.PrivSketchServer(params).update(sub)
    assert np.array_equal(brute(), np.stack([server._pos, server._neg]))
    benchmark.pedantic(brute, rounds=3, iterations=1)
