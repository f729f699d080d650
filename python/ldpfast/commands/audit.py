"""``ldpfast audit``: an empirical lower bound on the epsilon a protocol's client spends.

For each epsilon, draws ``--reports`` reports per input from the protocol's client on its
two most distinguishing neighbouring inputs (a small audit configuration, see
:func:`ldpfast.audit.default_params`) and prints the 99% Clopper-Pearson lower bound
``eps_lb`` on the privacy loss next to the claimed epsilon, and the smallest excess over
epsilon the run could detect (90% power). ``all`` audits every registered protocol.

Exit status (so that CI can gate on it): 0 when every audit passed with enough power,
1 when some ``eps_lb > eps`` (evidence at 99% that the client is not eps-LDP; PrivSketch
and PrivSketch-noSmp, whose clients warn, always violate: their ordering matrix is not
private), 3 when no violation was found but some run could not detect an excess of
``--detect`` (inconclusive: raise ``--reports``), 2 for bad arguments. ``--json`` prints
one JSON document instead of the table.

Example::

    ldpfast audit grr --eps 0.5,1,4
    ldpfast audit all --eps 1 --reports 1000000 --seed 7 --json
    ldpfast audit svim-padded --eps 1 --set reference=true     # R3's flawed single dummy
    ldpfast audit l-grr --eps 1 --budget permanent             # a memoized response: eps_inf

Memoized (longitudinal) protocols are audited per report (``eps_1``, the default) or, with
``--budget permanent``, on their permanent response (``eps_inf``: what unboundedly many
reports of one value reveal; the audit configuration uses ``eps_inf = 2 eps``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from typing import Any, Dict, Iterable

from ..errors import ParameterError
from ._options import integer, parse_floats

HELP = "empirical LDP audit: Clopper-Pearson lower bound on each protocol's privacy loss"
#: Exit statuses.
PASSED, VIOLATION, INCONCLUSIVE = 0, 1, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("protocol", help="registered protocol id (e.g. grr, ocms, svim-padded), an alias "
                                         "(ldpfast simulate --list names them, e.g. cms-he) or 'all'")
    parser.add_argument("--eps", nargs="+", required=True,
                        help="claimed epsilon(s) to audit: '0.5,1,4' or '1:5' as in the other commands "
                             "(space-separated values are taken too)")
    parser.add_argument("--reports", type=integer, default=1_000_000, help="reports per input (default 1e6)")
    parser.add_argument("--detect", type=float, default=0.1, metavar="EXCESS",
                        help="smallest excess over eps the audit must be able to detect (90%% power); a "
                             "run that cannot is inconclusive (exit 3). Default 0.1")
    parser.add_argument("--seed", type=integer, default=None,
                        help="seed (reproducible audit); default fresh OS entropy")
    parser.add_argument("--budget", choices=("report", "permanent"), default="report",
                        help="report: one report (eps_1 of memoized protocols); permanent: a memoized protocol's "
                             "permanent response (eps_inf)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a parameter of the audit configuration (VALUE as JSON, "
                             "e.g. reference=true, L=3); repeatable")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


def _changes(items: Iterable[str]) -> Dict[str, Any]:
    changes: Dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ParameterError(f"--set must be NAME=VALUE, got {item!r}")
        try:
            changes[name] = json.loads(value)
        except json.JSONDecodeError:
            changes[name] = value
    return changes


def run(args: argparse.Namespace) -> int:
    from .. import audit

    if not (math.isfinite(args.detect) and args.detect > 0):
        raise ParameterError(f"--detect must be a positive number, got {args.detect!r}")
    epsilons = [eps for text in args.eps for eps in parse_floats(text)]
    ids = list(audit.audited(args.budget)) if args.protocol == "all" else [args.protocol]
    changes = _changes(args.set)
    results = []
    for pid in ids:
        for eps in epsilons:
            with warnings.catch_warnings(record=True) as caught:   # not-LDP clients warn: reported below
                warnings.simplefilter("always")
                result = audit.audit_protocol(pid, eps, args.reports, rng=args.seed, budget=args.budget,
                                              **changes)
            verdict = ("violation" if result.violation else
                       "inconclusive" if result.detectable_excess > args.detect else "passed")
            results.append((result, verdict, bool(caught)))
    status = (VIOLATION if any(v == "violation" for _, v, _ in results) else
              INCONCLUSIVE if any(v == "inconclusive" for _, v, _ in results) else PASSED)
    if args.json:
        records = [dict(result.to_dict(), verdict=verdict, client_warns=warns) for result, verdict, warns in results]
        print(json.dumps({"detect": args.detect, "status": status, "results": records}, indent=1))
        return status
    rows = []
    for result, verdict, warns in results:
        flag = " NOT LDP (client warns)" if warns else ""
        flag += "  <-- eps_lb > eps" if verdict == "violation" else ""
        rows.append((result.protocol, f"{result.epsilon:g}", f"{result.eps_lb:.4f}", f"{result.reports:,}",
                     f"{result.detectable_excess:.3g}", verdict, result.event + flag))
    header = ("mechanism", "claimed eps", "eps_lb (99%)", "reports/input", "detectable", "verdict", "event")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for row in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    weak = [r for r, v, _ in results if v == "inconclusive"]
    if weak:
        print(f"ldpfast audit: warning: {len(weak)} run(s) cannot detect an excess of {args.detect:g} over eps "
              f"(smallest detectable: {min(r.detectable_excess for r in weak):.3g}); raise --reports",
              file=sys.stderr)
    return status
