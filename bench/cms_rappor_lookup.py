"""The CMS-RAPPOR server's update, former path against the current one, in the same run (issue 33).

* set bits: ``np.nonzero(bits)`` and ``_core.ocms_count_list`` on one OCMS row per set bit
  (the server before issue 33: n x set bits per report x candidates hashes);
* lookup list: ``_core.ocms_lookup_list``, one hash per (report, candidate) reading the
  report's bit at ``h_i(x)`` (n x candidates hashes);
* lookup range: ``_core.ocms_lookup_range``, the same sums for the run ``0 .. d - 1`` with
  the hash walked along x (no product per pair): the server's path for its default candidates.

One batch of sRP reports at epsilon = 1 with ``CMSRAPPORParams.optimal`` (m = 227 for
d = 10^4), candidates = the whole dictionary, threads = 1. The paths alternate,
``--reps`` times each; each time is the thread's CPU time (``--clock cpu``, default; other
processes' time slices left out) or wall time, and the best of each is reported with the
load average. The paths' sums are checked equal.

    PYTHONPATH=python python3 bench/cms_rappor_lookup.py [--n 10000] [--d 10000] [--reps 2] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Callable, Dict, List

import numpy as np

from ldpfast import _core
from ldpfast.kernels.field import core_field
from ldpfast.protocols.frequency import rappor_cms


def set_bit_path(field: _core.Field, reports: rappor_cms.CMSRAPPORReports, m: int,
                 candidates: np.ndarray) -> np.ndarray:
    user, symbol = np.nonzero(reports.bits)
    sums = np.zeros(candidates.size, dtype=np.uint64)
    _core.ocms_count_list(field, symbol.astype(np.uint64), reports.a0[user], reports.a1[user], m, candidates,
                          sums, 1)
    return sums


def lookup_path(field: _core.Field, reports: rappor_cms.CMSRAPPORReports, m: int,
                candidates: np.ndarray) -> np.ndarray:
    sums = np.zeros(candidates.size, dtype=np.uint64)
    _core.ocms_lookup_list(field, reports.bits, reports.a0, reports.a1, m, candidates, sums, 1)
    return sums


def range_path(field: _core.Field, reports: rappor_cms.CMSRAPPORReports, m: int,
               candidates: np.ndarray) -> np.ndarray:
    sums = np.zeros(candidates.size, dtype=np.uint64)
    _core.ocms_lookup_range(field, reports.bits, reports.a0, reports.a1, m, int(candidates[0]), sums, 1)
    return sums


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="reports in the batch")
    ap.add_argument("--d", type=int, default=10_000, help="dictionary size = candidates")
    ap.add_argument("--reps", type=int, default=2, help="timed runs of each path, alternated")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = ap.parse_args()
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    params = rappor_cms.CMSRAPPORParams.optimal(epsilon=1.0, d=args.d)
    reports = rappor_cms.CMSRAPPORClient(params, rng=1).perturb(np.random.default_rng(2).integers(0, args.d, args.n))
    candidates = np.arange(args.d, dtype=np.uint64)
    field = core_field(params.field_size)
    paths: Dict[str, Callable[..., np.ndarray]] = {"set bits": set_bit_path, "list": lookup_path,
                                                   "range": range_path}
    times: Dict[str, List[float]] = {name: [] for name in paths}
    sums: Dict[str, np.ndarray] = {}
    print(f"n = {args.n}, d = {args.d}, m = {params.m}, set bits per report = {reports.bits.sum() / args.n:.1f}, "
          f"backend = {_core.active_backend()}, clock = {args.clock}, load average {os.getloadavg()[0]:.2f}")
    for _ in range(args.reps):
        for name, path in paths.items():
            start = clock()
            sums[name] = path(field, reports, params.m, candidates)
            times[name].append(clock() - start)
    assert all(np.array_equal(sums["set bits"], s) for s in sums.values()), "the paths disagree"
    for name in paths:
        best = min(times[name])
        runs = ", ".join(f"{t:.3f}" for t in times[name])
        print(f"{name:>9}: {best:8.3f} s  {args.n / best:12,.0f} reports/s  "
              f"{args.n * args.d / best / 1e9:6.3f} G(report, candidate)/s  runs {runs}")
    before = min(times["set bits"])
    print(f"set bits / list: {before / min(times['list']):.1f}x, "
          f"set bits / range: {before / min(times['range']):.1f}x; load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
