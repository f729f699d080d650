"""``ldpfast reproduce``: Pan (CSF 2025) section 6, Figs. 2-4.

Runs MSE-OCMS+RR, l-OCMS+RR, HE, CMS+HE and RHR on the Zipf, Gaussian and mini-Kosarak
data sets for eps = 1..5 (100 runs each by default), prints the tables, writes one PNG
per data set with the closed forms and the Appendix K band, writes a markdown report
with the command that produced it, and answers the paper's three checks.

Example (what docs/pan_reproduction.md was made with is written in that file)::

    ldpfast reproduce --runs 100 --report docs/pan_reproduction.md --plots docs/img
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import time

from ..errors import ParameterError
from .simulate import add_common, parse_floats, progress_enabled, setup_threads

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
    parser.add_argument("--report", default=None, help="write the markdown report to this path")
    parser.add_argument("--plots", default=".", help="folder for the PNG plots (default: current folder)")
    parser.add_argument("--json", default=None, help="also save every measured cell as JSON to this path")
    parser.add_argument("--from-json", default=None,
                        help="do not simulate: re-render the report and plots from a file saved with --json")


def command_line(args: argparse.Namespace) -> str:
    """The full command that reproduces ``args`` (every option spelled out)."""
    parts = ["ldpfast", "reproduce", "--datasets", args.datasets, "--algorithms", args.algorithms,
             "--eps", args.eps, "--runs", str(args.runs), "--seed", str(args.seed)]
    if args.kosarak != "kosarak-prefix":
        parts += ["--kosarak", args.kosarak]
    if args.threads:
        parts += ["--threads", str(args.threads)]
    if args.report:
        parts += ["--report", args.report]
    parts += ["--no-plot"] if args.no_plot else ["--plots", args.plots]
    if args.json:
        parts += ["--json", args.json]
    return " ".join(shlex.quote(p) for p in parts)


def environment_line(threads: int, seconds: float) -> str:
    import ldpfast

    info = ldpfast.backend_info()
    return (f"Machine: {platform.machine()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
            f"ldpfast {ldpfast.__version__}, kernels {info['active']}, threads {info['threads']}"
            f"{'' if threads else ' (default)'}; total wall time {seconds:.0f} s.")


def run(args: argparse.Namespace) -> int:
    from .. import experiments

    setup_threads(args.threads)
    if args.from_json and args.json:
        raise ParameterError("--from-json and --json cannot be combined")
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    for name in names:
        if name not in experiments.PAN_DATASETS:
            raise ParameterError(f"--datasets must name {sorted(experiments.PAN_DATASETS)}, got {name!r}")
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    if not args.no_plot:
        experiments.require_matplotlib()
    if args.from_json:
        with open(args.from_json) as fh:
            saved = json.load(fh)
        raw = saved.get("results", saved)  # files of the first version hold only the results
        results = {name: experiments.SimulationResult.from_dict(res) for name, res in raw.items()}
        first = next(iter(results.values()))
        command = saved.get("command") or " ".join([
            "ldpfast reproduce --datasets", ",".join(results), "--algorithms", ",".join(first.algorithms),
            "--eps", ",".join(f"{e:g}" for e in first.epsilons), "--runs", str(first.runs),
            "--seed", str(first.seed)])
        environment = saved.get("environment", "") + f" Tables and plots re-rendered from `{args.from_json}`."
    else:
        start = time.perf_counter()
        results = experiments.reproduce_pan(names, algorithms, parse_floats(args.eps), args.runs,
                                            seed=args.seed, kosarak_source=args.kosarak,
                                            progress=progress_enabled(args.progress))
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
        with open(args.report, "w") as fh:
            fh.write(report)
        print(f"wrote {args.report}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"command": command, "environment": environment,
                       "results": {name: res.to_dict() for name, res in results.items()}}, fh, indent=1)
        print(f"wrote {args.json}")
    for path in plots.values():
        print(f"wrote {path}")
    return 0
