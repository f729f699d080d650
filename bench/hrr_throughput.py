"""HRR throughput: client perturbation, server ingestion (validate + accumulate),
accumulation alone and FWHT decoding, against numpy baselines (np.add.at and
np.bincount) measured in the same run.

    PYTHONPATH=python python3 bench/hrr_throughput.py [--n 10000000] [--log2d 20] [--threads 0]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import ldpfast
from ldpfast import _core
from ldpfast.protocols.frequency import hadamard as H

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import best_time  # noqa: E402  (found through sys.path above)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--log2d", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=1.0)
    args = ap.parse_args()
    if args.threads:
        ldpfast.set_num_threads(args.threads)
    info = ldpfast.backend_info()
    n, d = args.n, 2**args.log2d
    params = H.HRRParams(epsilon=args.epsilon, d=d)
    values = np.random.default_rng(1).integers(0, d, n, dtype=np.uint64)
    print(f"HRR throughput: n = {n:,} reports, d = 2^{args.log2d}, eps = {args.epsilon}, "
          f"backend = {info['active']}, threads = {info['threads']}")

    client = H.HRRClient(params, rng=1)
    t_client = best_time(lambda: client.perturb(values), args.repeat)
    reports = client.perturb(values)

    def ingest():
        H.HRRServer(params).update(reports)

    t_update = best_time(ingest, args.repeat)
    cell_base = np.zeros(1, np.uint64)

    def accumulate():
        z = np.zeros(d, np.int64)
        _core.hadamard_accumulate(None, reports.rows, reports.bits, cell_base, z, 0)

    t_acc = best_time(accumulate, args.repeat)
    server = H.HRRServer(params).update(reports)

    def decode():
        server._decoded = None
        server.estimate()

    t_decode = best_time(decode, args.repeat)

    def numpy_add_at():
        z = np.zeros(d, np.int64)
        np.add.at(z, reports.rows, reports.bits)

    def numpy_bincount():
        np.bincount(reports.rows, weights=reports.bits, minlength=d)

    t_addat = best_time(numpy_add_at, 1)
    t_bincount = best_time(numpy_bincount, args.repeat)
    z_ref = np.zeros(d, np.int64)
    np.add.at(z_ref, reports.rows, reports.bits)
    assert np.array_equal(z_ref, server.z), "ldpfast and numpy disagree"

    rows = [
        ("client perturb (C++, ChaCha20)", t_client),
        ("server update (validate + accumulate)", t_update),
        ("accumulate only", t_acc),
        ("numpy np.add.at (baseline)", t_addat),
        ("numpy np.bincount weights (baseline)", t_bincount),
    ]
    print(f"{'step':42s} {'seconds':>9s} {'reports/s':>14s}")
    for name, t in rows:
        print(f"{name:42s} {t:9.4f} {n / t:14.4g}")
    print(f"{'decode: int64 FWHT of 2^%d + scaling' % args.log2d:42s} {t_decode:9.4f}")
    print(f"update vs np.add.at: {t_addat / t_update:.1f}x faster; vs np.bincount: {t_bincount / t_update:.1f}x faster")
    print(f"accumulate vs np.bincount: {t_bincount / t_acc:.1f}x faster")


if __name__ == "__main__":
    main()
