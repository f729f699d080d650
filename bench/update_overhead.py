"""Cost of the all-or-nothing update: ``HRRServer.update`` (checks, a copy of the state,
the C++ accumulation into the copy, one-step commit under the lock) against the bare C++
kernel adding the same batch in place into a preallocated vector (the baseline, measured
in the same run), for several state and batch sizes.

    PYTHONPATH=python python3 bench/update_overhead.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np

import ldpfast
from ldpfast import _core
from ldpfast.protocols import hadamard as H


def best_of(repeat, fn, inner):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    info = ldpfast.backend_info()
    print(f"backend = {info['active']}, threads = {info['threads']}")
    print(f"{'d':>6} {'batch':>9} {'update ms':>10} {'kernel ms':>10} {'ratio':>7}")
    for log2d in (12, 16, 20):
        params = H.HRRParams(epsilon=1.0, d=2**log2d)
        layout = params.layout()
        for n in (1_000, 100_000, 1_000_000):
            reports = H.HRRClient(params, rng=1).perturb(np.random.default_rng(1).integers(0, 2**log2d, n))
            server = H.HRRServer(params)
            z = np.zeros(layout.n_cells, dtype=np.int64)
            rows = np.ascontiguousarray(layout.rows)
            inner = max(1, 200_000 // n)
            t_update = best_of(args.repeat, functools.partial(server.update, reports), inner)
            # default arguments bind this iteration's objects; the attributes are still read on every call
            t_kernel = best_of(args.repeat,
                               lambda reports=reports, rows=rows, layout=layout, z=z: _core.hadamard_update(
                                   None, reports.rows, reports.bits, rows, layout.cell_base, z, 0),
                               inner)
            print(f"2^{log2d:<4} {n:>9,} {t_update * 1e3:>10.3f} {t_kernel * 1e3:>10.3f} {t_update / t_kernel:>7.1f}")


if __name__ == "__main__":
    main()
