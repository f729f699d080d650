"""pytest-benchmark microbenchmarks of the Hadamard family.

    PYTHONPATH=python python3 -m pytest bench/bench_hadamard.py --benchmark-only
"""

import numpy as np
import pytest

from ldpfast import _core
from ldpfast.protocols.heavy import hadaheavy as HH
from ldpfast.protocols.frequency import hadamard as H
from ldpfast.protocols.frequency import hadaoracle as O

N = 2_000_000
D = 2**20


@pytest.fixture(scope="module")
def values():
    return np.random.default_rng(1).integers(0, D, N, dtype=np.uint64)


@pytest.fixture(scope="module")
def hrr_reports(values):
    return H.HRRClient(H.HRRParams(epsilon=1.0, d=D), rng=1).perturb(values)


def test_hrr_client_perturb(benchmark, values):
    client = H.HRRClient(H.HRRParams(epsilon=1.0, d=D), rng=1)
    benchmark(client.perturb, values[:200_000])


def test_hrr_server_update(benchmark, hrr_reports):
    params = H.HRRParams(epsilon=1.0, d=D)
    benchmark(lambda: H.HRRServer(params).update(hrr_reports))


def test_hrr_accumulate_kernel(benchmark, hrr_reports):
    base = np.zeros(1, np.uint64)

    def run():
        z = np.zeros(D, np.int64)
        _core.hadamard_accumulate(None, hrr_reports.rows, hrr_reports.bits, base, z, 0)

    benchmark(run)


def test_numpy_bincount_baseline(benchmark, hrr_reports):
    benchmark(np.bincount, hrr_reports.rows, weights=hrr_reports.bits, minlength=D)


def test_hrr_decode_whole_domain(benchmark, hrr_reports):
    server = H.HRRServer(H.HRRParams(epsilon=1.0, d=D)).update(hrr_reports)

    def run():
        server._decoded = None
        return server.estimate()

    benchmark(run)


def test_hadaoracle_update_and_query(benchmark, values):
    params = O.HadaOracleParams.create(epsilon=1.0, d=2**32, n=N, beta=0.01, hash_seed=1)
    reports = O.HadaOracleClient(params, rng=2).perturb(values)
    candidates = np.arange(10_000, dtype=np.uint64)

    def run():
        return O.HadaOracleServer(params).update(reports).estimate(candidates, counts=True)

    benchmark(run)


def test_hadaheavy_search(benchmark, values):
    params = HH.HadaHeavyParams.create(epsilon=1.0, d=2**32, n=N, beta=0.05, hash_seed=1)
    server = HH.HadaHeavyServer(params).update(HH.HadaHeavyClient(params, rng=3).perturb(values))
    benchmark(server.heavy_hitters)


def test_cmshe_query_100(benchmark, values):
    params = H.CMSHEParams(epsilon=1.0, d=D, hash_seed=1)
    server = H.CMSHEServer(params).update(H.CMSHEClient(params, rng=4).perturb(values[:200_000]))
    server.decoded()
    benchmark(server.estimate, np.arange(100))
