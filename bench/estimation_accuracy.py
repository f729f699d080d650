"""Accuracy of the frequency estimators of ``server.frequencies(method=...)`` and of the
consistency post-processing, on a Zipf population and the bundled click-streams.

For each data set, protocol and epsilon: ``--runs`` seeded simulations of ``n`` users,
then the whole-domain estimates by

* ``debiased``: the unbiased estimates (``method="debiased"``);
* ``norm-sub``: Wang et al.'s Norm-Sub of the debiased estimates (``postprocess("norm-sub")``);
* ``projection``: their Euclidean projection onto the simplex (``postprocess("simplex")``);
* ``ibu``: EM / iterative Bayesian update (``method="ibu"``, default stopping rule);
* ``mle``: the maximum-likelihood estimate (``method="mle"``);

and the mean over runs of ``l1 = sum |fhat - f|``, ``l2 = sqrt(sum (fhat - f)^2)`` and
``MSE = mean (fhat - f)^2`` against the users' true frequencies.

Data: ``zipf`` (exponent 1.3 over d = 1024), and ``kosarak``/``retail`` (one uniformly
sampled item per user of the bundled click-streams, the users whose item is among the 1024
most frequent items, re-indexed by rank).

    PYTHONPATH=python python3 bench/estimation_accuracy.py [--quick] [--write docs/estimation.md]

``--write`` replaces the table between the ``estimation-accuracy`` markers of that file.
The default (n = 100,000, 2 runs) takes about an hour on a shared 2-core machine (the
Hadamard family's iterative MLE dominates); ``--quick`` (n = 20,000, 1 run, two protocols)
seconds.
"""

from __future__ import annotations

import argparse
import re
import time
from typing import Dict, List

import numpy as np

from ldpfast import datasets
from ldpfast.protocols.frequency import grr, hadamard, ocms, olh, subset_selection

METHODS = ("debiased", "norm-sub", "projection", "ibu", "mle")
D = 1024


def zipf_population(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.minimum(rng.zipf(1.3, size=n) - 1, D - 1)


def clickstream(name: str, n: int, seed: int) -> np.ndarray:
    values = datasets.sets_to_values(datasets.load_sets(name), "sample", rng=seed, candidates=None).values
    items, counts = np.unique(values, return_counts=True)
    top = items[np.argsort(-counts, kind="stable")[:D]]
    rank = {int(v): i for i, v in enumerate(top)}
    kept = np.array([rank[int(v)] for v in values if int(v) in rank], dtype=np.int64)
    rng = np.random.default_rng(seed)
    return kept[rng.permutation(kept.size)[:n]]


PROTOCOLS = {
    "GRR": (lambda eps: grr.GRRParams(epsilon=eps, d=D), grr.GRRServer, grr.GRRClient),
    "SS": (lambda eps: subset_selection.SubsetSelectionParams(epsilon=eps, d=D),
           subset_selection.SubsetSelectionServer, subset_selection.SubsetSelectionClient),
    "OLH": (lambda eps: olh.OLHParams(epsilon=eps, d=D), olh.OLHServer, olh.OLHClient),
    "OCMS": (lambda eps: ocms.OCMSParams.optimal(epsilon=eps, d=D, field="compact"), ocms.OCMSServer, ocms.OCMSClient),
    "HRR": (lambda eps: hadamard.HRRParams(epsilon=eps, d=D), hadamard.HRRServer, hadamard.HRRClient),
}


def estimates(server, mle_steps: int) -> Dict[str, np.ndarray]:
    raw = server.frequencies()
    return {"debiased": raw.values, "norm-sub": raw.postprocess("norm-sub").values,
            "projection": raw.postprocess("simplex").values,
            "ibu": server.frequencies(method="ibu").values,
            "mle": server.frequencies(method="mle", max_iter=mle_steps).values}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--eps", default="0.5,1,2,4")
    parser.add_argument("--write", default=None, help="markdown file whose estimation-accuracy table to replace")
    parser.add_argument("--mle-steps", type=int, default=5000,
                        help="EM steps allowed to the MLE where it is iterative (Hadamard family; default 5000)")
    args = parser.parse_args()
    n = args.n or (20_000 if args.quick else 100_000)
    runs = args.runs or (1 if args.quick else 2)
    protocols = ["GRR", "OLH"] if args.quick else list(PROTOCOLS)
    data = {"zipf": lambda seed: zipf_population(n, seed),
            "kosarak": lambda seed: clickstream("kosarak-prefix", n, seed),
            "retail": lambda seed: clickstream("retail", n, seed)}
    epsilons = [float(e) for e in args.eps.split(",")]
    rows: List[str] = []
    gains: List[float] = []
    start = time.perf_counter()
    for data_name, make in data.items():
        for proto in protocols:
            make_params, server_type, client_type = PROTOCOLS[proto]
            for eps in epsilons:
                err = {m: np.zeros(3) for m in METHODS}
                for run in range(runs):
                    values = make(run)
                    truth = np.bincount(values, minlength=D) / values.size
                    params = make_params(eps)
                    server = server_type(params).update(client_type(params, rng=1000 + run).perturb(values))
                    for method, fhat in estimates(server, args.mle_steps).items():
                        e = fhat - truth
                        err[method] += np.array([np.abs(e).sum(), np.sqrt((e * e).sum()), (e * e).mean()]) / runs
                best = min(("ibu", "mle"), key=lambda m: err[m][0])
                gains.append(err["debiased"][0] / err[best][0])
                cells = " | ".join(f"{err[m][0]:.3f} / {err[m][1]:.4f} / {err[m][2]:.2e}" for m in METHODS)
                rows.append(f"| {data_name} | {proto} | {eps:g} | {cells} |")
                print(rows[-1], flush=True)
    header = ("| data | protocol | eps | " + " | ".join(METHODS) + " |\n"
              "|---|---|---|" + "---|" * len(METHODS))
    table = (f"l1 / l2 / MSE over the whole domain (d = {D}), n = {n:,} users, mean of {runs} run(s); IBU with "
             f"its defaults, the iterative MLE capped at {args.mle_steps} EM steps "
             f"(`bench/estimation_accuracy.py`, {time.perf_counter() - start:.0f} s).\n\n" + header + "\n"
             + "\n".join(rows) + "\n\n"
             f"l1 of the better of IBU/MLE relative to the debiased estimates: {min(gains):.1f}x to "
             f"{max(gains):.1f}x smaller (median {float(np.median(gains)):.1f}x).\n")
    print(table)
    if args.write:
        with open(args.write) as fh:
            text = fh.read()
        pattern = re.compile(r"(<!-- estimation-accuracy:start -->\n).*?(<!-- estimation-accuracy:end -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"{args.write} has no estimation-accuracy markers")
        with open(args.write, "w") as fh:
            fh.write(pattern.sub(lambda m: m.group(1) + table + m.group(2), text))
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
