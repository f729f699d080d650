"""``ldpfast params``: choose a protocol before deploying.

For a privacy parameter eps, a dictionary size d, a number of users n and a prior f*
(an upper bound on the largest frequency you care about; 1 = no prior), prints the hash
range and field [PAN] Algorithm 1 picks for OCMS+RR (MSE and l modes), the bits each
report costs, and the closed-form errors of OCMS+RR next to HE, CMS+HE, OLH, RHR, HRR,
GRR, CMS with symmetric/asymmetric RAPPOR and Subset Selection:

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

HELP = "closed-form errors and report sizes of OCMS+RR vs HE, CMS+HE, OLH, RHR, HRR, GRR, RAPPOR-CMS, SS"


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


def _ceil_log2(x: int) -> int:
    return max(0, (int(x) - 1).bit_length())


def _field_name(params) -> str:
    from ..ocms import PRIME

    if params.field_kind == "binary":
        return f"GF(2^{params.field_size.bit_length() - 1})"
    if params.field_size == PRIME:
        return "F_p, p = 2^64 - 59"
    return f"F_p, p = {params.field_size}"


def compare(epsilon: float, d: int, n: int, f_star: float = 1.0, modes=("mse", "l"),
            field: str = "paper") -> List[Dict[str, object]]:
    """One row per protocol: ``name``, ``m`` (hash range / RR symbols), ``bits`` per
    report, ``mse`` (worst case over ``f in [0, f*]``), ``l2`` (over the whole dictionary,
    worst case over distributions), ``l1`` (bound ``sqrt(d l2)``) and ``note``.

    Raises:
        ParameterError: invalid eps, d, n or f*.
    """
    from .. import ocms, rappor_cms, subset_selection
    from ..theory import hadamard as th
    from ..theory import ocms as to

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError(f"n must be a positive integer, got {n!r}")
    if not (isinstance(d, int) and d >= 2):
        raise ParameterError(f"d must be an integer >= 2, got {d!r}")
    if not (math.isfinite(f_star) and 0.0 <= f_star <= 1.0):
        raise ParameterError(f"f_star must be in [0, 1], got {f_star!r}")
    rows: List[Dict[str, object]] = []

    def add(name, m, bits, var_at, l2, note=""):
        worst = float(max(var_at(0.0), var_at(f_star)))
        rows.append({"protocol": name, "m": m, "bits": bits, "mse": worst, "l2": float(l2),
                     "l1": math.sqrt(d * float(l2)), "note": note})

    for mode in modes:
        p = ocms.Params.optimal(epsilon=epsilon, d=d, mode=mode, f_star=f_star, field=field)
        real = to.ocms_optimal_m(epsilon, mode, d, f_star)
        add("MSE-OCMS+RR" if mode == "mse" else "l-OCMS+RR", p.m, p.communication_bits,
            lambda f, p=p: to.ocms_variance(p, n=n, f=f), to.ocms_l2(epsilon, d, n, p.m),
            f"real optimum m = {real:.3f}; field {_field_name(p)}")
    e = math.exp(epsilon)  # epsilon was validated by ocms.Params above
    hsize = 1 << d.bit_length()  # 2^ceil(log2(d+1))
    add("HE", 2, _ceil_log2(hsize) + 1, lambda f: th.he_variance(epsilon, n, f), to.ocms_l2(epsilon, d, n, 2),
        f"Hadamard row ({_ceil_log2(hsize)} bits) + 1 bit")
    cms_m, cms_k = 1024, 2048
    cms_var = lambda f: th.cmshe_variance(epsilon, n, f, m=cms_m)  # noqa: E731
    add("CMS+HE", cms_m, _ceil_log2(cms_k) + _ceil_log2(1 << cms_m.bit_length()) + 1, cms_var,
        (d - 1) * cms_var(0.0) + cms_var(1.0),
        "k = 2048 functions, m = 1024 (+ the fixed family's bias, PAN Thm 3.10)")
    g = th.olh_g(epsilon)
    add("OLH", g, 128 + _ceil_log2(g), lambda f: to.ocms_variance(epsilon, g, n, f), to.ocms_l2(epsilon, d, n, g),
        "pairwise hash (a0, a1) in F_(2^64-59); a fully random hash would cost d log2(g) bits")
    if epsilon <= 21 and d <= 2**28:
        b, base, sym, rsize = th.rhr_parameters(epsilon, d)
        c2 = ((e - 1 + sym) / (e - 1)) ** 2
        # sum over the dictionary of the share of users in x's residue class is at most
        # ceil(d / base) (all users in the largest class): the worst-case l2.
        share_sum = -(-d // base)
        l2 = (c2 * (share_sum * (e + 1) + 2 * (d - share_sum)) / (e - 1 + sym) - 1) / n
        add("RHR", sym, _ceil_log2(rsize) + b, lambda f: th.rhr_variance(epsilon, n, f, residue_fraction=1.0), l2,
            f"b = {b}, {base} residue blocks; MSE for values sharing their residue with all users "
            "(PAN 6.1's adversarial data)")
    if d <= 2**30:
        hd = 1 << _ceil_log2(d)
        add("HRR", hd, _ceil_log2(hd) + 1, lambda f: th.hrr_variance(epsilon, n, f),
            (d * th.c_eps(epsilon) ** 2 - 1) / n, "Hadamard row + 1 bit (WW Fact 2.1)")
    grr_var = lambda f: to.grr_variance(epsilon, d, n, f)  # noqa: E731
    add("GRR", d, _ceil_log2(d), grr_var, (d - 1) * grr_var(0.0) + grr_var(1.0), "k-ary RR on [d]")
    for variant, name in (("symmetric", "CMS+sRP"), ("asymmetric", "CMS+aRP")):
        rp = rappor_cms.Params.optimal(epsilon=epsilon, d=d, variant=variant)
        add(name, rp.m, rp.communication_bits, lambda f, rp=rp: rp.variance(n, f),
            _affine_l2(lambda f, rp=rp: rp.variance(n, f), d),
            "m-bit RAPPOR report, m within 1% of its m -> inf error (PAN App. G)")
    if d <= subset_selection.MAX_D:
        sp = subset_selection.Params(epsilon=epsilon, d=d)
        add("SS", sp.k, sp.communication_bits, lambda f: sp.variance(n, f), _affine_l2(lambda f: sp.variance(n, f), d),
            f"k = {sp.k} of d values per report (Ye-Barg / Wang et al.)")
    return rows


def _affine_l2(variance, d: int) -> float:
    """Worst-case l2 over distributions on [d] of a variance affine in f (sum f = 1)."""
    at_zero, at_one = variance(0.0), variance(1.0)
    return float(d * at_zero + max(0.0, at_one - at_zero))


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
    if args.json:
        print(json.dumps({"epsilon": args.eps, "d": args.d, "n": args.n, "f_star": args.f_star,
                          "field": args.field, "protocols": rows}, indent=1))
        return 0
    print(f"eps = {args.eps:g}, d = {args.d:,}, n = {args.n:,}, f* = {args.f_star:g}\n")
    print(format_rows(rows))
    best_mse = min(rows, key=lambda r: r["mse"])
    best_l2 = min(rows, key=lambda r: r["l2"])
    print(f"\nlowest worst-case MSE: {best_mse['protocol']} ({best_mse['bits']} bits/report); "
          f"lowest l2: {best_l2['protocol']} ({best_l2['bits']} bits/report)")
    print("MSE: worst case over values with f <= f*; l2/l1: worst case over distributions on the whole "
          "dictionary (PAN Eq. 20, 22, Thm 3.8). Multiply by n for counts (MSE by n^2).")
    return 0
