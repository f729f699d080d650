"""``ldpfast shuffle``: the central privacy of shuffled local reports.

For local epsilons eps0, ``n`` users and a central ``delta``, prints the certified upper
bound on the central epsilon after a uniformly random shuffle (Wang et al.'s
variation-ratio reduction, evaluated exactly), the lower bound no valid generic analysis
can beat (exact shuffled binary randomized response; k-RR with ``--k``), and Feldman,
McMillan and Talwar's closed form; ``--rounds T`` composes T collections
(:mod:`ldpfast.theory.shuffle`).

Example::

    ldpfast shuffle --eps 1,4,8 --n 1e6 --delta 1e-6
    ldpfast shuffle --eps 2 --n 1e8 --delta 1e-9 --rounds 30 --k 64
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Dict, List, Optional

from ._options import integer, parse_floats

HELP = "central (eps, delta) of n shuffled eps0-LDP reports: upper and lower bounds, closed form, T rounds"


def add_shuffle_options(parser: argparse.ArgumentParser, rounds: bool = True) -> None:
    """``--shuffle-delta`` and the collections composed: ``--rounds``, or ``--shuffle-rounds``
    where the command's ``--rounds`` means something else (``simulate``)."""
    parser.add_argument("--shuffle-delta", type=float, default=None,
                        help="also print the central epsilon of shuffling the n reports at this delta")
    flag = "--rounds" if rounds else "--shuffle-rounds"
    parser.add_argument(flag, dest="rounds" if rounds else "shuffle_rounds", type=integer, default=1,
                        help="with --shuffle-delta: collections composed (default 1)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--eps", required=True, help="local epsilons, '1,2,4' or '1:5'")
    parser.add_argument("--n", type=integer, required=True, help="number of users (1e6 works)")
    parser.add_argument("--delta", type=float, default=1e-6, help="central delta (default 1e-6)")
    parser.add_argument("--rounds", type=integer, default=1, help="collections composed (default 1)")
    parser.add_argument("--k", type=integer, default=None,
                        help="the randomizer is k-ary randomized response on k values (tighter for k >= 3)")
    parser.add_argument("--analysis", choices=("variation-ratio", "clones"), default="variation-ratio",
                        help="upper-bound reduction (default variation-ratio; clones: FMT 2021, looser)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def central_rows(epsilons: List[float], n: int, delta: float, rounds: int = 1, k: Optional[int] = None,
                 analysis: str = "variation-ratio") -> List[Dict[str, Any]]:
    """One row per local epsilon: ``eps0``, ``upper``, ``lower``, ``closed_form``, ``seconds``."""
    from ..theory.shuffle import shuffle_epsilon

    rows = []
    for eps0 in epsilons:
        start = time.perf_counter()
        bound = shuffle_epsilon(eps0, n, delta, rounds=rounds, k=k, analysis=analysis)
        rows.append({"eps0": eps0, "upper": bound.upper, "lower": bound.lower, "closed_form": bound.closed_form,
                     "seconds": time.perf_counter() - start})
    return rows


def format_central(rows: List[Dict[str, Any]], n: int, delta: float, rounds: int = 1) -> str:
    over = f" over {rounds} rounds" if rounds > 1 else ""
    lines = [f"central epsilon of {n:,} shuffled reports at delta = {delta:g}{over}:",
             f"{'local eps':>10}  {'upper':>10}  {'lower':>10}  {'closed form':>11}  {'seconds':>7}"]
    lines += [f"{r['eps0']:>10g}  {r['upper']:>10.4g}  {r['lower']:>10.4g}  {r['closed_form']:>11.4g}  "
              f"{r['seconds']:>7.2f}" for r in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    epsilons = parse_floats(args.eps)
    rows = central_rows(epsilons, args.n, args.delta, args.rounds, args.k, args.analysis)
    if args.json:
        print(json.dumps({"n": args.n, "delta": args.delta, "rounds": args.rounds, "k": args.k,
                          "analysis": args.analysis, "rows": rows}, indent=1))
        return 0
    print(format_central(rows, args.n, args.delta, args.rounds))
    print("upper: certified (variation-ratio reduction, Wang et al. 2024)" if args.analysis == "variation-ratio"
          else "upper: certified (clones, Feldman-McMillan-Talwar 2021)")
    print("lower: exact central epsilon of one eps0-LDP randomizer (binary RR" +
          (f", {args.k}-RR)" if args.k else ")") + "; no valid bound is below it")
    return 0
