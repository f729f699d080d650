"""Time ldpfast's FWHT against FFHT (FALCONN-LIB, PyPI ``ffht``) and a numpy butterfly.

All contenders transform the same 1-D array in place, in the same run (FFHT through
``fht_``, its in-place call: ``fht`` returns a transformed copy, whose allocation and
copy it would time too). Each timing is the
best of several runs (other processes add noise, never remove it); the input is restored
from a copy before every run, outside the timed region. ldpfast is timed per backend with
threads=1 (FFHT is single-threaded) and with the default thread count. The ratio columns
are ldpfast time / FFHT time (below 1 = ldpfast faster). FFHT is optional: without it its
columns are skipped. The numpy column takes most of the run time at large sizes (about
5 minutes in all on one core); --no-numpy drops it.

    PYTHONPATH=python python3 bench/fwht_vs_ffht.py [--min-log 10] [--max-log 24]
        [--dtypes float32,float64] [--budget 0.3] [--repeats 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ldpfast
from ldpfast import _core
from ldpfast.kernels import fwht

try:
    import ffht
except ImportError:  # optional baseline
    ffht = None


def numpy_butterfly(x: np.ndarray) -> None:
    """Textbook in-place FWHT with numpy reshapes (stages h = 1, 2, 4, ...)."""
    n = x.shape[-1]
    h = 1
    while h < n:
        v = x.reshape(-1, 2, h)
        a = v[:, 0, :].copy()
        v[:, 0, :] += v[:, 1, :]
        np.subtract(a, v[:, 1, :], out=v[:, 1, :])
        h *= 2


def best_time(fn, work: np.ndarray, source: np.ndarray, budget_s: float, min_runs: int = 5,
              max_runs: int = 2000) -> float:
    best = float("inf")
    spent = 0.0
    runs = 0
    while runs < min_runs or (spent < budget_s and runs < max_runs):
        np.copyto(work, source)
        t0 = time.perf_counter()
        fn(work)
        t = time.perf_counter() - t0
        best = min(best, t)
        spent += t
        runs += 1
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-log", type=int, default=10)
    parser.add_argument("--max-log", type=int, default=24)
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds per contender and size")
    parser.add_argument("--repeats", type=int, default=1,
                        help="repeat the whole table and keep each cell's best")
    parser.add_argument("--no-numpy", action="store_true", help="skip the (slow) numpy column")
    args = parser.parse_args()

    backends = list(_core.supported_backends())
    all_threads = ldpfast.backend_info()["threads"]
    print(f"ldpfast backends: {backends}; tall = {all_threads} threads; "
          f"ffht: {'yes' if ffht else 'not installed (skipped)'}")
    previous = _core.active_backend()
    try:
        for dtype in args.dtypes.split(","):
            columns = (["ffht"] if ffht else []) + ([] if args.no_numpy else ["numpy"])
            ours = [f"{b}/t1" for b in backends] + [f"{b}/tall" for b in backends]
            columns += ours
            results = {}
            for _ in range(args.repeats):
                for log_n in range(args.min_log, args.max_log + 1):
                    source = np.random.default_rng(log_n).standard_normal(2**log_n).astype(dtype)
                    work = np.empty_like(source)
                    cells = {}
                    if ffht:
                        cells["ffht"] = best_time(ffht.fht_, work, source, args.budget)
                    if not args.no_numpy:
                        cells["numpy"] = best_time(numpy_butterfly, work, source, args.budget,
                                                   min_runs=3, max_runs=20)
                    for b in backends:
                        ldpfast.set_backend(b)
                        cells[f"{b}/t1"] = best_time(lambda x: fwht(x, 1), work, source, args.budget)
                        cells[f"{b}/tall"] = best_time(lambda x: fwht(x, all_threads), work, source,
                                                       args.budget)
                    row = results.setdefault(log_n, {})
                    for k, v in cells.items():
                        row[k] = min(row.get(k, float("inf")), v)
            print(f"\n{dtype}: best time in ms" + ("; ratio = ldpfast / ffht" if ffht else ""))
            header = f"{'n':>6} " + " ".join(f"{c:>12}" for c in columns)
            if ffht:
                header += " " + " ".join(f"{c + ' ratio':>16}" for c in ours)
            print(header)
            for log_n, row in sorted(results.items()):
                line = f"{'2^' + str(log_n):>6} " + " ".join(f"{row[c] * 1e3:12.4f}" for c in columns)
                if ffht:
                    line += " " + " ".join(f"{row[c] / row['ffht']:16.2f}" for c in ours)
                print(line, flush=True)
    finally:
        _core.set_backend(previous)


if __name__ == "__main__":
    main()
