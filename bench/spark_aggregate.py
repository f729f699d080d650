"""Aggregate Parquet report files on Spark (ldpfast.spark) vs one process, in the same run.

Workloads at --scale 1 (sizes where one process takes about 10 s or more on the 2-core
development VM): HRR (d = 2^16), GRR (d = 1024), OCMS+RR streamed into match counts for
1,000 candidates (MSE-OCMS, eps = 2, d = 1e6), OLH (d = 2^16, eps = 2: keeps its reports,
24 bytes each). Reports are simulated with the seeded clients and written once (not timed)
as --files distinct Parquet files, each linked --copies times (hard links: the same bytes
read again, from the page cache like every other file here). Modes, on the same files:

* ``single``: ``ldpfast.dask.aggregate_files`` in this process, then ``to_bytes`` (the
  baseline: one process, ldpfast's own C++ threads);
* ``spark files``: ``ldpfast.spark.aggregate_files(paths, zero).to_bytes()`` (tasks read
  the files with pyarrow);
* ``spark frame`` (--frame): ``aggregate_dataframe(spark.read.parquet(...))``, Spark's
  reader and Arrow batches (files written with the fingerprint column);
* ``recipe`` (--recipe): the recipe docs/spark.md showed before ldpfast.spark
  (``mapInArrow`` folding each Arrow batch, ``treeReduce`` of the partial bytes);
* ``fixed``: ``aggregate_files`` of one file holding one report: the fixed cost of a Spark
  job (scheduling, Python workers, the fetch), reported apart.

Each mode runs --repeat times, interleaved; the table gives min / median seconds, the
Spark/single ratios of the minima and of the medians, the ratio of the minima without the
job's fixed cost (Spark minus the fixed cost's minimum), and whether the bytes equal the
single process's. The Spark session (started once, not timed) has default memory settings;
on a local master the partials go through a spill directory (--no-spill: in pieces through
Spark's shuffles).

--largest-state D aggregates GRR over d = D values (a state of 8 D bytes) from two files
through the files route and checks the bytes: with D = 2^27, a 1 GiB state at the default
1 GiB driver heap (--no-spill: the partials in pieces through Spark's shuffles, not
through the spill directory that a local master uses by default).

    PYTHONPATH=python python3 bench/spark_aggregate.py --scale 0.1 --recipe --frame
    PYTHONPATH=python python3 bench/spark_aggregate.py --largest-state 134217728 --no-spill

Results measured on the development VM are in docs/spark.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np


def _write(folder: Path, proto, params, n: int, files: int, copies: int, seed: int, d: int) -> list:
    from ldpfast import arrow

    folder.mkdir(parents=True, exist_ok=True)
    client = proto.client(params, rng=seed)
    rng = np.random.default_rng(seed)
    per_file = max(1, n // (files * copies))
    distinct = []
    for i in range(files):
        values = np.minimum(rng.zipf(1.2, size=per_file) - 1, d - 1)
        path = folder / f"part-{i:04d}-copy000.parquet"
        arrow.write_parquet(client.perturb(values), path, params, fingerprint_column=True)
        distinct.append(path)
    paths = []
    for i, path in enumerate(distinct):
        paths.append(str(path))
        for c in range(1, copies):
            link = path.with_name(f"part-{i:04d}-copy{c:03d}.parquet")
            os.link(path, link)
            paths.append(str(link))
    return sorted(paths), per_file * files * copies


def _recipe(spark, folder: Path, zero):
    """The recipe of docs/spark.md before ldpfast.spark, as written there."""
    from ldpfast.dask import aggregate_partition, merge_partials

    server, blob = type(zero), zero.to_bytes()

    def fold(batches):  # nested functions travel by value to the Python workers
        import pyarrow as pa

        yield pa.RecordBatch.from_pydict({"state": [aggregate_partition(server, blob, batches)]})

    def merge(a, b):
        return merge_partials(server, a, b)

    partials = (spark.read.parquet(str(folder)).drop("ldpfast_fingerprint")
                .mapInArrow(fold, "state binary").rdd.map(lambda row: bytes(row.state)))
    return partials.treeReduce(merge, depth=2)


ISSUE_SIZES = {"hrr": 16_000_000, "grr": 16_000_000, "ocms": 4_000_000, "olh": 4_000_000}


def _workloads(scale: float, issue_sizes: bool):
    from ldpfast._base import protocols

    known = protocols()
    hrr, grr, ocms, olh = (known[p] for p in ("hrr", "grr", "ocms", "olh"))
    p_hrr = hrr.params(epsilon=1.0, d=2**16)
    p_grr = grr.params(epsilon=1.0, d=1024)
    p_ocms = ocms.params.optimal(epsilon=2.0, d=10**6)
    p_olh = olh.params(epsilon=2.0, d=2**16)
    out = [
        ("HRR d=2^16", hrr, p_hrr, hrr.aggregator(p_hrr), int(2.4e9 * scale), 2**16),
        ("GRR d=1024", grr, p_grr, grr.aggregator(p_grr), int(1.2e9 * scale), 1024),
        ("OCMS 1000 cand.", ocms, p_ocms, ocms.aggregator(p_ocms, candidates=np.arange(1000)), int(6e7 * scale), 1000),
        ("OLH d=2^16", olh, p_olh, olh.aggregator(p_olh), int(2.4e7 * scale), 2**16),
    ]
    if issue_sizes:
        out = [(name, proto, params, zero, ISSUE_SIZES[proto.id], d) for name, proto, params, zero, _, d in out]
    return out


def _session(master: str):
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName("ldpfast-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.hadoop.parquet.page.verify-checksum.enabled", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _largest_state(spark, d: int, root: Path, spill) -> int:
    import ldpfast.spark as lspark
    from ldpfast import arrow
    from ldpfast._base import protocols
    from ldpfast.dask import aggregate_files

    grr = protocols()["grr"]
    params = grr.params(epsilon=1.0, d=d)
    paths = []
    for i in range(2):
        path = root / f"grr-{i}.parquet"
        arrow.write_parquet(grr.client(params, rng=i).perturb(np.arange(1000) * (d // 1000)), path, params)
        paths.append(str(path))
    t = time.perf_counter()
    expected = aggregate_files(grr.aggregator, grr.aggregator(params).to_bytes(), paths)
    single = time.perf_counter() - t
    t = time.perf_counter()
    got = lspark.aggregate_files(paths, params, spark=spark, tasks=2, spill=spill).to_bytes()
    took = time.perf_counter() - t
    how = "in pieces through Spark's shuffles" if spill is None else "spilled to a directory"
    print(f"GRR d={d}: state {len(expected) / 2**30:.3f} GiB; one process {single:.1f} s, Spark files route "
          f"{took:.1f} s (2 partials of that size {how}, default memory settings); identical: {got == expected}")
    return 0 if got == expected else 1


def _measure(spark, args, root: Path, k: int, workload):
    """Write one workload's files, time every mode on them; (name, n, times, results)."""
    import ldpfast.spark as lspark
    from ldpfast import arrow
    from ldpfast.dask import aggregate_files

    name, proto, params, zero, n, d = workload
    spill = None if args.no_spill else "auto"
    folder = root / proto.id
    t = time.perf_counter()
    paths, n = _write(folder, proto, params, n, args.files, args.copies, seed=100 + k, d=d)
    size = sum(os.path.getsize(p) for p in paths)
    print(f"{name}: {n:,} reports in {len(paths)} files ({size / 1e6:.0f} MB), written in "
          f"{time.perf_counter() - t:.1f} s; load average {os.getloadavg()[0]:.1f}", flush=True)
    one = root / f"{proto.id}-one.parquet"
    arrow.write_parquet(proto.client(params, rng=1).perturb(np.zeros(1, dtype=np.int64)), one, params)
    modes = {
        "single": lambda: aggregate_files(type(zero), zero.to_bytes(), paths),
        "spark files": lambda: lspark.aggregate_files(paths, zero, spark=spark, spill=spill).to_bytes(),
        "fixed": lambda: lspark.aggregate_files([str(one)], zero, spark=spark).to_bytes(),
    }
    if args.frame:
        modes["spark frame"] = lambda: lspark.aggregate_dataframe(spark.read.parquet(str(folder)), zero,
                                                                  spill=spill).to_bytes()
    if args.recipe:
        modes["recipe"] = lambda: _recipe(spark, folder, zero)
    times = {mode: [] for mode in modes}
    results = {}
    lspark.aggregate_files([str(one)], zero, spark=spark)  # Python workers started, modules imported
    for _ in range(args.repeat):
        for mode, run in modes.items():
            t = time.perf_counter()
            try:
                results[mode] = run()
            except Exception as exc:  # e.g. the recipe's driver running out of memory
                results[mode] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
            times[mode].append(time.perf_counter() - t)
        print("  " + "; ".join(f"{m} {times[m][-1]:.2f} s" for m in modes), flush=True)
    shutil.rmtree(folder)
    one.unlink()
    return name, n, times, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the workload sizes")
    parser.add_argument("--issue-sizes", action="store_true",
                        help="the sizes of issue 26 instead: 16M HRR, 16M GRR, 4M OCMS, 4M OLH reports")
    parser.add_argument("--files", type=int, default=16, help="distinct Parquet files per workload")
    parser.add_argument("--copies", type=int, default=1, help="hard links of each distinct file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--only", nargs="*", choices=["hrr", "grr", "ocms", "olh"], default=None)
    parser.add_argument("--frame", action="store_true", help="also the DataFrame route")
    parser.add_argument("--recipe", action="store_true", help="also the recipe docs/spark.md showed before")
    parser.add_argument("--largest-state", type=int, default=None, metavar="D")
    parser.add_argument("--no-spill", action="store_true",
                        help="partials in pieces through Spark's shuffles (default on a local master: "
                             "spilled to a temporary directory)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the Parquet files")
    args = parser.parse_args()
    warnings.simplefilter("ignore", FutureWarning)  # PySpark on pandas 3

    import ldpfast

    root = args.dir or Path(tempfile.mkdtemp(prefix="ldpfast-spark-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    spark = _session(args.master)
    print(f"backend {ldpfast.backend_info()['active']}, {os.cpu_count()} CPUs, Spark {spark.version} "
          f"{args.master}, session start {time.perf_counter() - t:.1f} s, data in {root}", flush=True)
    try:
        if args.largest_state:
            return _largest_state(spark, args.largest_state, root, None if args.no_spill else "auto")
        workloads = _workloads(args.scale, args.issue_sizes)
        rows = [_measure(spark, args, root, k, workload) for k, workload in enumerate(workloads)
                if not args.only or workload[1].id in args.only]
    finally:
        spark.stop()
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)

    print()
    print(f"{'workload':<17}{'reports':>15}{'mode':>13}{'min s':>9}{'median s':>10}{'/single':>9}"
          f"{'(median)':>10}{'-fixed':>8}  identical")
    for name, n, times, results in rows:
        single, fixed = min(times["single"]), min(times["fixed"])
        single_median = statistics.median(times["single"])
        for mode in times:
            if mode == "fixed":
                continue
            best, median = min(times[mode]), statistics.median(times[mode])
            same = results[mode] == results["single"] if isinstance(results[mode], bytes) else results[mode]
            ratios = "" if mode == "single" else \
                f"{best / single:>9.2f}{median / single_median:>10.2f}{(best - fixed) / single:>8.2f}"
            print(f"{name:<17}{n:>15,}{mode:>13}{best:>9.2f}{median:>10.2f}{ratios:>27}  {same}")
        print(f"{name:<17}{'':>15}{'fixed':>13}{fixed:>9.2f}{statistics.median(times['fixed']):>10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
