"""Long queries: the progress line on stderr (only on a terminal or when asked, never inside
simulations), the pieces adding up to the same counts, and OCMS's fast_query parameters
(a power-of-two m over GF(2^l), so whole-dictionary queries use the affine decode)."""

import io

import numpy as np
import pytest

import ldpfast
from ldpfast import _core, _progress
from ldpfast.errors import ParameterError
from ldpfast.protocols.frequency import ocms, olh
from ldpfast.theory import ocms as theory


class _Stderr:
    """What the progress line wrote to stderr (pytest's capture)."""

    def __init__(self, capsys):
        self.capsys = capsys

    def getvalue(self):
        return self.capsys.readouterr().err


@pytest.fixture
def progress_everywhere(monkeypatch, capsys):
    """Every query counts as long; its progress is read from the captured stderr."""
    monkeypatch.setattr(_progress, "MIN_STEPS", 0)
    yield _Stderr(capsys)
    ldpfast.set_progress(None)


def _server(params, n=3000, seed=1):
    values = np.random.default_rng(seed).integers(0, params.d, n)
    return ocms.OCMSServer(params).update(ocms.OCMSClient(params, rng=seed).perturb(values))


@pytest.mark.parametrize("fast", [False, True])
def test_pieces_with_progress_give_the_same_counts(progress_everywhere, fast):
    params = ocms.OCMSParams.optimal(epsilon=3.0, d=200_000, mode="l", fast_query=fast)
    server = _server(params)
    ldpfast.set_progress(False)
    whole = server.match_counts()
    assert progress_everywhere.getvalue() == ""
    ldpfast.set_progress(True)
    np.testing.assert_array_equal(server.match_counts(), whole)
    shown = progress_everywhere.getvalue()
    assert "query of 200,000 candidates over 3,000 reports: 100%" in shown and shown.endswith("\r")


def test_progress_follows_the_terminal_and_the_environment(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    ldpfast.set_progress(None)
    monkeypatch.delenv("LDPFAST_PROGRESS", raising=False)
    monkeypatch.setattr(_progress.sys, "stderr", io.StringIO())
    assert not _progress.get_progress()
    monkeypatch.setattr(_progress.sys, "stderr", Terminal())
    assert _progress.get_progress()
    monkeypatch.setenv("LDPFAST_PROGRESS", "0")
    assert not _progress.get_progress()
    ldpfast.set_progress(True)
    assert _progress.get_progress()
    with _progress.suppressed():
        assert not _progress.get_progress()
    ldpfast.set_progress(None)
    with pytest.raises(ParameterError, match="enabled must be True, False or None"):
        ldpfast.set_progress("yes")


def test_simulations_draw_no_query_progress(progress_everywhere):
    from ldpfast import experiments

    ldpfast.set_progress(True)
    data = ldpfast.datasets.load_dataset("gaussian", n=500)
    experiments.simulate(["ocms-l", "olh"], data, [2.0], runs=1)
    assert progress_everywhere.getvalue() == ""


def test_olh_queries_show_progress_too(progress_everywhere):
    params = olh.OLHParams(epsilon=2.0, d=5000)
    server = olh.OLHServer(params).update(olh.OLHClient(params, rng=3).perturb(np.arange(2000) % 5000))
    ldpfast.set_progress(True)
    server.estimate()
    assert "query of 5,000 candidates over 2,000 reports" in progress_everywhere.getvalue()


@pytest.mark.parametrize("epsilon,mode", [(1.0, "mse"), (3.0, "l"), (4.0, "l"), (6.0, "mse")])
def test_fast_query_picks_the_better_power_of_two(epsilon, mode):
    d = 100_000
    fast = ocms.OCMSParams.optimal(epsilon, d, mode=mode, fast_query=True)
    m = fast.m
    assert m & (m - 1) == 0 and fast.field_kind == "binary" and fast.field_size == 2**17
    real = theory.ocms_optimal_m(epsilon, mode, d)
    assert m // 2 <= real <= 2 * m

    def loss(size):
        if mode == "l":
            return theory.ocms_l2(epsilon, d, 1, size)
        return max(theory.ocms_variance(epsilon, size, 1, 0.0), theory.ocms_variance(epsilon, size, 1, 1.0))
    other = m * 2 if real > m else m // 2
    assert loss(m) <= loss(other)
    assert _core.ocms_decode_method(fast.field, m, d) == "affine"


def test_fast_query_counts_equal_the_scan():
    params = ocms.OCMSParams.optimal(epsilon=4.0, d=50_000, mode="l", fast_query=True)
    server = _server(params)
    z, a0, a1 = server._columns()
    scanned = np.zeros(params.d, dtype=np.uint64)
    _core.ocms_count_range(params.field, z, a0, a1, params.m, 0, scanned, method="scan")
    np.testing.assert_array_equal(server.match_counts(), scanned)
