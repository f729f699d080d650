"""IBU speed: ldpfast's implicit-channel EM against multi-freq-ldpy's IBU (a dense ``d x d``
channel matrix, numba-compiled), same GRR data, same number of iterations, same run.

    PYTHONPATH=python python3 bench/ibu_speed.py [--iterations 300]

multi-freq-ldpy is a peer, not a dependency: install it in a scratch environment
(``pip install multi-freq-ldpy``) to get its column; without it only ours is timed.
Times are process CPU seconds per run of ``--iterations`` EM steps (median of 3; the
numba compilation is excluded by a warm-up call). Both start from the uniform vector and
run exactly that many steps (tolerances set below reach), so the outputs agree to
rounding, which is checked. Both run on one BLAS/OpenMP/numba thread unless the
environment says otherwise: the peer's dense products spend CPU time on every BLAS
thread, so its time grows with their number.
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")       # before numpy (and numba) are imported

import argparse  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

try:
    from machine import median_cpu
except ImportError:  # imported as bench.ibu_speed
    from .machine import median_cpu

from ldpfast import estimation  # noqa: E402
from ldpfast.errors import ConvergenceWarning  # noqa: E402
from ldpfast.protocols.frequency import grr  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--n", type=int, default=100_000)
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)     # a fixed number of steps, short of convergence
    try:
        from multi_freq_ldpy.estimators.Histogram_estimator import IBU as peer_ibu
    except ImportError:
        peer_ibu = None
    print(f"threads: OMP {os.environ['OMP_NUM_THREADS']}, OpenBLAS {os.environ['OPENBLAS_NUM_THREADS']}, "
          f"MKL {os.environ['MKL_NUM_THREADS']}, numba {os.environ['NUMBA_NUM_THREADS']}")
    print("| d | ldpfast CPU s | multi-freq-ldpy CPU s | ratio | max abs difference |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for d in (64, 256, 1024, 4096):
        params = grr.GRRParams(epsilon=1.0, d=d)
        values = np.minimum(rng.zipf(1.3, size=args.n) - 1, d - 1)
        server = grr.GRRServer(params).update(grr.GRRClient(params, rng=1).perturb(values))
        channel = estimation.channel_of(server)
        fit, ours_s = median_cpu(estimation.ibu, channel, tol=1e-300, max_iter=args.iterations, repeat=3)
        ours = fit.values
        if peer_ibu is None:
            print(f"| {d} | {ours_s:.4f} | (not installed) | | |")
            continue
        p, q = params.keep_probability, params.other_probability
        dense = np.full((d, d), q) + (p - q) * np.eye(d)
        observed = server.counts / server.n
        peer_ibu(d, dense, observed, 2, 1e-300, "max_abs")          # numba warm-up
        theirs, theirs_s = median_cpu(peer_ibu, d, dense, observed, args.iterations, 1e-300, "max_abs", repeat=3)
        print(f"| {d} | {ours_s:.4f} | {theirs_s:.4f} | {theirs_s / ours_s:.1f}x | "
              f"{float(np.abs(ours - theirs).max()):.1e} |", flush=True)


if __name__ == "__main__":
    main()
