"""HRR throughput: client perturbation, server ingestion (validate + accumulate),
accumulation alone and FWHT decoding, against numpy baselines (np.add.at and
np.bincount) measured in the same run.

With ``--versus-scatter`` it times instead the bare server kernel (``_core.hadamard_update``,
one thread) against bench/machine.py's C scatter loop ``counts[y[i]]++`` (uint64 table of
``d``, the same rows as uint64) for batches of 1e4, 1e5, 1e6 uniform reports and d = 2^10 ..
2^20: the thread's CPU time, the two interleaved, best of ``--repeat`` samples of calls
totalling >= 2 ms each; column ``ratio`` is kernel time over scatter time.

    PYTHONPATH=python python3 bench/hrr_throughput.py [--n 10000000] [--log2d 20] [--threads 0]
    PYTHONPATH=python python3 bench/hrr_throughput.py --versus-scatter [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, Tuple

import numpy as np

import ldpfast
from ldpfast import _core
from ldpfast.protocols.frequency import hadamard as H

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import CLoops, best_time, c_loops  # noqa: E402  (found through sys.path above)

SAMPLE_SECONDS = 2e-3


def per_call(fn: Callable[[], object]) -> Callable[[], float]:
    """A sampler of ``fn``: each call runs ``fn`` as often as fills about SAMPLE_SECONDS of
    thread CPU time and returns the thread CPU seconds per call."""
    calls = max(1, int(SAMPLE_SECONDS / max(best_time(fn, 3, time.thread_time), 1e-7)))

    def sample() -> float:
        t0 = time.thread_time()
        for _ in range(calls):
            fn()
        return (time.thread_time() - t0) / calls

    return sample


def kernel_and_scatter(loops: CLoops, n: int, d: int, repeat: int, rng: np.random.Generator) -> Tuple[float, float]:
    """Best seconds per call of the bare kernel and of the scatter loop on the same ``n``
    uniform rows in ``[0, d)``, sampled alternately."""
    rows = rng.integers(0, d, n, dtype=np.uint32)
    bits = (1 - 2 * rng.integers(0, 2, n)).astype(np.int8)
    z, group_rows, cell_base = np.zeros(d, np.int64), np.array([d], np.uint64), np.zeros(1, np.uint64)
    kernel = per_call(lambda: _core.hadamard_update(None, rows, bits, group_rows, cell_base, z, 1, None, None))
    scatter = per_call(loops.histogram_call(rows.astype(np.uint64), np.zeros(d, np.uint64)))
    k_best = s_best = float("inf")
    for _ in range(repeat):  # interleaved: a slow spell of the machine hits both
        k_best, s_best = min(k_best, kernel()), min(s_best, scatter())
    return k_best, s_best


def versus_scatter(repeat: int) -> None:
    """Bare kernel over scatter loop per batch size and d (see the module docstring)."""
    loops = c_loops()
    if loops is None:
        sys.exit("bench: --versus-scatter needs a C compiler for the scatter loop")
    print(f"HRR kernel vs C scatter loop: _core = {_core.__file__}, backend = {_core.active_backend()}, "
          f"threads = 1, clock = thread CPU, load average {os.getloadavg()[0]:.2f}")
    print(f"{'d':>6} {'n':>8} {'kernel ns/rep':>13} {'scatter ns/rep':>14} {'ratio':>6}")
    rng = np.random.default_rng(1)
    for n in (10_000, 100_000, 1_000_000):
        for log_d in (10, 14, 16, 18, 20):
            kernel, scatter = kernel_and_scatter(loops, n, 1 << log_d, repeat, rng)
            print(f"  2^{log_d:<2d} {n:8d} {kernel / n * 1e9:13.2f} {scatter / n * 1e9:14.2f} {kernel / scatter:6.2f}",
                  flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--log2d", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--versus-scatter", action="store_true", help="bare kernel vs the C scatter loop, 1 thread")
    args = ap.parse_args()
    if args.versus_scatter:
        versus_scatter(args.repeat)
        return
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
