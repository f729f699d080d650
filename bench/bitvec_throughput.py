"""Bit-vector protocols: server accumulation, RAPPOR decoding and the clients, each with its
ratio against a baseline measured in the same run.

1. Column counts (the RAPPOR / OUE / L-UE server's hot loop): 128-bit reports in 64 cohorts,
   reports/s per core of the C++ kernel on each ISA and of ``rappor.RAPPORServer.update`` (one
   and all threads), against a straightforward numpy implementation (``np.unpackbits``, then
   a per-cohort sum).
2. RAPPOR decode of 10,000 candidates over 64 cohorts (128-bit filters, the C++ client's
   HMAC-DRBG encoding): the candidates' Bloom bits, the lasso-then-least-squares decode and
   EM, against EM written in numpy (``np.bincount`` matrix-vector products, same steps).
3. Clients: OUE at d = 1024 against numpy (one uniform per bit) and pure-LDP's UEClient
   where it installs; L-OSUE / L-GRR against multi-freq-ldpy's clients where it installs.

    PYTHONPATH=python python3 bench/bitvec_throughput.py [--quick] [--json FILE]

CPU seconds (time.process_time) are reported beside wall seconds: on a shared machine the
wall time of one thread is inflated by other load, its CPU time is not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from ldpfast import _core  # noqa: E402
from ldpfast.protocols.frequency import unary  # noqa: E402
from ldpfast.protocols.repeated import longitudinal, longitudinal_unary, rappor  # noqa: E402


def timed(fn, repeat=3):
    """(best wall seconds, CPU seconds of that run, result)."""
    best = None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        if best is None or wall < best[0]:
            best = (wall, cpu, out)
    return best


def numpy_column_counts(rows, cohorts, m, k):
    """The straightforward way: one byte per bit, then a per-cohort sum."""
    bits = np.unpackbits(rows, axis=1, bitorder="little", count=k)
    out = np.zeros((m, k), dtype=np.int64)
    for c in range(m):
        out[c] = bits[cohorts == c].sum(axis=0)
    return out


def bench_counts(n, table):
    k, m = 128, 64
    rng = np.random.default_rng(1)
    rows = np.frombuffer(rng.bytes(n * 16), dtype=np.uint8).reshape(n, 16)
    cohorts = rng.integers(0, m, n).astype(np.uint32)
    base_n = min(n, 1_000_000)
    wall, cpu, ref = timed(lambda: numpy_column_counts(rows[:base_n], cohorts[:base_n], m, k), repeat=1)
    numpy_rate = base_n / cpu
    table["numpy reports/s per core"] = numpy_rate
    print(f"column counts, {k}-bit reports, {m} cohorts, n = {n:,}")
    print(f"  numpy (unpackbits + per-cohort sum): {numpy_rate / 1e6:8.2f} M reports/s per core")
    previous = _core.active_backend()
    got = _core.bitvec_column_counts(rows[:base_n], k, cohorts[:base_n], m, 1)[0]
    assert np.array_equal(got, ref)
    for isa in _core.supported_backends():
        _core.set_backend(isa)
        wall, cpu, _ = timed(lambda: _core.bitvec_column_counts(rows, k, cohorts, m, 1))
        rate = n / cpu
        table[f"kernel {isa} reports/s per core"] = rate
        print(f"  C++ kernel {isa:<7} 1 thread:          {rate / 1e6:8.2f} M reports/s per core  "
              f"({rate / numpy_rate:6.0f} x numpy)")
    _core.set_backend(previous)
    params = rappor.RAPPORParams(k=k, h=2, m=m, f=0.5, encoding="cpp-drbg")
    reports = rappor.RAPPORReports(cohort=cohorts, bits=rows)
    for threads in (1, 0):
        wall, cpu, _ = timed(lambda threads=threads: rappor.RAPPORServer(params, threads=threads).update(reports))
        label = "1 thread" if threads == 1 else f"{_core.get_num_threads()} threads"
        table[f"Server.update {label} reports/s (wall)"] = n / wall
        table[f"Server.update {label} reports/s per core"] = n / cpu
        print(f"  rappor.RAPPORServer.update ({label}): {n / wall / 1e6:8.2f} M reports/s wall, "
              f"{n / cpu / 1e6:.2f} M per core ({n / cpu / numpy_rate:.0f} x numpy)")


def numpy_em(design, y, trials, p_one, p_zero, other_rate, steps):
    """EM of the bit counts' composite likelihood (as the C++ one, without SQUAREM)."""
    C = design.col_ptr.size - 1
    cols = np.repeat(np.arange(C), np.diff(design.col_ptr))
    rows = design.rows.astype(np.intp)
    f, f_other = np.full(C, 1.0 / (C + 1)), 1.0 / (C + 1)
    total, gap = trials.sum(), p_one - p_zero
    for _ in range(steps):
        mass = np.bincount(rows, weights=f[cols], minlength=y.size) + f_other * other_rate
        pi = p_zero + gap * mass
        u, v = y / pi, (trials - y) / (1 - pi)
        owed = p_zero * u.sum() + (1 - p_zero) * v.sum() + gap * np.bincount(cols, weights=(u - v)[rows], minlength=C)
        a = p_zero + gap * other_rate
        f_other = f_other * (u * a + v * (1 - a)).sum() / total
        f = f * owed / total
    return f


def bench_decode(candidates, n, table):
    params = rappor.RAPPORParams(k=128, h=2, m=64, p=0.25, q=0.75, f=0.25, encoding="cpp-drbg")
    labels = [f"https://example.com/page/{i}" for i in range(candidates)]
    weights = 1.0 / np.arange(1, 41) ** 1.2
    values = np.random.default_rng(2).choice(40, size=n, p=weights / weights.sum())
    reports = rappor.RAPPORClient(params, rng=3).perturb([labels[v] for v in values])
    server = rappor.RAPPORServer(params).update(reports)
    print(f"RAPPOR decode: {candidates:,} candidates, 64 cohorts, 128-bit filters, n = {n:,}")
    wall, cpu, design = timed(lambda: rappor._design(params, np.asarray(labels, dtype=object)), repeat=1)
    table["candidate Bloom bits s"] = wall
    print(f"  candidates' Bloom bits (MD5 of {candidates * 64:,} pairs): {wall:.2f} s wall, {cpu:.2f} s CPU")
    for method in ("lasso", "em"):
        wall, cpu, decoded = timed(lambda method=method: server.decode(labels, method=method), repeat=1)
        found = int(decoded.significant().sum()) if method == "lasso" else int((decoded.values > 0.005).sum())
        table[f"decode {method} s"] = wall
        table[f"decode {method} iterations"] = decoded.iterations
        print(f"  decode {method:<5}: {wall:6.2f} s wall, {cpu:6.2f} s CPU, {decoded.iterations} iterations, "
              f"{found} candidates found (40 reported)")
    steps = 200
    y = server.counts.astype(np.float64).ravel()
    trials = np.repeat(server.group_reports.astype(np.float64), params.k)
    other = 1.0 - (1.0 - 1.0 / params.k) ** params.h
    wall_np, cpu_np, _ = timed(lambda: numpy_em(design, y, trials, params.q_star, params.p_star, other, steps),
                               repeat=1)
    f = np.zeros(candidates)

    def cpp_em():
        f[:] = 1.0 / (candidates + 1)
        return _core.sparse_bit_em(design.col_ptr, design.rows, design.n_rows, y, trials, params.q_star,
                                   params.p_star, other, 1.0 / (candidates + 1), 0.0, steps, f)
    wall_cc, cpu_cc, _ = timed(cpp_em, repeat=1)
    table["EM step numpy s"] = cpu_np / steps
    table["EM step C++ s"] = cpu_cc / steps
    print(f"  EM step: C++ {cpu_cc / steps * 1e3:.2f} ms CPU, numpy {cpu_np / steps * 1e3:.2f} ms CPU "
          f"({cpu_np / cpu_cc:.1f} x)")


def bench_clients(n, table):
    d = 1024
    x = np.random.default_rng(4).integers(0, d, n)
    params = unary.OUEParams(epsilon=1.0, d=d)
    client = unary.OUEClient(params, rng=1, threads=1)
    _, cpu, _ = timed(lambda: client.perturb(x))
    ours = n / cpu
    rng = np.random.default_rng(5)

    def numpy_oue():
        probs = np.full((n, d), params.q)
        probs[np.arange(n), x] = 0.5
        return np.packbits(rng.random((n, d)) < probs, axis=1, bitorder="little")
    _, cpu_np, _ = timed(numpy_oue, repeat=1)
    table["OUE client per core"] = ours
    table["OUE numpy client per core"] = n / cpu_np
    print(f"OUE client, d = {d}: {ours / 1e3:.0f} k reports/s per core, numpy {n / cpu_np / 1e3:.0f} k "
          f"({cpu_np / cpu:.1f} x)")
    try:
        from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer
    except ImportError:
        print("  pure-LDP not installed: pip install pure-ldp for its UE")
    else:
        few = min(n, 20_000)
        pclient, pserver = UEClient(1.0, d, use_oue=True), UEServer(1.0, d, use_oue=True)
        _, cpu_p, _ = timed(lambda: [pserver.aggregate(pclient.privatise(int(v))) for v in x[:few]], repeat=1)
        table["pure-LDP UE client+server per core"] = few / cpu_p
        _, cpu_ours, _ = timed(lambda: unary.OUEServer(params, threads=1).update(client.perturb(x[:few])))
        print(f"  pure-LDP UEClient + UEServer.aggregate: {few / cpu_p / 1e3:.1f} k reports/s per core; ldpfast "
              f"client + server {few / cpu_ours / 1e3:.0f} k ({cpu_p / cpu_ours:.0f} x)")
    d = 100
    x = np.random.default_rng(6).integers(0, d, n)
    for name, p in (("L-OSUE", longitudinal_unary.LOSUEParams(2.0, 1.0, d)),
                    ("L-GRR", longitudinal.LGRRParams(2.0, 1.0, d))):
        c = (longitudinal_unary.LOSUEClient if name == "L-OSUE" else longitudinal.LGRRClient)(p, rng=1, threads=1)
        _, cpu, _ = timed(lambda c=c: c.perturb(x))
        table[f"{name} client per core"] = n / cpu
        print(f"{name} client (memoized), d = {d}: {n / cpu / 1e3:.0f} k reports/s per core", end="")
        try:
            from multi_freq_ldpy.long_freq_est import L_GRR, L_OSUE
        except ImportError:
            print("  (multi-freq-ldpy not installed)")
            continue
        few = min(n, 20_000)
        ref = (lambda v: L_OSUE.L_OSUE_Client(int(v), d, 2.0, 1.0)) if name == "L-OSUE" else \
            (lambda v: L_GRR.L_GRR_Client(int(v), d, 2.0, 1.0))
        ref(0)   # numba compilation
        _, cpu_ref, _ = timed(lambda ref=ref, few=few: [ref(v) for v in x[:few]], repeat=1)
        table[f"{name} multi-freq-ldpy per core"] = few / cpu_ref
        print(f"; multi-freq-ldpy {few / cpu_ref / 1e3:.1f} k ({(n / cpu) / (few / cpu_ref):.0f} x; it keeps no "
              "memo: every report is a fresh two-stage draw)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--json", default=None, help="write the numbers here")
    args = ap.parse_args()
    table: dict = {"backends": list(_core.supported_backends())}
    bench_counts(2_000_000 if args.quick else 10_000_000, table)
    bench_decode(10_000, 200_000 if args.quick else 1_000_000, table)
    bench_clients(100_000 if args.quick else 400_000, table)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(table, fh, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
