"""PCKV-UE, PCKV-GRR and the PrivKV baseline: empirical MSE of the frequency, value-total and mean estimates
against their closed forms (ldpfast.protocols.multiattribute._kv.Rates), at a few epsilons.

Data: the synthetic ratings-like set ``_kv.ratings`` (Zipf(1.1) item popularity over ``d``
items, 0..4 items per user, item k's ratings ``clip(0.8 cos k + N(0, 0.3^2), -1, 1)``),
``pad_len`` 4 so no user exceeds the padding (the frequency and total estimators are then
unbiased and their closed forms exact; PrivKV's always are, and it spends eps/2 on each of
key and value). Each cell: ``--runs`` independent runs of ``--n``
users (one seeded client call); "ratio" is the empirical MSE summed over the keys divided
by the closed form summed likewise (1 when the closed form is right; its spread over runs
is about ``sqrt(2/runs)``). Means: keys held by at least ``--min-share`` of the users, the
delta-method variance (first order in 1/n) against the empirical MSE of the clipped ratio.

    PYTHONPATH=python python bench/key_value.py [--runs 40] [--n 20000] [--d 50]
"""

from __future__ import annotations

import argparse
from typing import Any, Dict

import numpy as np

from ldpfast._base import protocols
from ldpfast.protocols.multiattribute import _kv


def _runs(pid: str, epsilon: float, data: _kv.Pairs, args: argparse.Namespace) -> Dict[str, Any]:
    proto = protocols()[pid]
    params = proto.params(epsilon=epsilon, d=args.d) if pid == "privkv" else \
        proto.params(epsilon=epsilon, d=args.d, pad_len=4)
    offsets, keys, values = data
    sizes = np.tile(np.diff(offsets), args.runs)
    tiled = (np.concatenate(([0], np.cumsum(sizes))).astype(np.int64), np.tile(keys, args.runs),
             np.tile(values, args.runs))
    reports = proto.client(params, rng=int(epsilon * 1000)).perturb(tiled)
    columns = reports.columns()
    servers = [proto.aggregator(params).update(type(reports).from_columns(
        {k: v[r * args.n:(r + 1) * args.n] for k, v in columns.items()})) for r in range(args.runs)]
    f, s, q2 = _kv.truth(data, args.d)
    rates = params.rates
    fhat = np.array([srv.estimate() for srv in servers])
    shat = np.array([srv.totals() for srv in servers])
    held = np.flatnonzero(f >= args.min_share)
    mhat = np.array([srv.means(held) for srv in servers])
    m = s[held] / f[held]
    freq_mse, freq_cf = ((fhat - f) ** 2).mean(axis=0).sum(), rates.frequency_variance(args.n, f).sum()
    tot_mse, tot_cf = ((shat - s) ** 2).mean(axis=0).sum(), rates.total_variance(args.n, f, q2).sum()
    mean_mse = np.nanmean((mhat - m) ** 2, axis=0).sum()
    mean_cf = rates.mean_variance(args.n, f[held], m, q2[held]).sum()
    return {"pid": pid, "eps": epsilon, "eps1": params.key_budget, "freq": (freq_mse / args.d, freq_cf / args.d),
            "tot": (tot_mse / args.d, tot_cf / args.d), "mean": (mean_mse / held.size, mean_cf / held.size),
            "held": held.size, "nan": int(np.isnan(mhat).sum())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--d", type=int, default=50)
    parser.add_argument("--min-share", type=float, default=0.05)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    args = parser.parse_args()
    data = _kv.ratings(args.d, args.n, max_pairs=4, seed=2026)
    print(f"n={args.n} users per run, d={args.d}, pad_len=4, {args.runs} runs; MSE per key (mean over keys)")
    print(f"{'protocol':9} {'eps':>4} {'eps1':>6} | {'freq MSE':>9} {'closed':>9} {'ratio':>6} | "
          f"{'total MSE':>9} {'closed':>9} {'ratio':>6} | {'mean MSE':>9} {'delta':>9} {'ratio':>6} keys NaN")
    for pid in ("pckv-ue", "pckv-grr", "privkv"):
        for eps in args.epsilons:
            r = _runs(pid, eps, data, args)
            cells = " | ".join(f"{e:9.3g} {c:9.3g} {e / c:6.3f}" for e, c in (r["freq"], r["tot"], r["mean"]))
            print(f"{pid:9} {eps:4g} {r['eps1']:6.3f} | {cells} {r['held']:4d} {r['nan']:3d}")


if __name__ == "__main__":
    main()
