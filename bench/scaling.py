"""Thread scaling of the server kernels, each against a limit measured in the same run
(bench/machine.py's STREAM copy/triad with the same thread count, the larger of the two
as the bandwidth limit):

* HRR ingestion (validated ``hadamard_update``, one group) at d = 2^20 and 2^24: reports/s,
  and the report stream (4-byte row + 1-byte bit) as % of the bandwidth.
* FWHT float32 at 2^20 and 2^24: time, and % of a one-pass bound (the array read and
  written once at the bandwidth).
* PrivSketch decode-first with sampling (K = 4, M = 128, 41,271 candidates): users/s, and
  the ordering matrices (1 KiB per user) as % of triad bandwidth.

Medians of repeated runs; on a shared machine read them with the load average that
``run_all.py`` records.

    PYTHONPATH=python python3 bench/scaling.py [--quick] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from ldpfast import _core
from ldpfast.kernels import fwht

try:
    from machine import median_time, stream_bandwidth
except ImportError:
    from .machine import median_time, stream_bandwidth


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
        t = median_time(lambda t=threads: _core.hadamard_update(None, rows, bits, group_rows, cell_base, z, t), repeat)
        rate = n / t
        out.append({"log2_cells": log2_cells, "threads": threads, "reports_per_s": rate,
                    "pct_stream": 100 * rate * 5 / 1e9 / bandwidth[threads]["stream_gbs"]})
    return out


def fwht_rows(log2_n: int, thread_counts: list[int], bandwidth: dict[int, dict[str, float]],
              repeat: int = 5) -> list[dict[str, float]]:
    x = np.random.default_rng(log2_n).standard_normal(2**log2_n).astype(np.float32)
    zeros = np.zeros_like(x)  # timed on zeros: values do not change the speed, repeats stay finite
    out, reference = [], None
    for threads in thread_counts:
        y = x.copy()
        fwht(y, threads)
        reference = y if reference is None else reference
        assert np.array_equal(y.view(np.uint32), reference.view(np.uint32)), "FWHT differs between thread counts"
        t = median_time(lambda t=threads: fwht(zeros, t), repeat)
        one_pass = 2 * x.nbytes / 1e9 / bandwidth[threads]["stream_gbs"]
        out.append({"log2_n": log2_n, "threads": threads, "ms": 1e3 * t, "pct_one_pass": 100 * one_pass / t})
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
        t = median_time(lambda t=threads: decode(t), repeat)
        rate = users / t
        out.append({"threads": threads, "users_per_s": rate,
                    "pct_stream": 100 * rate * (2 * KM + 5) / 1e9 / bandwidth[threads]["stream_gbs"]})
    return out


def run(quick: bool, thread_counts: list[int], bandwidth: dict[int, dict[str, float]]) -> dict[str, object]:
    n_hrr = 2**22 if quick else 2**25
    return {
        "hrr": hrr(20, n_hrr, thread_counts, bandwidth) + hrr(24, n_hrr, thread_counts, bandwidth),
        "fwht_f32": fwht_rows(20, thread_counts, bandwidth) + fwht_rows(24, thread_counts, bandwidth),
        "privsketch_decode": privsketch(20_000 if quick else 200_000, thread_counts, bandwidth),
    }


def print_tables(result: dict[str, object]) -> None:
    print("HRR ingestion (validated), one group; % = report stream (5 B/report) / STREAM bandwidth")
    for r in result["hrr"]:
        print(f"  d=2^{r['log2_cells']:<3} threads {r['threads']:>2}  {r['reports_per_s']:10.3g} reports/s  "
              f"{r['pct_stream']:5.1f}%")
    print("FWHT float32; % = one-pass bound (read + write at STREAM bandwidth) / time")
    for r in result["fwht_f32"]:
        print(f"  n=2^{r['log2_n']:<3} threads {r['threads']:>2}  {r['ms']:9.2f} ms  {r['pct_one_pass']:5.1f}%")
    print("PrivSketch decode-first (K=4, M=128, 41,271 candidates); % = orders (1 KiB/user) / STREAM bandwidth")
    for r in result["privsketch_decode"]:
        print(f"  threads {r['threads']:>2}  {r['users_per_s']:10.3g} users/s  {r['pct_stream']:5.1f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", default=",".join(str(t) for t in range(1, (os.cpu_count() or 1) + 1)))
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    bandwidth = {t: stream_bandwidth(t, 32 if args.quick else 128) for t in threads}
    for t in threads:
        print(f"STREAM threads {t}: copy {bandwidth[t]['copy_gbs']:.1f} GB/s, triad {bandwidth[t]['triad_gbs']:.1f} GB/s")
    print_tables(run(args.quick, threads, bandwidth))


if __name__ == "__main__":
    main()
