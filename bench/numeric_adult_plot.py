"""The figure of docs/guide/distribution.md: the age distribution of the bundled Adult extract
(32,561 people) estimated by the default entry point at eps = 1, against the truth.

    PYTHONPATH=python python3 bench/numeric_adult_plot.py [--eps 1] [--out docs/img/distribution_adult_age.png]

Needs matplotlib.
"""

from __future__ import annotations

import argparse

import numpy as np

from ldpfast.datasets import load_adult
from ldpfast.protocols.numeric.distribution import distribution_plan

BOUNDS = (16.5, 90.5)   # ages 17..90, one unit per year


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="docs/img/distribution_adult_age.png")
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ages = load_adult().numeric["age"].astype(np.float64)
    plan = distribution_plan(args.eps, BOUNDS, ages.size)
    est = plan.simulate(ages, rng=args.seed)
    w1, ks = est.distances(ages)
    years = np.arange(17, 91)
    truth = np.bincount(ages.astype(np.int64) - 17, minlength=years.size) / ages.size
    estimated = est.range(years - 0.5, years + 0.5)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    left.bar(years, truth, width=1.0, color="0.8", label="true share per year")
    left.plot(years, estimated, color="C0", label=f"estimated ({plan.method}, d={plan.buckets})")
    left.set_xlabel("age")
    left.set_ylabel("share of people")
    left.legend(frameon=False)
    grid = np.linspace(*BOUNDS, 600)
    right.step(grid, np.searchsorted(np.sort(ages), grid, side="right") / ages.size, color="0.5", label="true CDF")
    right.plot(grid, est.cdf(grid), color="C0", label="estimated CDF")
    right.set_xlabel("age")
    right.legend(frameon=False)
    fig.suptitle(f"Adult, age: n = {ages.size:,}, eps = {args.eps:g}; W1 = {w1:.2f} years, KS = {ks:.3f}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"{args.out}: {plan.method} over {plan.buckets} buckets, W1 = {w1:.3f} years, KS = {ks:.4f}, "
          f"median {float(est.quantile(0.5)):.1f} (true {np.median(ages):.1f}), mean {est.mean():.2f} "
          f"(true {ages.mean():.2f})")


if __name__ == "__main__":
    main()
