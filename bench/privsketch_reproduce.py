"""Reproduce [PS] Fig. 4 (MSE against eps) and Fig. 5 (top-k Var / NCR), plus the LDP-safe
PrivSketch variant.

Protocols: PrivSketch (R2 estimator), PrivSketch-noSmp, Multi-PCMS-Mean (faithful, and with
the derived collision correction), Multi-PCMS-Min, PS-OLH (padding = P90 of set sizes, no
amplification) and the LDP-safe variant (no ordering matrix; count-mean and fill-corrected
decoding). SVIM enters the top-k tables. K = 4, M = 128, eps in {0.5, 1, 2, 4, 8, 16}.

Data: "synthetic" = [PS] Table 1 Dataset3 shape (n = 100,000, d = 20,000, Zipf(1.1) items,
lengths int(N(1,0.2) * 100) de-duplicated: max 115, P90 76 with seed 7, against the paper's
112 / 73);
"kosarak-prefix" (36,681 users, the first 3.7% of Kosarak; full Kosarak is not bundled) and
"retail" (88,162 users), both with d = max id + 1. ``--scale`` shrinks the synthetic n and
caps the real data's users (the d stays). The "bias floor" row is MSE(ftilde, f): the
count-min Bloom bias that PrivSketch and noSmp cannot go below (SPEC 5.4 item 4).

    PYTHONPATH=python python3 bench/privsketch_reproduce.py [--scale 0.25] [--reps 1] [--out bench/results]
"""

import argparse
import os
import time
import warnings

import numpy as np

from ldpfast import metrics
from ldpfast import privsketch as ps
from ldpfast.datasets import SetData, load_sets, zipf_sets

EPSILONS = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
TOP_K = 50
PROTOCOLS = ["PrivSketch", "PrivSketch-noSmp", "Multi-PCMS-Mean", "Multi-PCMS-Mean+corr", "Multi-PCMS-Min",
             "PS-OLH", "LDP-safe (mean)", "LDP-safe (mean-corr)"]


def load(name, scale, seed):
    if name == "synthetic":
        return zipf_sets(max(1000, int(100_000 * scale)), 20_000, length=100, seed=seed)
    data = load_sets(name)
    n = data.n if scale >= 1 else max(1000, int(data.n * scale))
    if n < data.n:
        data = SetData(offsets=data.offsets[:n + 1], items=data.items[:data.offsets[n]], d=data.d, name=name)
    return data


def run_protocols(data, eps, seed, threads):
    """Frequency estimates of every protocol (whole domain), and wall times."""
    out, times = {}, {}
    d = data.d

    def timed(name, fn):
        t0 = time.perf_counter()
        out[name] = fn()
        times[name] = time.perf_counter() - t0

    def sketch(params_cls, client_cls, server_cls, **estimate):
        params = params_cls.create(epsilon=eps, d=d, K=4, M=128, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ps.PrivacyWarning)
            client = client_cls(params, rng=seed + 1, threads=threads)
        kwargs = {"threads": threads} if server_cls in (ps.Server, ps.NoSmpServer) else {}
        server = server_cls(params, **kwargs).update(client.perturb(data))
        return server

    timed("PrivSketch", lambda: sketch(ps.Params, ps.Client, ps.Server).estimate())
    timed("PrivSketch-noSmp", lambda: sketch(ps.NoSmpParams, ps.NoSmpClient, ps.NoSmpServer).estimate())
    mean_server = {}
    timed("Multi-PCMS-Mean", lambda: mean_server.setdefault(
        "s", sketch(ps.MultiPCMSMeanParams, ps.MultiPCMSMeanClient, ps.MultiPCMSMeanServer)).estimate())
    out["Multi-PCMS-Mean+corr"] = mean_server["s"].estimate(correction=True)
    timed("Multi-PCMS-Min", lambda: sketch(ps.MultiPCMSMinParams, ps.MultiPCMSMinClient,
                                           ps.MultiPCMSMinServer).estimate())
    olh = ps.PSOLHParams(epsilon=eps, d=d, pad_len=ps.padding_length(data))
    timed("PS-OLH", lambda: ps.PSOLHServer(olh, threads=threads).update(
        ps.PSOLHClient(olh, rng=seed + 2, threads=threads).perturb(data)).estimate())
    safe = {}
    timed("LDP-safe (mean)", lambda: safe.setdefault(
        "s", sketch(ps.SafeParams, ps.SafeClient, ps.SafeServer)).estimate(estimator="mean"))
    out["LDP-safe (mean-corr)"] = safe["s"].estimate(estimator="mean-corrected")
    return out, times


def bias_floor(data, seed, threads):
    """MSE of the count-min frequency ftilde itself (noSmp at eps = 700 never flips)."""
    params = ps.NoSmpParams.create(epsilon=700.0, d=data.d, K=4, M=128, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ps.PrivacyWarning)
        reports = ps.NoSmpClient(params, rng=0, threads=threads).perturb(data)
    server = ps.NoSmpServer(params, threads=threads).update(reports)
    return server.estimate()


def table(title, rows, cols, fmt):
    lines = [f"\n{title}", "| protocol | " + " | ".join(f"eps={c:g}" for c in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for name, values in rows.items():
        lines.append(f"| {name} | " + " | ".join(fmt(v) for v in values) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["synthetic", "kosarak-prefix", "retail"])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--reps", type=int, default=1, help="repetitions averaged ([PS] uses 10)")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    report, curves = [], {}
    for name in args.datasets:
        t_data = time.perf_counter()
        data = load(name, args.scale, seed=7)
        truth = data.frequencies()
        sizes = data.sizes()
        ftilde = bias_floor(data, seed=11, threads=args.threads)
        head = (f"\n## {name}: n={data.n:,} d={data.d:,} set sizes max {sizes.max()} mean {sizes.mean():.1f} "
                f"P90 {ps.padding_length(data)}; reps={args.reps}")
        print(head, flush=True)
        mse = {p: np.zeros(len(EPSILONS)) for p in PROTOCOLS}
        var = {p: np.zeros(len(EPSILONS)) for p in PROTOCOLS + ["SVIM"]}
        ncr = {p: np.zeros(len(EPSILONS)) for p in PROTOCOLS + ["SVIM"]}
        total_times = {}
        for j, eps in enumerate(EPSILONS):
            for rep in range(args.reps):
                seed = 1000 * rep + j
                est, times = run_protocols(data, eps, seed, args.threads)
                for p in PROTOCOLS:
                    mse[p][j] += metrics.mse(est[p], truth) / args.reps
                    var[p][j] += metrics.var_topk(est[p], truth, data.n, TOP_K) / args.reps
                    ncr[p][j] += metrics.ncr(est[p], truth, TOP_K) / args.reps
                for p, t in times.items():
                    total_times[p] = total_times.get(p, 0.0) + t
                result = ps.svim(data, eps, k=TOP_K, rng=seed, threads=args.threads)
                svim_est = np.zeros(data.d)
                svim_est[result.top] = result.estimates
                var["SVIM"][j] += metrics.var_topk(svim_est, truth, data.n, TOP_K) / args.reps
                ncr["SVIM"][j] += metrics.ncr(svim_est, truth, TOP_K) / args.reps
            print(f"  eps={eps:g} done ({time.perf_counter() - t_data:.0f} s)", flush=True)
        mse_rows = dict(mse)
        mse_rows["bias floor MSE(ftilde, f)"] = np.full(len(EPSILONS), metrics.mse(ftilde, truth))
        mse_rows["ratio Multi-PCMS-Mean / PrivSketch"] = mse["Multi-PCMS-Mean"] / mse["PrivSketch"]
        mse_rows["ratio LDP-safe (mean-corr) / PrivSketch"] = mse["LDP-safe (mean-corr)"] / mse["PrivSketch"]
        block = [head,
                 table(f"MSE (frequency scale, whole domain) on {name}", mse_rows, EPSILONS, lambda v: f"{v:.3g}"),
                 table(f"Var over top-{TOP_K} (count scale, C_e ∩ C_t) on {name}", var, EPSILONS,
                       lambda v: f"{v:.3g}"),
                 table(f"NCR top-{TOP_K} on {name}", ncr, EPSILONS, lambda v: f"{v:.2f}"),
                 "\nwall time, all eps and reps (s): " + ", ".join(f"{p} {t:.1f}" for p, t in total_times.items())]
        text = "\n".join(block)
        print(text, flush=True)
        report.append(text)
        curves[name] = mse
    with open(os.path.join(args.out, "privsketch_reproduce.md"), "w") as fh:
        fh.write("\n".join(report) + "\n")
    plot(curves, os.path.join(args.out, "privsketch_mse.png"))
    print(f"\nwrote {args.out}/privsketch_reproduce.md and privsketch_mse.png")


def plot(curves, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(5.5 * len(curves), 4.2), squeeze=False)
    for ax, (name, mse) in zip(axes[0], curves.items()):
        for p, values in mse.items():
            ax.plot(EPSILONS, values, marker="o", label=p, linestyle="--" if "LDP-safe" in p else "-")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("epsilon")
        ax.set_ylabel("MSE")
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("PrivSketch (not LDP: ordering matrix) vs eps-LDP baselines, K=4, M=128")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
