"""Thread scaling of the server kernels, each against a limit measured in the same run
(bench/machine.py's STREAM copy/triad with the same thread count, the larger of the two
as the bandwidth limit):

* HRR ingestion (validated ``hadamard_update``, one group) at d = 2^18, 2^19, 2^20 and 2^24:
  reports/s, and the report stream (4-byte row + 1-byte bit) as % of the bandwidth.
* FWHT float32 at 2^20, 2^24, 2^26 and 2^28 (2^28 without --quick): time; % of a one-pass
  bound (the array read and written once at the STREAM bandwidth); and the same against an
  in-place pass over the same array in the same threads (``np.negative(a, out=a)`` on
  1/threads of it each), whose ratio time / pass is the transform's cost in
  memory-pass equivalents (compute included: the kernel is compute-bound beyond ~2 passes).
* PrivSketch decode-first with sampling (K = 4, M = 128, 41,271 candidates): users/s, and
  the ordering matrices (1 KiB per user) as % of the bandwidth.

Medians (and best) of repeated runs; single-thread rows also record the thread's CPU time,
which is what to compare on a shared machine where other processes take turns on the
cores (read the wall times with the load average that ``run_all.py`` records). Every row
checks that the result is identical for every thread count.

    PYTHONPATH=python python3 bench/scaling.py [--quick] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

import numpy as np
from ldpfast import _core
from ldpfast.kernels import fwht

try:
    from machine import stream_bandwidth
except ImportError:
    from .machine import stream_bandwidth


def timings(fn, threads: int, repeat: int) -> dict[str, float]:
    """Median and best wall seconds of fn(); for one thread also the best CPU seconds of
    the calling thread (the kernels run one-threaded work on the caller)."""
    wall, cpu = [], []
    for _ in range(repeat):
        c0, t0 = time.thread_time(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    out = {"s": float(np.median(wall)), "best_s": min(wall)}
    if threads == 1:
        out["cpu_s"] = min(cpu)
    return out


def in_place_pass(a: np.ndarray, threads: int) -> float:
    """Best wall seconds of one in-place read + write pass over `a`, split over threads."""
    parts = np.array_split(a, threads)

    def run():
        pool = [threading.Thread(target=np.negative, args=(p,), kwargs={"out": p}) for p in parts]
        for th in pool:
            th.start()
        for th in pool:
            th.join()

    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def hrr(log2_cells: int, n: int, thread_counts: list[int], bandwidth: dict[int, dict[str, float]],
        repeat: int = 3) -> list[dict[str, float]]:
    rng = np.random.default_rng(log2_cells)
    cells = 2**log2_cells
    rows = rng.integers(0, cells, n, dtype=np.uint32)
    bits = rng.choice(np.array([-1, 1], np.int8), n)
    group_rows, cell_base = np.array([cells], np.uint64), np.array([0], np.uint64)
    z = np.ones(cells, np.int64)  # touched before timing, as a server's state is
    out, reference = [], None
    for threads in thread_counts:
        z[:] = 0
        assert _core.hadamard_update(None, rows, bits, group_rows, cell_base, z, threads) == n
        reference = z.copy() if reference is None else reference
        assert np.array_equal(z, reference), "HRR sums differ between thread counts"
        t = timings(lambda t=threads: _core.hadamard_update(None, rows, bits, group_rows, cell_base, z, t),
                    threads, repeat)
        rate = n / t["s"]
        row = {"log2_cells": log2_cells, "threads": threads, "ms": 1e3 * t["s"], "best_ms": 1e3 * t["best_s"],
               "reports_per_s": rate, "gbs": rate * 5 / 1e9,
               "pct_stream": 100 * rate * 5 / 1e9 / bandwidth[threads]["stream_gbs"]}
        if "cpu_s" in t:
            row["cpu_ms"] = 1e3 * t["cpu_s"]
        out.append(row)
    return out


def fwht_rows(log2_n: int, thread_counts: list[int], bandwidth: dict[int, dict[str, float]],
              repeat: int = 5) -> list[dict[str, float]]:
    n = 2**log2_n
    x = np.random.default_rng(log2_n).standard_normal(min(n, 2**24)).astype(np.float32)
    x = np.resize(x, n)  # large sizes repeat a 2^24 sample: cheaper to make, same work
    zeros = np.zeros_like(x)  # timed on zeros: values do not change the speed, repeats stay finite
    out, reference = [], None
    for threads in thread_counts:
        y = x.copy()
        fwht(y, threads)
        reference = y if reference is None else reference
        assert np.array_equal(y.view(np.uint32), reference.view(np.uint32)), "FWHT differs between thread counts"
        del y
        t = timings(lambda t=threads: fwht(zeros, t), threads, repeat if log2_n < 28 else 3)
        one_pass = 2 * x.nbytes / 1e9 / bandwidth[threads]["stream_gbs"]
        pass_s = in_place_pass(zeros, threads)
        row = {"log2_n": log2_n, "threads": threads, "ms": 1e3 * t["s"], "best_ms": 1e3 * t["best_s"],
               "gbs_one_pass": 2 * x.nbytes / t["s"] / 1e9, "pct_one_pass": 100 * one_pass / t["s"],
               "in_place_pass_ms": 1e3 * pass_s, "pass_equivalents": t["s"] / pass_s}
        if "cpu_s" in t:
            row["cpu_ms"] = 1e3 * t["cpu_s"]
        out.append(row)
    del reference
    return out


def privsketch(users: int, thread_counts: list[int], bandwidth: dict[int, dict[str, float]],
               repeat: int = 3) -> list[dict[str, float]]:
    K, M, D = 4, 128, 41_271
    KM = K * M
    rng = np.random.default_rng(7)
    order = np.argsort(rng.random((users, KM)), axis=1).astype(np.uint16).reshape(users, K, M)
    cell = rng.integers(0, KM, users).astype(np.uint32)
    bits = rng.choice(np.array([-1, 1], np.int8), users)
    cand_cells = (np.arange(K)[None, :] * M + rng.integers(0, M, (D, K))).astype(np.uint16)
    flat, owner = cand_cells.reshape(-1), np.repeat(np.arange(D), K)
    by_cell = np.argsort(flat, kind="stable")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(flat, minlength=KM))]).astype(np.int64)
    bucket_cand = owner[by_cell].astype(np.uint32)
    bucket_cells = np.ascontiguousarray(cand_cells[owner[by_cell]])

    def decode(threads):
        return _core.privsketch_decode_cell(K, M, order, cell, bits, offsets, bucket_cand, bucket_cells, D, threads)

    out, reference = [], None
    for threads in thread_counts:
        pos, neg, bad = decode(threads)
        assert bad == users
        reference = (pos, neg) if reference is None else reference
        assert np.array_equal(pos, reference[0]) and np.array_equal(neg, reference[1])
        t = timings(lambda t=threads: decode(t), threads, repeat)
        rate = users / t["s"]
        row = {"threads": threads, "ms": 1e3 * t["s"], "best_ms": 1e3 * t["best_s"], "users_per_s": rate,
               "gbs": rate * (2 * KM + 5) / 1e9,
               "pct_stream": 100 * rate * (2 * KM + 5) / 1e9 / bandwidth[threads]["stream_gbs"]}
        if "cpu_s" in t:
            row["cpu_ms"] = 1e3 * t["cpu_s"]
        out.append(row)
    return out


def run(quick: bool, thread_counts: list[int], bandwidth: dict[int, dict[str, float]]) -> dict[str, object]:
    n_hrr = 2**22 if quick else 2**25
    fwht_sizes = (20, 24) if quick else (20, 24, 26, 28)
    return {
        "hrr": [row for d in (18, 19, 20, 24) for row in hrr(d, n_hrr, thread_counts, bandwidth)],
        "fwht_f32": [row for n in fwht_sizes for row in fwht_rows(n, thread_counts, bandwidth)],
        "privsketch_decode": privsketch(20_000 if quick else 200_000, thread_counts, bandwidth),
    }


def _cpu(row) -> str:
    return f"  cpu {row['cpu_ms']:8.1f} ms" if "cpu_ms" in row else ""


def print_tables(result: dict[str, object]) -> None:
    print("HRR ingestion (validated), one group; % = report stream (5 B/report) / STREAM bandwidth")
    for r in result["hrr"]:
        print(f"  d=2^{r['log2_cells']:<3} threads {r['threads']:>2}  {r['ms']:8.1f} ms  {r['reports_per_s']:10.3g} "
              f"reports/s  {r['gbs']:5.2f} GB/s  {r['pct_stream']:5.1f}%{_cpu(r)}")
    print("FWHT float32; % = one-pass bound (read + write at STREAM bandwidth) / time; "
          "passes = time / in-place numpy pass over the same array")
    for r in result["fwht_f32"]:
        print(f"  n=2^{r['log2_n']:<3} threads {r['threads']:>2}  {r['ms']:9.2f} ms  {r['gbs_one_pass']:5.1f} GB/s  "
              f"{r['pct_one_pass']:5.1f}%  passes {r['pass_equivalents']:4.1f}{_cpu(r)}")
    print("PrivSketch decode-first (K=4, M=128, 41,271 candidates); % = orders (1 KiB/user) / STREAM bandwidth")
    for r in result["privsketch_decode"]:
        print(f"  threads {r['threads']:>2}  {r['ms']:8.1f} ms  {r['users_per_s']:10.3g} users/s  "
              f"{r['gbs']:5.2f} GB/s  {r['pct_stream']:5.1f}%{_cpu(r)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", default=",".join(str(t) for t in range(1, (os.cpu_count() or 1) + 1)))
    ap.add_argument("--json", default=None, help="also write the tables and STREAM rows to this JSON file")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    bandwidth = {t: stream_bandwidth(t, 32 if args.quick else 128) for t in threads}
    for t in threads:
        print(f"STREAM threads {t}: copy {bandwidth[t]['copy_gbs']:.1f} GB/s, "
              f"triad {bandwidth[t]['triad_gbs']:.1f} GB/s")
    result = run(args.quick, threads, bandwidth)
    print_tables(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"stream": list(bandwidth.values()), **result}, f, indent=1)


if __name__ == "__main__":
    main()
