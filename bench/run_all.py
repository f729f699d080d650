"""One run of the kernel benchmarks, written to a machine-readable JSON file so that runs
on different machines compare: the machine description (CPU, cores, caches, memory,
ISA backends, numpy/ldpfast versions, git commit, load average), STREAM bandwidth per
thread count, the OCMS affine-vs-scan decode table (bench/ocms_affine_decode.py) and the
thread-scaling tables of HRR ingestion, FWHT and PrivSketch decode (bench/scaling.py),
each with its % of the limit measured in the same run.

    PYTHONPATH=python python3 bench/run_all.py [--quick] [--threads 1,2,4] [--out FILE]

By default the file goes to bench/results/kernels-<UTC time>-<cpus>cpu.json. --quick uses
sizes that finish in a few minutes on a laptop; without it the sizes are the ones the
issue's numbers were taken at where memory allows (minutes more). --note records free
text about the machine (e.g. that it is a shared VM). --baseline-pythonpath DIR also runs
the scaling tables against another build of ldpfast (a directory holding an ``ldpfast``
package, e.g. an older checkout's ``python/``) in a subprocess of the same run, before and
after this build's, and stores them under "baseline": before/after on the same machine
state.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import machine  # noqa: E402  (found through sys.path above)
import ocms_affine_decode  # noqa: E402
import scaling  # noqa: E402


def run_baseline(pythonpath: str, quick: bool, threads: list[int]) -> dict[str, object]:
    """bench/scaling.py's tables with another ldpfast build, in a subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "baseline.json")
        cmd = [sys.executable, os.path.join(HERE, "scaling.py"), "--threads", ",".join(map(str, threads)),
               "--json", out] + (["--quick"] if quick else [])
        print(f"baseline ({pythonpath}):", flush=True)
        subprocess.run(cmd, env={**os.environ, "PYTHONPATH": os.path.abspath(pythonpath)}, check=True)
        with open(out) as f:
            return json.load(f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default 1..all CPUs)")
    ap.add_argument("--out", default=None, help="output JSON path")
    ap.add_argument("--note", default=None, help="free text about the machine, stored in the file")
    ap.add_argument("--baseline-pythonpath", default=None, metavar="DIR",
                    help="also run bench/scaling.py with PYTHONPATH=DIR (another ldpfast build) for comparison")
    args = ap.parse_args()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = [int(t) for t in args.threads.split(",")] if args.threads else list(range(1, cpus + 1))

    started = time.time()
    result = {"schema": 1, "quick": args.quick, "threads": threads, "machine": machine.describe(),
              "note": args.note}
    stream = [machine.stream_bandwidth(t, 32 if args.quick else 128) for t in threads]
    result["stream"] = stream
    bandwidth = {row["threads"]: row for row in stream}
    print(f"{result['machine']['cpu_model']}, {cpus} usable CPUs, load average {result['machine']['load_average']}")
    for row in stream:
        print(f"STREAM threads {row['threads']:>2}: copy {row['copy_gbs']:.1f} GB/s, triad {row['triad_gbs']:.1f} GB/s")

    affine = ocms_affine_decode.run(n=1000 if args.quick else 5000, d=2**18 if args.quick else 1_000_000,
                                    thread_counts=threads)
    ocms_affine_decode.print_table(affine)
    result["ocms_affine_decode"] = affine
    if args.baseline_pythonpath:
        result["baseline"] = {"pythonpath": os.path.abspath(args.baseline_pythonpath),
                              "runs": [run_baseline(args.baseline_pythonpath, args.quick, threads)]}
    scaled = scaling.run(args.quick, threads, bandwidth)
    scaling.print_tables(scaled)
    result.update(scaled)
    if args.baseline_pythonpath:
        result["baseline"]["runs"].append(run_baseline(args.baseline_pythonpath, args.quick, threads))
    result["machine"]["load_average_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    result["seconds"] = time.time() - started

    out = args.out or os.path.join(HERE, "results", time.strftime("kernels-%Y%m%dT%H%M%SZ", time.gmtime())
                                   + f"-{cpus}cpu.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
