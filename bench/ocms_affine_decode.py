"""OCMS+RR decode over GF(2^l) with m = 2^b: solving h(x) = z per report (method="affine")
against the full scan (method="scan", the baseline) in the same run, for m in
{4, 16, 64, 256, 1024} and 1..N threads. Asserts identical counts, prints the speedup per
m, and the cost constants of the crossover rule that ``method="auto"`` applies
(cpp/src/ocms.cpp, ``ocms_affine_preferred``): per report, scan ~ d pairs, affine ~
kAffineReportCost + kAffineMatchCost d/m pair-equivalents.

    PYTHONPATH=python python3 bench/ocms_affine_decode.py [--n 5000] [--d 1000000] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from ldpfast import _core
from ldpfast.kernels import field as kfield

try:
    from machine import median_time
except ImportError:  # imported as bench.ocms_affine_decode
    from .machine import median_time

M_VALUES = (4, 16, 64, 256, 1024)


def binary_field(l: int):
    poly = kfield.irreducible_polynomial(l)
    return _core.Field.binary(l, sum(1 << e for e in poly[1:]))


def run(n: int, d: int, thread_counts: list[int], repeat: int = 3, seed: int = 1) -> dict[str, object]:
    l = max(3, int(d).bit_length())  # the smallest GF(2^l) holding [0, d]
    field = binary_field(l)
    rng = np.random.default_rng(seed)
    rows = []
    for m in M_VALUES:
        a0 = rng.integers(0, 2**l, n, dtype=np.uint64)
        a1 = rng.integers(0, 2**l, n, dtype=np.uint64)
        z = rng.integers(0, m, n, dtype=np.uint64)
        for threads in thread_counts:
            result = {}
            for method in ("scan", "affine"):
                counts = np.zeros(d, dtype=np.uint64)

                def decode(counts=counts, z=z, a0=a0, a1=a1, m=m, threads=threads, method=method):
                    counts[:] = 0
                    _core.ocms_count_range(field, z, a0, a1, m, 0, counts, threads, method=method)

                result[method] = median_time(decode, repeat)
                result[method + "_counts"] = counts.copy()
            assert np.array_equal(result["scan_counts"], result["affine_counts"]), "affine counts differ"
            scan_s, affine_s = result["scan"], result["affine"]
            rows.append({
                "m": m, "threads": threads, "scan_s": scan_s, "affine_s": affine_s, "speedup": scan_s / affine_s,
                "scan_gpairs_per_s": n * d / scan_s / 1e9,
                "affine_ns_per_match": affine_s * threads / (n * d / m) * 1e9,
                "auto_method": _core.ocms_decode_method(field, m, d),
            })
    return {"n": n, "d": d, "l": l, "rows": rows}


def print_table(result: dict[str, object]) -> None:
    print(f"OCMS decode, GF(2^{result['l']}), n = {result['n']} reports, d = {result['d']} candidates "
          "(baseline: full scan, same run)")
    print(f"{'m':>6} {'thr':>4} {'scan s':>9} {'affine s':>9} {'speedup':>8} {'scan Gpair/s':>13} "
          f"{'ns/match*thr':>13} {'auto':>7}")
    for r in result["rows"]:
        print(f"{r['m']:>6} {r['threads']:>4} {r['scan_s']:>9.4f} {r['affine_s']:>9.4f} {r['speedup']:>8.1f} "
              f"{r['scan_gpairs_per_s']:>13.2f} {r['affine_ns_per_match']:>13.2f} {r['auto_method']:>7}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--d", type=int, default=1_000_000)
    ap.add_argument("--threads", default=",".join(str(t) for t in range(1, (os.cpu_count() or 1) + 1)))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print_table(run(args.n, args.d, [int(t) for t in args.threads.split(",")], args.repeat))


if __name__ == "__main__":
    main()
