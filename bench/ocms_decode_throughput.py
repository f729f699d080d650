"""OCMS+RR server decode throughput: (report, candidate) pair evaluations per second.

Measures ``_core.ocms_count_range`` (full-dictionary decode, prime field p = 2^64 - 59)
for every backend this CPU supports, with one thread and with all threads, against a
vectorized numpy implementation of the same decode measured in the same run. The numpy
baseline is the strongest one we know how to write: it uses the same multiplication-free
recurrence as the C++ kernel (v(x + B) = v(x) + B*a1 mod p with the residue mod m carried
along), exact in uint64, over a (reports x B lanes) state array, so its cost is a dozen
numpy passes per B candidates. The script asserts that all counts are identical.

    PYTHONPATH=python python3 bench/ocms_decode_throughput.py [--n 10000] [--d 100000]

For per-core numbers on a shared machine, pin it (``taskset -c 0``) and take the best
of several repeats (``--repeat``).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import ldpfast
from ldpfast import _core

PRIME = 2**64 - 59


def numpy_count_range(z, a0, a1, m, d):
    """counts[x] = #{i : ((a0[i] + a1[i] x) mod p) mod m == z[i]} for x in [0, d), in numpy."""
    lanes = max(8, min(1024, 2**18 // max(len(z), 1)))  # state arrays of ~2^18 entries
    p = np.uint64(PRIME)
    m_u = np.uint64(m)
    p_mod_m = np.uint64(PRIME % m)

    def step_constants(step):  # step: (n,) values in [0, p)
        d_step = step % m_u
        d_wrap = np.where(d_step >= p_mod_m, d_step - p_mod_m, d_step + (m_u - p_mod_m))
        return step, p - step, d_step, d_wrap

    def advance(v, r, consts):
        step, wrap_at, d_step, d_wrap = consts
        wrap = v >= wrap_at
        v_next = np.where(wrap, v - wrap_at, v + step)
        s = r + np.where(wrap, d_wrap, d_step)
        return v_next, np.where(s >= m_u, s - m_u, s)

    n = len(z)
    unit = step_constants(a1)
    # Lane start values v(j) for j < lanes (x = 0 gives a0), by the unit recurrence.
    v = np.empty((n, lanes), dtype=np.uint64)
    r = np.empty((n, lanes), dtype=np.uint64)
    v[:, 0], r[:, 0] = a0, a0 % m_u
    for j in range(1, lanes):
        v[:, j], r[:, j] = advance(v[:, j - 1], r[:, j - 1], unit)
    # Stride constants: lanes * a1 mod p, by doubling with exact modular additions.
    stride = np.zeros(n, dtype=np.uint64)
    for _ in range(lanes):
        t = stride + a1
        stride = np.where((t < stride) | (t >= p), t - p, t)
    step, wrap_at, d_step, d_wrap = (c[:, None] for c in step_constants(stride))
    d_fix = d_wrap - d_step  # added on wrap (uint64 arithmetic wraps mod 2^64, as intended)
    zc = z[:, None]
    counts = np.zeros(d + lanes, dtype=np.uint64)
    wrap = np.empty(v.shape, dtype=bool)
    big = np.empty(v.shape, dtype=bool)
    hits = np.empty(v.shape, dtype=bool)
    for x0 in range(0, d, lanes):  # in place: no temporaries in the loop
        np.equal(r, zc, out=hits)
        counts[x0:x0 + lanes] += np.count_nonzero(hits, axis=0).astype(np.uint64)
        np.greater_equal(v, wrap_at, out=wrap)
        np.add(v, step, out=v)
        np.subtract(v, p, out=v, where=wrap)
        np.add(r, d_step, out=r)
        np.add(r, d_fix, out=r, where=wrap)
        np.greater_equal(r, m_u, out=big)
        np.subtract(r, m_u, out=r, where=big)
    return counts[:d]


def best_time(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="reports")
    parser.add_argument("--d", type=int, default=100_000, help="candidates (dictionary size)")
    parser.add_argument("--m", type=int, default=5, help="hash range")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--numpy-repeat", type=int, default=1)
    args = parser.parse_args()

    rng = np.random.default_rng(1)
    field = _core.Field.prime(PRIME)
    values = rng.integers(0, args.d, args.n).astype(np.uint64)
    z, a0, a1 = _core.ocms_perturb(field, bytes(range(32)), values, args.m, 2**62)
    pairs = args.n * args.d

    start = time.perf_counter()
    reference = numpy_count_range(z, a0, a1, args.m, args.d)
    np_seconds = time.perf_counter() - start
    for _ in range(args.numpy_repeat - 1):
        np_seconds = min(np_seconds, best_time(lambda: numpy_count_range(z, a0, a1, args.m, args.d), 1))

    rows = [("numpy (incremental, uint64)", 1, np_seconds)]
    all_threads = _core.get_num_threads()
    previous = _core.active_backend()
    try:
        for backend in _core.supported_backends():
            ldpfast.set_backend(backend)
            for threads in sorted({1, all_threads}):
                counts = np.zeros(args.d, dtype=np.uint64)
                _core.ocms_count_range(field, z, a0, a1, args.m, 0, counts, threads)
                assert np.array_equal(counts, reference), f"{backend} counts differ from numpy"
                seconds = best_time(lambda threads=threads: _core.ocms_count_range(
                    field, z, a0, a1, args.m, 0, np.zeros(args.d, dtype=np.uint64), threads), args.repeat)
                rows.append((f"ldpfast {backend}", threads, seconds))
    finally:
        ldpfast.set_backend(previous)

    print(f"OCMS decode, n = {args.n} reports x d = {args.d} candidates, m = {args.m}, p = 2^64 - 59; "
          f"cpu affinity {len(os.sched_getaffinity(0))} core(s)")
    print(f"{'implementation':<30} {'threads':>7} {'seconds':>10} {'pairs/s':>12} {'x numpy':>9}")
    for name, threads, seconds in rows:
        print(f"{name:<30} {threads:>7} {seconds:>10.4f} {pairs / seconds:>12.3e} {np_seconds / seconds:>9.1f}")
    print("all counts identical to the numpy baseline")


if __name__ == "__main__":
    main()
