"""The distribution of a number: W1 distance to Beta(5, 2) of the default entry point
(``distribution_plan(method="auto")``), Square Wave + EMS over several bucket counts, OUE over
the bin count tuned after the fact (the best of a grid, per run set) and over 1,024 bins with
Norm-Sub, all measured on the same data and runs; optionally the published Square Wave code
(vvv214/LDP_Protocols ``sw.py``, its EMS) on the same data. Also the EMS time at d = 1,024,
n = 1e6 (single thread, CPU time).

    PYTHONPATH=python python3 bench/numeric_distribution.py [--n 100000,1000000] [--eps 0.5,1,2,4]
        [--reps 5] [--reference DIR_WITH_SW_PY] [--reference-eps 1] [--json OUT]

The published code builds dense 1,024 x 1,024 matrices (seconds a run): ``--reference-eps``
limits it to some epsilons.

W1 is measured as in [SW] (Li et al., SIGMOD 2020): both CDFs at the ends of 1,024 equal cells
of [0, 1], ``sum |F - G| / 1024`` (``DistributionEstimate.distances``).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import time
from typing import Any, Dict, List

import numpy as np

import ldpfast
from ldpfast.protocols.numeric import binned, distribution, square_wave

BOUNDS = (0.0, 1.0)
OUE_BINS = (8, 12, 16, 24, 32, 48, 64)
SW_BUCKETS = (256, 512, 1024)


def beta_values(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).beta(5.0, 2.0, n)


def w1_of(plan: distribution.DistributionPlan, values: np.ndarray, seed: int) -> float:
    return plan.simulate(values, rng=seed).distances(values)[0]


def reference_w1(module: Any, values: np.ndarray, eps: float, seed: int) -> float:
    """The published code's EMS (its ``sw`` with ``EM`` pointed at its ``EMS``) on ``values``."""
    np.random.seed(seed)
    module.EM = module.EMS
    counts = module.sw(values, 0.0, 1.0, eps)
    estimate = distribution.DistributionEstimate(np.asarray(counts) / counts.sum(), BOUNDS, "vvv214", values.size)
    return estimate.distances(values)[0]


def record(runs: Dict[str, List[float]], name: str, value: float) -> None:
    runs.setdefault(name, []).append(value)


def mean_se(xs: List[float]) -> Dict[str, float]:
    return {"mean": float(np.mean(xs)), "se": float(np.std(xs, ddof=1) / np.sqrt(len(xs))) if len(xs) > 1 else 0.0}


def ems_time(n: int) -> Dict[str, float]:
    params = square_wave.SquareWaveParams(epsilon=1.0, d=1024)
    x = np.minimum((beta_values(n, 9) * 1024).astype(np.int64), 1023)
    server = square_wave.SquareWaveServer(params).update(square_wave.SquareWaveClient(params, rng=1).perturb(x))
    best, fit = float("inf"), None
    for _ in range(5):
        t0 = time.process_time()
        fit = server.fit_distribution()
        best = min(best, time.process_time() - t0)
    assert fit is not None
    return {"seconds": best, "iterations": fit.iterations}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="100000,1000000")
    ap.add_argument("--eps", default="0.5,1,2,4")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--reference", default=None, help="directory holding vvv214/LDP_Protocols' sw.py")
    ap.add_argument("--reference-eps", default="1", help="epsilons the published code runs at")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ldpfast.set_num_threads(1)
    reference = None
    reference_eps = {float(v) for v in args.reference_eps.split(",")}
    if args.reference:
        spec = importlib.util.spec_from_file_location("vvv214_sw", os.path.join(args.reference, "sw.py"))
        assert spec is not None and spec.loader is not None
        reference = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(reference)
    rows = []
    for n in (int(v) for v in args.n.split(",")):
        for eps in (float(v) for v in args.eps.split(",")):
            runs: Dict[str, List[float]] = {}
            add = functools.partial(record, runs)
            for rep in range(args.reps):
                values = beta_values(n, 1000 + rep)
                add("auto", w1_of(distribution.distribution_plan(eps, BOUNDS, n), values, rep))
                for d in SW_BUCKETS:
                    add(f"sw-ems-{d}", w1_of(distribution.distribution_plan(eps, BOUNDS, n, "square-wave", d),
                                             values, rep))
                for bins in OUE_BINS:
                    add(f"oue-{bins}", w1_of(distribution.distribution_plan(eps, BOUNDS, n, "oue", bins), values, rep))
                add("oue-rule", w1_of(distribution.distribution_plan(eps, BOUNDS, n, "oue"), values, rep))
                add("oue-1024-normsub", w1_of(distribution.distribution_plan(eps, BOUNDS, n, "oue", 1024), values,
                                              rep))
                if reference is not None and eps in reference_eps:
                    add("vvv214-sw-ems", reference_w1(reference, values, eps, rep))
            summary = {name: mean_se(xs) for name, xs in runs.items()}
            tuned = min((k for k in summary if k.startswith("oue-") and k[4:].isdigit() and k != "oue-1024"),
                        key=lambda k: summary[k]["mean"])
            row = {"n": n, "eps": eps, "reps": args.reps, "oue_tuned": tuned,
                   "auto_method": "{0.method}-{0.buckets}".format(distribution.distribution_plan(eps, BOUNDS, n)),
                   "oue_rule_bins": binned.bin_count(eps, n), **summary}
            rows.append(row)
            best_sw = min((k for k in summary if k.startswith("sw-ems-")), key=lambda k: summary[k]["mean"])
            line = (f"n={n:>8,} eps={eps:<4} auto({row['auto_method']}) {summary['auto']['mean']:.5f}"
                    f"+-{summary['auto']['se']:.5f}  {best_sw} {summary[best_sw]['mean']:.5f}  "
                    f"sw-ems-1024 {summary['sw-ems-1024']['mean']:.5f}  "
                    f"OUE tuned ({tuned}) {summary[tuned]['mean']:.5f}  "
                    f"OUE rule ({row['oue_rule_bins']} bins) {summary['oue-rule']['mean']:.5f}  "
                    f"OUE-1024 Norm-Sub {summary['oue-1024-normsub']['mean']:.4f}")
            if "vvv214-sw-ems" in summary:
                line += f"  vvv214 sw.py EMS {summary['vvv214-sw-ems']['mean']:.5f}"
            print(line, flush=True)
    timing = ems_time(1_000_000)
    print(f"EMS at d=1024, n=1e6, eps=1: {timing['seconds'] * 1e3:.1f} ms CPU ({timing['iterations']} iterations)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "ems_time": timing}, f, indent=1)


if __name__ == "__main__":
    main()
