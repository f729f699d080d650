"""Concurrency and interruption, for every registered protocol: several Python threads
updating, merging and reading one aggregator lose nothing and never see a partial state,
and a KeyboardInterrupt during ``update`` leaves the state either unchanged or with the
whole batch (the state is committed in one assignment, after the C++ call returns or
raises)."""

import _thread
import signal
import threading
import time

import numpy as np
import pytest

from _fuzz_cases import case_params, batches, example, tiled

CASES = case_params()
THREADS = 4


@pytest.fixture(scope="module", params=CASES)
def conc_case(request):
    proto, params, reports, make = example(request.param)
    # batches of tens of thousands of reports, so that C++ calls (GIL released) overlap
    return proto, params, make, batches(tiled(reports, 50), 8)


def _run_threads(targets):
    errors = []

    def guarded(fn):
        try:
            fn()
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(fn,)) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_threads_updating_one_aggregator_lose_nothing(conc_case):
    """4 threads, each adding 2 of the 8 batches 3 times: the final state equals the
    sequential one exactly (same bytes)."""
    proto, params, make, parts = conc_case
    rounds = 3
    expected = make(params)
    for _ in range(rounds):
        for part in parts:
            expected.update(part)
    shared = make(params)
    mine = [parts[i::THREADS] for i in range(THREADS)]
    _run_threads([lambda own=own: [shared.update(p) for _ in range(rounds) for p in own] for own in mine])
    assert shared.to_bytes() == expected.to_bytes()


def test_merge_and_reads_during_updates(conc_case):
    """One thread updates, one merges another aggregator in 3 times, two read (estimate-like
    reads through to_bytes): the final state is exact, and every snapshot read meanwhile
    is a consistent state (it loads: n agrees with the counts)."""
    proto, params, make, parts = conc_case
    other = make(params).update(parts[0])
    expected = make(params)
    for part in parts:
        expected.update(part)
    for _ in range(3):
        expected.merge(other)
    shared = make(params)
    done = threading.Event()
    snapshots = []

    def updater():
        for part in parts:
            shared.update(part)

    def merger():
        for _ in range(3):
            shared.merge(other)

    def reader():
        while not done.is_set():
            snapshots.append(shared.to_bytes())
            time.sleep(0)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for r in readers:
        r.start()
    try:
        _run_threads([updater, merger])
    finally:
        done.set()
        for r in readers:
            r.join()
    assert shared.to_bytes() == expected.to_bytes()
    for blob in snapshots[::max(1, len(snapshots) // 50)]:
        proto.aggregator.from_bytes(blob)


def _interrupt_main(how):
    if how == "signal":
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    else:
        _thread.interrupt_main()


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="SIGINT is delivered to the main thread")
def test_interrupted_update_is_all_or_nothing(conc_case):
    """Ctrl-C (SIGINT, or interrupt_main) at spread-out moments during ``update``: the
    state is the old one or the old one plus the whole batch, never anything between."""
    proto, params, make, parts = conc_case
    before = make(params).update(parts[0]).to_bytes()
    batch = parts[1]
    for attempt in range(6):  # a batch whose update takes ~5 ms or more, so interrupts land inside
        agg = proto.aggregator.from_bytes(before)
        start = time.perf_counter()
        agg.update(batch)
        duration = time.perf_counter() - start
        after = agg.to_bytes()
        if duration > 0.005 or attempt == 5:
            break
        batch = tiled(batch, 2)
    outcomes = {"unchanged": 0, "complete": 0}
    trials = 20
    for trial in range(trials):
        agg = proto.aggregator.from_bytes(before)
        delay = duration * trial / trials
        timer = threading.Timer(delay, _interrupt_main, args=("signal" if trial % 2 else "interrupt_main",))
        try:
            timer.start()
            agg.update(batch)
            timer.join()
            for _ in range(10_000):  # the pending interrupt is raised here at the latest
                pass
        except KeyboardInterrupt:
            pass
        timer.join()
        state = agg.to_bytes()
        assert state in (before, after), f"partial state after an interrupt at {delay:.4f} s"
        outcomes["unchanged" if state == before else "complete"] += 1
    assert sum(outcomes.values()) == trials


def test_threads_on_large_hrr_batches_lose_no_counts():
    """The issue's reproducer: HRR batches large enough that the C++ accumulations (GIL
    released) of 4 threads overlap; every count must arrive."""
    from ldpfast.protocols import hadamard

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
    does when Ctrl-C arrives mid-call."""

    def __init__(self, core, name):
        self._core, self._name = core, name

    def __getattr__(self, attr):
        real = getattr(self._core, attr)
        if attr != self._name:
            return real

        def interrupted(*args, **kwargs):
            real(*args, **kwargs)
            raise KeyboardInterrupt

        return interrupted


@pytest.mark.parametrize("module, kernel, case_id", [
    ("protocols._hadamard_layout", "hadamard_update", "hrr"),
    ("protocols._hadamard_layout", "hadamard_update", "hadaoracle"),
    ("protocols.rhr", "hadamard_update", "rhr"), ("protocols._hashed_reports", "ocms_count_list", "ocms-candidates"),
    ("protocols.privsketch", "privsketch_decode_cell", "privsketch"),
    ("protocols._svim", "ocms_count_range", "svim-items")])
def test_interrupt_raised_inside_a_kernel_leaves_the_state_unchanged(monkeypatch, module, kernel, case_id):
    import importlib

    proto, params, reports, make = example(case_id)
    first, second = batches(reports, 2)
    agg = make(params).update(first)
    before = agg.to_bytes()
    mod = importlib.import_module(f"ldpfast.{module}")
    monkeypatch.setattr(mod, "_core", _RaisingCore(mod._core, kernel))
    with pytest.raises(KeyboardInterrupt):
        agg.update(second)
    monkeypatch.undo()
    assert agg.to_bytes() == before
    assert agg.update(second).to_bytes() == make(params).update(first).update(second).to_bytes()
