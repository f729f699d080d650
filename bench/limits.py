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
* OUE: ``d/8`` bytes (a row of d bits) counted column by column, no scatter;
* HRR: 5 bytes (a uint32 row, an int8 sign) and one increment into ``d`` int64 cells.

    PYTHONPATH=python python3 bench/limits.py [--n 16777216] [--budget 0.5]
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from typing import Callable, Iterator, Optional, Tuple

import numpy as np

import ldpfast
from ldpfast.protocols.frequency import grr, hadamard, unary

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402  (found through sys.path above)


def best(fn: Callable[[], object], budget: float) -> float:
    """The best time of as many calls as fit ``budget`` seconds (3 to 100)."""
    once = machine.best_time(fn, 1)
    return machine.best_time(fn, int(min(100, max(3, budget / max(once, 1e-6)))))


def scatter_rate(loops: Optional[machine.CLoops], size: int, n: int, budget: float) -> Optional[float]:
    """Increments/s of the C histogram loop over ``n`` uniform values into ``size`` counters."""
    if loops is None:
        return None
    y = np.random.default_rng(size).integers(0, size, n, dtype=np.uint64)
    counts = np.zeros(size, dtype=np.uint64)
    return n / best(lambda: loops.histogram(y, counts), budget)


def servers(n: int) -> Iterator[Tuple[str, int, Callable[[], object], float, Optional[int]]]:
    """(name, reports, one update, bytes per report, scatter table size or None) per
    server, each batch ``8 n`` bytes or more (larger than the last-level cache for the
    default n: read from memory, like the bandwidth), made only when its turn comes."""
    values = np.random.default_rng(1).integers(0, 1 << 20, n)
    for d in (10_000, 100_000):
        params = grr.GRRParams(epsilon=1.0, d=d)
        reports = grr.GRRClient(params, rng=1).perturb(values % d)
        yield f"GRR d={d}", n, partial(grr.GRRServer(params).update, reports), 8.0, d
    for d in (1024, 16384):
        rows = 64 * n // d  # 8 n bytes of rows
        oue = unary.OUEParams(epsilon=1.0, d=d)
        bits = unary.OUEClient(oue, rng=1).perturb(values[:rows] % d)
        yield f"OUE d={d}", rows, partial(unary.OUEServer(oue, threads=1).update, bits), d / 8, None
    for log_d in (16, 20):
        hrr = hadamard.HRRParams(epsilon=1.0, d=1 << log_d)
        batch = hadamard.HRRClient(hrr, rng=1).perturb(values % (1 << log_d))
        yield (f"HRR d=2^{log_d}", n, partial(hadamard.HRRServer(hrr, threads=1).update, batch), 5.0,
               1 << log_d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 24, help="reports per GRR/HRR batch")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    args = ap.parse_args()
    ldpfast.set_num_threads(1)
    loops = machine.c_loops()
    read_gbs = machine.read_bandwidth(loops)
    info = ldpfast.backend_info()
    print(f"limits: backend = {info['active']}, threads = 1, load average {os.getloadavg()[0]:.1f}")
    print(f"read bandwidth: {read_gbs:.2f} GB/s ({'C loop' if loops else 'numpy sum'})")
    print(f"{'server':>13} {'reports/s':>10} {'GB/s':>6} {'of read':>7} {'scatter/s':>10} {'of scatter':>10}")
    for name, n, update, nbytes, table in servers(args.n):
        rate = n / best(update, args.budget)
        scatter = scatter_rate(loops, table, args.n, args.budget) if table else None
        versus = f"{scatter:10.3g} {rate / scatter:10.2f}" if scatter else f"{'-':>10} {'-':>10}"
        print(f"{name:>13} {rate:10.3g} {rate * nbytes / 1e9:6.2f} {rate * nbytes / 1e9 / read_gbs:7.2f} {versus}",
              flush=True)


if __name__ == "__main__":
    main()
