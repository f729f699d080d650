"""HadaHeavy end to end: n users over a 2^32 domain (planted heavy items plus a Zipf
tail), client + server time, recall and precision, with TreeHist (b = 1) on the same
data as the baseline.

    PYTHONPATH=python python3 bench/hadaheavy_end_to_end.py [--n 1000000] [--epsilon 1] [--seeds 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ldpfast
from ldpfast.protocols.heavy import hadaheavy as HH


def planted(seed: int, n: int, d: int):
    rng = np.random.default_rng(seed)
    shares = (0.30, 0.20, 0.14, 0.09, 0.06, 0.03)
    items = rng.choice(d, size=len(shares) + 10_000, replace=False).astype(np.uint64)
    counts = [int(n * s) for s in shares]
    ranks = np.minimum(rng.zipf(1.5, n - sum(counts)), 10_000) - 1
    values = np.concatenate([np.repeat(items[:len(shares)], counts), items[len(shares):][ranks]])
    rng.shuffle(values)
    uniq, cnt = np.unique(values, return_counts=True)
    return values, dict(zip(uniq.tolist(), cnt.tolist()))


def run(params, values, truth, seed, common_tau, method="fwht"):
    t0 = time.perf_counter()
    reports = HH.HadaHeavyClient(params, rng=seed).perturb(values)
    t1 = time.perf_counter()
    server = HH.HadaHeavyServer(params).update(reports)
    t2 = time.perf_counter()
    hh = server.heavy_hitters(method=method)
    t3 = time.perf_counter()
    heavy = {x for x, c in truth.items() if c >= params.tau}
    found = set(hh.items.tolist())
    recall = len(heavy & found) / len(heavy) if heavy else float("nan")
    precision = (sum(truth.get(x, 0) >= params.tau - 2 * params.delta for x in found) / len(found)
                 if found else float("nan"))
    common = {x for x, c in truth.items() if c >= common_tau}
    recall_common = len(common & found) / len(common) if common else float("nan")
    max_err = max((abs(c - truth.get(x, 0)) for x, c in zip(hh.items.tolist(), hh.counts)), default=0.0)
    return {"client": t1 - t0, "ingest": t2 - t1, "search": t3 - t2,
            "recall": recall, "recall_common": recall_common, "precision": precision,
            "outputs": len(found), "heavy": len(heavy), "max_err": max_err, "examined": hh.candidates_examined}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--log2d", type=int, default=32)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--beta", type=float, default=0.05)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    d = 2**args.log2d
    info = ldpfast.backend_info()
    print(f"HadaHeavy end to end: n = {args.n:,}, d = 2^{args.log2d}, eps = {args.epsilon}, beta = {args.beta}, "
          f"backend = {info['active']}, threads = {info['threads']}")
    header = (f"{'algorithm':10s} {'seed':>4s} {'client s':>9s} {'ingest s':>9s} {'search s':>9s} "
              f"{'recall':>7s} {'rec@HHtau':>9s} {'precision':>9s} {'outputs':>7s} {'heavy':>5s} "
              f"{'max|err|':>9s} {'Delta':>9s} {'examined':>9s}")
    print(header)
    for seed in range(1, args.seeds + 1):
        values, truth = planted(seed, args.n, d)
        common_tau = HH.HadaHeavyParams.create(args.epsilon, d, args.n, args.beta).tau
        for name, factory, method in (("HadaHeavy", HH.HadaHeavyParams.create, "fwht"),
                                      ("TreeHist", HH.HadaHeavyParams.treehist, "fwht"),
                                      ("TH-noFWHT", HH.HadaHeavyParams.treehist, "direct")):
            params = factory(args.epsilon, d, args.n, args.beta, hash_seed=seed)
            r = run(params, values, truth, 100 + seed, common_tau, method)
            print(f"{name:10s} {seed:4d} {r['client']:9.3f} {r['ingest']:9.4f} {r['search']:9.3f} "
                  f"{r['recall']:7.2f} {r['recall_common']:9.2f} {r['precision']:9.2f} {r['outputs']:7d} "
                  f"{r['heavy']:5d} {r['max_err']:9.0f} {params.delta:9.0f} {r['examined']:9d}")
    print("recall: share of items with c(x) >= tau (the algorithm's own) found; rec@HHtau: share found of the\n"
          "items above HadaHeavy's tau; precision: share of outputs with c(x) >= tau - 2 Delta.\n"
          "TreeHist = HadaHeavy with b = 1 (HadaOracle levels); TH-noFWHT queries its level oracles without the FWHT.")


if __name__ == "__main__":
    main()
