"""Every server's throughput as a fraction of the machine's own limits, measured in the same run.

Limits (one thread; bench/machine.py):

* read: sequential read bandwidth, a C loop summing 256 MiB (numpy's sum without a C
  compiler), GB/s;
* scatter: increments/s of the plain C loop ``counts[y[i]]++`` over uniform ``y``, for
  a table of the server's size (L1/L2-resident tables are faster than large ones).

A server cannot ingest reports faster than it reads their bytes: column ``of read`` is
its throughput over ``read / bytes per report``. Servers that make one random increment
per report are also compared with the C scatter loop over a uint64 table of their size
(column ``of scatter``; above 1 where the server counts smarter, e.g. HRR's narrow
tables). Servers, with threads=1:

* GRR: 8 bytes (a uint64 symbol) and one increment into ``d`` uint64 counters;
* OUE: ``d/8`` bytes (a row of d bits) counted column by column, no scatter; its bare kernel
  (``_core.bitvec_column_counts``) is timed too (column ``of kernel``: update time over
  kernel time is its inverse);
* HRR: 5 bytes (a uint32 row, an int8 sign) and one increment into ``d`` int64 cells.

With ``--clock cpu`` every time is the thread's CPU time rather than wall time (on a shared,
loaded machine the time slices other processes take are then left out; their cache and
memory traffic still count). The load average is printed with the table.

    PYTHONPATH=python python3 bench/limits.py [--n 16777216] [--budget 0.5] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial
from typing import Callable, Iterator, Optional, Tuple

import numpy as np

import ldpfast
from ldpfast import _core
from ldpfast.protocols.frequency import grr, hadamard, unary

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402  (found through sys.path above)


CLOCK: Callable[[], float] = time.perf_counter


def best(fn: Callable[[], object], budget: float) -> float:
    """The best time of as many calls as fit ``budget`` seconds (3 to 100)."""
    once = machine.best_time(fn, 1, CLOCK)
    return machine.best_time(fn, int(min(100, max(3, budget / max(once, 1e-6)))), CLOCK)


def scatter_rate(loops: Optional[machine.CLoops], size: int, n: int, budget: float) -> Optional[float]:
    """Increments/s of the C histogram loop over ``n`` uniform values into ``size`` counters."""
    if loops is None:
        return None
    y = np.random.default_rng(size).integers(0, size, n, dtype=np.uint64)
    counts = np.zeros(size, dtype=np.uint64)
    return n / best(lambda: loops.histogram(y, counts), budget)


Server = Tuple[str, int, Callable[[], object], float, Optional[int], Optional[Callable[[], object]]]


def servers(n: int) -> Iterator[Server]:
    """(name, reports, one update, bytes per report, scatter table size or None, the bare
    kernel or None) per server, each batch ``8 n`` bytes or more (larger than the
    last-level cache for the default n: read from memory, like the bandwidth), made only
    when its turn comes."""
    values = np.random.default_rng(1).integers(0, 1 << 20, n)
    for d in (10_000, 100_000):
        params = grr.GRRParams(epsilon=1.0, d=d)
        reports = grr.GRRClient(params, rng=1).perturb(values % d)
        yield f"GRR d={d}", n, partial(grr.GRRServer(params).update, reports), 8.0, d, None
    for d in (10_000, 100_000):
        rows = 64 * n // d  # 8 n bytes of rows
        oue = unary.OUEParams(epsilon=1.0, d=d)
        bits = unary.OUEClient(oue, rng=1).perturb(values[:rows] % d)
        kernel = partial(_core.bitvec_column_counts, bits.bits, d, None, 1, 1)
        yield f"OUE d={d}", rows, partial(unary.OUEServer(oue, threads=1).update, bits), d / 8, None, kernel
    for log_d in (16, 20):
        hrr = hadamard.HRRParams(epsilon=1.0, d=1 << log_d)
        batch = hadamard.HRRClient(hrr, rng=1).perturb(values % (1 << log_d))
        yield (f"HRR d=2^{log_d}", n, partial(hadamard.HRRServer(hrr, threads=1).update, batch), 5.0,
               1 << log_d, None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 24, help="reports per GRR/HRR batch")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time calls by wall time or by the thread's CPU time")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.thread_time if args.clock == "cpu" else time.perf_counter
    ldpfast.set_num_threads(1)
    loops = machine.c_loops()
    read_gbs = machine.read_bandwidth(loops, clock=CLOCK)
    info = ldpfast.backend_info()
    print(f"limits: backend = {info['active']}, threads = 1, clock = {args.clock}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"read bandwidth: {read_gbs:.2f} GB/s ({'C loop' if loops else 'numpy sum'})")
    print(f"{'server':>13} {'reports/s':>10} {'GB/s':>6} {'of read':>7} {'scatter/s':>10} {'of scatter':>10} "
          f"{'of kernel':>9}")
    for name, n, update, nbytes, table, kernel in servers(args.n):
        seconds = best(update, args.budget)
        rate = n / seconds
        scatter = scatter_rate(loops, table, args.n, args.budget) if table else None
        versus = f"{scatter:10.3g} {rate / scatter:10.2f}" if scatter else f"{'-':>10} {'-':>10}"
        of_kernel = f"{best(kernel, args.budget) / seconds:9.2f}" if kernel else f"{'-':>9}"
        print(f"{name:>13} {rate:10.3g} {rate * nbytes / 1e9:6.2f} {rate * nbytes / 1e9 / read_gbs:7.2f} {versus} "
              f"{of_kernel}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
