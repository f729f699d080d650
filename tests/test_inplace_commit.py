"""In-place commits, for every registered protocol: ``update`` and ``merge`` write into the
aggregator's state in place (time and memory proportional to the batch), all or nothing.

* A KeyboardInterrupt raised at any line of the commit (``Delta.commit`` and the chunked
  merge add) leaves the state as it was or with the whole batch: injected with a trace
  function at the k-th line event, for every k until a run completes.
* Arrays handed to callers (estimates, counts, decoded vectors) never share memory with
  the state: a later update does not change them.
* A one-report update of a large server allocates about the batch, not the state.
"""

import sys
import tracemalloc

import numpy as np
import pytest

from ldpfast import errors
from _examples import case_params, example
from ldpfast.testing._case import batches, tiled
from test_contract import _estimate
from ldpfast.protocols.frequency import grr, hadamard, hashtogram, rhr
from ldpfast._base import protocols
from ldpfast._delta import Delta, sparse_counts
from test_conformance import SUBJECTS

CASES = case_params()
_COMMIT_CODE = {Delta.commit.__code__, Delta._add_dense.__code__}


class _InterruptAt:
    """A trace function that raises KeyboardInterrupt at the k-th line executed inside the
    commit code (Python unsets a trace function that raises, so it fires once)."""

    def __init__(self, k):
        self.k, self.seen, self.fired = k, 0, False

    def __call__(self, frame, event, arg):
        if frame.f_code not in _COMMIT_CODE:
            return None
        if event == "line":
            if self.seen == self.k:
                self.fired = True
                raise KeyboardInterrupt
            self.seen += 1
        return self


def _interrupted_at_every_line(change, fresh):
    """Runs ``change(server)`` on ``fresh()`` servers with an interrupt at line k = 0, 1, ...
    until one run is not interrupted; returns the set of outcomes (bytes after each run)."""
    outcomes = []
    for k in range(10_000):
        server = fresh()
        trace = _InterruptAt(k)
        sys.settrace(trace)
        try:
            change(server)
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        outcomes.append(server.to_bytes())
        if not trace.fired:
            return outcomes
    raise AssertionError("the commit never finished")


@pytest.mark.parametrize("case_id", CASES)
def test_an_interrupt_at_any_line_of_the_commit_leaves_before_or_after(case_id, monkeypatch):
    proto, params, reports, make = example(case_id)
    first, second = batches(reports, 2)
    before = make(params).update(first).to_bytes()
    after = make(params).update(first).update(second).to_bytes()
    outcomes = _interrupted_at_every_line(lambda s: s.update(second), lambda: make(params).update(first))
    assert outcomes[-1] == after
    assert all(out in (before, after) for out in outcomes)
    # merges add whole arrays chunk by chunk: three chunks for the largest array
    other = make(params).update(second)
    largest = max([v.size for v in other._committed().values() if isinstance(v, np.ndarray)], default=1)
    monkeypatch.setattr(Delta, "_CHUNK", largest // 3 + 1)
    outcomes = _interrupted_at_every_line(lambda s: s.merge(other), lambda: make(params).update(first))
    assert outcomes[-1] == after
    assert all(out in (before, after) for out in outcomes)


@pytest.mark.parametrize("case_id", [p for p in CASES if protocols()[SUBJECTS[p.values[0]][0]].builtin])
def test_every_builtin_server_commits_in_place(case_id):
    """``_ingest`` and ``_merged`` return a Delta (or None: the kernel committed in place),
    never a whole new state, which would cost time and memory in proportion to the state."""
    proto, params, reports, make = example(case_id)
    server, other = make(params), make(params).update(reports)
    batch, _, aligned = server._accepted(reports)
    with server._lock:
        server._own(batch, aligned)
        ingested = server._ingest(batch)
        merged = server._merged(other._committed())
    assert ingested is None or isinstance(ingested, Delta), type(ingested)
    assert isinstance(merged, Delta), type(merged)


def _arrays_of(server, proto):
    """Every array a caller can get from the server without arguments."""
    out = {"estimate": np.asarray(_estimate(server)), "frequencies": np.asarray(server.frequencies().values)}
    for name in dir(type(server)):
        if name.startswith("_") or not isinstance(getattr(type(server), name, None), property):
            continue
        value = getattr(server, name)
        if isinstance(value, np.ndarray):
            out[name] = value
    if hasattr(server, "decoded"):
        out["decoded"] = server.decoded()
    return out


@pytest.mark.parametrize("case_id", CASES)
def test_arrays_handed_out_do_not_change_with_later_updates(case_id):
    proto, params, reports, make = example(case_id)
    first, second = batches(reports, 2)
    server = make(params).update(first)
    handed = _arrays_of(server, proto)
    kept = {name: array.copy() for name, array in handed.items()}
    server.update(second)
    for name, array in handed.items():
        np.testing.assert_array_equal(array, kept[name], err_msg=name)


def _allocated(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("make", [
    lambda: (grr.GRRServer(grr.GRRParams(epsilon=1.0, d=2**22)), grr.GRRClient),
    lambda: (hadamard.HRRServer(hadamard.HRRParams(epsilon=1.0, d=2**22)), hadamard.HRRClient),
    lambda: (rhr.RHRServer(rhr.RHRParams(epsilon=1.0, d=2**22)), rhr.RHRClient),
    lambda: (hashtogram.HashtogramServer(hashtogram.HashtogramParams.create(epsilon=1.0, d=2**30, n=2**22, T=2**19,
                                                                            hash_seed=1)),
             hashtogram.HashtogramClient),
], ids=["grr", "hrr", "rhr", "hashtogram"])
def test_a_one_report_update_allocates_about_the_batch(make):
    """The state is 32 MiB or more; a one-report update (batch copy, checks, sparse commit)
    must stay under 64 KiB (tracemalloc sees numpy's allocations)."""
    server, client = make()
    assert server._state_nbytes() >= 32 << 20
    one = client(server.params, rng=1).perturb(np.array([3]))
    server.update(one)  # first call: caches, imports
    assert _allocated(lambda: server.update(one)) < 64 << 10
    assert server.n == 2


def test_sparse_counts_agrees_with_bincount_on_both_paths():
    rng = np.random.default_rng(1)
    for n, size in ((50, 10_000), (50_000, 1000), (0, 10)):  # sorted and histogram paths
        positions = rng.integers(0, size, n)
        weights = rng.choice(np.array([-1, 1], np.int8), n)
        for w in (None, weights):
            index, sums = sparse_counts(positions, size, w)
            dense = np.zeros(size, np.int64)
            dense[index] = sums
            expected = np.bincount(positions, w, minlength=size).astype(np.int64)
            np.testing.assert_array_equal(dense, expected)
            assert np.all(np.diff(index) > 0)


def test_a_sum_that_would_wrap_is_refused_before_anything_is_written():
    server = grr.GRRServer(grr.GRRParams(epsilon=1.0, d=4))
    server._set_state({"counts": np.array([2**64 - 1, 0, 0, 0], np.uint64)})
    before = server.to_bytes()
    with pytest.raises(errors.IncompatibleError, match="adding the batch would overflow"):
        server.update(grr.GRRReports(y=np.array([1, 0], np.uint64)))
    assert server.to_bytes() == before


def test_reports_with_many_values_commit_in_place():
    """tiled batches (thousands of reports) through the same in-place path."""
    proto, params, reports, make = example("hrr")
    big = tiled(reports, 20)
    server = make(params).update(big)
    assert server.n == len(big)


def test_a_second_interrupt_during_the_rollback_of_a_merge_still_restores_it(monkeypatch):
    """A merge that overflows in its last chunk is taken back out chunk by chunk; a
    KeyboardInterrupt just after any of those subtractions (before the rollback records
    it) restarts the rollback, which must still end exactly at the state before."""
    params = grr.GRRParams(epsilon=1.0, d=40)
    mine = grr.GRRServer(params)
    counts = np.arange(40, dtype=np.uint64) * 7
    counts[-1] = 2**64 - 5  # the last chunk overflows
    mine._set_state({"counts": counts})
    theirs = grr.GRRServer(params)
    theirs._set_state({"counts": np.full(40, 9, np.uint64)})
    before = mine.to_bytes()
    monkeypatch.setattr(Delta, "_CHUNK", 4)
    real = np.subtract
    for k in range(1, 12):
        calls = [0]

        def interrupted_once(*args, k=k, calls=calls, **kwargs):
            out = real(*args, **kwargs)
            calls[0] += 1
            if calls[0] == k:
                raise KeyboardInterrupt
            return out

        monkeypatch.setattr(np, "subtract", interrupted_once)
        with pytest.raises(errors.IncompatibleError, match="merging would overflow"):
            mine.merge(theirs)
        monkeypatch.setattr(np, "subtract", real)
        assert mine.to_bytes() == before, k


def test_plain_columns_length_takes_only_exact_contiguous_aligned_columns_of_one_length():
    """update's one-call column check (``_core.plain_columns_length``): any column it does not
    take returns -1, and the Python check then names what differs."""
    from ldpfast import _core

    u32, i8 = np.dtype(np.uint32), np.dtype(np.int8)
    names, dtypes, ndims = ("rows", "bits"), (u32, i8), (1, 1)
    good = {"rows": np.arange(6, dtype=np.uint32), "bits": np.ones(6, np.int8)}
    assert _core.plain_columns_length(good, names, dtypes, ndims) == 6
    unaligned = np.zeros(25, np.uint8)[1:].view(np.uint32)
    for name, column in [("rows", np.arange(6, dtype=np.int64)), ("rows", np.arange(12, dtype=np.uint32)[::2]),
                         ("rows", unaligned[:6]), ("bits", np.ones(5, np.int8)), ("bits", np.ones((6, 1), np.int8)),
                         ("bits", np.array(1, np.int8)), ("bits", [1] * 6)]:
        assert _core.plain_columns_length({**good, name: column}, names, dtypes, ndims) == -1, (name, column)
    assert _core.plain_columns_length({"rows": good["rows"]}, names, dtypes, ndims) == -1
    reports = hadamard.HRRReports(rows=good["rows"], bits=good["bits"])
    reports.bits = np.ones(5, np.int8)
    with pytest.raises(errors.ReportError, match="equal lengths"):
        hadamard.HRRServer(hadamard.HRRParams(epsilon=1.0, d=8)).update(reports)
