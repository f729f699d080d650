"""The shuffle accountant (:mod:`ldpfast.theory.shuffle`): its bounds and CPU time at the
inputs of /work/shared/TOOLBOX.md's table, optionally next to wangsw/PrivacyAmplification's
numerical upper bound measured in the same run, and the central-epsilon figure of the docs.

    PYTHONPATH=python python3 bench/shuffle_accountant.py [--wangsw PATH/unifiedamplification.py]
        [--wangsw-large] [--rounds 1,10,100] [--plot docs/img/shuffle_central_eps.png]

``--wangsw`` loads that file (a checkout of the public repository; never vendored here)
and times its ``amplificationUB(p, beta, q, q, n, delta, T=24)`` for general eps0-LDP
randomizers at n = 1e6 (and 1e8 with ``--wangsw-large``: minutes per input). Times are
process CPU seconds (median of ``--repeat`` runs for ours).
"""

from __future__ import annotations

import argparse
import importlib.util
import math

import numpy as np

try:
    from machine import median_cpu
except ImportError:  # imported as bench.shuffle_accountant
    from .machine import median_cpu

from ldpfast.theory.shuffle import shuffle_closed_form, shuffle_epsilon

# TOOLBOX.md (2-core machine, delta = 1e-6): wangsw's upper bound (T = 24) and its CPU seconds
PUBLISHED = {(10**6, 1.0): (0.003517, 8.5), (10**6, 4.0): (0.03431, 3.5), (10**6, 8.0): (0.3039, 0.8),
             (10**8, 1.0): (0.0002601, 68.0), (10**8, 4.0): (0.002801, 28.0), (10**8, 8.0): (0.02567, 5.2)}


def load_wangsw(path: str):
    spec = importlib.util.spec_from_file_location("wangsw_unifiedamplification", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def table(args) -> None:
    wangsw = load_wangsw(args.wangsw) if args.wangsw else None
    print("| n | eps0 | upper | lower | closed form | our CPU s | TOOLBOX wangsw upper (CPU s) | wangsw here (CPU s) |")
    print("|---|---|---|---|---|---|---|---|")
    for (n, eps0), (published, published_s) in PUBLISHED.items():
        bound, seconds = median_cpu(shuffle_epsilon, eps0, n, 1e-6, repeat=args.repeat)
        here = ""
        if wangsw is not None and (n <= 10**6 or args.wangsw_large):
            p = math.exp(eps0)
            value, theirs = median_cpu(wangsw.amplificationUB, p, (p - 1) / (p + 1), p, p, n, 1e-6, 24)
            here = f"{value:.6g} ({theirs:.1f}; {theirs / seconds:.0f}x ours)"
        print(f"| {n:.0e} | {eps0:g} | {bound.upper:.6g} | {bound.lower:.6g} | {bound.closed_form:.4g} | "
              f"{seconds:.2f} | {published} ({published_s}) | {here} |", flush=True)
    for rounds in [int(r) for r in args.rounds.split(",") if r.strip()]:
        for n in (10**6, 10**8):
            bound, seconds = median_cpu(shuffle_epsilon, 1.0, n, 1e-6, rounds=rounds)
            print(f"rounds={rounds} n={n:.0e} eps0=1: upper {bound.upper:.6g} lower {bound.lower:.6g} "
                  f"closed form {bound.closed_form:.4g}, {seconds:.2f} CPU s", flush=True)
    bound, seconds = median_cpu(shuffle_epsilon, 1.0, 10**6, 1e-6, k=16)
    print(f"k-RR, k=16, n=1e6 eps0=1: upper {bound.upper:.6g} lower {bound.lower:.6g}, {seconds:.2f} CPU s")


def plot(path: str, delta: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = np.unique(np.logspace(3, 9, 13).astype(np.int64))
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for eps0, color in zip((0.5, 1.0, 2.0, 4.0, 8.0), ("C0", "C1", "C2", "C3", "C4")):
        bounds = [shuffle_epsilon(eps0, int(n), delta) for n in ns]
        ax.loglog(ns, [b.upper for b in bounds], color=color, label=f"eps0 = {eps0:g}")
        ax.loglog(ns, [b.lower for b in bounds], color=color, linestyle="--", linewidth=0.8)
        ax.loglog(ns, [shuffle_closed_form(eps0, int(n), delta) for n in ns], color=color, linestyle=":",
                  linewidth=0.8)
    ax.set_xlabel("users n")
    ax.set_ylabel(f"central epsilon at delta = {delta:g}")
    ax.set_title("shuffled eps0-LDP reports: upper (solid), lower (dashed), closed form (dotted)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wangsw", default=None, help="path of wangsw/PrivacyAmplification's unifiedamplification.py")
    parser.add_argument("--wangsw-large", action="store_true", help="also run it at n = 1e8 (minutes each)")
    parser.add_argument("--rounds", default="10,100", help="composed rounds to time (default 10,100)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--plot", default=None, help="write the central-epsilon figure to this PNG")
    parser.add_argument("--delta", type=float, default=1e-9, help="delta of the figure (default 1e-9)")
    args = parser.parse_args()
    table(args)
    if args.plot:
        plot(args.plot, args.delta)


if __name__ == "__main__":
    main()
