"""Whole-dictionary queries of the per-user-hash protocols (issue 22, point 2): how long
``server.estimate()`` takes for OCMS+RR and OLH over every value of ``[0, d)``, what the
progress line costs, and how much the affine decode saves where the parameters allow it
(``ocms.OCMSParams.optimal(..., fast_query=True)``: m a power of two over GF(2^l)).

Baseline: the default parameters (prime field 2^64 - 59, the scan: one step per report
and candidate), measured in the same run. Also HRR (one FWHT, not per-user hashing) for
scale. Every configuration answers the same query of the same users; the counts of the
progress run are checked equal to the plain run's.

    PYTHONPATH=python python3 bench/full_domain_query.py [--n 1000000] [--d 100000] [--eps 2]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

try:
    from machine import describe
except ImportError:  # imported as bench.full_domain_query
    from .machine import describe

import ldpfast
from ldpfast.protocols.frequency import hadamard, ocms, olh


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def run(n: int, d: int, epsilon: float, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    values = np.minimum(rng.zipf(1.3, n) - 1, d - 1)
    mse, ell = "OCMS+RR mse (default: prime field, scan)", "OCMS+RR l (default: prime field, scan)"
    configs = [  # (label, params, the baseline it is compared with)
        (mse, ocms.OCMSParams.optimal(epsilon, d, mode="mse"), mse),
        (ell, ocms.OCMSParams.optimal(epsilon, d, mode="l"), ell),
        ("OLH (prime field, scan)", olh.OLHParams(epsilon=epsilon, d=d), ell),
        ("OCMS+RR mse fast_query (GF(2^l), affine)", ocms.OCMSParams.optimal(epsilon, d, mode="mse", fast_query=True),
         mse),
        ("OCMS+RR l fast_query (GF(2^l), affine)", ocms.OCMSParams.optimal(epsilon, d, mode="l", fast_query=True), ell),
        ("HRR (FWHT; not per-user hashing)", hadamard.HRRParams(epsilon=epsilon, d=d), ell),
    ]
    rows = []
    ldpfast.set_progress(False)
    for label, params, baseline in configs:
        proto = ldpfast._base.protocol(params.protocol)
        server = proto.aggregator(params).update(proto.client(params, rng=seed).perturb(values))
        seconds, est = _timed(server.estimate)
        m = getattr(params, "m", getattr(params, "g", None))
        rows.append({"config": label, "baseline": baseline, "protocol": params.protocol, "m": m,
                     "field_size": getattr(params, "field_size", None), "seconds": seconds})
        print(f"{label:<44} {seconds:8.2f} s", flush=True)
        if label == ell:
            ldpfast.set_progress(True)   # the progress line on stderr: pieces of the same query
            shown, again = _timed(server.estimate)
            ldpfast.set_progress(False)
            assert np.array_equal(est, again)
            rows.append({"config": label + ", with the progress line", "baseline": ell, "protocol": params.protocol,
                         "m": m, "field_size": params.field_size, "seconds": shown})
            print(f"{'  same, with the progress line':<44} {shown:8.2f} s", flush=True)
    base = {r["config"]: r["seconds"] for r in rows}
    for row in rows:
        row["speedup_vs_baseline"] = base[row["baseline"]] / row["seconds"]
    return {"n": n, "d": d, "epsilon": epsilon, "threads": ldpfast.backend_info()["threads"], "rows": rows,
            "machine": describe()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=100_000)
    parser.add_argument("--eps", type=float, default=2.0)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "full_domain_query.json"))
    args = parser.parse_args()
    result = run(args.n, args.d, args.eps)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"\nspeedup vs the default parameters (OLH, HRR: vs OCMS+RR l), n = {args.n:,}, d = {args.d:,}, "
          f"eps = {args.eps:g}:")
    for row in result["rows"]:
        print(f"  {row['config']:<58} {row['speedup_vs_baseline']:6.2f}x")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
