"""GRR server against numpy and a plain C histogram, in the same run (issue 33's targets).

Per batch size n and dictionary size d, on one batch of GRR reports (epsilon = 1):

* end to end: ``Server(params).update(reports).estimate()`` against ``np.bincount`` plus
  the debias ``(C/n - q)/(p - q)`` (both allocate their histogram); target: ldpfast at
  least 2x faster (column ``np/ldp``);
* counting: ``update`` into an existing server against the scalar C loop
  ``counts[y[i]]++`` into an existing array (bench/machine.py's ``c_loops``, no checks);
  target: ldpfast within 1.5x (column ``ldp/C``).

Each cell is the best of repeated runs (other processes add time, never remove it), with
``--threads`` kernel threads (default 1: numpy and the C loop are single-threaded).

    PYTHONPATH=python python3 bench/grr_server.py [--n 100000,1000000] [--d 10000,100000] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Dict, Optional

import numpy as np

import ldpfast
from ldpfast.protocols.frequency import grr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402  (found through sys.path above)


def numpy_estimate(y: np.ndarray, params: grr.GRRParams) -> np.ndarray:
    counts = np.bincount(y, minlength=params.d)
    p, q = params.keep_probability, params.other_probability
    return (counts / y.size - q) / (p - q)


def best(fn: Callable[[], object], budget: float) -> float:
    """The best time of as many calls as fit ``budget`` seconds (5 to 200)."""
    once = machine.best_time(fn, 1)
    return machine.best_time(fn, int(min(200, max(5, budget / max(once, 1e-6)))))


def measure(n: int, d: int, budget: float, loops: Optional[machine.CLoops]) -> Dict[str, float]:
    """The seconds of each contender for one batch of n reports over d symbols."""
    params = grr.GRRParams(epsilon=1.0, d=d)
    reports = grr.GRRClient(params, rng=1).perturb(np.random.default_rng(n + d).integers(0, d, n))
    y = reports.y
    assert np.allclose(numpy_estimate(y, params), grr.GRRServer(params).update(reports).estimate())
    server = grr.GRRServer(params)
    out = {"numpy": best(lambda: numpy_estimate(y, params), budget),
           "ldpfast": best(lambda: grr.GRRServer(params).update(reports).estimate(), budget),
           "update": best(lambda: server.update(reports), budget)}
    if loops is not None:
        counts = np.zeros(d, dtype=np.uint64)
        out["c"] = best(lambda: loops.histogram(y, counts), budget)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="100000,1000000")
    ap.add_argument("--d", default="10000,100000")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per cell")
    args = ap.parse_args()
    ldpfast.set_num_threads(args.threads)
    loops = machine.c_loops()
    info = ldpfast.backend_info()
    print(f"GRR server: backend = {info['active']}, threads = {info['threads']}, ldpfast from "
          f"{os.path.dirname(ldpfast.__file__)}; times in ms (best of repeated runs)")
    print(f"{'n':>8} {'d':>7} | {'numpy':>8} {'ldpfast':>8} {'np/ldp':>6} | {'C hist':>8} {'update':>8} "
          f"{'ldp/C':>6} | {'reports/s':>9}")
    for n in map(int, args.n.split(",")):
        for d in map(int, args.d.split(",")):
            t = measure(n, d, args.budget / 4, loops)
            c = f"{t['c'] * 1e3:8.3f}" if "c" in t else f"{'-':>8}"
            ratio = f"{t['update'] / t['c']:6.2f}" if "c" in t else f"{'-':>6}"
            print(f"{n:8d} {d:7d} | {t['numpy'] * 1e3:8.3f} {t['ldpfast'] * 1e3:8.3f} "
                  f"{t['numpy'] / t['ldpfast']:6.2f} | {c} {t['update'] * 1e3:8.3f} {ratio} | "
                  f"{n / t['update']:9.3g}", flush=True)


if __name__ == "__main__":
    main()
