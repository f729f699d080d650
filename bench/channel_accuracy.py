"""l1 error of the debiased, IBU and MLE estimates (``server.frequencies(method=...)``) for
the protocols whose channels came with issue 21's second batch (OUE, SUE, L-OUE, RAPPOR,
PGR) on a Zipf population, over the whole domain.

For each protocol, epsilon and seed: ``n`` users with values ``min(Zipf(1.3) - 1, d - 1)``,
one report each, then ``l1 = sum |fhat - f|`` against the users' true frequencies; the
table gives the mean and the range over the seeds. RAPPOR is configured as in
``simulate`` (``eps_1 = eps``, ``eps_inf = 2 eps``, 32 Bloom bits, 2 hashes, 16 cohorts);
its debiased estimate is the least-squares decode over ``[0, d)``. L-OUE spends ``eps_1 =
eps`` after a permanent OUE at ``2 eps``.

    PYTHONPATH=python python3 bench/channel_accuracy.py [--n 100000] [--d 64] [--eps 1,4] [--seeds 3]
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable, Dict, Tuple

import numpy as np

from ldpfast.protocols.repeated import longitudinal_unary as lue, rappor
from ldpfast.protocols.frequency import pgr, unary

METHODS = ("debiased", "ibu", "mle")

PROTOCOLS: Dict[str, Tuple[Callable[[float, int], Any], Any, Any]] = {
    "OUE": (lambda eps, d: unary.OUEParams(epsilon=eps, d=d), unary.OUEServer, unary.OUEClient),
    "SUE": (lambda eps, d: unary.SUEParams(epsilon=eps, d=d), unary.SUEServer, unary.SUEClient),
    "L-OUE": (lambda eps, d: lue.LOUEParams(eps_inf=2 * eps, eps_1=eps, d=d), lue.LOUEServer, lue.LOUEClient),
    "RAPPOR": (lambda eps, d: rappor.configured(eps, 2 * eps, k=32, h=2, m=16, d=d), rappor.RAPPORServer,
               rappor.RAPPORClient),
    "PGR": (lambda eps, d: pgr.PGRParams(epsilon=eps, d=d), pgr.PGRServer, pgr.PGRClient),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--eps", default="1,4")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"l1 over the whole domain, d = {args.d}, n = {args.n}, Zipf(1.3), mean [min, max] over "
          f"{args.seeds} seeds")
    print("| protocol | eps | " + " | ".join(METHODS) + " | best likelihood / debiased |")
    print("|---|---|" + "---|" * (len(METHODS) + 1))
    for name in args.protocols.split(","):
        make, server_type, client_type = PROTOCOLS[name]
        for eps in (float(e) for e in args.eps.split(",")):
            errors: Dict[str, list] = {m: [] for m in METHODS}
            for seed in range(args.seeds):
                rng = np.random.default_rng(seed)
                values = np.minimum(rng.zipf(1.3, size=args.n) - 1, args.d - 1)
                truth = np.bincount(values, minlength=args.d) / args.n
                params = make(eps, args.d)
                server = server_type(params).update(client_type(params, rng=seed + 100).perturb(values))
                for method in METHODS:
                    fit = server.frequencies(method=method)
                    errors[method].append(float(np.abs(fit.values - truth).sum()))
            cells = [f"{np.mean(v):.4f} [{min(v):.4f}, {max(v):.4f}]" for v in errors.values()]
            ratio = min(np.mean(errors["ibu"]), np.mean(errors["mle"])) / np.mean(errors["debiased"])
            print(f"| {name} | {eps:g} | " + " | ".join(cells) + f" | {ratio:.2f} |", flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
