"""Coverage of the intervals and realized false-discovery rate of ``heavy_hitters``, per
protocol, against the target each ``Estimate`` states (issue 19's characterization).

For every case of ``tests/_calibration.py`` (each registered protocol on a small
configuration; ``/hashed`` and ``/mean`` variants; ``/null`` cases with every value at the
threshold, the GRR reproducer of the issue among them), runs ``--runs`` seeded repetitions
and prints: coverage of the ``1 - alpha`` intervals (all candidates, the candidates at or
below the threshold, the heavy ones), the empirical spread over the reported standard
error, and the realized FDR of ``heavy_hitters(threshold, fdr=q)`` (BH) with its
standard error; the issue's GRR reproducer is ``grr/null``.

    python bench/estimates_calibration.py --runs 1000 [--cases grr/null olh/null] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import _calibration as calibration  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--alpha", type=float, default=0.05, help="interval level 1 - alpha")
    parser.add_argument("--fdr", type=float, default=0.05, help="BH level of heavy_hitters")
    parser.add_argument("--cases", nargs="*", default=sorted(calibration.CASES))
    parser.add_argument("--seed", type=int, default=1, help="seed of the runs (default 1)")
    parser.add_argument("--json", default=None, help="also write the table to this JSON file")
    args = parser.parse_args()
    print(f"runs={args.runs}, intervals at {1 - args.alpha:.0%}, heavy_hitters BH at fdr={args.fdr}")
    header = f"{'case':22} {'cover':>6} {'null':>6} {'heavy':>6} {'sd/std':>7} {'FDR':>7} {'+-':>6} {'s/run':>6}"
    print(header)
    rows = []
    for name in args.cases:
        start = time.perf_counter()
        runs = calibration.simulate(name, args.runs, alpha=args.alpha, fdr=args.fdr, seed=args.seed)
        elapsed = (time.perf_counter() - start) / args.runs
        covered = (runs.low <= runs.target) & (runs.target <= runs.high)
        fdp = runs.false_discovery_proportions
        spread = np.median(runs.values.std(axis=0, ddof=1) / runs.std.mean(axis=0))
        row = {"case": name, "coverage": float(covered.mean()),
               "coverage_null": float(covered[:, runs.null].mean()) if runs.null.any() else None,
               "coverage_heavy": float(covered[:, ~runs.null].mean()) if (~runs.null).any() else None,
               "spread_over_std": float(spread), "fdr": float(fdp.mean()),
               "fdr_se": float(fdp.std(ddof=1) / np.sqrt(fdp.size)), "seconds_per_run": elapsed}
        rows.append(row)

        def fmt(v):
            return "   -  " if v is None else f"{v:6.3f}"
        print(f"{name:22} {fmt(row['coverage'])} {fmt(row['coverage_null'])} {fmt(row['coverage_heavy'])} "
              f"{spread:7.3f} {row['fdr']:7.4f} {row['fdr_se']:6.4f} {elapsed:6.3f}", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"runs": args.runs, "alpha": args.alpha, "fdr": args.fdr, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
