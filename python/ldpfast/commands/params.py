"""``ldpfast params``: choose a protocol before deploying.

For a privacy parameter eps, a dictionary size d, a number of users n and a prior f*
(an upper bound on the largest frequency you care about; 1 = no prior), prints every
registered protocol with a deployment comparison (``Protocol.compare``: OCMS+RR in its MSE
and l modes with the hash range and field [PAN] Algorithm 1 picks, HE, CMS+HE, OLH, BLH,
RHR, HRR, PGR, GRR, CMS with symmetric/asymmetric RAPPOR, Subset Selection), ranked by
:func:`ldpfast.recommend`: its closed-form error, the bits each report costs and the
server's work and memory:

* worst-case MSE over values with ``f <= f*`` ([PAN] Eq. 20 with the integer ``m``;
  every variance here is linear in ``f``, so the worst case is at ``f = 0`` or ``f*``);
* l2 over the whole dictionary (worst case over distributions, [PAN] Eq. 22) and the
  Cauchy-Schwarz bound ``l1 <= sqrt(d l2)`` ([PAN] Thm 3.8);
* ``--query`` says which error ranks them (l2 for ``all``, the MSE for ``top-k`` and
  ``candidates``); ``--max-report-bits`` and ``--server-budget`` rule options out.

Example::

    ldpfast params --eps 2 --d 100000 --n 1000000 --f-star 0.05 --max-report-bits 64
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any, Dict, List, Optional, Sequence

from .. import planning
from ._options import integer

HELP = ("rank the frequency oracles (OCMS+RR, OLH, HE, HRR, PGR, ...) for a deployment: closed-form errors, "
        "bits per report, server cost")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--eps", type=float, required=True, help="privacy parameter epsilon")
    parser.add_argument("--d", type=integer, required=True, help="dictionary size (values in [0, d)); 1e5 works")
    parser.add_argument("--n", type=integer, default=1_000_000, help="number of users (default 1e6)")
    parser.add_argument("--f-star", type=float, default=1.0,
                        help="prior: largest frequency of interest (default 1 = no prior knowledge)")
    parser.add_argument("--query", choices=planning.QUERIES, default="all",
                        help="what will be estimated: all values (ranked by l2), the top-k (by worst-case MSE) or "
                             "--candidates K known values (by worst-case MSE); default all")
    parser.add_argument("--candidates", type=integer, default=None,
                        help="--query candidates: how many values will be estimated")
    parser.add_argument("--max-report-bits", type=integer, default=None, help="most bits a user may send")
    parser.add_argument("--server-budget", type=float, default=None, metavar="SECONDS",
                        help=f"most seconds of server work (one core at {planning.STEPS_PER_SECOND:.0e} steps/s) "
                             "to aggregate the reports and answer the query")
    parser.add_argument("--protocol", default=None,
                        help="only these protocols: comma-separated registry ids or aliases (e.g. ocms,olh,pgr)")
    parser.add_argument("--mode", choices=("mse", "l", "both"), default="both",
                        help="which OCMS+RR optimum to show (default both)")
    parser.add_argument("--field", choices=("paper", "compact", "binary"), default="paper",
                        help="OCMS field: paper (2^64-59, 128-bit hash description), compact (smallest "
                             "prime >= max(d+1, 5m)) or binary (GF(2^l)); default paper")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    from .shuffle import add_shuffle_options

    add_shuffle_options(parser)


def compare(epsilon: float, d: int, n: int, f_star: float = 1.0, modes: Sequence[str] = ("mse", "l"),
            field: str = "paper") -> List[Dict[str, object]]:
    """One row per protocol configuration: ``protocol`` (its name), ``id`` (the registry
    id), ``m`` (hash range / RR symbols), ``bits`` per report, ``mse`` (worst case over
    ``f in [0, f*]``), ``l2`` (over the whole dictionary, worst case over distributions),
    ``l1`` (bound ``sqrt(d l2)``) and ``note``. The rows come from every registered
    protocol's ``compare`` hook, OCMS+RR first.

    Raises:
        ParameterError: invalid eps, d, n or f*.
    """
    return [{"protocol": row.name, "id": pid, "m": row.m, "bits": row.bits, "mse": planning.worst_mse(row, f_star),
             "l2": float(row.l2), "l1": math.sqrt(d * float(row.l2)), "note": row.note}
            for pid, row in planning.comparison_rows(epsilon, d, n, f_star, modes, field)]


def _seconds(seconds: float) -> str:
    if math.isnan(seconds):
        return "?"
    return f"{seconds:,.0f}" if seconds >= 100 else f"{seconds:.2g}"


def _size(nbytes: float) -> str:
    if math.isnan(nbytes):
        return "?"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if nbytes < 1000 or unit == "TB":
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1000
    return ""   # unreachable


def format_rows(options: List[planning.Option], d: int) -> str:
    header = ["rank", "protocol", "id", "m", "bits/report", "worst-case MSE", "l2 (dictionary)", "l1 bound",
              "server s", "state"]
    body = [[str(i + 1) if o.fits else "-", o.name, o.protocol, str(o.m), str(o.bits), f"{o.mse:.4e}",
             f"{o.l2:.4e}", f"{math.sqrt(d * o.l2):.4e}", _seconds(o.server_seconds), _size(o.state_bytes)]
            for i, o in enumerate(options)]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:{'<' if i in (1, 2) else '>'}{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*header)] + [fmt.format(*b) for b in body]
    lines.append("")
    lines += [f"  {o.name}: {o.note}" for o in options if o.note]
    lines += [f"  {o.name}: excluded, {o.why_not}" for o in options if not o.fits]
    return "\n".join(lines)


def _options(args: argparse.Namespace) -> List[planning.Option]:
    only = None if args.protocol is None else [p.strip() for p in args.protocol.split(",") if p.strip()]
    options = planning.recommend(args.eps, args.d, args.n, max_report_bits=args.max_report_bits, query=args.query,
                                 candidates=args.candidates, server_budget=args.server_budget, f_star=args.f_star,
                                 protocols=only, field=args.field)
    if args.mode != "both":   # the other OCMS+RR mode is not shown
        other = {"mse": "l-OCMS+RR", "l": "MSE-OCMS+RR"}[args.mode]
        options = [o for o in options if not (o.protocol == "ocms" and o.name == other)]
    return options


def run(args: argparse.Namespace) -> int:
    options = _options(args)
    by_name = {o.name: i for i, o in enumerate(options)}
    fitting = [o for o in options if o.fits]
    central = None
    if args.shuffle_delta is not None:
        from .shuffle import central_rows, format_central

        central = central_rows([args.eps], args.n, args.shuffle_delta, args.rounds)
    if args.json:
        extra = {} if central is None else {"shuffle": {"delta": args.shuffle_delta, "rounds": args.rounds,
                                                        **central[0]}}
        rows: List[Dict[str, Any]] = []
        for row in compare(args.eps, args.d, args.n, args.f_star, ("mse", "l"), args.field):
            if row["protocol"] in by_name:
                option = options[by_name[str(row["protocol"])]]
                rows.append({**row, "rank": option_rank(options, option), "server_ops": option.server_ops,
                             "server_seconds": option.server_seconds, "state_bytes": option.state_bytes,
                             "fits": option.fits, "why_not": option.why_not, "params": option.to_dict()["params"]})
        print(json.dumps({"epsilon": args.eps, "d": args.d, "n": args.n, "f_star": args.f_star, "field": args.field,
                          "query": args.query, "max_report_bits": args.max_report_bits,
                          "server_budget": args.server_budget,
                          "recommended": fitting[0].name if fitting else None, "protocols": rows, **extra}, indent=1,
                         default=lambda v: None))
        return 0
    metric = "l2 over the dictionary" if args.query == "all" else "worst-case MSE"
    print(f"eps = {args.eps:g}, d = {args.d:,}, n = {args.n:,}, f* = {args.f_star:g}; query: {args.query} "
          f"(ranked by {metric}, bits, server cost)\n")
    print(format_rows(options, args.d))
    if fitting:
        best, lowest = fitting[0], min(fitting, key=lambda o: o.error)
        print(f"\nrecommended: {best.name} ({best.protocol}), {best.bits} bits/report, {metric} {best.error:.4e}"
              + ("" if lowest is best else f"; lowest: {lowest.name} {lowest.error:.4e} with {lowest.bits} "
                                            "bits/report"))
        if best.code is not None:
            print(f"build it: {best.code}")
    else:
        print("\nno protocol meets the constraints (see 'excluded' above)")
    print("Ranks: options within 10% of the lowest error first, fewest bits first; then by error.\n"
          "MSE: worst case over values with f <= f*; l2/l1: worst case over distributions on the whole dictionary\n"
          "(PAN Eq. 20, 22, Thm 3.8). Multiply by n for counts (MSE by n^2). Server s: one core at "
          f"{planning.STEPS_PER_SECOND:.0e} steps/s.")
    if central is not None:
        print("\n" + format_central(central, args.n, args.shuffle_delta, args.rounds))
    return 0


def option_rank(options: List[planning.Option], option: planning.Option) -> Optional[int]:
    """1-based rank of a fitting option, None for an excluded one."""
    return options.index(option) + 1 if option.fits else None
