"""Concurrency and interruption: several Python threads updating, merging and reading one
aggregator lose nothing and never see a partial state, and a KeyboardInterrupt (SIGINT)
during ``update`` leaves the state unchanged or with the whole batch, nothing between."""

from __future__ import annotations

import _thread
import functools
import signal
import threading
import time
from typing import Callable, List, Sequence

from .._base import Reports
from ._case import Case, CheckSkipped, batches, register, tiled

THREADS = 4


def _large_batches(case: Case) -> List[Reports]:
    """The example's reports 50 times over, in 8 batches: tens of thousands of reports each,
    so that the C++ calls of several threads (the GIL released) overlap."""
    return batches(tiled(case.reports, 50), 8)


def _run_threads(targets: Sequence[Callable[[], object]]) -> None:
    errors: List[BaseException] = []

    def guarded(fn: Callable[[], object]) -> None:
        try:
            fn()
        except BaseException as exc:  # reported in the calling thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(fn,)) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


@register("concurrency")
def threads_updating_one_aggregator_lose_nothing(case: Case) -> None:
    """4 threads, each adding 2 of 8 large batches 3 times: the state equals the sequential
    one exactly."""
    parts = _large_batches(case)
    rounds = 3
    expected = case.server()
    for _ in range(rounds):
        for part in parts:
            expected.update(part)
    shared = case.server()
    def add(own: Sequence[Reports]) -> None:
        for _ in range(rounds):
            for part in own:
                shared.update(part)

    _run_threads([functools.partial(add, parts[i::THREADS]) for i in range(THREADS)])
    assert shared.to_bytes() == expected.to_bytes(), "concurrent updates lost or duplicated reports"


@register("concurrency")
def merge_and_reads_during_updates(case: Case) -> None:
    """One thread updates, one merges another server in 3 times, two read (``to_bytes``):
    the final state is exact and every snapshot read meanwhile is a consistent state (it
    loads)."""
    parts = _large_batches(case)
    other = case.server(parts[0])
    expected = case.server(*parts)
    for _ in range(3):
        expected.merge(other)
    shared = case.server()
    done = threading.Event()
    snapshots: List[bytes] = []

    def reader() -> None:
        while not done.is_set():
            snapshots.append(shared.to_bytes())
            time.sleep(0)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for r in readers:
        r.start()
    try:
        _run_threads([lambda: [shared.update(part) for part in parts], lambda: [shared.merge(other) for _ in range(3)]])
    finally:
        done.set()
        for r in readers:
            r.join()
    assert shared.to_bytes() == expected.to_bytes()
    for blob in snapshots[::max(1, len(snapshots) // 50)]:
        case.aggregator.from_bytes(blob)


def _interrupt_main(how: str) -> None:
    if how == "signal":
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
    else:
        _thread.interrupt_main()


@register("concurrency")
def interrupted_update_is_all_or_nothing(case: Case) -> None:
    """Ctrl-C (SIGINT, or ``_thread.interrupt_main``) at 20 spread-out moments during an
    ``update`` of a few milliseconds or more: the state is the old one or the old one plus
    the whole batch. Runs on the main thread with Python's default SIGINT handler."""
    if threading.current_thread() is not threading.main_thread():
        raise CheckSkipped("SIGINT is delivered to the main thread")
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler or not hasattr(signal, "pthread_kill"):
        raise CheckSkipped("needs Python's default SIGINT handler and signal.pthread_kill")
    parts = _large_batches(case)
    before = case.server(parts[0]).to_bytes()
    batch = parts[1]
    for attempt in range(6):  # grow the batch until its update takes ~5 ms, so interrupts land inside
        agg = case.aggregator.from_bytes(before)
        start = time.perf_counter()
        agg.update(batch)
        duration = time.perf_counter() - start
        after = agg.to_bytes()
        if duration > 0.005 or attempt == 5:
            break
        batch = tiled(batch, 2)
    trials = 20
    for trial in range(trials):
        agg = case.aggregator.from_bytes(before)
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
        assert agg.to_bytes() in (before, after), f"partial state after an interrupt {delay * 1000:.1f} ms in"
