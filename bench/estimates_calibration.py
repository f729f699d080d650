"""Coverage of the intervals and realized false-discovery rate of ``heavy_hitters``, per
protocol, against the target each ``Estimate`` states (issue 19's characterization).

For every case of ``tests/_calibration.py`` (each registered protocol on a small
configuration; ``/hashed`` and ``/mean`` variants; ``/null`` cases with every value at the
threshold, the GRR reproducer of the issue among them; ``grr/wide``, issue 29's regime of
a few reports per value), runs ``--runs`` seeded repetitions and prints: coverage of the
``1 - alpha`` intervals (all candidates, the candidates at or below the threshold, the
heavy ones, those whose target is 0), coverage of the error bars ``values -+ z std`` (all
candidates, target 0; issue 29), the empirical spread over the reported standard
error, and the realized FDR of ``heavy_hitters(threshold, fdr=q)`` (BH) with its
standard error; the issue's GRR reproducer is ``grr/null``.

    python bench/estimates_calibration.py --runs 1000 [--cases grr/null olh/null] [--seed 1]
    python bench/estimates_calibration.py --issue29 --runs 20
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from statistics import NormalDist

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import _calibration as calibration  # noqa: E402


def issue29(runs: int, alpha: float) -> None:
    """Issue 29's regime: GRR at d = 73,446, eps = 2, n = 136,000 Zipf(1.3) values (about 1.9
    reports per value, 84% of the values held by no user): coverage of ``values -+ z std``
    and of ``confidence_interval`` over the whole domain and over the values at 0."""
    from ldpfast.protocols.frequency import grr

    d, n = 73_446, 136_000
    data = (np.random.default_rng(0).zipf(1.3, n) - 1) % d
    truth = np.bincount(data, minlength=d) / n
    zero = truth == 0
    params = grr.GRRParams(epsilon=2.0, d=d)
    z = NormalDist().inv_cdf(1 - alpha / 2)
    bar, interval = np.zeros((runs, d), dtype=bool), np.zeros((runs, d), dtype=bool)
    for r in range(runs):
        est = grr.GRRServer(params).update(grr.GRRClient(params, rng=100 + r).perturb(data))\
            .frequencies()
        low, high = est.confidence_interval(alpha)
        bar[r], interval[r] = np.abs(est.values - truth) <= z * est.std, (low <= truth) & (truth <= high)
    print(f"issue 29 (GRR d={d}, n={n}, {runs} runs, {zero.mean():.0%} of the values at 0): smallest std "
          f"{est.std.min():.4f}, median {np.median(est.std):.4f}; at {1 - alpha:.0%} values -+ z std covers "
          f"{bar.mean():.4f} (at 0: {bar[:, zero].mean():.4f}), confidence_interval {interval.mean():.4f} "
          f"(at 0: {interval[:, zero].mean():.4f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--alpha", type=float, default=0.05, help="interval level 1 - alpha")
    parser.add_argument("--fdr", type=float, default=0.05, help="BH level of heavy_hitters")
    parser.add_argument("--cases", nargs="*", default=sorted(calibration.CASES))
    parser.add_argument("--seed", type=int, default=1, help="seed of the runs (default 1)")
    parser.add_argument("--json", default=None, help="also write the table to this JSON file")
    parser.add_argument("--issue29", action="store_true", help="only issue 29's large-domain GRR regime")
    args = parser.parse_args()
    if args.issue29:
        issue29(args.runs, args.alpha)
        return
    print(f"runs={args.runs}, intervals at {1 - args.alpha:.0%}, heavy_hitters BH at fdr={args.fdr}")
    header = (f"{'case':22} {'cover':>6} {'null':>6} {'heavy':>6} {'zero':>6} {'bar':>6} {'bar0':>6} {'sd/std':>7} "
              f"{'FDR':>7} {'+-':>6} {'s/run':>6}")
    print(header)
    rows = []
    for name in args.cases:
        start = time.perf_counter()
        runs = calibration.simulate(name, args.runs, alpha=args.alpha, fdr=args.fdr, seed=args.seed)
        elapsed = (time.perf_counter() - start) / args.runs
        covered = (runs.low <= runs.target) & (runs.target <= runs.high)
        barred = np.abs(runs.values - runs.target) <= NormalDist().inv_cdf(1 - args.alpha / 2) * runs.std
        zero = runs.target == 0
        fdp = runs.false_discovery_proportions
        spread = np.median(runs.values.std(axis=0, ddof=1) / runs.std.mean(axis=0))
        row = {"case": name, "coverage": float(covered.mean()),
               "coverage_null": float(covered[:, runs.null].mean()) if runs.null.any() else None,
               "coverage_heavy": float(covered[:, ~runs.null].mean()) if (~runs.null).any() else None,
               "coverage_zero": float(covered[:, zero].mean()) if zero.any() else None,
               "bar_coverage": float(barred.mean()),
               "bar_coverage_zero": float(barred[:, zero].mean()) if zero.any() else None,
               "spread_over_std": float(spread), "fdr": float(fdp.mean()),
               "fdr_se": float(fdp.std(ddof=1) / np.sqrt(fdp.size)), "seconds_per_run": elapsed}
        rows.append(row)

        def fmt(v):
            return "   -  " if v is None else f"{v:6.3f}"
        print(f"{name:22} {fmt(row['coverage'])} {fmt(row['coverage_null'])} {fmt(row['coverage_heavy'])} "
              f"{fmt(row['coverage_zero'])} {fmt(row['bar_coverage'])} {fmt(row['bar_coverage_zero'])} {spread:7.3f} "
              f"{row['fdr']:7.4f} {row['fdr_se']:6.4f} {elapsed:6.3f}", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"runs": args.runs, "alpha": args.alpha, "fdr": args.fdr, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
