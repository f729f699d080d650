"""Multi-dimensional range queries (issue 32, point 3): TDG, HDG and the adaptive grid from
real client reports, against the Apache-2.0 reference HDG of Yang et al. (privmdr) where its
source is at hand, on the same records and queries.

Data: ``--n`` records (default 1e6) of 6 attributes, a correlated Gaussian (unit variances,
correlation ``--rho`` between every pair, default 0.5) cut into 64 bins over [-3, 3]
(ldpfast.protocols.multiattribute._grid_hooks.correlated_records); and UCI Adult's six
numeric attributes, each cut into 64 equal-width bins over its range (32,561 people).
Queries: privmdr's generator: ``--dims`` random attributes (default 2), each a range of half
the domain (32 of 64 values) starting at a multiple of 4 (``--queries`` per setting, default 200). Error: the
mean absolute error of the answered fractions (privmdr's MAE).

Adaptive grid: a first ``--phase1`` share of the users (default 10%) report to an HDG
server; the cuts of the others' adaptive grid come from its marginals; the answers come from
the second phase alone (the first phase's users are spent on the cuts).

Server time: ``update`` of all reports, the post-processing (consistency, weighted update)
and the answers, wall and CPU (``time.process_time``: every thread), ``--threads`` kernel
threads (0: all), the best of ``--repeat`` servers built from the same reports. The
reference's server time: its aggregation (its OUE is simulated from the true cell counts,
binomial draws), consistency and weighted update, in its Python loops.

    PYTHONPATH=python python3 bench/multidim_ranges.py [--n 1000000] [--eps 0.5,1,2] [--reference PATH]
        [--out bench/results/multidim_ranges.json] [--figure docs/img/range_error.png]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ldpfast.datasets import load_adult
from ldpfast.protocols.multiattribute import adaptive_grid, hdg, tdg
from ldpfast.protocols.multiattribute._grid_hooks import correlated_records

DOMAIN = 64
REFERENCE_MIRROR = "/work/.mirror/YangJianyu-bupt+privmdr/repo"
REFERENCE_FILES = ("HDG.py", "choose_granularity.py", "consistency_method.py", "estimate_method.py",
                   "frequency_oracle.py", "generate_query.py", "grid_generate.py")


def adult_records() -> np.ndarray:
    data = load_adult()
    columns = []
    for values in data.numeric.values():
        low, high = int(values.min()), int(values.max())
        columns.append((values - low) * DOMAIN // (high - low + 1))
    return np.stack(columns, axis=1).astype(np.int64)


def queries(k: int, count: int, seed: int, dims: int = 2) -> Tuple[np.ndarray, np.ndarray]:
    """privmdr's queries over ``dims`` attributes: ranges of 8 of 16 coarse blocks (of 4 values)."""
    gen = np.random.default_rng(seed)
    lows, highs = np.zeros((count, k), dtype=np.int64), np.full((count, k), DOMAIN - 1, dtype=np.int64)
    for q in range(count):
        for a in gen.choice(k, dims, replace=False):
            lows[q, a] = gen.integers(0, 9) * 4
            highs[q, a] = lows[q, a] + 31
    return lows, highs


def truth(records: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
    return np.array([np.all((records >= lo) & (records <= hi), axis=1).mean() for lo, hi in zip(lows, highs)])


def run_ldpfast(module: Any, params: Any, records: np.ndarray, lows: np.ndarray, highs: np.ndarray, seed: int,
                threads: int, repeat: int = 1) -> Tuple[np.ndarray, Dict[str, float], Any]:
    """Answers from one collection; the server's times are the best of ``repeat`` servers
    built from the same reports (other processes add time, never remove it)."""
    names = {"hdg": "HDG", "tdg": "TDG", "adaptive-grid": "AdaptiveGrid"}[params.protocol]
    reports = getattr(module, f"{names}Client")(params, rng=seed).perturb(records)
    best: Dict[str, float] = {}
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        server = getattr(module, f"{names}Server")(params, threads=threads).update(reports)
        update = time.perf_counter() - wall
        answers = server.range_batch(lows, highs)
        times = {"update_s": update, "server_wall_s": time.perf_counter() - wall,
                 "server_cpu_s": time.process_time() - cpu}
        best = {key: min(value, best.get(key, value)) for key, value in times.items()}
    return answers, best, server


def run_adaptive(records: np.ndarray, eps: float, lows: np.ndarray, highs: np.ndarray, seed: int, share: float,
                 threads: int, repeat: int) -> Tuple[np.ndarray, Dict[str, float]]:
    first = int(len(records) * share)
    params1 = hdg.HDGParams.create(eps, (DOMAIN,) * records.shape[1], first)
    _, _, server1 = run_ldpfast(hdg, params1, records[:first], lows[:1], highs[:1], seed, threads)
    params = adaptive_grid.AdaptiveGridParams.plan(eps, (DOMAIN,) * records.shape[1], len(records) - first,
                                                   [server1.marginal(a) for a in range(records.shape[1])])
    answers, times, _ = run_ldpfast(adaptive_grid, params, records[first:], lows, highs, seed + 1, threads, repeat)
    return answers, times


def load_reference(path: Optional[str]) -> Optional[Dict[str, Any]]:
    """privmdr's modules, read from its git mirror (``git show``) into a temporary folder."""
    if path is None or not os.path.isdir(path):
        return None
    folder = tempfile.mkdtemp(prefix="privmdr-")
    for name in REFERENCE_FILES:
        text = subprocess.run(["git", "--git-dir", os.path.join(path, ".git") if os.path.isdir(
            os.path.join(path, ".git")) else path, "show", f"HEAD:{name}"], capture_output=True, text=True, check=True)
        with open(os.path.join(folder, name), "w") as out:
            out.write(text.stdout)
    sys.path.insert(0, folder)
    import HDG  # type: ignore[import-not-found]  # noqa: E402  (the reference, from the folder above)
    import generate_query  # type: ignore[import-not-found]  # noqa: E402

    return {"HDG": HDG, "generate_query": generate_query}


def run_reference(ref: Dict[str, Any], records: np.ndarray, eps: float, lows: np.ndarray, highs: np.ndarray,
                  seed: int) -> Tuple[np.ndarray, Dict[str, float]]:
    import random

    random.seed(seed)
    np.random.seed(seed)
    n, k = records.shape
    dims = int(((lows[0] > 0) | (highs[0] < DOMAIN - 1)).sum())
    args = SimpleNamespace(user_num=n, attribute_num=k, domain_size=DOMAIN, epsilon=eps, query_dimension=dims,
                           consistency_iteration_num_max=100, weighted_update_iteration_num_max=100,
                           dimension_query_volume=0.5, algorithm_name="HDG")
    query_list = []
    for lo, hi in zip(lows, highs):
        query = ref["generate_query"].RangeQuery(dims, k, args=args)
        query.initialize_range_query()
        query.selected_attribute_list = [int(a) for a in np.flatnonzero((lo > 0) | (hi < DOMAIN - 1))]
        for a in query.selected_attribute_list:
            node = query.query_attribute_node_list[a]
            node.left_interval, node.right_interval = int(lo[a]), int(hi[a])
        query_list.append(query)
    shuffled = records[np.random.permutation(n)].tolist()
    grids = ref["HDG"].AG_Uniform_Grid_1_2_way_optimal(args=args)
    grids.group_attribute()
    grids.construct_Grid_set()
    wall, cpu = time.perf_counter(), time.process_time()
    grids.get_LDP_Grid_set_divide_user(shuffled)
    collect = time.perf_counter() - wall
    grids.get_consistent_Grid_set()
    grids.get_weight_update_for_2_way_group()
    post = time.perf_counter() - wall - collect
    grids.answer_range_query_list(query_list)
    answers = np.array(grids.weighted_update_answer_list) / n
    return answers, {"collect_s": collect, "post_s": post, "server_wall_s": time.perf_counter() - wall,
                     "server_cpu_s": time.process_time() - cpu}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--rho", type=float, default=0.5)
    parser.add_argument("--eps", default="0.5,1,2")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dims", type=int, default=2, help="attributes each query constrains")
    parser.add_argument("--data", default="gaussian,adult")
    parser.add_argument("--phase1", type=float, default=0.1)
    parser.add_argument("--runs", type=int, default=3, help="collections per setting of the Gaussian data")
    parser.add_argument("--adult-runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="servers timed per collection (best time kept)")
    parser.add_argument("--reference", default=REFERENCE_MIRROR, help="privmdr's git mirror ('' to skip)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--figure", default=None)
    args = parser.parse_args(argv)
    epsilons = [float(e) for e in args.eps.split(",")]
    ref = load_reference(args.reference or None)
    data = {"gaussian": lambda: (correlated_records((DOMAIN,) * 6, args.n, rho=args.rho, seed=11), args.runs),
            "adult": lambda: (adult_records(), args.adult_runs)}
    rows = []
    for name in args.data.split(","):
        records, runs = data[name]()
        lows, highs = queries(records.shape[1], args.queries, seed=5, dims=args.dims)
        true = truth(records, lows, highs)
        for eps in epsilons:
            for method in ("tdg", "hdg", "adaptive-grid", "privmdr-hdg"):
                if method == "privmdr-hdg" and ref is None:
                    continue
                errors, times = [], []
                for run in range(runs):
                    seed = 100 * run + 7
                    if method == "adaptive-grid":
                        answers, timing = run_adaptive(records, eps, lows, highs, seed, args.phase1, args.threads,
                                                       args.repeat)
                    elif method == "privmdr-hdg":
                        answers, timing = run_reference(ref, records, eps, lows, highs, seed)  # type: ignore[arg-type]
                    else:
                        module = {"tdg": tdg, "hdg": hdg}[method]
                        params = module.__dict__[f"{method.upper()}Params"].create(eps, (DOMAIN,) * 6, len(records))
                        answers, timing, _ = run_ldpfast(module, params, records, lows, highs, seed, args.threads,
                                                         args.repeat)
                    errors.append(float(np.abs(answers - true).mean()))
                    times.append(timing)
                row = {"data": name, "n": len(records), "dims": args.dims, "eps": eps, "method": method, "runs": runs,
                       "mae": float(np.mean(errors)), "mae_runs": errors,
                       **{key: float(np.median([t[key] for t in times])) for key in times[0]}}
                rows.append(row)
                print(f"{name:8s} n={len(records):8d} eps={eps:<4g} {method:14s} MAE {row['mae']:.4f}  server "
                      f"{row['server_wall_s']:.3f} s wall, {row['server_cpu_s']:.3f} s CPU", flush=True)
    if args.out:
        with open(args.out, "w") as out:
            json.dump({"rho": args.rho, "queries": args.queries, "phase1": args.phase1, "rows": rows}, out, indent=1)
    if args.figure:
        plot(rows, args.figure)
    return 0


def plot(rows: List[Dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, name in zip(axes, ("gaussian", "adult")):
        for method in ("tdg", "hdg", "adaptive-grid", "privmdr-hdg"):
            points = [(r["eps"], r["mae"]) for r in rows if r["data"] == name and r["method"] == method]
            if points:
                ax.plot(*zip(*points), marker="o", label=method)
        ax.set_yscale("log")
        ax.set_xlabel("epsilon")
        ax.set_title(f"{name} (n = {next(r['n'] for r in rows if r['data'] == name):,})")
    axes[0].set_ylabel("MAE of 2-D range queries")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
