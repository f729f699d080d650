"""``ldpfast simulate``: run protocols on a data set over an eps grid and measure errors.

Example::

    ldpfast simulate -p ocms-mse,he,rhr --data zipf --eps 1,2,3 --runs 20 --plot zipf.png

Prints the worst-case MSE ([PAN] Eq. 19), l1 and l2 over the values of interest, next to
the closed forms where they exist. Set-valued protocols ([PS]: PrivSketch family, nPCMS,
SVIM) run on set data and report [PS]'s MSE, top-k Var and NCR; heavy-hitter protocols
([WW]: HadaHeavy, TreeHist, TreeHist-CS; Wang et al.'s PEM) report recall, precision and the
largest error over the true heavy hitters next to Delta. One kind per run::

    ldpfast simulate -p privsketch,ps-olh,svim --data retail --eps 1,4 --runs 5
    ldpfast simulate -p hadaheavy,treehist,pem --data zipf --n 100000 --eps 2,4
    ldpfast simulate -p spl,smp,rsfd,calm --data adult --eps 1,4 --runs 3

Record protocols (several attributes per user) run on ``--data correlated`` (synthetic
records with dependent attributes) or ``adult`` and report the mean total variation distance
of the attributes' frequencies and of the 2-way marginals.

Repeated collection (``--rounds T``): memoized protocols over T rounds of users whose values
change (``--data zipf`` with ``--churn``, or ``kosarak-clicks``, the bundled click-streams
split by time), per-round errors and each user's cumulative privacy loss against
re-randomizing every round (:mod:`ldpfast.experiments.rounds`)::

    ldpfast simulate --rounds 50 -p l-grr,l-osue,rappor --eps 1 --eps-inf 2 --churn 0.05

It and writes a PNG (needs ``pip install 'ldpfast[plot]'``,
or pass ``--no-plot``). Seeded: the reports are reproducible from ``--seed``, which is
right for simulation and never for real clients.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, List, Mapping, Optional, Protocol, TypeVar, Union

import numpy as np

from ..errors import ParameterError
from ._labelfile import label_sets, label_values
from ._options import integer, parse_floats

if TYPE_CHECKING:
    from ..datasets import RecordData, SetData, ValueData
    from ..experiments import DataSource


class _Result(Protocol):
    """What ``--json`` writes: a simulation result of any kind."""

    def to_dict(self) -> Mapping[str, Any]: ...


_R = TypeVar("_R", bound=_Result)

#: Synthetic set data: [PS] Table 1 Dataset3's shape (Zipf(1.1) items, lengths drawn around 100
#: before de-duplication) at a tenth of its users unless --n says otherwise.
SET_SYNTHETIC = "zipf-sets"
SET_SYNTHETIC_N, SET_SYNTHETIC_D, SET_SYNTHETIC_LENGTH = 10_000, 20_000, 100

DEFAULT_PROTOCOLS = "ocms-mse,ocms-l"

HELP = "simulate protocols on a data set over an eps grid; print error tables and plot them"


def parse_candidates(text: Optional[str]) -> Union[None, str, int, List[int]]:
    """``--candidates``: None (the data set's own), ``"all"`` (the whole domain), ``K`` (the K
    most frequent values) or ``A:B`` (the list ``A..B-1``)."""
    if text is None or text == "all":
        return text
    try:
        if ":" in text:
            lo, hi = (int(v) for v in text.split(":"))
            return list(range(lo, hi))
        return int(text)
    except ValueError:
        raise ParameterError(f"--candidates must be 'all', an integer K or A:B, got {text!r}") from None


def add_common(parser: argparse.ArgumentParser, *, runs: int, eps: str) -> None:
    """Options shared by ``simulate`` and ``reproduce``."""
    parser.add_argument("--eps", default=eps, help=f"privacy parameters, '1,2,3' or '1:5' (default {eps})")
    parser.add_argument("--runs", type=integer, default=runs, help=f"independent runs per eps (default {runs})")
    parser.add_argument("--seed", type=integer, default=0, help="master seed (simulation only; default 0)")
    parser.add_argument("--threads", type=integer, default=0,
                        help="threads for client perturbation and server decoding (0 = all cores)")
    parser.add_argument("--no-plot", action="store_true", help="do not write PNG plots (no matplotlib needed)")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None,
                          help="always draw the progress bar on stderr (default: when stderr is a terminal)")
    progress.add_argument("--quiet", dest="progress", action="store_false", help="no progress bar")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-p", "--protocol", default=DEFAULT_PROTOCOLS,
                        help="comma-separated protocol names (see --list; default ocms-mse,ocms-l)")
    parser.add_argument("--data", default=None,
                        help="zipf, zipf-sampled, gaussian, gaussian-paper, mini-kosarak, mini-kosarak-clean, "
                             "a bundled file (kosarak-prefix, retail, bms-webview-1, bms-webview-2) or a path "
                             "(one value per line, or one set per line: integer ids or labels) (default zipf); "
                             "set-valued protocols: "
                             f"{SET_SYNTHETIC} (synthetic Zipf sets), a bundled file or a path with one set per line "
                             f"(default {SET_SYNTHETIC})")
    parser.add_argument("--n", type=integer, default=None,
                        help="users for the synthetic zipf/gaussian data (default: the paper's 10,000); with "
                             "set data: the synthetic sets' users, or the first N users of a file")
    parser.add_argument("--d", type=integer, default=None,
                        help="dictionary size (default: the data set's; zipf 1,000,000 as R1, the paper says 100,000)")
    parser.add_argument("--kosarak", default="kosarak-prefix",
                        help="Kosarak file mini-kosarak is built from: the bundled prefix (default) or a path "
                             "to the full FIMI kosarak.dat")
    parser.add_argument("--values", choices=("entries", "sample"), default="entries",
                        help="set-valued data: one report per (user, item) entry, or one sampled item per user")
    parser.add_argument("--candidates", default=None,
                        help="values of interest: 'all', K (the K most frequent) or A:B (default: the data set's)")
    parser.add_argument("--top-k", type=integer, default=50,
                        help="set-valued protocols: k of the top-k Var and NCR (default 50, as PS Fig. 5)")
    parser.add_argument("--beta", type=float, default=0.05,
                        help="heavy hitters: failure probability the thresholds are set for (default 0.05)")
    add_common(parser, runs=10, eps="1,2,3,4,5")
    parser.add_argument("--plot", default="simulate.png", help="PNG path (default simulate.png)")
    parser.add_argument("--json", default=None, help="also write the results as JSON to this path")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    parser.add_argument("--list", action="store_true", help="list the protocols and data sets, then exit")
    rounds = parser.add_argument_group("repeated collection (--rounds)")
    rounds.add_argument("--rounds", type=integer, default=None,
                        help="simulate T rounds of collection with memoized protocols (default protocols: every "
                             "memoized one; --eps: one report's budget eps_1, one value)")
    rounds.add_argument("--eps-inf", type=float, default=None,
                        help="budget of the permanent (memoized) response (default 2 * eps_1)")
    rounds.add_argument("--churn", type=float, default=0.05,
                        help="zipf data: probability that a user's value changes each round (default 0.05)")

    from .shuffle import add_shuffle_options

    add_shuffle_options(parser, rounds=False)  # --rounds is the repeated-collection simulation: --shuffle-rounds


def setup_threads(threads: int) -> None:
    """Apply ``--threads`` to the kernels."""
    import ldpfast

    if threads < 0:
        raise ParameterError(f"--threads must be >= 0, got {threads}")
    ldpfast.set_num_threads(threads)


def check_output_path(path: str, flag: str) -> None:
    """ParameterError unless ``path`` can be created: its folder exists and it is not a folder."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder):
        raise ParameterError(f"{flag} must be a file path in an existing folder, got {path!r}")


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse unwritable --plot/--json paths (and a missing matplotlib) before simulating."""
    from .. import experiments

    if not args.no_plot:
        experiments.require_matplotlib()
        check_output_path(args.plot, "--plot")
    if args.json:
        check_output_path(args.json, "--json")


def write_outputs(args: argparse.Namespace, result: _R, plot: Callable[[_R, str], object]) -> int:
    """Write ``--json`` (``result.to_dict()``) and the ``--plot`` PNG (``plot(result, path)``)."""
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result.to_dict(), fh, indent=1)
        print(f"wrote {args.json}")
    if not args.no_plot:
        plot(result, args.plot)
        print(f"wrote {args.plot}")
    return 0


def progress_enabled(flag: Optional[bool]) -> bool:
    return sys.stderr.isatty() if flag is None else flag


KIND_TITLES = {"values": "single-value frequency oracles (metrics: worst-case MSE, l1, l2; value data)",
               "sets": "set-valued protocols (metrics: MSE, top-k Var, NCR; set data)",
               "heavy": "heavy hitters (metrics: recall, precision, max error vs Delta; value data)",
               "numbers": "means of numbers (metric: MSE of the mean vs closed form; numeric data)",
               "records": "record protocols (metrics: mean TV distance of the attributes and of the 2-way marginals; "
                          "record data)"}


def list_choices() -> str:
    from .. import datasets
    from ..datasets.numeric import NUMERIC_DATASETS
    from .._registry import aliases
    from ..experiments import KINDS

    ids = aliases()
    lines = ["name (protocol id where the name is an alias; every command takes both)"]
    for kind, table in KINDS.items():
        lines.append(f"protocols, {KIND_TITLES[kind]}:")
        for alg in table.values():
            status = "" if alg.available() else "  [not in this build]"
            name = f"{alg.name} ({ids[alg.name]})" if alg.name in ids else alg.name
            lines.append(f"  {name:<27} {alg.label:<16} {alg.summary}{status}")
    lines.append("data sets:")
    lines += [f"  {name}" for name in datasets.SYNTHETIC]
    lines.append(f"  {SET_SYNTHETIC}  (synthetic, set-valued)")
    lines += [f"  {name}  (bundled, set-valued)" for name in sorted(datasets.BUNDLED)]
    lines += [f"  {name}  (records)" for name in datasets.RECORD_DATA]
    lines.append("  PATH  (one value per line, or one set per line: integer ids or labels)")
    lines += [f"  {name}  (numeric, for means)" for name in NUMERIC_DATASETS]
    return "\n".join(lines)


def protocol_kind(names: List[str]) -> str:
    """The one kind of every name in ``names`` (ParameterError when they mix kinds)."""
    from ..experiments import algorithm_kind

    if not names:
        raise ParameterError("--protocol must name at least one protocol")
    kinds = {name: algorithm_kind(name) for name in names}
    if len(set(kinds.values())) > 1:
        groups = "; ".join(f"{kind}: {', '.join(n for n in names if kinds[n] == kind)}"
                           for kind in dict.fromkeys(kinds.values()))
        raise ParameterError(f"--protocol must name protocols of one kind (they take different data and "
                             f"metrics), got {groups}; run each kind separately")
    return next(iter(kinds.values()))


def load_sets(args: argparse.Namespace) -> SetData:
    """The set data of a set-valued ``simulate``."""
    from .. import datasets

    name = args.data or SET_SYNTHETIC
    if name == SET_SYNTHETIC:
        return datasets.zipf_sets(args.n or SET_SYNTHETIC_N, args.d or SET_SYNTHETIC_D,
                                  length=SET_SYNTHETIC_LENGTH, seed=args.seed)
    if name in datasets.SYNTHETIC:
        raise ParameterError(f"--data {name!r} holds one value per user; set-valued protocols need "
                             f"{SET_SYNTHETIC}, one of {sorted(datasets.BUNDLED)} or a file with one set per line")
    labelled = None if name in datasets.BUNDLED else label_sets(name, args.d)
    sets = datasets.load_sets(name, d=args.d) if labelled is None else labelled
    if args.n is not None and args.n < sets.n:
        sets = datasets.SetData(offsets=sets.offsets[:args.n + 1], items=sets.items[:sets.offsets[args.n]],
                                d=sets.d, name=f"{sets.name} (first {args.n:,} users)")
    return sets


def load_records(args: argparse.Namespace) -> RecordData:
    """The record data of a record ``simulate``: synthetic correlated records (``--n``,
    default 20,000) or Adult's nine categorical attributes (its first ``--n`` people)."""
    from .. import datasets

    name = args.data or "correlated"
    if name == "correlated":
        return datasets.correlated_records(args.n or 20_000, seed=args.seed)
    if name != "adult":
        raise ParameterError(f"--data must be one of {list(datasets.RECORD_DATA)} for record protocols, got {name!r}")
    data = datasets.adult_records()
    if args.n is not None and args.n < data.n:
        data = datasets.RecordData(data.records[:args.n], data.domains, data.names, f"{data.name} (first {args.n:,})")
    return data


def load_data(args: argparse.Namespace) -> DataSource:
    """The data source of ``simulate``: a ValueData, or eps -> ValueData for Zipf."""
    from .. import datasets

    candidates = parse_candidates(args.candidates)
    if args.data == SET_SYNTHETIC:
        raise ParameterError(f"--data {SET_SYNTHETIC!r} is set-valued; use it with set-valued protocols")
    args.data = args.data or "zipf"
    if args.data not in datasets.SYNTHETIC and args.data not in datasets.BUNDLED:
        labelled = label_values(args.data, args.d, candidates)
        if labelled is not None:
            return labelled

    def build(eps: Optional[float]) -> ValueData:
        cand = None if isinstance(candidates, str) else candidates  # a str is "all"
        data = datasets.load_dataset(args.data, epsilon=eps, n=args.n, d=args.d, values=args.values,
                                     candidates=cand, rng=args.seed, kosarak=args.kosarak)
        if candidates == "all":
            data = data.with_candidates(np.arange(data.d, dtype=np.int64))
        return data

    return build if args.data in ("zipf", "zipf-sampled") else build(None)


def run(args: argparse.Namespace) -> int:
    from .. import experiments

    if args.list:
        print(list_choices())
        return 0
    setup_threads(args.threads)
    if args.rounds is not None:
        return run_rounds(args)
    names = [p.strip() for p in args.protocol.split(",") if p.strip()]
    kind = protocol_kind(names)
    epsilons = parse_floats(args.eps)
    check_outputs(args)  # fail before the simulation, not after it
    if kind != "values":
        return run_other_kind(args, kind, names, epsilons)
    algorithms = [experiments.get_algorithm(name) for name in names]
    result = experiments.simulate(algorithms, load_data(args), epsilons, args.runs, seed=args.seed,
                                  progress=progress_enabled(args.progress))
    print(f"{result.note}\nn={result.n} users, d={result.d}, |X|={result.n_candidates} values of interest, "
          f"{result.runs} runs per eps, seed {result.seed}\n")
    print(result.table("all", markdown=args.markdown))
    if args.shuffle_delta is not None:
        from .shuffle import central_rows, format_central

        rows = central_rows(epsilons, result.n, args.shuffle_delta, rounds=args.shuffle_rounds)
        print("\n" + format_central(rows, result.n, args.shuffle_delta, rounds=args.shuffle_rounds))
    bands = [c for c in result.cells if c.within_band is not None]
    if bands:
        inside = sum(bool(c.within_band) for c in bands)
        print(f"\nworst-case MSE between closed form and Appendix K bound: {inside}/{len(bands)} cells")
    return write_outputs(args, result, experiments.plot_results)


def run_other_kind(args: argparse.Namespace, kind: str, names: List[str], epsilons: List[float]) -> int:
    """``simulate`` for set-valued, heavy-hitter or record protocols."""
    from .. import experiments

    if kind == "numbers":
        return run_means(args, names, epsilons)
    progress = progress_enabled(args.progress)
    result: Union[experiments.SetSimulationResult, experiments.HeavySimulationResult,
                  experiments.RecordSimulationResult]
    if kind == "records":
        data = load_records(args)
        result = experiments.simulate_records(names, data, epsilons, args.runs, seed=args.seed, progress=progress)
        print(f"n={data.n} users, {len(data.domains)} attributes {dict(zip(data.names, data.domains))}, "
              f"{result.runs} runs per eps, seed {result.seed}\n")
    elif kind == "sets":
        sets = load_sets(args)
        result = experiments.simulate_sets(names, sets, epsilons, args.runs, k=args.top_k, seed=args.seed,
                                           progress=progress)
        sizes = sets.sizes()
        print(f"n={result.n} users, d={result.d}, set sizes mean {sizes.mean():.1f} max {sizes.max()}, "
              f"top-k k={result.k}, {result.runs} runs per eps, seed {result.seed}\n")
    else:
        if not 0 < args.beta < 1:
            raise ParameterError(f"--beta must be in (0, 1), got {args.beta!r}")
        heavy = experiments.simulate_heavy(names, load_data(args), epsilons, args.runs, beta=args.beta,
                                           seed=args.seed, progress=progress)
        print(f"n={heavy.n} users, d={heavy.d}, beta={heavy.beta}, {heavy.runs} runs per eps, seed "
              f"{heavy.seed}; heavy hitter: c(x) >= tau (each protocol's own), counts\n")
        result = heavy
    print(result.table("all", markdown=args.markdown))
    return write_outputs(args, result, experiments.plot_kind_results)


def run_means(args: argparse.Namespace, names: List[str], epsilons: List[float]) -> int:
    """``simulate`` for mean protocols on a numeric data set (``--data``: one of
    ``ldpfast.datasets.numeric.NUMERIC_DATASETS``, default ``beta``)."""
    from ..datasets.numeric import numeric_dataset
    from ..experiments.numeric import plot_means, simulate_means

    data = numeric_dataset(args.data or "beta", n=args.n or 100_000, rng=args.seed)
    result = simulate_means(names, data, epsilons, args.runs, seed=args.seed)
    print(f"data {data.name}: n={result.n} users, bounds {result.bounds}, {data.clipped_share:.1%} clipped, "
          f"true mean {result.true_mean:.6g}, {result.runs} runs per eps, seed {result.seed}\n")
    print(result.table("all", markdown=args.markdown))
    return write_outputs(args, result, plot_means)


def run_rounds(args: argparse.Namespace) -> int:
    """``simulate --rounds T``: memoized protocols over T rounds (module docstring)."""
    from .. import experiments

    if args.shuffle_delta is not None:
        raise ParameterError(f"--rounds {args.rounds} simulates repeated collection by memoized protocols and "
                             "does not shuffle; for the central epsilon of shuffled reports composed over T "
                             "collections use --shuffle-rounds T with --shuffle-delta")
    epsilons = parse_floats(args.eps)
    if len(epsilons) != 1:
        raise ParameterError(f"--rounds takes one --eps (a report's budget eps_1), got {args.eps!r}")
    names = (experiments.rounds_protocols() if args.protocol == DEFAULT_PROTOCOLS
             else [p.strip() for p in args.protocol.split(",") if p.strip()])
    check_outputs(args)
    d = 64 if args.d is None else args.d
    if args.data in (None, "zipf"):
        data = experiments.churn_rounds(10_000 if args.n is None else args.n, d, args.rounds, args.churn,
                                        rng=args.seed)
    elif args.data == "kosarak-clicks":
        data = experiments.click_rounds(args.rounds, d=d, n=args.n)
    else:
        raise ParameterError(f"--rounds runs on --data zipf (with --churn) or kosarak-clicks, got {args.data!r}")
    result = experiments.simulate_rounds(names, data, epsilons[0], args.eps_inf, seed=args.seed)
    print(f"{result.data}\nn={result.n:,} users, d={result.d}, {result.rounds} rounds, seed {result.seed}; "
          "loss: min(t eps_1, distinct values x eps_inf) per user, re-randomized: t eps_1\n")
    print(result.table(markdown=args.markdown))
    return write_outputs(args, result, experiments.plot_rounds)
