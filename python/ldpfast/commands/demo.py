"""``ldpfast demo``: OCMS+RR on a synthetic Zipf data set, measured against the closed forms,
then the [PAN] comparison on real click-stream data.

Part 1 (synthetic Zipf) is described below. Part 2 (``--real``, default the bundled
Kosarak prefix: 36,681 users of a Hungarian news portal, 293,919 (user, page) clicks over
17,032 pages) sends one report per click, as [PAN] section 6.3 treats Kosarak, and
measures how well MSE-OCMS+RR, l-OCMS+RR, HE and RHR recover the popularity of the 100 most
visited pages (worst-case MSE, l1, l2 over them, with the closed forms and the Appendix K
bound) using :func:`ldpfast.experiments.simulate`. A user with k clicks spends ``k*eps``
this way (not eps-LDP per user; the printed output says how many users spend more than eps
and the largest multiple); ``--values sample`` sends one uniformly chosen page per user
instead (eps per user).

Follows the setting of [PAN] section 6 (Zipf ``1/r^2``, metrics over the most frequent
values, MSE-OCMS with ``f* = 1`` for the worst-case MSE and l-OCMS for l1/l2) and adds two
contrasts: CMS+RR with ``m = 2`` (Hadamard Encoding's variance, [PAN] section 4) and plain
k-ary randomized response over the whole dictionary (GRR).

The building blocks are public so that other commands can reuse them:
:func:`zipf_values` draws the data, :func:`simulate` returns one row of measurements and
theory per method, :func:`format_table` prints them.
"""

from __future__ import annotations

import argparse
import time
from typing import Dict, List, Sequence, Tuple, Union

import numpy as np

from .. import theory
from ..protocols.frequency import grr, ocms
from .._random import KeySource
from ..errors import ParameterError
from ._options import add_alias, integer

HELP = "simulate OCMS+RR on Zipf data and compare measured errors with [PAN]'s closed forms"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", dest="users", type=integer, default=100_000, help="number of users (default 1e5)")
    parser.add_argument("--d", dest="dict_size", type=integer, default=100_000,
                        help="dictionary size (default 1e5)")
    parser.add_argument("--eps", dest="epsilon", type=float, default=2.0, help="privacy parameter (default 2)")
    add_alias(parser, "--users", "--n", "users", integer)
    add_alias(parser, "--dict-size", "--d", "dict_size", integer)
    add_alias(parser, "--epsilon", "--eps", "epsilon", float)
    parser.add_argument("--runs", type=integer, default=20, help="independent runs to average (default 20)")
    parser.add_argument("--top", type=integer, default=100,
                        help="evaluate on the TOP most frequent values (default 100)")
    parser.add_argument("--seed", type=integer, default=0, help="seed of the data set and of the simulated clients")
    parser.add_argument("--threads", type=integer, default=0, help="threads for the kernels (0 = default)")
    parser.add_argument("--real", default="kosarak-prefix",
                        help="part 2 data: a bundled set file (kosarak-prefix, retail, bms-webview-1, "
                             "bms-webview-2), a path, or 'none' to skip (default kosarak-prefix)")
    parser.add_argument("--values", choices=("entries", "sample"), default="entries",
                        help="part 2: one report per (user, item) entry (as PAN) or one sampled item per user")


def zipf_values(users: int, d: int, seed: int, exponent: float = 2.0) -> np.ndarray:
    """``users`` values drawn i.i.d. with ``Pr[rank r] ~ 1/r^exponent`` over ``d`` ranks; rank
    ``r`` is mapped to a value of ``[0, d)`` by a seeded permutation (the protocols do not
    care which values are frequent)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5A1F]))
    weights = 1.0 / np.arange(1, d + 1, dtype=np.float64) ** exponent
    ranks = rng.choice(d, size=users, p=weights / weights.sum())
    return rng.permutation(d)[ranks].astype(np.int64)


def top_values(values: np.ndarray, d: int, top: int) -> Tuple[np.ndarray, np.ndarray]:
    """The ``top`` most frequent values (ties by smaller value) and their frequencies."""
    counts = np.bincount(values, minlength=d)
    order = np.lexsort((np.arange(d), -counts))[:top]
    return order.astype(np.uint64), counts[order] / values.size


def _methods(epsilon: float, d: int) -> List[Tuple[str, Union[ocms.OCMSParams, grr.GRRParams]]]:
    return [
        ("MSE-OCMS+RR (f*=1)", ocms.OCMSParams.optimal(epsilon, d, mode="mse", f_star=1.0)),
        ("l-OCMS+RR", ocms.OCMSParams.optimal(epsilon, d, mode="l")),
        ("CMS+RR m=2 (HE)", ocms.OCMSParams(epsilon, d, 2)),
        ("GRR (k-ary RR)", grr.GRRParams(epsilon, d)),
    ]


def simulate(values: np.ndarray, d: int, epsilon: float, runs: int, top: int = 100, seed: int = 0,
             threads: int = 0) -> List[Dict[str, object]]:
    """Run every method ``runs`` times on the fixed data ``values`` and measure, over the
    ``top`` most frequent values ``X`` ([PAN] Eq. 19 and section 6):
    ``mse_max = max_x mean_runs err^2``, ``l2 = mean_runs sum_x err^2``,
    ``l1 = mean_runs sum_x |err|``. Theory: ``Var`` of each estimate (Eq. 6 / Eq. 8, or
    GRR's); ``mse_max_theory = max_x Var``, ``l2_theory = sum_x Var``, ``l1_bound =
    sqrt(|X| l2_theory)`` (Cauchy-Schwarz, Thm 3.8), and App. K's 95% upper factor for
    the biased estimator ``mse_max``. Returns one dict per method."""
    if runs < 1 or top < 1 or values.size == 0:
        raise ParameterError(f"runs, top and the number of users must be positive, got {runs}, {top}, {values.size}")
    n = int(values.size)
    candidates, freqs = top_values(values, d, top)
    keys = KeySource(seed)
    rows: List[Dict[str, object]] = []
    for name, params in _methods(epsilon, d):
        client_s = server_s = 0.0
        errors = np.empty((runs, candidates.size))
        for run in range(runs):
            t0 = time.perf_counter()
            if isinstance(params, ocms.OCMSParams):
                ocms_reports = ocms.OCMSClient(params, rng=keys.generator(), threads=threads).perturb(values)
                t1 = time.perf_counter()
                est = ocms.OCMSServer(params, candidates=candidates, threads=threads).update(ocms_reports).estimate()
            else:
                grr_reports = grr.GRRClient(params, rng=keys.generator(), threads=threads).perturb(values)
                t1 = time.perf_counter()
                est = grr.GRRServer(params).update(grr_reports).estimate(candidates)
            t2 = time.perf_counter()
            client_s += t1 - t0
            server_s += t2 - t1
            errors[run] = est - freqs
        if isinstance(params, ocms.OCMSParams):
            var = np.asarray(theory.ocms_variance(params, n=n, f=freqs))
            m, bits = params.m, params.communication_bits
        else:
            var = np.asarray(theory.grr_variance(epsilon, d, n, freqs))
            m, bits = d, params.communication_bits
        sq = errors**2
        rows.append({
            "method": name, "m": m, "bits": bits,
            "mse_max": float(sq.mean(axis=0).max()), "mse_max_theory": float(var.max()),
            "mse_max_95": float(var.max() * theory.worst_case_mse_upper_factor(candidates.size, runs)),
            "l2": float(sq.sum(axis=1).mean()), "l2_theory": float(var.sum()),
            "l1": float(np.abs(errors).sum(axis=1).mean()),
            "l1_bound": float(np.sqrt(candidates.size * var.sum())),
            "client_ms": 1e3 * client_s / runs, "server_ms": 1e3 * server_s / runs,
        })
    return rows


def format_table(rows: Sequence[Dict[str, object]]) -> str:
    """The rows as an aligned text table (measured next to theory)."""
    header = ("method", "m", "bits", "MSEmax", "theory", "95% up", "l2", "theory", "l1", "bound",
              "client ms", "server ms")
    lines = [[str(r["method"]), str(r["m"]), str(r["bits"])]
             + [f"{r[k]:.3e}" for k in ("mse_max", "mse_max_theory", "mse_max_95", "l2", "l2_theory",
                                        "l1", "l1_bound")]
             + [f"{r['client_ms']:.1f}", f"{r['server_ms']:.1f}"] for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(line) for line in lines])


def run(args: argparse.Namespace) -> int:
    for name, flag in (("users", "--n"), ("dict_size", "--d"), ("runs", "--runs"), ("top", "--top")):
        if getattr(args, name) < 1:
            raise ParameterError(f"{flag} must be >= 1, got {getattr(args, name)}")
    if args.threads < 0:
        raise ParameterError(f"--threads must be >= 0, got {args.threads}")
    if args.dict_size < 2:
        raise ParameterError(f"--d must be >= 2, got {args.dict_size}")
    start = time.perf_counter()
    values = zipf_values(args.users, args.dict_size, args.seed)
    top = min(args.top, args.dict_size)
    rows = simulate(values, args.dict_size, args.epsilon, args.runs, top, args.seed, args.threads)
    print(f"OCMS+RR demo ([PAN] section 6 setting): n = {args.users} users, d = {args.dict_size}, "
          f"Zipf 1/r^2, eps = {args.epsilon:g}, {args.runs} runs, seed {args.seed}")
    print(f"Errors over the {top} most frequent values (largest true f = "
          f"{np.max(np.bincount(values)) / values.size:.4f}); theory = closed form at the true f "
          "([PAN] Eq. 6/8; section 2.1 for GRR);")
    print("MSEmax = max_x mean_runs err^2 is biased upward: '95% up' is [PAN] App. K's 95% upper "
          "bound for it. l1 'bound' is sqrt(|X| l2) (Thm 3.8).")
    print()
    print(format_table(rows))
    print()
    print(f"total {time.perf_counter() - start:.1f} s (client = perturbing all users once; "
          f"server = aggregating and estimating the {top} values)")
    if args.real != "none":
        print()
        real_data_part(args)
    return 0


#: The protocols part 2 compares ([PAN] section 6 without CMS+HE, which equals HE).
REAL_PROTOCOLS = ("ocms-mse", "ocms-l", "he", "rhr")


def privacy_spending(sizes: np.ndarray, mode: str, epsilon: float) -> str:
    """One line saying what part 2 spends per user: with ``entries`` a user with k items
    sends k reports and spends ``k eps`` (sequential composition), so the line gives the
    share of users above eps and the largest multiple; ``sample`` spends eps per user."""
    if mode == "sample":
        empty = int(np.count_nonzero(sizes == 0))
        note = (f"; the {empty:,} users with empty sets send nothing, which reveals that their set is empty"
                if empty else "")
        return f"Privacy: one sampled item per user, eps = {epsilon:g} per user{note}."
    over = int(np.count_nonzero(sizes > 1))
    most = int(sizes.max()) if sizes.size else 0
    return (f"Privacy: NOT eps-LDP per user. A user with k clicks sends k reports and spends k*eps "
            f"(sequential composition): {100.0 * over / max(sizes.size, 1):.1f}% of the {sizes.size:,} users "
            f"spend more than eps = {epsilon:g}, the most active one {most} x eps = {most * epsilon:g}. "
            "This part measures accuracy as [PAN] section 6.3 does; --values sample is eps per user.")


def real_data_part(args: argparse.Namespace) -> None:
    """Part 2: [PAN]'s comparison on a real set-valued data set (see the module docstring)."""
    from .. import datasets, experiments

    start = time.perf_counter()
    sets = datasets.load_sets(args.real)
    data = datasets.sets_to_values(sets, args.values, rng=args.seed, candidates=args.top)
    protocols = [p for p in REAL_PROTOCOLS if experiments.ALGORITHMS[p].available()]
    result = experiments.simulate(protocols, data, [args.epsilon], args.runs, seed=args.seed)
    what = "one report per (user, page) click" if args.values == "entries" else "one sampled item per user"
    print(f"Real data: {sets.name}, {sets.n:,} users, {data.n:,} reports ({what}), d = {data.d:,}; "
          f"eps = {args.epsilon:g}, {args.runs} runs, seed {args.seed}")
    print(privacy_spending(sets.sizes(), args.values, args.epsilon))
    print(f"Errors over the {data.candidates.size} most frequent items (largest f = {data.max_frequency():.4f}); "
          "closed form = variance at the true f, App. K bound = its 95% upper band for MSEmax")
    print()
    print(result.table("all"))
    cells = result.cells
    best = {m: min(cells, key=lambda c: getattr(c, a)).label
            for m, a in (("worst-case MSE", "worst_mse"), ("l1", "l1"), ("l2", "l2"))}
    print()
    print("lowest " + ", ".join(f"{m}: {label}" for m, label in best.items())
          + f"  ({time.perf_counter() - start:.1f} s)")
    if best["worst-case MSE"] != "MSE-OCMS+RR" and data.max_frequency() < 0.5:
        print(f"(MSE-OCMS+RR assumed no prior, f* = 1; here max f = {data.max_frequency():.3f}, and with that "
              "prior its m would be larger and its worst-case MSE lower: see `ldpfast params --f-star`)")
