"""pytest-benchmark microbenchmarks of the FWHT kernel (every supported backend).

    PYTHONPATH=python python3 -m pytest bench/bench_fwht.py --benchmark-only
"""

import numpy as np
import pytest

import ldpfast
from ldpfast import _core
from ldpfast.kernels import fwht

BACKENDS = list(_core.supported_backends())


@pytest.fixture(params=BACKENDS)
def backend(request):
    previous = _core.active_backend()
    ldpfast.set_backend(request.param)
    yield request.param
    _core.set_backend(previous)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("log_n", [10, 16, 20, 24])
def test_single_row_one_thread(benchmark, backend, dtype, log_n):
    x = np.zeros(2**log_n, dtype=dtype)  # values do not change the speed (no denormals)
    benchmark(fwht, x, 1)


@pytest.mark.parametrize("log_n", [20, 24])
def test_single_row_all_threads(benchmark, backend, log_n):
    x = np.zeros(2**log_n, dtype=np.float32)
    benchmark(fwht, x, 0)


@pytest.mark.parametrize("shape", [(4096, 2**8), (256, 2**14), (16, 2**18)], ids=str)
def test_batch_all_threads(benchmark, backend, shape):
    x = np.zeros(shape, dtype=np.float64)
    benchmark(fwht, x, 0)


def test_ffht_baseline(benchmark):
    ffht = pytest.importorskip("ffht")
    x = np.zeros(2**20, dtype=np.float32)
    benchmark(ffht.fht, x)
