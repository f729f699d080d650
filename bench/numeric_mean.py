"""Numeric means (ldpfast.protocols.numeric): measured worst-case ``n Var`` against Wang et
al.'s closed forms at eps = 1, and the server's throughput (reports per second, one thread)
against ``np.sum`` of the same uint32 column in the same run.

``n Var`` is measured two ways. Over ``R`` collections of ``n`` users at the worst-case input:
``n mean_r (t_hat_r - t)^2``, a mean of ``R`` squared normals, relative standard deviation
``sqrt(2/R)``; and per user, the sample variance of ``N`` users' contributions (the estimate
is their mean, so ``n Var`` is their variance), relative standard deviation
``sqrt((kurtosis - 1)/N)``, computed from the sample. Each is accepted within 4 of its
standard deviations plus the grid's 0.1%.

With ``--plot PATH`` it draws instead the docs' figure (docs/img/numeric_mean_eps.png): the
MSE of the mean against eps for each mechanism on Beta(5, 2) data beside its closed form at
the data (:func:`ldpfast.experiments.numeric.simulate_means`).

    PYTHONPATH=python python3 bench/numeric_mean.py [--runs 20000] [--n 1000] [--reports 20000000]
    PYTHONPATH=python python3 bench/numeric_mean.py --plot docs/img/numeric_mean_eps.png [--runs 200]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any, Tuple

import numpy as np

from ldpfast.protocols.numeric import _grid, mean, multidim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import best_time  # noqa: E402  (found through sys.path above)


def _contributions(label: str, runs: int, n: int) -> Tuple[np.ndarray, float, float]:
    """Per-user contributions ``(runs, n)`` to the mean of ``t`` at the worst-case ``t``, that
    ``t`` and the closed form ``max_t n Var``."""
    if label == "hm-d10":
        params: Any = multidim.SampledMeanParams(epsilon=1.0, attributes=10, bounds=(-1.0, 1.0))
        reports = multidim.SampledMeanClient(params, rng=1).perturb(np.ones((runs * n, 10)))
        y = _grid.values_of(params.mechanism, params.steps, reports.index)
        mine = (reports.attributes == 0).any(axis=1)        # attribute 0's share: (d/k) y when sampled
        first = np.where(mine, y[np.arange(y.shape[0]), np.argmax(reports.attributes == 0, axis=1)], 0.0)
        return (10.0 / params.k * first).reshape(runs, n), 1.0, params.worst_variance()
    name = label
    worst_t = {"duchi": 0.0, "pm": 1.0, "hm": 1.0, "laplace": 1.0}[name]
    params = mean.params_for(name, 1.0, bounds=(-1.0, 1.0))
    client = mean._CLASSES[name][2](params, rng=1)
    y = _grid.values_of(params.mechanism, params.steps, client.perturb(np.full(runs * n, worst_t)).index)
    return y.reshape(runs, n), worst_t, params.mechanism.worst_variance()


def accuracy(runs: int, n: int) -> None:
    print(f"worst-case n Var at eps = 1: {runs} collections of n = {n} users each")
    print(f"{'mechanism':10} {'closed form':>11} {'runs: n Var':>12} {'+-4 sd':>8} {'per user':>9} {'+-4 sd':>8}")
    for label in ("duchi", "pm", "hm", "laplace", "hm-d10"):
        z, t, closed = _contributions(label, runs, n)
        estimates = z.mean(axis=1)
        by_runs = n * float(np.mean((estimates - t) ** 2))
        runs_tol = 4 * math.sqrt(2.0 / runs) + 1e-3
        flat = z.ravel()
        per_user = float(flat.var())
        kurtosis = float(np.mean((flat - flat.mean()) ** 4) / per_user**2)
        user_tol = 4 * math.sqrt((kurtosis - 1.0) / flat.size) + 1e-3
        ok = abs(by_runs / closed - 1) <= runs_tol and abs(per_user / closed - 1) <= user_tol
        print(f"{label:10} {closed:11.3f} {by_runs:12.3f} {runs_tol * closed:8.3f} {per_user:9.3f} "
              f"{user_tol * closed:8.3f}  {'ok' if ok else 'OUTSIDE'}")


def throughput(reports: int, repeat: int) -> None:
    params = mean.HybridParams(epsilon=1.0)
    index = np.random.default_rng(2).integers(0, params.largest_index + 1, reports, dtype=np.uint32)
    batch = mean.HybridReports(index=index)
    numpy_sum = best_time(lambda: np.add.reduce(index, dtype=np.uint64), repeat)
    update = best_time(lambda: mean.HybridServer(params).update(batch), repeat)
    server = mean.HybridServer(params).update(batch)
    estimate = best_time(lambda: server.frequencies(), repeat)
    print(f"\nserver, HM at eps = 1 ({params.largest_index + 1} grid points), {reports:,} reports, one thread:")
    print(f"  np.sum of the column     {reports / numpy_sum:14,.0f} reports/s")
    print(f"  update (check + sums)    {reports / update:14,.0f} reports/s  ({update / numpy_sum:.1f} x np.sum)")
    print(f"  estimate with intervals  {estimate * 1e3:14.3f} ms")


def figure(path: str, runs: int) -> None:
    from ldpfast.datasets.numeric import numeric_dataset
    from ldpfast.experiments.numeric import plot_means, simulate_means

    result = simulate_means(["duchi", "pm", "hm", "laplace"], numeric_dataset("beta", n=10_000, rng=1),
                            [0.25, 0.5, 1.0, 2.0, 4.0, 8.0], runs, seed=1)
    print(result.table())
    plot_means(result, path)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20_000)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--reports", type=int, default=20_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plot", help="draw the error-against-eps figure to this PNG instead")
    args = ap.parse_args()
    if args.plot:
        figure(args.plot, args.runs)
        return
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    accuracy(args.runs, args.n)
    throughput(args.reports, args.repeat)


if __name__ == "__main__":
    main()
