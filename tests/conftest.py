"""Shared fixtures: every kernel test runs once per backend this CPU supports."""

import os
import re

import numpy as np
import pytest
from hypothesis import settings

import ldpfast
from ldpfast import _core

# Property tests explore a fixed, seeded sequence of examples so a CI run is reproducible;
# HYPOTHESIS_PROFILE=explore draws fresh examples on every run (for local bug hunting).
settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

SUPPORTED_BACKENDS = list(_core.supported_backends())


@pytest.fixture(autouse=True)
def _privacy_warnings_once():
    """ldpfast's PrivacyWarning filters (each protocol and reason shown once per process),
    which pytest's per-test filter list would drop, appended behind the test's own filters."""
    ldpfast.errors._install_privacy_filters(append=True)


def pytest_collectstart(collector):
    """The same filters while test modules are collected (their parameter lists build
    parameters too)."""
    ldpfast.errors._install_privacy_filters(append=True)


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


# -- the fast subset: `pytest --smoke tests` runs only what tests/smoke.txt lists ----------------
SMOKE_LIST = os.path.join(os.path.dirname(__file__), "smoke.txt")


def smoke_patterns():
    """tests/smoke.txt as (included, excluded) regular expressions over pytest node ids: ``*``
    is any text, a line without ``::`` takes a whole file or folder, ``!`` excludes."""
    with open(SMOKE_LIST, encoding="utf-8") as fh:
        lines = [line.strip() for line in fh if line.strip() and not line.lstrip().startswith("#")]
    patterns = {True: [], False: []}
    for line in lines:
        body = line.lstrip("!")
        regex = ".*".join(re.escape(part) for part in body.split("*")) + ("" if "::" in body else "(::.*|/.*)?")
        patterns[not line.startswith("!")].append(re.compile(regex))
    return patterns[True], patterns[False]


def pytest_addoption(parser):
    parser.addoption("--smoke", action="store_true", help="run only the fast subset listed in tests/smoke.txt")


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--smoke"):
        return
    included, excluded = smoke_patterns()
    selected = [any(p.fullmatch(item.nodeid) for p in included) and not any(p.fullmatch(item.nodeid) for p in excluded)
                for item in items]
    config.hook.pytest_deselected(items=[item for item, keep in zip(items, selected) if not keep])
    items[:] = [item for item, keep in zip(items, selected) if keep]
