"""pytest-benchmark microbenchmarks of the OCMS+RR kernels, per backend.

    PYTHONPATH=python python3 -m pytest bench/bench_kernels_ocms.py --benchmark-group-by=func

Throughput: hash / perturb / randomized_response per element; the decodes per
(report, candidate) pair (divide n * d by the mean time).
"""

import numpy as np
import pytest

import ldpfast
from ldpfast import _core

PRIME = 2**64 - 59
KEY = bytes(range(32))
FIELDS = {"prime": _core.Field.prime(PRIME), "gf64": _core.Field.binary(64, 0x1B)}


@pytest.fixture(params=list(_core.supported_backends()))
def backend(request):
    previous = _core.active_backend()
    ldpfast.set_backend(request.param)
    yield request.param
    ldpfast.set_backend(previous)


def reports(field, n, d, m, seed=1):
    values = np.random.default_rng(seed).integers(0, d, n).astype(np.uint64)
    return _core.ocms_perturb(field, KEY, values, m, 2**62)


@pytest.mark.parametrize("field_name", list(FIELDS))
def test_hash(benchmark, backend, field_name):
    n = 1_000_000
    field = FIELDS[field_name]
    _, a0, a1 = reports(field, n, 10**6, 5)
    x = np.arange(n, dtype=np.uint64)
    benchmark(_core.ocms_hash, field, a0, a1, x, 5, 1)


@pytest.mark.parametrize("field_name", list(FIELDS))
def test_perturb(benchmark, backend, field_name):
    x = np.arange(1_000_000, dtype=np.uint64)
    benchmark(_core.ocms_perturb, FIELDS[field_name], KEY, x, 5, 2**62, 1)


def test_randomized_response(benchmark, backend):
    y = np.arange(1_000_000, dtype=np.uint64) % np.uint64(21)
    benchmark(_core.randomized_response, KEY, y, 21, 2**62, 1)


@pytest.mark.parametrize("m", [5, 149, 2**63 + 1])
def test_count_range_full_dictionary(benchmark, backend, m):
    """n = 10^4 reports x d = 10^5 candidates (10^9 pairs), one thread."""
    n, d = 10_000, 100_000
    field = FIELDS["prime"]
    z, a0, a1 = reports(field, n, d, m)
    benchmark.pedantic(lambda: _core.ocms_count_range(field, z, a0, a1, m, 0, np.zeros(d, np.uint64), 1),
                       rounds=3, iterations=1)


def test_count_range_gf64(benchmark, backend):
    n, d = 1_000, 10_000
    field = FIELDS["gf64"]
    z, a0, a1 = reports(field, n, d, 5)
    benchmark(lambda: _core.ocms_count_range(field, z, a0, a1, 5, 0, np.zeros(d, np.uint64), 1))


def test_count_list(benchmark, backend):
    """n = 10^4 reports x 10^4 scattered candidates (10^8 pairs), one thread."""
    n, k = 10_000, 10_000
    field = FIELDS["prime"]
    z, a0, a1 = reports(field, n, 10**9, 5)
    candidates = np.random.default_rng(2).integers(0, 10**9, k).astype(np.uint64)
    benchmark.pedantic(lambda: _core.ocms_count_list(field, z, a0, a1, 5, candidates, np.zeros(k, np.uint64), 1),
                       rounds=3, iterations=1)
