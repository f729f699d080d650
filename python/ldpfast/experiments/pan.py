"""Reproduction of [PAN] (Pan, CSF 2025) section 6, Figs. 2-4: its data sets, the runs,
the checks of the paper's claims on the measured results and the markdown report."""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple, TypedDict, Union

from .. import datasets as _data
from ..errors import ParameterError
from .algorithms import PAN_ALGORITHMS, PAN_METRIC_ALGORITHMS, get_algorithm
from .progress import ProgressBar
from .results import CellResult, SimulationResult
from .runner import DataSource, _progress_bar, appendix_k_factor, simulate

__all__ = ["PAN_DATASETS", "PAN_RHR_WORST_CLAIMS", "pan_dataset", "reproduce_pan", "pan_checks", "pan_report"]


#: Where [PAN] section 6 says RHR performs the worst: every metric on Zipf (Fig. 2), the
#: worst-case MSE on mini-Kosarak (Fig. 4).
PAN_RHR_WORST_CLAIMS = {"zipf": ("mse", "l1", "l2"), "kosarak": ("mse",)}
#: name -> (figure, description) of [PAN]'s data sets.
PAN_DATASETS = {
    "zipf": ("Fig. 2", "deterministic Zipf 1/r^2 (R1; the paper: n = 10,000), d = 1,000,000, X = the 100 values "
                       "(multiples of RHR's 2^(b-1), so all share RHR residue 0), f* = 1"),
    "gaussian": ("Fig. 3", "R1 Gaussian: RandomState(317).normal(1000, 50, n), floored (the paper: n = 10,000); "
                           "d = 10,000, "
                           "X = [0, 10000), f* = 0"),
    "kosarak": ("Fig. 4", "mini-Kosarak (faithful: SPMF separators counted, values token+2); d = 26,000, "
                          "X = {0..999}, f* = 1"),
}


def pan_dataset(name: str, kosarak_source: str = "kosarak-prefix", n: Optional[int] = None) -> DataSource:
    """The data source of one [PAN] experiment (see :data:`PAN_DATASETS`); ``n`` shrinks
    the synthetic Zipf and Gaussian sets (default: the paper's 10,000 users)."""
    sizes = {} if n is None else {"n": n}
    if name == "zipf":
        return lambda eps: _data.pan_zipf(eps, **sizes)
    if name == "gaussian":
        return _data.pan_gaussian("r1", **sizes)
    if name == "kosarak":
        return _data.mini_kosarak(kosarak_source, mode="faithful")
    raise ParameterError(f"dataset must be one of {sorted(PAN_DATASETS)}, got {name!r}")


def reproduce_pan(datasets: Sequence[str] = ("zipf", "gaussian", "kosarak"),
                  algorithms: Sequence[str] = PAN_ALGORITHMS,
                  epsilons: Sequence[float] = (1, 2, 3, 4, 5), runs: int = 100, *, seed: int = 0,
                  kosarak_source: str = "kosarak-prefix", n: Optional[int] = None,
                  progress: Union[bool, ProgressBar] = False) -> Dict[str, SimulationResult]:
    """Run [PAN] section 6 (Figs. 2-4): each algorithm ``runs`` times per eps on each data
    set. Returns ``{dataset: SimulationResult}``; see :func:`pan_checks` and
    :func:`pan_report`. Algorithms missing from this build raise ParameterError.
    ``progress``: True for a stderr progress bar, or a :class:`ProgressBar` to advance
    (one step per run, data sets, eps and algorithms in that nesting order). ``n``: users of
    the synthetic data sets (default the paper's 10,000; smaller for smoke tests)."""
    algs = [get_algorithm(a) for a in algorithms]
    sources = {name: pan_dataset(name, kosarak_source, n) for name in datasets}
    bar = _progress_bar(progress, len(sources) * len(algs) * len(epsilons) * runs)
    results = {name: simulate(algs, source, epsilons, runs, seed=seed, progress=bar)
               for name, source in sources.items()}
    bar.close()
    return results


class PanChecks(TypedDict):
    """What :func:`pan_checks` returns (each row described there)."""

    leads: List[Tuple[str, str, float, str, float, str, float]]
    he_vs_cms: List[Tuple[str, str, float, float, float, float, Optional[float], Optional[float], Optional[float]]]
    band: List[Tuple[str, str, float, float, float, float, bool]]
    l1_bound: List[Tuple[str, str, float, float, float, bool]]
    l2_exact: List[Tuple[str, str, float, float, float, float]]
    rhr_worst: List[Tuple[str, str, float, float, str, float, Optional[float], Optional[float]]]


def _metric_value(cell: CellResult, metric: str) -> float:
    return {"mse": cell.worst_mse, "l1": cell.l1, "l2": cell.l2}[metric]


def pan_checks(results: Dict[str, SimulationResult]) -> PanChecks:
    """The three claims of [PAN] section 6, checked on measured results.

    Returns a dict with:
      ``leads``: list of ``(dataset, metric, eps, leader, value, best_other, other_value)``
      for every cell, where the leader is MSE-OCMS for MSE and l-OCMS for l1/l2 and the
      others are HE, CMS+HE, RHR (when present);
      ``he_vs_cms``: list of ``(dataset, metric, eps, he, cms_he, ratio, z, predicted_ratio,
      z_predicted)``: ``z`` is ``cms_he - he`` over its standard error (l1/l2; None for the
      max-based MSE); ``predicted_ratio`` the closed forms' CMS+HE / HE ratio (MSE: of the
      largest variances, l2: of ``sum_x Var``; None for l1) and ``z_predicted`` the measured
      minus the predicted difference over the standard error (l2 only);
      ``band``: list of ``(dataset, label, eps, closed_form, measured, bound, inside)`` for
      every cell with a closed form (closed form <= Eq. 19 estimate <= Appendix K bound);
      the paper's claim is about the MSE-OCMS+RR cells;
      ``l1_bound``: ``(dataset, label, eps, l1, bound, below)`` for cells with the l1 bound;
      ``l2_exact``: ``(dataset, label, eps, l2, expected, z)`` with ``expected = sum_x Var``
      at the true frequencies and ``z`` the deviation in standard errors;
      ``rhr_worst``: ``(dataset, metric, eps, rhr, worst_label, worst, rhr_theory, worst_theory)``
      for every cell of :data:`PAN_RHR_WORST_CLAIMS`, ``worst`` the largest value among the
      metric's algorithms (closed forms for the MSE only, None otherwise).
    """
    checks: PanChecks = {"leads": [], "he_vs_cms": [], "band": [], "l1_bound": [], "l2_exact": [], "rhr_worst": []}
    leads, pairs, band = checks["leads"], checks["he_vs_cms"], checks["band"]
    for name, res in results.items():
        for eps in res.epsilons:
            for metric, algs in PAN_METRIC_ALGORITHMS.items():
                present = [a for a in algs if a in res.algorithms]
                if not present or present[0] != algs[0] or len(present) < 2:
                    continue
                leader = res.cell(algs[0], eps)
                others = [res.cell(a, eps) for a in present[1:]]
                best = min(others, key=lambda c: _metric_value(c, metric))
                leads.append((name, metric, eps, leader.label, _metric_value(leader, metric),
                              best.label, _metric_value(best, metric)))
            if "he" in res.algorithms and "cms-he" in res.algorithms:
                he, cms = res.cell("he", eps), res.cell("cms-he", eps)
                for metric in ("mse", "l1", "l2"):
                    a, b = _metric_value(he, metric), _metric_value(cms, metric)
                    z = predicted = z_predicted = None
                    if metric == "mse" and he.theory_mse and cms.theory_mse:
                        predicted = cms.theory_mse / he.theory_mse
                    if metric != "mse":
                        se = math.hypot(getattr(he, f"{metric}_se"), getattr(cms, f"{metric}_se"))
                        z = (b - a) / se if se > 0 else None
                        if metric == "l2" and he.exact_l2 and cms.exact_l2 and se > 0:
                            predicted = cms.exact_l2 / he.exact_l2
                            z_predicted = ((b - a) - (cms.exact_l2 - he.exact_l2)) / se
                    pairs.append((name, metric, eps, a, b, b / a, z, predicted, z_predicted))
            for alg in res.algorithms:
                c = res.cell(alg, eps)
                if c.theory_mse is not None and c.appendix_k is not None:  # set together
                    band.append((name, c.label, eps, c.theory_mse, c.worst_mse, c.appendix_k,
                                 bool(c.within_band)))
    l1_bound, l2_exact = checks["l1_bound"], checks["l2_exact"]
    for name, res in results.items():
        for c in res.cells:
            if c.theory_l1 is not None:
                l1_bound.append((name, c.label, c.epsilon, c.l1, c.theory_l1, c.l1 <= c.theory_l1))
            if c.exact_l2 is not None and c.l2_se > 0:
                l2_exact.append((name, c.label, c.epsilon, c.l2, c.exact_l2, (c.l2 - c.exact_l2) / c.l2_se))
    rhr_worst = checks["rhr_worst"]
    for name, metrics in PAN_RHR_WORST_CLAIMS.items():
        if name not in results or "rhr" not in results[name].algorithms:
            continue
        res = results[name]
        for eps in res.epsilons:
            for metric in metrics:
                cells = [res.cell(a, eps) for a in PAN_METRIC_ALGORITHMS[metric] if a in res.algorithms]
                worst = max(cells, key=lambda c: _metric_value(c, metric))
                rhr = res.cell("rhr", eps)
                theory = (rhr.theory_mse, worst.theory_mse) if metric == "mse" else (None, None)
                rhr_worst.append((name, metric, eps, _metric_value(rhr, metric), worst.label,
                                  _metric_value(worst, metric), *theory))
    return checks


def pan_report(results: Dict[str, SimulationResult], checks: PanChecks, command: str,
               environment: str = "", plots: Optional[Dict[str, str]] = None) -> str:
    """Markdown report of a reproduction: the command, the measured tables per data set,
    and the answers to the three checks."""
    lines = ["# Reproduction of Pan (CSF 2025), section 6 (Figs. 2-4)", "",
             "Produced by:", "", "```bash", command, "```", ""]
    if environment:
        lines += [environment, ""]
    runs = sorted({res.runs for res in results.values()})
    t = runs[0] if len(runs) == 1 else None
    sizes = sorted({res.n_candidates for res in results.values()})
    at_t = ("t = the runs of each data set" if t is None else
            ", ".join(f"{appendix_k_factor(size, t):.2f} for |X| = {size:,}" for size in sizes) + f" at t = {t} runs")
    lines += ["Metrics over the values of interest X: worst-case MSE = Eq. 19 (max over X of the mean "
              "squared error over runs), l1 and l2 = mean over runs of the summed absolute / squared "
              "errors. Closed forms (`ldpfast.theory`): the largest variance over X at the true frequencies "
              "(OCMS+RR: Eq. 8/20 with the chosen integer m; HE: m = 2; CMS+HE: with its per-run family's "
              "bias, Thm 3.10; RHR: with the share of users in each residue class) for the MSE; Eq. 22 with "
              "|X| in place of d for l2 and its Cauchy-Schwarz bound sqrt(|X| l2) for l1 (an upper bound), "
              "as the reference code plots them. App. K bound = closed form x "
              f"[1 + (2/t)(sqrt(t log(20|X|)) + log(20|X|))] ({at_t}). The paper shows MSE-OCMS+RR only "
              "for the MSE and l-OCMS+RR only for l1/l2; both are listed for every metric here.", ""]
    for name, res in results.items():
        fig, desc = PAN_DATASETS.get(name, ("", res.note))
        lines += [f"## {name} ({fig})", "", f"{desc}. n = {res.n:,} users, {res.runs} runs per eps, "
                  f"seed {res.seed}. Construction: {res.note}.", ""]
        ms: Dict[str, List[str]] = {}
        for c in res.cells:
            if c.algorithm.startswith("ocms"):
                ms.setdefault(c.label, []).append(f"{c.params.get('m', '?')}")
        if ms:
            lines += ["m per eps: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in ms.items()), ""]
        lines += [res.table("all", markdown=True), ""]
        secs = sum(c.seconds for c in res.cells)
        lines += [f"Time for this data set: {secs:.0f} s "
                  + "(" + ", ".join(f"{a}: {sum(c.seconds for c in res.cells if c.algorithm == a):.0f} s"
                                    for a in res.algorithms) + ").", ""]
        if plots and name in plots:
            lines += [f"![{name}]({plots[name]})", ""]
    lines += ["## How this differs from the paper's runs", "",
              "- **mini-Kosarak** is rebuilt with the reference code's construction (every token of SPMF's "
              "sequence file counted, separators included, `round(count/scale)` copies of `token + 2`, "
              "d = 26,000, X = {0..999}) from the bundled Kosarak prefix (the first 36,681 of 990,002 users; "
              "the full file is not available here). The scale is `100 * 36,681 / 990,002 = 3.705`, the same "
              "per-user density as the paper's `/100` on the full file, giving 168,130 entries (paper: "
              "\"over 170,000\"). Value 1 is the `-1` click separator (frequency 0.47: the \"value above "
              "0.4\" of the paper, which hurts RHR's MSE for every value sharing its residue), value 0 the "
              "`-2` user separator (0.058); the other values are page ids + 2. Rounding removes items with "
              "fewer than 2 clicks in the prefix instead of fewer than 51 in the full file, so the tail of "
              "pages differs; with `--kosarak kosarak.dat` (the full FIMI file) the construction is the paper's.",
              "- **Full Kosarak**: the bundled prefix is 3.7% of Kosarak (36,681 / 990,002 users), so Fig. 4 "
              "here is built from a 3.7% prefix at the paper's per-user density, not from the whole data set. "
              "The full file is accepted: download `kosarak.dat` from the FIMI repository "
              "(http://fimi.uantwerpen.be/data/kosarak.dat, one user per line) and pass "
              "`ldpfast reproduce --kosarak kosarak.dat` "
              "(in Python: `ldpfast.datasets.mini_kosarak(\"kosarak.dat\")`); "
              "the scale is then the paper's 100.",
              "- **Zipf** is the reference code's deterministic data with d = 1,000,000 (the paper's text says "
              "100,000 and \"sampled\"), **Gaussian** its seed-317 data (floored, mean 1000; the text says a "
              "random mean in [1000, 9000] and rounding).",
              "- OCMS draws `a0, a1` from the whole field `2^64 - 59` and estimates with `m'` ([PAN] Alg. 1-2); "
              "the reference code uses another 64-bit prime, `a0, a1` in `[1, p-1]` and plain `m`: identical "
              "to double precision at this field size. RR is decoded with the exact inverse "
              "`(e+m-2)/(e-1)` (the reference code inverts the matrix numerically; the paper's printed "
              "`(e+m-1)/(e-1)` is an erratum).",
              "- CMS+HE redraws its 2,048 hash functions every run, as the reference code does, so its closed "
              "form includes the family's bias term ([PAN] Thm 3.10). RHR's closed form uses the share of "
              "users in each residue class. The paper plots closed forms only for OCMS.",
              "- The randomness is ldpfast's seeded ChaCha20 (simulation seeds), so individual numbers differ "
              "from the paper's plots while their distribution does not.", ""]
    lines += ["## Checks", ""]
    leads = checks["leads"]
    won = [r for r in leads if r[4] < r[6]]
    lines += [f"**1. Does OCMS+RR lead in each metric?** {len(won)}/{len(leads)} (data set, metric, eps) "
              "cells: MSE-OCMS has the lowest worst-case MSE and l-OCMS the lowest l1 / l2 among "
              "HE, CMS+HE, RHR."]
    lost = [r for r in leads if r[4] >= r[6]]
    if lost:
        lines += ["", "Cells where it does not lead:", "",
                  "| data set | metric | eps | OCMS | best other | value |", "|---|---|---|---|---|---|"]
        lines += [f"| {r[0]} | {r[1]} | {r[2]:g} | {r[4]:.4e} | {r[5]} | {r[6]:.4e} |" for r in lost]
    pairs = checks["he_vs_cms"]
    if pairs:
        ratios = [p[5] for p in pairs]
        zs = [abs(p[6]) for p in pairs if p[6] is not None]
        zp = [abs(p[8]) for p in pairs if p[8] is not None]
        preds = [p[7] for p in pairs if p[7] is not None and p[1] == "l2"]
        lines += ["", f"**2. Are HE and CMS+HE equal?** CMS+HE / HE ratio over all {len(pairs)} "
                  f"(data set, metric, eps) cells: {min(ratios):.3f} .. {max(ratios):.3f}."]
        if zs:
            lines[-1] += (f" For l1/l2 the difference is within 3 standard errors in {sum(z < 3 for z in zs)}/"
                          f"{len(zs)} cells (largest {max(zs):.2f}).")
        if zp:
            lines[-1] += (f" The closed forms predict CMS+HE's l2 to be {min(preds):.3f} .. {max(preds):.3f} "
                          "times HE's (the per-run hash family's bias, [PAN] Thm 3.10, and the m/(m-1) "
                          "factor), which is largest when one value dominates; the measured l2 difference "
                          f"differs from that prediction by at most {max(zp):.2f} standard errors "
                          f"({sum(z < 3 for z in zp)}/{len(zp)} within 3).")
        lines += ["", "| data set | metric | eps | HE | CMS+HE | ratio | z | predicted ratio | z vs prediction |",
                  "|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {p[0]} | {p[1]} | {p[2]:g} | {p[3]:.4e} | {p[4]:.4e} | {p[5]:.3f} | "
                  f"{'' if p[6] is None else f'{p[6]:+.2f}'} | {'' if p[7] is None else f'{p[7]:.3f}'} | "
                  f"{'' if p[8] is None else f'{p[8]:+.2f}'} |" for p in pairs]
    band = checks["band"]
    ocms_band = [b for b in band if b[1] == "MSE-OCMS+RR"]
    if ocms_band:
        inside = [b for b in ocms_band if b[6]]
        others = [b for b in band if b[1] != "MSE-OCMS+RR"]
        lines += ["", f"**3. Does every measured worst-case MSE sit between the closed form and the "
                  f"Appendix K bound?** {len(inside)}/{len(ocms_band)} MSE-OCMS+RR cells"
                  + (f"; {sum(b[6] for b in others)}/{len(others)} cells of the other algorithms with a "
                     "closed form." if others else "."), "",
                  "| data set | eps | closed form | measured | App. K bound | inside |", "|---|---|---|---|---|---|"]
        lines += [f"| {b[0]} | {b[2]:g} | {b[3]:.4e} | {b[4]:.4e} | {b[5]:.4e} | {'yes' if b[6] else 'NO'} |"
                  for b in ocms_band]
        outside = [b for b in others if not b[6]]
        if outside:
            lines += ["", "Cells of the other algorithms outside their band:", "",
                      "| data set | algorithm | eps | closed form | measured | App. K bound |",
                      "|---|---|---|---|---|---|"]
            lines += [f"| {b[0]} | {b[1]} | {b[2]:g} | {b[3]:.4e} | {b[4]:.4e} | {b[5]:.4e} |" for b in outside]
            above = [b for b in outside if b[4] > b[5]]
            lines += ["", f"{len(outside) - len(above)} of these are below the closed form and {len(above)} above "
                      "the bound. Eq. 19 overshoots the largest variance only when many values share it "
                      "(MSE-OCMS+RR's m makes Var(f=0) = Var(f=1)); when one value's variance dominates (e.g. "
                      "l-OCMS+RR's larger m on the most frequent value), the maximum is that one value's "
                      f"mean of {_runs_text(results)} squared errors, which falls below its expectation about "
                      "half the time."]
    rhr_rows = checks.get("rhr_worst", [])
    if rhr_rows:
        not_worst = [r for r in rhr_rows if r[4] != "RHR"]
        lines += ["", f"**4. Is RHR the worst where the paper says so** (every metric on Zipf, Fig. 2; the "
                  f"worst-case MSE on mini-Kosarak, Fig. 4)? In {len(rhr_rows) - len(not_worst)}/{len(rhr_rows)} "
                  "cells."]
        if not_worst:
            lines += ["", "Cells where another algorithm is worse than RHR (closed forms: the largest variance "
                      "over X, MSE only):", "",
                      "| data set | metric | eps | RHR | worst | its value | RHR closed form | worst's closed form |",
                      "|---|---|---|---|---|---|---|---|"]
            lines += [f"| {r[0]} | {r[1]} | {r[2]:g} | {r[3]:.4e} | {r[4]} | {r[5]:.4e} | "
                      f"{'' if r[6] is None else f'{r[6]:.4e}'} | {'' if r[7] is None else f'{r[7]:.4e}'} |"
                      for r in not_worst]
            flipped = [r for r in not_worst if r[1] == "mse" and r[6] is not None and r[7] is not None
                       and r[6] > r[7]]
            if flipped:
                lines += ["", f"In {len(flipped)} of these MSE cells the closed forms still rank RHR worst: Eq. 19 "
                          f"is a maximum over X of means of {_runs_text(results)} runs, which overshoots the "
                          "largest variance most when "
                          "many values share it (HE, CMS+HE: every value has about the same variance) and least "
                          "when one value dominates (RHR: the values sharing the residue of the 0.47-frequency "
                          "separator), so at these eps the measured ranking is within that selection bias."]
    l1_rows, l2_rows = checks.get("l1_bound", []), checks.get("l2_exact", [])
    if l1_rows or l2_rows:
        lines += ["", "**Further checks.**"]
        if l1_rows:
            lines[-1] += (f" The measured l1 is below its Cauchy-Schwarz bound sqrt(|X| l2) ([PAN] Thm 3.8, "
                          f"\"expected to be below it\") in {sum(r[5] for r in l1_rows)}/{len(l1_rows)} cells.")
        if l2_rows:
            big = max(l2_rows, key=lambda r: abs(r[5]))
            lines[-1] += (f" The measured l2 (mean of {_runs_text(results)} runs) is within 3 standard errors of "
                          "its exact "
                          f"expectation sum_x Var(x) at the true frequencies in "
                          f"{sum(abs(r[5]) < 3 for r in l2_rows)}/{len(l2_rows)} cells (largest deviation "
                          f"{big[5]:+.2f} SE: {big[0]}, {big[1]}, eps {big[2]:g}); this checks every "
                          "implementation and closed form at once, since each estimator is unbiased.")
    return "\n".join(lines) + "\n"


def _runs_text(results: Dict[str, SimulationResult]) -> str:
    """The runs per cell of ``results``: ``"100"``, or ``"2 to 100"`` when data sets differ."""
    runs = sorted({res.runs for res in results.values()})
    return str(runs[0]) if len(runs) == 1 else f"{runs[0]} to {runs[-1]}"
