"""pytest-benchmark microbenchmarks for PrivSketch (run: PYTHONPATH=python pytest bench/bench_privsketch.py).

Baseline named in each group: the brute-force numpy collector (O(n d K)) on the same
reports, so the group table shows the decode-first speed-up measured in the same run.
"""

import warnings

import numpy as np
import pytest

from ldpfast import privsketch as ps
from ldpfast.datasets import load_sets

N_USERS = 20_000


@pytest.fixture(scope="module")
def setup():
    data = load_sets("kosarak-prefix")
    sets = (data.offsets[:N_USERS + 1], data.items[:data.offsets[N_USERS]])
    params = ps.Params.create(epsilon=3.0, d=data.d, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ps.PrivacyWarning)
        client = ps.Client(params, rng=2)
    return params, client, sets, client.perturb(sets)


@pytest.mark.benchmark(group="privsketch-client")
def test_client_perturb(benchmark, setup):
    params, client, sets, _ = setup
    benchmark(client.perturb, sets)


@pytest.mark.benchmark(group="privsketch-collector")
def test_decode_first_cpp(benchmark, setup):
    params, _, _, reports = setup
    benchmark(lambda: ps.Server(params).update(reports))


@pytest.mark.benchmark(group="privsketch-collector")
def test_brute_force_numpy_baseline(benchmark, setup):
    params, _, _, reports = setup
    sub = ps.Reports(k=reports.k[:500], m=reports.m[:500], bit=reports.bit[:500], order=reports.order[:500])
    cells = params.cells(np.arange(params.d)).astype(np.int64)

    def brute():
        flat = sub.order.reshape(len(sub), -1)
        ranks = flat[:, cells]
        return ranks.argmin(axis=2)

    benchmark.extra_info["users"] = len(sub)
    benchmark.pedantic(brute, rounds=3, iterations=1)
