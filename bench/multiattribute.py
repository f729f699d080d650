"""Multi-attribute protocols on the UCI Adult extract, in one run (issue 32's numbers).

**Marginals** (CALM against one oracle on the full joint domain), epsilon = 1, on seven
categorical attributes of Adult (workclass, marital-status, occupation, relationship, race,
sex, income: 113,400 joint cells, under the 2^20 the joint baseline takes; education and
native-country are left out so that the joint fits). Error of a marginal: its total variation
distance to the true one (half the L1 distance of the cell shares); reported: the mean over
every 2-way (21) and every 3-way (35) marginal, averaged over ``--runs`` runs, for
n = 32,561 (Adult) and Adult's rows replicated to about 10^6 (31 copies, as the marginal-release
papers do). Contenders: ``calm-2`` (CALM collecting every 2-way marginal, OLH; 3-way queries
by maximum entropy), ``calm-3`` (every 3-way marginal), ``joint`` (GRR on the 113,400 joint
cells; marginals summed, Norm-Sub applied).

**Server time** of SPL, SMP and RS+FD (GRR oracle, epsilon = 1, all nine categorical
attributes, n = 32,561) against multi-freq-ldpy (``pip install multi-freq-ldpy``), when it is
installed: ldpfast's ``Server(params).update(reports).estimate()`` on its report columns against
multi-freq-ldpy's ``*_GRR_Aggregator_MI`` on the same reports as its list of tuples; both
estimate every attribute's frequencies. The two estimates of the same reports must be equal
(multi-freq-ldpy clips and renormalizes; ldpfast's are post-processed alike for the
comparison), and multi-freq-ldpy's own client's reports must give estimates within noise.

    PYTHONPATH=python python3 bench/multiattribute.py [--runs 3] [--figure docs/img/adult_marginal.png]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
import warnings
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from ldpfast.datasets import load_adult
from ldpfast.protocols.multiattribute.calm import CALMParams, JointParams, CALMClient, CALMServer, JointClient, \
    JointServer
from ldpfast.protocols.multiattribute.multifreq import (RSFDClient, RSFDParams, RSFDServer, SMPClient, SMPParams,
                                                        SMPServer, SPLClient, SPLParams, SPLServer)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402  (found through sys.path above)

MARGINAL_ATTRIBUTES = ("workclass", "marital-status", "occupation", "relationship", "race", "sex", "income")
EPSILON = 1.0


def adult_records(names: Sequence[str]) -> Tuple[np.ndarray, Tuple[int, ...], Dict[str, Tuple[str, ...]]]:
    data = load_adult().categorical
    records = np.stack([data[a][0] for a in names], axis=1)
    return records, tuple(len(data[a][1]) for a in names), {a: data[a][1] for a in names}


def true_marginal(records: np.ndarray, domains: Sequence[int], key: Tuple[int, ...]) -> np.ndarray:
    cells = np.ravel_multi_index(tuple(records[:, a] for a in key), [domains[a] for a in key])
    return np.bincount(cells, minlength=int(np.prod([domains[a] for a in key]))) / len(records)


def marginal_errors(records: np.ndarray, domains: Tuple[int, ...], names: Sequence[str], runs: int,
                    seed: int) -> Dict[str, Dict[int, float]]:
    """Mean total variation distance over every 2- and 3-way marginal, per contender."""
    contenders: Dict[str, Any] = {
        "calm-2": (CALMParams.all_way(EPSILON, domains, 2, names=tuple(names)), CALMClient, CALMServer),
        "calm-3": (CALMParams.all_way(EPSILON, domains, 3, names=tuple(names)), CALMClient, CALMServer),
        "joint": (JointParams(epsilon=EPSILON, domains=domains, names=tuple(names)), JointClient, JointServer),
    }
    truth = {way: {key: true_marginal(records, domains, key)
                   for key in itertools.combinations(range(len(domains)), way)} for way in (2, 3)}
    out: Dict[str, Dict[int, float]] = {}
    for name, (params, client_type, server_type) in contenders.items():
        errors: Dict[int, List[float]] = {2: [], 3: []}
        for run in range(runs):
            server = server_type(params).update(client_type(params, rng=seed + run).perturb(records))
            for way in (2, 3):
                for key, true in truth[way].items():
                    est = server.marginal(list(key)).estimate
                    errors[way].append(0.5 * float(np.abs(est - true).sum()))
        out[name] = {way: float(np.mean(values)) for way, values in errors.items()}
    return out


# -- server time against multi-freq-ldpy ---------------------------------------------------------------
def multifreq_comparison(records: np.ndarray, domains: Tuple[int, ...], seed: int) -> Dict[str, Any]:
    try:
        from multi_freq_ldpy.mdim_freq_est import RSpFD_solution, SMP_solution, SPL_solution
    except ImportError as exc:
        return {"skipped": f"multi-freq-ldpy is not installed ({exc})"}
    k, d = list(domains), len(domains)
    cases = {
        "spl": (SPLParams, SPLClient, SPLServer, SPL_solution.SPL_GRR_Client, SPL_solution.SPL_GRR_Aggregator_MI),
        "smp": (SMPParams, SMPClient, SMPServer, SMP_solution.SMP_GRR_Client, SMP_solution.SMP_GRR_Aggregator_MI),
        "rsfd": (lambda **kw: RSFDParams(amplified=True, **kw), RSFDClient, RSFDServer,
                 RSpFD_solution.RSpFD_GRR_Client, RSpFD_solution.RSpFD_GRR_Aggregator_MI),
    }
    out: Dict[str, Any] = {}
    for name, (params_type, client_type, server_type, their_client, their_server) in cases.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")        # RS+FD amplified, as the paper (and multi-freq-ldpy) run it
            params = params_type(epsilon=EPSILON, domains=domains)
            reports = client_type(params, rng=seed).perturb(records)
        tuples = _as_tuples(name, reports)
        ours_s = machine.best_time(lambda s=server_type, p=params, r=reports: s(p).update(r).estimate(), 5)
        start = time.perf_counter()
        theirs_same = their_server(tuples, k, d, EPSILON)
        theirs_s = time.perf_counter() - start
        ours = server_type(params).update(reports)
        ours_pp = _clip_normalize(ours.estimate(), params.offsets)
        same_gap = float(np.max(np.abs(ours_pp - np.concatenate(list(theirs_same)))))
        np.random.seed(seed)                        # multi-freq-ldpy draws from numpy's global generator
        start = time.perf_counter()
        their_reports = [their_client(list(row), k, d, EPSILON) for row in records.tolist()]
        their_client_s = time.perf_counter() - start
        theirs_own = np.concatenate(list(their_server(their_reports, k, d, EPSILON)))
        true = np.concatenate([np.bincount(records[:, j], minlength=kj) / len(records) for j, kj in enumerate(k)])
        sd = np.sqrt(ours.cell_variance(true, np.arange(params.d)))
        out[name] = {"ldpfast_server_s": ours_s, "multi_freq_ldpy_server_s": theirs_s,
                     "speedup": theirs_s / ours_s, "max_abs_difference_same_reports": same_gap,
                     "multi_freq_ldpy_client_s": their_client_s,
                     "own_client_difference_over_sd": float(np.max(np.abs(theirs_own - ours_pp) / (np.sqrt(2) * sd)))}
    return out


def _as_tuples(name: str, reports: Any) -> List[Any]:
    """ldpfast's GRR reports as multi-freq-ldpy's input: a tuple of symbols per user (SPL,
    RS+FD) or ``(attribute, symbol)`` (SMP)."""
    if name == "smp":
        return list(zip(reports.group.astype(int).tolist(), reports.y[:, 0].astype(int).tolist()))
    return [tuple(row) for row in reports.y.astype(int).tolist()]


def _clip_normalize(fhat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """multi-freq-ldpy's post-processing: negatives to 0, each attribute renormalized."""
    out = np.clip(fhat, 0.0, None)
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        out[lo:hi] /= out[lo:hi].sum()
    return out


def heat_map(records: np.ndarray, domains: Tuple[int, ...], names: Sequence[str], labels: Dict[str, Any],
             path: str, seed: int) -> None:
    """occupation x relationship on Adult x 31: true, CALM (2-way) and the full joint, eps = 1."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    query = ["occupation", "relationship"]
    key = tuple(names.index(a) for a in query)
    true = true_marginal(records, domains, key).reshape([domains[a] for a in key])
    calm = CALMParams.all_way(EPSILON, domains, 2, names=tuple(names))
    joint = JointParams(epsilon=EPSILON, domains=domains, names=tuple(names))
    tables = [("true", true)]
    for label, params, client, server in (("CALM (2-way, OLH)", calm, CALMClient, CALMServer),
                                          ("full joint (GRR)", joint, JointClient, JointServer)):
        agg = server(params).update(client(params, rng=seed).perturb(records))
        tables.append((label, agg.marginal(query).table()))
    fig, axes = plt.subplots(1, 3, figsize=(13, 5), sharey=True)
    top = 1.25 * float(true.max())                 # the colour scale of the true table (larger shares saturate)
    for ax, (label, table) in zip(axes, tables):
        image = ax.imshow(table, vmin=0, vmax=top, cmap="viridis", aspect="auto")
        tv = 0.5 * float(np.abs(table - true).sum())
        ax.set_title(f"{label}" + ("" if label == "true" else f"\nTV distance {tv:.3f}"))
        ax.set_xticks(range(domains[key[1]]), labels[query[1]], rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(domains[key[0]]), labels[query[0]], fontsize=7)
    fig.colorbar(image, ax=axes, shrink=0.8, label="share of people")
    fig.suptitle(f"Adult x 31 ({len(records):,} records), occupation x relationship, epsilon = {EPSILON:g}", y=1.04)
    fig.savefig(path, dpi=110, bbox_inches="tight")


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--figure", default="", help="write the heat map here (PNG)")
    parser.add_argument("--json", default="", help="write the numbers here")
    args = parser.parse_args(argv)
    result: Dict[str, Any] = {"machine": machine.describe(), "epsilon": EPSILON}
    records, domains, labels = adult_records(MARGINAL_ATTRIBUTES)
    replicated = np.tile(records, (31, 1))
    result["marginals"] = {}
    for label, data in (("adult", records), ("adult_x31", replicated)):
        start = time.perf_counter()
        result["marginals"][label] = {"n": len(data), **marginal_errors(data, domains, MARGINAL_ATTRIBUTES,
                                                                          args.runs, args.seed)}
        result["marginals"][label]["seconds"] = time.perf_counter() - start
        print(json.dumps({label: result["marginals"][label]}), flush=True)
    every, every_domains, _ = adult_records(tuple(load_adult().categorical))
    result["multi_freq_ldpy"] = multifreq_comparison(every, every_domains, args.seed)
    print(json.dumps({"multi_freq_ldpy": result["multi_freq_ldpy"]}), flush=True)
    if args.figure:
        heat_map(replicated, domains, MARGINAL_ATTRIBUTES, labels, args.figure, args.seed)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
