"""Range queries over an ordered domain of 1,024 values: the MSE of hierarchical histograms
(``hh``, constrained inference), HIO (the same reports, direct sums of the decomposition's
nodes), AHEAD (adaptive rounds) and a flat OLH histogram (the sum of the range's per-value
estimates), on Gaussian, Cauchy, Zipf and Adult-age data.

For each data set and repetition: ``n`` users, ``--queries`` ranges of volume 0.5 (512
values at uniformly random positions), and the mean squared error of the answered shares
against the true shares; the table is the mean over repetitions, with the server time
(aggregating the reports and answering the queries, with standard errors).

Data on ``[0, 1024)``: ``gaussian`` N(512, 100^2), ``cauchy`` location 512 scale 30, both
redrawn until inside the domain; ``zipf`` exponent 1.3 (value = rank - 1, tail clipped to
1023); ``adult-age`` the bundled Adult ages 17..90 spread onto the 1,024 buckets
(``(age - 17) * 1024 // 74``) and resampled with replacement to ``n`` users.

    PYTHONPATH=python python3 bench/range_queries.py [--n 1000000] [--reps 3] [--plot docs/img/range_mse_eps.png]

``--plot`` also sweeps epsilon on the Gaussian data (``--sweep-n`` users) and draws MSE vs
epsilon (needs matplotlib).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Callable, Dict, List

import numpy as np

from ldpfast import datasets
from ldpfast._registry import protocol
from ldpfast.protocols.numeric import ahead, hierarchy

D = 1024
METHODS = ("HH (B=4, consistent)", "HIO (B=4, direct)", "AHEAD (B=2)", "flat OLH")


def truncated(draw: Callable[[int], np.ndarray], n: int) -> np.ndarray:
    out = np.zeros(0, dtype=np.int64)
    while out.size < n:
        x = np.round(draw(2 * n)).astype(np.int64)
        out = np.concatenate([out, x[(x >= 0) & (x < D)]])
    return out[:n]


def population(name: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if name == "gaussian":
        return truncated(lambda m: rng.normal(512, 100, m), n)
    if name == "cauchy":
        return truncated(lambda m: 512 + 30 * rng.standard_cauchy(m), n)
    if name == "zipf":
        return np.minimum(rng.zipf(1.3, size=n) - 1, D - 1)
    age = datasets.load_adult().numeric["age"]
    buckets = (age - 17) * D // 74
    return buckets[rng.integers(0, buckets.size, n)]


def true_shares(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    cdf = np.concatenate([[0], np.cumsum(np.bincount(values, minlength=D))]) / values.size
    return np.asarray(cdf[hi + 1] - cdf[lo])


def ahead_rounds(values: np.ndarray, eps: float, lo: np.ndarray, hi: np.ndarray, seed: int) -> tuple:
    """AHEAD (B = 2, default threshold) on random equal groups, one per round; the server time
    counts each round's aggregation, the next round's parameters, the combination and the
    answers (not the clients)."""
    rng = np.random.default_rng(seed)
    params = ahead.AHEADParams(epsilon=eps, d=D, branching=2)
    servers, took = [], 0.0
    for group in np.array_split(rng.permutation(values.size), params.d.bit_length() - 1):
        reports = ahead.AHEADClient(params, rng=int(rng.integers(2**62))).perturb(values[group])
        start = time.perf_counter()
        servers.append(ahead.AHEADServer(params).update(reports))
        params = servers[-1].next_params()
        took += time.perf_counter() - start
    start = time.perf_counter()
    answers = ahead.combine(servers).query(lo, hi).values
    return answers, took + time.perf_counter() - start


def run_methods(values: np.ndarray, eps: float, lo: np.ndarray, hi: np.ndarray, seed: int) -> Dict[str, tuple]:
    """``{method: (answers, server seconds)}``."""
    out: Dict[str, tuple] = {}
    params = hierarchy.HHParams(epsilon=eps, d=D, branching=4)
    reports = hierarchy.HHClient(params, rng=seed).perturb(values)
    for method, consistent in ((METHODS[0], True), (METHODS[1], False)):
        start = time.perf_counter()
        answers = hierarchy.HHServer(params).update(reports).range_query(lo, hi, consistent=consistent).values
        out[method] = (answers, time.perf_counter() - start)
    out[METHODS[2]] = ahead_rounds(values, eps, lo, hi, seed + 1)
    olh = protocol("olh")
    flat_params = olh.params(epsilon=eps, d=D)
    flat_reports = olh.client(flat_params, rng=seed + 2).perturb(values)
    start = time.perf_counter()
    cdf = np.concatenate([[0.0], np.cumsum(olh.aggregator(flat_params).update(flat_reports).estimate())])
    out[METHODS[3]] = (cdf[hi + 1] - cdf[lo], time.perf_counter() - start)
    return out


def table(data_sets: List[str], eps: float, n: int, reps: int, queries: int, seed: int) -> Dict[str, Dict[str, dict]]:
    result: Dict[str, Dict[str, dict]] = {}
    for name in data_sets:
        errors: Dict[str, List[float]] = {m: [] for m in METHODS}
        seconds: Dict[str, List[float]] = {m: [] for m in METHODS}
        for rep in range(reps):
            values = population(name, n, seed + 100 * rep)
            rng = np.random.default_rng(seed + 100 * rep + 1)
            lo = rng.integers(0, D // 2 + 1, queries)
            hi = lo + D // 2 - 1
            truth = true_shares(values, lo, hi)
            for method, (answers, took) in run_methods(values, eps, lo, hi, seed + 100 * rep + 2).items():
                errors[method].append(float(np.mean((answers - truth) ** 2)))
                seconds[method].append(took)
        result[name] = {m: {"mse": float(np.mean(errors[m])), "server_s": float(np.median(seconds[m]))}
                        for m in METHODS}
        print(name, {m: f"{v['mse']:.3g} ({v['server_s']:.2f} s)" for m, v in result[name].items()}, flush=True)
    return result


def markdown(result: Dict[str, Dict[str, dict]], eps: float, n: int, reps: int, queries: int) -> str:
    lines = [f"MSE of range answers (volume 0.5), d = {D}, eps = {eps}, n = {n:,}, {reps} repetitions x "
             f"{queries} queries; server seconds in parentheses", "",
             "| data | " + " | ".join(METHODS) + " |", "|---" * (len(METHODS) + 1) + "|"]
    for name, row in result.items():
        best = min(row[m]["mse"] for m in METHODS)
        cells = [(f"**{row[m]['mse']:.3g}**" if row[m]["mse"] == best else f"{row[m]['mse']:.3g}")
                 + f" ({row[m]['server_s']:.2f})" for m in METHODS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(path: str, n: int, reps: int, queries: int, seed: int) -> Dict[str, Dict[str, float]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep = {}
    for eps in (0.4, 0.8, 1.6, 3.2):
        sweep[str(eps)] = {m: v["mse"] for m, v in table(["gaussian"], eps, n, reps, queries, seed)["gaussian"].items()}
    fig, ax = plt.subplots(figsize=(6, 4))
    for method in METHODS:
        ax.plot([float(e) for e in sweep], [sweep[e][method] for e in sweep], marker="o", label=method)
    ax.set(xscale="log", yscale="log", xlabel="epsilon", ylabel="MSE of range answers (volume 0.5)",
           title=f"Gaussian data, d = {D}, n = {n:,}")
    ax.set_xticks([float(e) for e in sweep], list(sweep))
    ax.minorticks_off()
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return sweep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--eps", type=float, default=0.8)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--data", default="gaussian,cauchy,zipf,adult-age")
    parser.add_argument("--json", help="write the numbers to this file")
    parser.add_argument("--plot", help="also sweep epsilon on the Gaussian data and draw MSE vs epsilon here")
    parser.add_argument("--sweep-n", type=int, default=100_000)
    args = parser.parse_args()
    result = table(args.data.split(","), args.eps, args.n, args.reps, args.queries, args.seed)
    print(markdown(result, args.eps, args.n, args.reps, args.queries))
    record = {"eps": args.eps, "n": args.n, "reps": args.reps, "queries": args.queries, "table": result}
    if args.plot:
        record["sweep"] = {"n": args.sweep_n, "mse": plot(args.plot, args.sweep_n, args.reps, args.queries, args.seed)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
