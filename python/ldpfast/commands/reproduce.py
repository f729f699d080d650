"""``ldpfast reproduce``: Pan (CSF 2025) section 6, Figs. 2-4.

Runs MSE-OCMS+RR, l-OCMS+RR, HE, CMS+HE and RHR on the Zipf, Gaussian and mini-Kosarak
data sets for eps = 1..5 (100 runs each by default), prints the tables, and writes into
the output folder (``--out``, default ``./ldpfast-reproduce``) a markdown report with the
command that produced it, one PNG per data set with the closed forms and the Appendix K
band, and every measured cell as JSON; it answers the paper's three checks.

With 20 or more runs it first times one run of every cell (after a warm-up run) and
prints the expected total time; the progress bar's remaining time is that calibration, rescaled by the speed
measured so far. An existing report named with ``--report`` is not replaced without
``--force``.

Example (what docs/pan_reproduction.md was made with is written in that file)::

    ldpfast reproduce --runs 100 --out pan-run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from typing import List, Optional, Sequence, TextIO, Union

from ..errors import FormatError, ParameterError
from ..experiments import ProgressBar
from ._options import parse_floats
from .simulate import add_common, progress_enabled, setup_threads

DEFAULT_OUT = "ldpfast-reproduce"
#: Calibration costs two runs per cell: below this many runs it would add more than 10%.
CALIBRATE_FROM_RUNS = 20

#: ``--quick``: enough to exercise every step and write every file, not to reproduce the figures.
QUICK_RUNS, QUICK_EPS, QUICK_N = 2, "1,3", 2000

HELP = "reproduce Pan's experiments (Figs. 2-4): tables, plots, and a markdown report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--datasets", default="zipf,gaussian,kosarak",
                        help="comma-separated subset of zipf, gaussian, kosarak (default: all three)")
    parser.add_argument("--algorithms", default="ocms-mse,ocms-l,he,cms-he,rhr",
                        help="comma-separated protocol names (default: the paper's five)")
    parser.add_argument("--kosarak", default="kosarak-prefix",
                        help="Kosarak source for mini-Kosarak: the bundled prefix (default) or a path to "
                             "the full FIMI kosarak.dat")
    add_common(parser, runs=100, eps="1:5")
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"output folder for the report, plots and JSON (default ./{DEFAULT_OUT})")
    parser.add_argument("--report", default=None,
                        help="markdown report path (default OUT/pan_reproduction.md)")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing file given with --report (e.g. docs/pan_reproduction.md)")
    parser.add_argument("--plots", default=None, help="folder for the PNG plots (default OUT)")
    parser.add_argument("--json", default=None,
                        help="save every measured cell as JSON to this path (default OUT/pan_reproduction.json)")
    parser.add_argument("--from-json", default=None,
                        help="do not simulate: re-render the report and plots from a file saved with --json")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke test in under a minute: {QUICK_RUNS} runs, eps {QUICK_EPS}, "
                             f"{QUICK_N:,} users in the synthetic data sets (overrides --runs and --eps)")


def command_line(args: argparse.Namespace) -> str:
    """The full command that reproduces ``args`` (every option spelled out)."""
    parts = ["ldpfast", "reproduce", "--datasets", args.datasets, "--algorithms", args.algorithms]
    parts += ["--quick"] if args.quick else ["--eps", args.eps, "--runs", str(args.runs)]
    parts += ["--seed", str(args.seed)]
    if args.kosarak != "kosarak-prefix":
        parts += ["--kosarak", args.kosarak]
    if args.threads:
        parts += ["--threads", str(args.threads)]
    parts += ["--out", args.out, "--report", args.report]
    parts += ["--no-plot"] if args.no_plot else ["--plots", args.plots]
    parts += ["--json", args.json]
    return " ".join(shlex.quote(p) for p in parts)


class CalibratedProgress(ProgressBar):
    """A progress bar whose remaining time comes from measured per-cell costs: ``costs``
    holds the seconds of one run of each cell in the order the runs happen (``runs``
    consecutive runs per cell); the estimate is rescaled by the speed seen so far."""

    def __init__(self, costs: Sequence[float], runs: int, enabled: bool = True, stream: Optional[TextIO] = None):
        super().__init__(len(costs) * runs, enabled=enabled, stream=stream)
        self.costs, self.runs = [max(float(c), 1e-9) for c in costs], runs
        self.expected_total = sum(self.costs) * runs
        self.expected_done = 0.0

    def advance(self, steps: int = 1, label: str = "") -> None:
        for step in range(self.done, min(self.done + steps, self.total)):
            self.expected_done += self.costs[step // self.runs]
        super().advance(steps, label)

    def remaining(self, elapsed: float) -> float:
        """Expected seconds left: calibrated cost left x (measured / calibrated so far)."""
        left = self.expected_total - self.expected_done
        speed = elapsed / self.expected_done if self.expected_done > 0 else 1.0
        return left * speed

    def _draw(self, now: float) -> None:
        elapsed = now - self.start
        frac = min(self.expected_done / self.expected_total, 1.0)
        filled = int(frac * self.width)
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] cell "
                          f"{min(self.done // self.runs + 1, len(self.costs))}/{len(self.costs)} "
                          f"{_clock(elapsed)} elapsed, ~{_clock(self.remaining(elapsed))} left "
                          f"{self.label[:36]:<36}")
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def calibrate(names: Sequence[str], algorithms: Sequence[str], epsilons: Sequence[float], runs: int, seed: int,
              kosarak: str) -> CalibratedProgress:
    """Time one run of every cell, after one warm-up run (first-call costs such as thread
    start-up or page faults would otherwise be counted ``runs`` times), in the order the
    simulation runs them, and return a progress bar that knows the cost of each."""
    from .. import experiments

    start = time.perf_counter()
    algs = [experiments.get_algorithm(a) for a in algorithms]
    costs: List[float] = []
    for name in names:
        source = experiments.pan_dataset(name, kosarak)
        for eps in epsilons:
            data = source(eps) if callable(source) else source
            for alg in algs:
                experiments.run_once(alg, eps, data, seed)
                tic = time.perf_counter()
                experiments.run_once(alg, eps, data, seed + 1)
                costs.append(time.perf_counter() - tic)
    took = time.perf_counter() - start
    expected = sum(costs) * runs
    print(f"ldpfast reproduce: calibration: one run of each of the {len(costs)} cells took {took:.1f} s; "
          f"{runs} runs should take about {_clock(expected)} (min:s) on this machine now", file=sys.stderr)
    return CalibratedProgress(costs, runs, enabled=False)


def _make_parent(path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)


def _check_writable(path: str, force: bool, what: str) -> None:
    if os.path.exists(path) and not force:
        raise ParameterError(f"{what} {path!r} exists; pass --force to replace it (or choose another --out)")


def environment_line(threads: int, seconds: float) -> str:
    import ldpfast

    info = ldpfast.backend_info()
    return (f"Machine: {platform.machine()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
            f"ldpfast {ldpfast.__version__}, kernels {info['active']}, threads {info['threads']}"
            f"{'' if threads else ' (default)'}; total wall time {seconds:.0f} s.")


def run(args: argparse.Namespace) -> int:
    from .. import experiments

    setup_threads(args.threads)
    if args.quick:
        if args.from_json:
            raise ParameterError("--quick and --from-json cannot be combined")
        args.runs, args.eps = QUICK_RUNS, QUICK_EPS
    if args.from_json and args.json:
        raise ParameterError("--from-json and --json cannot be combined")
    explicit_report = args.report is not None
    args.report = args.report or os.path.join(args.out, "pan_reproduction.md")
    args.plots = args.plots or args.out
    if not args.from_json:
        args.json = args.json or os.path.join(args.out, "pan_reproduction.json")
    if explicit_report:
        _check_writable(args.report, args.force, "--report")
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    for name in names:
        if name not in experiments.PAN_DATASETS:
            raise ParameterError(f"--datasets must name {sorted(experiments.PAN_DATASETS)}, got {name!r}")
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    if not args.no_plot:
        experiments.require_matplotlib()
    if args.from_json:
        with open(args.from_json) as fh:
            try:
                saved = json.load(fh)
                raw = saved.get("results", saved)  # files of the first version hold only the results
                results = {name: experiments.SimulationResult.from_dict(res) for name, res in raw.items()}
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise FormatError(f"--from-json {args.from_json!r} is not a file written by "
                                  f"'ldpfast reproduce --json': {exc!r}") from None
        if not results:
            raise FormatError(f"--from-json {args.from_json!r} holds no results")
        first = next(iter(results.values()))
        command = saved.get("command") or " ".join([
            "ldpfast reproduce --datasets", ",".join(results), "--algorithms", ",".join(first.algorithms),
            "--eps", ",".join(f"{e:g}" for e in first.epsilons), "--runs", str(first.runs),
            "--seed", str(first.seed)])
        environment = saved.get("environment", "") + f" Tables and plots re-rendered from `{args.from_json}`."
    else:
        epsilons = parse_floats(args.eps)
        start = time.perf_counter()
        enabled = progress_enabled(args.progress)
        progress: Union[bool, ProgressBar] = enabled
        if args.runs >= CALIBRATE_FROM_RUNS:
            bar = calibrate(names, algorithms, epsilons, args.runs, args.seed, args.kosarak)
            bar.enabled = enabled
            progress = bar
        results = experiments.reproduce_pan(names, algorithms, epsilons, args.runs, seed=args.seed,
                                            kosarak_source=args.kosarak, n=QUICK_N if args.quick else None,
                                            progress=progress)
        command, environment = command_line(args), environment_line(args.threads, time.perf_counter() - start)
    plots = {}
    if not args.no_plot:
        os.makedirs(args.plots, exist_ok=True)
        for name, res in results.items():
            path = os.path.join(args.plots, f"pan_{name}.png")
            experiments.plot_results(res, path, metric_algorithms=experiments.PAN_METRIC_ALGORITHMS)
            plots[name] = path
    checks = experiments.pan_checks(results)
    report_plots = plots
    if args.report:
        base = os.path.dirname(os.path.abspath(args.report))
        report_plots = {k: os.path.relpath(os.path.abspath(v), base) for k, v in plots.items()}
    report = experiments.pan_report(results, checks, command, environment, report_plots)
    print(report)
    if args.report:
        _make_parent(args.report)
        with open(args.report, "w") as fh:
            fh.write(report)
        print(f"wrote {args.report}")
    if args.json:
        _make_parent(args.json)
        with open(args.json, "w") as fh:
            json.dump({"command": command, "environment": environment,
                       "results": {name: res.to_dict() for name, res in results.items()}}, fh, indent=1)
        print(f"wrote {args.json}")
    for path in plots.values():
        print(f"wrote {path}")
    return 0
