"""[WW] Table 1, measured: frequency oracles (HRR, HadaOracle, Bassily et al.'s Hashtogram)
and heavy hitters (HadaHeavy, TreeHist with Count-Sketch oracles) on the same data.

Oracles: n users over d = 2^20 (planted heavy values plus a Zipf tail); for each n the
largest and mean absolute count error over 2000 queried values (the planted ones and a
sample of the rest), the server time (ingest + decode + queries) and the state size, with
a log-log slope of the largest error against n (theory: 1/2 for all three; the oracles
differ in the constant and in the log(1/beta) vs log(n/beta) factor).
Heavy hitters: d = 2^32, each algorithm with its default thresholds; recall of the values
above tau, precision (outputs with count >= tau - 2 delta) and the largest error of an
output, and the server time.

    PYTHONPATH=python python3 bench/ww_table1.py [--quick] [--out DIR]

``--quick`` (n in {1e4, 1e5}, one seed) takes seconds; the default (n in {1e5, 1e6, 1e7})
takes 80 s on a 2-core machine. Results: a table on stdout, ``ww_table1.json`` (raw rows)
and ``ww_table1.png`` (largest oracle error against n) in ``--out`` (default bench/results).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import ldpfast
from ldpfast.protocols.heavy import hadaheavy, treehist_cs
from ldpfast.protocols.frequency import hadamard, hadaoracle, hashtogram


def planted(n: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    shares = (0.10, 0.05, 0.02, 0.01)
    items = rng.choice(d, size=len(shares) + 20_000, replace=False).astype(np.uint64)
    counts = [int(n * s) for s in shares]
    ranks = np.minimum(rng.zipf(1.3, n - sum(counts)), 20_000) - 1
    values = np.concatenate([np.repeat(items[:len(shares)], counts), items[len(shares):][ranks]])
    rng.shuffle(values)
    return values, items


def oracle_row(name, params, client, server_cls, values, queries, seed):
    uniq, cnt = np.unique(values, return_counts=True)
    pos = np.minimum(np.searchsorted(uniq, queries), uniq.size - 1)
    truth = np.where(uniq[pos] == queries, cnt[pos], 0).astype(np.float64)
    reports = client(params, rng=seed).perturb(values)
    t0 = time.perf_counter()
    server = server_cls(params).update(reports)
    est = np.asarray(server.estimate(queries), dtype=np.float64) * values.size
    seconds = time.perf_counter() - t0
    err = np.abs(est - truth)
    cells = sum(np.asarray(a).size for a in server._state().values())
    return {"oracle": name, "n": int(values.size), "max_err": float(err.max()), "mean_err": float(err.mean()),
            "server_s": seconds, "state_cells": int(cells)}


def oracles(ns, seeds, d=2**20, eps=1.0, beta=0.05):
    rows = []
    for n in ns:
        for seed in range(seeds):
            values, items = planted(n, d, seed)
            queries = np.unique(np.concatenate([items[:4], np.random.default_rng(seed).choice(d, 1996, replace=False)
                                                .astype(np.uint64)]))
            rows.append(oracle_row("HRR", hadamard.HRRParams(epsilon=eps, d=d), hadamard.HRRClient,
                                   hadamard.HRRServer, values, queries, seed))
            rows.append(oracle_row("HadaOracle", hadaoracle.HadaOracleParams.create(epsilon=eps, d=d, n=n, beta=beta,
                                                                          hash_seed=seed),
                                   hadaoracle.HadaOracleClient, hadaoracle.HadaOracleServer, values, queries, seed))
            rows.append(oracle_row("Hashtogram", hashtogram.HashtogramParams.create(epsilon=eps, d=d, n=n, beta=beta,
                                                                          hash_seed=seed),
                                   hashtogram.HashtogramClient, hashtogram.HashtogramServer, values, queries, seed))
    return rows


def heavy_row(name, params, values, seed):
    uniq, cnt = np.unique(values, return_counts=True)
    truth = dict(zip(uniq.tolist(), cnt.tolist()))
    proto = ldpfast.protocol(params.protocol)
    reports = proto.Client(params, rng=seed).perturb(values)
    t0 = time.perf_counter()
    hh = proto.Server(params).update(reports).heavy_hitters()
    seconds = time.perf_counter() - t0
    heavy = {x for x, c in truth.items() if c >= params.tau}
    found = set(hh.items.tolist())
    good = sum(truth.get(x, 0) >= params.tau - 2 * params.delta for x in found)
    max_err = max((abs(c - truth.get(x, 0)) for x, c in zip(hh.items.tolist(), hh.counts)), default=0.0)
    return {"algorithm": name, "n": int(values.size), "tau": params.tau, "heavy": len(heavy), "outputs": len(found),
            "recall": len(heavy & found) / len(heavy) if heavy else None,
            "precision": good / len(found) if found else None, "max_err": float(max_err), "server_s": seconds}


def heavy_hitters(ns, seeds, d=2**32, eps=2.0, beta=0.05):
    rows = []
    for n in ns:
        for seed in range(seeds):
            values, _ = planted(n, d, seed)
            rows.append(heavy_row("HadaHeavy", hadaheavy.HadaHeavyParams.create(epsilon=eps, d=d, n=n, beta=beta,
                                                                       hash_seed=seed), values, seed))
            rows.append(heavy_row("TreeHist (Count-Sketch)", treehist_cs.TreeHistCSParams.create(
                epsilon=eps, d=d, n=n, beta=beta, hash_seed=seed), values, seed))
    return rows


def slope(rows, name):
    pts = [(r["n"], r["max_err"]) for r in rows if r["oracle"] == name]
    ns = sorted({n for n, _ in pts})
    if len(ns) < 2:
        return None
    mean = [np.mean([e for m, e in pts if m == n]) for n in ns]
    return float(np.polyfit(np.log(ns), np.log(mean), 1)[0])


def plot(orows, path: Path) -> None:
    """Largest error against n, log-log, one line per oracle (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name in ("HRR", "HadaOracle", "Hashtogram"):
        ns = sorted({r["n"] for r in orows if r["oracle"] == name})
        errs = [np.mean([r["max_err"] for r in orows if r["oracle"] == name and r["n"] == n]) for n in ns]
        ax.loglog(ns, errs, marker="o", label=name)
    ax.set_xlabel("n (users)")
    ax.set_ylabel("largest count error")
    ax.set_title("Frequency oracles, eps = 1, d = 2^20")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n in {1e4, 1e5}, one seed (seconds)")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = ap.parse_args()
    ns = [10**4, 10**5] if args.quick else [10**5, 10**6, 10**7]
    seeds = args.seeds or (1 if args.quick else 2)
    start = time.perf_counter()
    orows = oracles(ns, seeds)
    hrows = heavy_hitters(ns, seeds)
    print(f"{'oracle':<11} {'n':>9} {'max err':>10} {'mean err':>10} {'server s':>9} {'cells':>9}")
    for r in orows:
        print(f"{r['oracle']:<11} {r['n']:>9} {r['max_err']:>10.1f} {r['mean_err']:>10.1f} {r['server_s']:>9.3f} "
              f"{r['state_cells']:>9}")
    slopes = {name: slope(orows, name) for name in ("HRR", "HadaOracle", "Hashtogram")}
    print("log-log slope of max error vs n:", {k: (round(v, 3) if v is not None else None) for k, v in slopes.items()})
    print(f"\n{'algorithm':<24} {'n':>9} {'heavy':>6} {'out':>5} {'recall':>7} {'prec':>6} "
          f"{'max err':>10} {'server s':>9}")
    for r in hrows:
        rec = "-" if r["recall"] is None else f"{r['recall']:.2f}"
        prec = "-" if r["precision"] is None else f"{r['precision']:.2f}"
        print(f"{r['algorithm']:<24} {r['n']:>9} {r['heavy']:>6} {r['outputs']:>5} {rec:>7} {prec:>6} "
              f"{r['max_err']:>10.1f} {r['server_s']:>9.3f}")
    total = time.perf_counter() - start
    print(f"\ntotal {total:.1f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    plot(orows, args.out / "ww_table1.png")
    (args.out / "ww_table1.json").write_text(json.dumps(
        {"oracles": orows, "slopes": slopes, "heavy_hitters": hrows, "seconds": total, "quick": args.quick}, indent=1))


if __name__ == "__main__":
    main()
