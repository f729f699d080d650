"""pytest-benchmark microbenchmarks of the OCMS+RR protocol layer (Python API on top of the
C++ kernels): client perturbation of 10^6 values and a server answering 10^5 candidates
from 10^4 reports (10^9 hash evaluations), in both server modes.

Run:  PYTHONPATH=python python3 -m pytest bench/bench_ocms_protocol.py --benchmark-only
"""

import numpy as np
import pytest

from ldpfast.protocols.frequency import ocms

D = 100_000


@pytest.fixture(scope="module")
def params():
    return ocms.OCMSParams.optimal(epsilon=2.0, d=D, mode="mse")


@pytest.fixture(scope="module")
def reports(params):
    values = np.random.default_rng(0).integers(0, D, 10_000)
    return ocms.OCMSClient(params, rng=1).perturb(values)


@pytest.mark.parametrize("a_range", ["full", "nonzero"])
def test_client_perturb_1e6(benchmark, params, a_range):
    p = ocms.OCMSParams(params.epsilon, params.d, params.m, params.field_size, a_range=a_range)
    client = ocms.OCMSClient(p, rng=2)
    values = np.random.default_rng(3).integers(0, D, 1_000_000).astype(np.uint64)
    out = benchmark(client.perturb, values)
    assert len(out) == 1_000_000


def test_server_estimate_1e4_reports_whole_dictionary(benchmark, params, reports):
    server = ocms.OCMSServer(params).update(reports)
    est = benchmark.pedantic(server.estimate, rounds=3, iterations=1)  # candidates = range(D)
    assert est.shape == (D,)


def test_server_estimate_1e4_reports_candidate_list(benchmark, params, reports):
    server = ocms.OCMSServer(params).update(reports)
    candidates = np.random.default_rng(4).permutation(D).astype(np.uint64)  # not a range
    est = benchmark.pedantic(server.estimate, args=(candidates,), rounds=3, iterations=1)
    assert est.shape == (D,)


def test_streaming_server_update_1e4_reports(benchmark, params, reports):
    candidates = np.arange(D, dtype=np.uint64)

    def ingest():
        return ocms.OCMSServer(params, candidates=candidates).update(reports)

    server = benchmark.pedantic(ingest, rounds=3, iterations=1)
    assert server.n == len(reports)
