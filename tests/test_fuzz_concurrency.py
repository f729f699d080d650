"""Concurrency and interruption cases the issues reported, by name (every protocol's
concurrent updates, merges and reads, and Ctrl-C during ``update``, are checked by
ldpfast.testing: tests/test_conformance.py): large HRR batches from 4 threads, and a
KeyboardInterrupt raised inside each kind of C++ kernel call."""

import numpy as np
import pytest

from ldpfast._base import protocols
from ldpfast.testing._case import Case, Options, batches
from ldpfast.testing._concurrency import _run_threads
from test_conformance import SERVER_OPTIONS

THREADS = 4


def test_threads_on_large_hrr_batches_lose_no_counts():
    """The issue's reproducer: HRR batches large enough that the C++ accumulations (GIL
    released) of 4 threads overlap; every count must arrive."""
    from ldpfast.protocols.frequency import hadamard

    params = hadamard.HRRParams(epsilon=1.0, d=2**12)
    reports = hadamard.HRRClient(params, rng=3).perturb(np.random.default_rng(3).integers(0, 2**12, 400_000))
    shared = hadamard.HRRServer(params)
    rounds = 5
    _run_threads([lambda: [shared.update(reports) for _ in range(rounds)]] * THREADS)
    expected = hadamard.HRRServer(params).update(reports)
    assert shared.n == THREADS * rounds * len(reports)
    np.testing.assert_array_equal(shared.z, THREADS * rounds * expected.z)


class _RaisingCore:
    """The C++ module, except that ``name`` does its work on the arrays it is given and
    then raises KeyboardInterrupt, as a kernel that checks for signals between chunks
    does when Ctrl-C arrives mid-call. Kernels that add into the state in place take back
    what they added before raising (tests/test_interrupt.py sends them real SIGINTs), so
    here they raise without changing anything."""

    IN_PLACE = {"hadamard_update"}

    def __init__(self, core, name):
        self._core, self._name = core, name

    def __getattr__(self, attr):
        real = getattr(self._core, attr)
        if attr != self._name:
            return real

        def interrupted(*args, **kwargs):
            if self._name not in self.IN_PLACE:
                real(*args, **kwargs)
            raise KeyboardInterrupt

        return interrupted


@pytest.mark.parametrize("module, kernel, case_id", [
    ("protocols._hadamard_layout", "hadamard_update", "hrr"),
    ("protocols._hadamard_layout", "hadamard_update", "hadaoracle"),
    ("protocols.frequency.rhr", "hadamard_update", "rhr"),
    ("protocols.frequency._hashed_reports", "ocms_count_list", "ocms-candidates"),
    ("protocols.sets.privsketch", "privsketch_decode_cell", "privsketch"),
    ("protocols.sets._svim", "ocms_count_range", "svim-items")])
def test_interrupt_raised_inside_a_kernel_leaves_the_state_unchanged(monkeypatch, module, kernel, case_id):
    import importlib

    pid, make_server = SERVER_OPTIONS.get(case_id, (case_id, None))
    case = Case(protocols()[pid], protocols()[pid].example, make_server, Options())
    params, make = case.params, case.make_server
    first, second = batches(case.reports, 2)
    agg = make(params).update(first)
    before = agg.to_bytes()
    mod = importlib.import_module(f"ldpfast.{module}")
    monkeypatch.setattr(mod, "_core", _RaisingCore(mod._core, kernel))
    with pytest.raises(KeyboardInterrupt):
        agg.update(second)
    monkeypatch.undo()
    assert agg.to_bytes() == before
    assert agg.update(second).to_bytes() == make(params).update(first).update(second).to_bytes()
