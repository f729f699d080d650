"""``ldpfast audit``: an empirical lower bound on the epsilon a protocol's client spends.

For each epsilon, draws ``--reports`` reports per input from the protocol's client on its
two most distinguishing neighbouring inputs (a small audit configuration, see
:func:`ldpfast.audit.default_params`) and prints the 99% Clopper-Pearson lower bound
``eps_lb`` on the privacy loss next to the claimed epsilon. ``eps_lb > eps`` is evidence
that the mechanism is not eps-LDP. ``all`` audits every registered protocol.

Example::

    ldpfast audit grr --eps 0.5 1 4
    ldpfast audit all --eps 1 --reports 1000000 --seed 7
    ldpfast audit svim-padded --eps 1 --set reference=true     # R3's flawed single dummy
    ldpfast audit l-grr --eps 1 --budget permanent             # a memoized response: eps_inf

Memoized (longitudinal) protocols are audited per report (``eps_1``, the default) or, with
``--budget permanent``, on their permanent response (``eps_inf``: what unboundedly many
reports of one value reveal; the audit configuration uses ``eps_inf = 2 eps``).
"""

from __future__ import annotations

import argparse
import json
import warnings

from ..errors import ParameterError
from ._options import integer

HELP = "empirical LDP audit: Clopper-Pearson lower bound on each protocol's privacy loss"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("protocol", help="registered protocol id (e.g. grr, ocms, svim-padded) or 'all'")
    parser.add_argument("--eps", type=float, nargs="+", required=True, help="claimed epsilon(s) to audit")
    parser.add_argument("--reports", type=integer, default=1_000_000, help="reports per input (default 1e6)")
    parser.add_argument("--seed", type=integer, default=None,
                        help="seed (reproducible audit); default fresh OS entropy")
    parser.add_argument("--budget", choices=("report", "permanent"), default="report",
                        help="report: one report (eps_1 of memoized protocols); permanent: a memoized protocol's "
                             "permanent response (eps_inf)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a parameter of the audit configuration (VALUE as JSON, "
                             "e.g. reference=true, L=3); repeatable")


def _changes(items) -> dict:
    changes = {}
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

    ids = list(audit.audited(args.budget)) if args.protocol == "all" else [args.protocol]
    changes = _changes(args.set)
    rows = []
    for pid in ids:
        for eps in args.eps:
            with warnings.catch_warnings(record=True) as caught:   # not-LDP clients warn: reported below
                warnings.simplefilter("always")
                result = audit.audit_protocol(pid, eps, args.reports, rng=args.seed, budget=args.budget, **changes)
            flag = " NOT LDP (client warns)" if caught else ""
            flag += "  <-- eps_lb > eps" if result.eps_lb > result.epsilon else ""
            rows.append((pid, f"{result.epsilon:g}", f"{result.eps_lb:.4f}", f"{result.reports:,}",
                         result.event + flag))
    header = ("mechanism", "claimed eps", "eps_lb (99%)", "reports/input", "event")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for row in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    return 0
