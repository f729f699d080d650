"""Shared fixtures: every kernel test runs once per backend this CPU supports."""

import numpy as np
import pytest

import ldpfast
from ldpfast import _core

SUPPORTED_BACKENDS = list(_core.supported_backends())


@pytest.fixture(params=SUPPORTED_BACKENDS)
def backend(request):
    """Run the test with the kernels of one ISA forced; restores the previous one."""
    previous = _core.active_backend()
    ldpfast.set_backend(request.param)
    try:
        yield request.param
    finally:
        _core.set_backend(previous)


@pytest.fixture
def rng():
    return np.random.default_rng(20261121)
