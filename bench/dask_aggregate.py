"""Aggregate reports from Parquet on a Dask LocalCluster vs one process.

Workloads (at --scale 1): 1e8 HRR reports (d = 2^16) and 1e7 OCMS+RR reports streamed
into match counts for 1,000 candidate values (MSE-OCMS, eps = 2, d = 1e6, PRIME field).
Reports are simulated with the seeded clients, written to --files Parquet files per
workload (not timed), then aggregated

* single-process: the files read one after another and folded into one aggregator
  (ldpfast's own C++ threads, default thread count), and
* Dask: ldpfast.dask.aggregate_parquet on a LocalCluster of --workers processes
  (1 thread each; the C++ kernels get --worker-threads threads per worker).

It prints reports per second for both, their ratio, and checks that the final bytes are
identical. Baseline: the single-process run measured in the same invocation.

    PYTHONPATH=python python3 bench/dask_aggregate.py --scale 0.1

Measured at --scale 1 (16 files per workload, 231 MB and 171 MB of zstd Parquet) on the
2-core development VM, best of 3, with the kernels of main at 2026-11-21 20:05 and the
machine otherwise idle (load average 0.5). Both modes use the same 2 cores, so the ratio
shows Dask's overhead rather than a speed-up; on a busy machine (load 5-12) the ratio
varied between 0.6 and 1.6:

    workload          reports   1 process             Dask, 2 workers       identical
    HRR d=2^16        1e8       0.43 s  2.3e8/s       0.32 s  3.1e8/s       yes
    OCMS+RR 1000 c.   1e7       0.78 s  1.3e7/s       0.78 s  1.3e7/s       yes
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def _write(folder: Path, proto, params, n: int, files: int, seed: int, d: int) -> list:
    import pyarrow.parquet as pq

    from ldpfast import arrow

    folder.mkdir(parents=True, exist_ok=True)
    client = proto.client(params, rng=seed)
    rng = np.random.default_rng(seed)
    paths = []
    bounds = np.linspace(0, n, files + 1).astype(np.int64)
    for i in range(files):
        count = int(bounds[i + 1] - bounds[i])
        path = folder / f"part-{i:04d}.parquet"
        done = 0
        writer = None
        while done < count:  # bounded memory: 5e6 reports at a time
            step = min(5_000_000, count - done)
            values = np.minimum(rng.zipf(1.2, size=step) - 1, d - 1)
            table = arrow.to_arrow(client.perturb(values), params)
            if writer is None:
                writer = pq.ParquetWriter(str(path) + ".tmp", table.schema, compression="zstd")
            writer.write_table(table, row_group_size=1 << 20)
            done += step
        writer.close()
        os.replace(str(path) + ".tmp", path)
        paths.append(str(path))
    return paths


def _warm_up():
    import pyarrow.parquet  # noqa: F401

    from ldpfast._base import protocols

    protocols()


def _single(zero, paths, batch_rows):
    from ldpfast import arrow

    agg = type(zero).from_bytes(zero.to_bytes())
    for path in paths:
        for _, batch in arrow.iter_parquet(path, agg.params, batch_rows=batch_rows):
            agg.update(batch)
    return agg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of 1e8 HRR / 1e7 OCMS reports")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-threads", type=int, default=1,
                        help="LDPFAST_NUM_THREADS in each worker (default 1)")
    parser.add_argument("--files", type=int, default=16, help="Parquet files per workload")
    parser.add_argument("--batch-rows", type=int, default=1 << 20)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per mode (best is reported)")
    parser.add_argument("--only", choices=["hrr", "ocms"], default=None)
    parser.add_argument("--dir", type=Path, default=None, help="where to write the Parquet files")
    args = parser.parse_args()

    import distributed

    import ldpfast
    import ldpfast.dask as ldask
    from ldpfast._base import protocols

    known = protocols()
    workloads = []
    if args.only in (None, "hrr"):
        params = known["hrr"].params(epsilon=1.0, d=2**16)
        workloads.append(("HRR d=2^16", known["hrr"], params, known["hrr"].aggregator(params),
                          int(1e8 * args.scale), 2**16))
    if args.only in (None, "ocms"):
        params = known["ocms"].params.optimal(epsilon=2.0, d=10**6)
        zero = known["ocms"].aggregator(params, candidates=np.arange(1000))
        workloads.append(("OCMS+RR 1000 candidates", known["ocms"], params, zero, int(1e7 * args.scale), 1000))

    root = args.dir or Path(tempfile.mkdtemp(prefix="ldpfast-bench-"))
    print(f"backend {ldpfast.backend_info()['active']}, {os.cpu_count()} CPUs, data in {root}")
    rows = []
    try:
        with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                      dashboard_address=None,
                                      env={"LDPFAST_NUM_THREADS": str(args.worker_threads)}) as cluster, \
                distributed.Client(cluster) as client:
            t = time.perf_counter()
            client.run(_warm_up)  # imports on the workers: a one-off cost, reported apart
            print(f"worker warm-up (imports): {time.perf_counter() - t:.2f} s")
            for k, (name, proto, params, zero, n, d) in enumerate(workloads):
                t = time.perf_counter()
                paths = _write(root / proto.id, proto, params, n, args.files, seed=100 + k, d=d)
                size = sum(os.path.getsize(p) for p in paths)
                print(f"{name}: wrote {n:,} reports in {len(paths)} files "
                      f"({size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")
                singles, dasks = [], []
                for _ in range(args.repeat):  # best of --repeat for both (first Dask call is cold)
                    t = time.perf_counter()
                    single = _single(zero, paths, args.batch_rows)
                    singles.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    distributed_agg = ldask.aggregate_parquet(paths, zero, batch_rows=args.batch_rows)
                    dasks.append(time.perf_counter() - t)
                identical = single.to_bytes() == distributed_agg.to_bytes()
                print(f"  1 process: {', '.join(f'{x:.2f}' for x in singles)} s; "
                      f"dask: {', '.join(f'{x:.2f}' for x in dasks)} s")
                rows.append((name, n, min(singles), min(dasks), identical))
                shutil.rmtree(root / proto.id)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)

    print()
    print(f"{'workload':<26}{'reports':>13}{'1 process s':>13}{'reports/s':>13}"
          f"{f'dask {args.workers}w s':>13}{'reports/s':>13}{'ratio':>8}  identical")
    for name, n, t1, t2, same in rows:
        print(f"{name:<26}{n:>13,}{t1:>13.2f}{n / t1:>13.3g}{t2:>13.2f}{n / t2:>13.3g}{t1 / t2:>8.2f}  {same}")
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
