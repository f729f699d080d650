"""``ldpfast params``: choose a protocol before deploying.

For a privacy parameter eps, a dictionary size d, a number of users n and a prior f*
(an upper bound on the largest frequency you care about; 1 = no prior), prints the hash
range and field [PAN] Algorithm 1 picks for OCMS+RR (MSE and l modes), the bits each
report costs, and the closed-form errors of OCMS+RR next to every registered protocol with
a deployment comparison (``Protocol.compare``: HE, CMS+HE, OLH, RHR, HRR, GRR, CMS with
symmetric/asymmetric RAPPOR, Subset Selection):

* worst-case MSE over values with ``f <= f*`` ([PAN] Eq. 20 with the integer ``m``;
  every variance here is linear in ``f``, so the worst case is at ``f = 0`` or ``f*``);
* l2 over the whole dictionary (worst case over distributions, [PAN] Eq. 22) and the
  Cauchy-Schwarz bound ``l1 <= sqrt(d l2)`` ([PAN] Thm 3.8).

Example::

    ldpfast params --eps 2 --d 100000 --n 1000000 --f-star 0.05
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Dict, List

from ..errors import ParameterError
from ._options import integer

HELP = "closed-form errors and report sizes of OCMS+RR vs the other frequency oracles (HE, CMS+HE, OLH, RHR, ...)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--eps", type=float, required=True, help="privacy parameter epsilon")
    parser.add_argument("--d", type=integer, required=True, help="dictionary size (values in [0, d)); 1e5 works")
    parser.add_argument("--n", type=integer, default=1_000_000, help="number of users (default 1e6)")
    parser.add_argument("--f-star", type=float, default=1.0,
                        help="prior: largest frequency of interest (default 1 = no prior knowledge)")
    parser.add_argument("--mode", choices=("mse", "l", "both"), default="both",
                        help="which OCMS+RR optimum to show (default both)")
    parser.add_argument("--field", choices=("paper", "compact", "binary"), default="paper",
                        help="OCMS field: paper (2^64-59, 128-bit hash description), compact (smallest "
                             "prime >= max(d+1, 5m)) or binary (GF(2^l)); default paper")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    from .shuffle import add_shuffle_options

    add_shuffle_options(parser)


def compare(epsilon: float, d: int, n: int, f_star: float = 1.0, modes=("mse", "l"),
            field: str = "paper") -> List[Dict[str, object]]:
    """One row per protocol configuration: ``name``, ``m`` (hash range / RR symbols),
    ``bits`` per report, ``mse`` (worst case over ``f in [0, f*]``), ``l2`` (over the whole
    dictionary, worst case over distributions), ``l1`` (bound ``sqrt(d l2)``) and ``note``.
    The rows come from every registered protocol's ``compare`` hook, OCMS+RR first.

    Raises:
        ParameterError: invalid eps, d, n or f*.
    """
    from .._base import protocols

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError(f"n must be a positive integer, got {n!r}")
    if not (isinstance(d, int) and d >= 2):
        raise ParameterError(f"d must be an integer >= 2, got {d!r}")
    if not (math.isfinite(f_star) and 0.0 <= f_star <= 1.0):
        raise ParameterError(f"f_star must be in [0, 1], got {f_star!r}")
    known = protocols()
    order = sorted((pid for pid, proto in known.items() if proto.compare is not None),
                   key=lambda pid: (pid != "ocms", pid))
    rows: List[Dict[str, object]] = []
    for pid in order:
        for row in known[pid].compare(epsilon, d, n, f_star, modes=tuple(modes), field=field):
            # every variance here is affine in f, so the worst case over [0, f*] is at an end
            worst = float(max(row.variance(0.0), row.variance(f_star)))
            rows.append({"protocol": row.name, "m": row.m, "bits": row.bits, "mse": worst, "l2": float(row.l2),
                         "l1": math.sqrt(d * float(row.l2)), "note": row.note})
    return rows


def format_rows(rows: List[Dict[str, object]]) -> str:
    header = ["protocol", "m", "bits/report", "worst-case MSE", "l2 (dictionary)", "l1 bound"]
    body = [[str(r["protocol"]), str(r["m"]), str(r["bits"]), f"{r['mse']:.4e}", f"{r['l2']:.4e}",
             f"{r['l1']:.4e}"] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*header)] + [fmt.format(*b) for b in body]
    lines.append("")
    lines += [f"  {r['protocol']}: {r['note']}" for r in rows if r["note"]]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    modes = ("mse", "l") if args.mode == "both" else (args.mode,)
    rows = compare(args.eps, args.d, args.n, args.f_star, modes, args.field)
    central = None
    if args.shuffle_delta is not None:
        from .shuffle import central_rows, format_central

        central = central_rows([args.eps], args.n, args.shuffle_delta, args.rounds)
    if args.json:
        extra = {} if central is None else {"shuffle": {"delta": args.shuffle_delta, "rounds": args.rounds,
                                                        **central[0]}}
        print(json.dumps({"epsilon": args.eps, "d": args.d, "n": args.n, "f_star": args.f_star,
                          "field": args.field, "protocols": rows, **extra}, indent=1))
        return 0
    print(f"eps = {args.eps:g}, d = {args.d:,}, n = {args.n:,}, f* = {args.f_star:g}\n")
    print(format_rows(rows))
    best_mse = min(rows, key=lambda r: r["mse"])
    best_l2 = min(rows, key=lambda r: r["l2"])
    print(f"\nlowest worst-case MSE: {best_mse['protocol']} ({best_mse['bits']} bits/report); "
          f"lowest l2: {best_l2['protocol']} ({best_l2['bits']} bits/report)")
    print("MSE: worst case over values with f <= f*; l2/l1: worst case over distributions on the whole "
          "dictionary (PAN Eq. 20, 22, Thm 3.8). Multiply by n for counts (MSE by n^2).")
    if central is not None:
        print("\n" + format_central(central, args.n, args.shuffle_delta, args.rounds))
    return 0
