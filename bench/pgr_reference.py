"""PGR (ldpfast.protocols.frequency.pgr) against the paper's public C++ implementation
(minilek/private_frequency_oracles, ``oracles/projective_geometry.cc``), measured in one run:
client ns per user, server seconds (aggregation plus the decoder of every estimate) and
MSE / closed form, on the same data, at the same field size q (the reference's choice, the
smallest prime above e^eps + 1) and at ldpfast's default q.

The reference is compiled here with g++ -O3 from a checkout you pass (it needs the Boost
headers, Debian's libboost-dev); only a small driver written by this script is added to it,
in a temporary folder. Nothing of it is part of ldpfast.

    python3 bench/pgr_reference.py --reference /path/to/private_frequency_oracles [--n 100000] [--reps 3]

Prints one table and writes ``--out`` (JSON, default bench/results/pgr_reference.json).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

from ldpfast import _core
from ldpfast.protocols.frequency import pgr

DRIVER = r"""
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "projective_geometry.h"
// args: K eps q n seed values.bin estimates.bin -> prints "client_s server_s K"
int main(int argc, char** argv) {
  const int K = std::atoi(argv[1]); const double eps = std::atof(argv[2]); const int q = std::atoi(argv[3]);
  const int n = std::atoi(argv[4]); const unsigned seed = (unsigned)std::atoi(argv[5]);
  std::vector<unsigned> values(n);
  FILE* in = std::fopen(argv[6], "rb");
  if (std::fread(values.data(), sizeof(unsigned), n, in) != (size_t)n) return 1;
  std::fclose(in);
  ProjectiveGeometryResponse oracle(K, eps, q, false, seed);
  std::vector<Message> messages;
  messages.reserve(n);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) messages.push_back(oracle.local_randomizer((int)values[i]));
  auto t1 = std::chrono::steady_clock::now();
  std::vector<double> est = oracle.estimate_all_freqs(messages);
  auto t2 = std::chrono::steady_clock::now();
  FILE* out = std::fopen(argv[7], "wb");
  std::fwrite(est.data(), sizeof(double), K, out);
  std::fclose(out);
  std::printf("%.9f %.9f %zu\n", std::chrono::duration<double>(t1 - t0).count(),
              std::chrono::duration<double>(t2 - t1).count(), est.size());
  return 0;
}
"""

SETTINGS = [(1.0, 2**14), (1.0, 2**17), (4.0, 2**14), (4.0, 2**17)]


def reference_q(eps: float) -> int:
    """The reference's field size: the smallest prime >= e^eps + 1."""
    from ldpfast.theory.projective import _next_prime

    return _next_prime(math.ceil(math.exp(eps) + 1))


def build(reference: str, work: str) -> str:
    src = os.path.join(work, "driver.cc")
    with open(src, "w") as f:
        f.write(DRIVER)
    exe = os.path.join(work, "pgr_reference")
    oracles = os.path.join(reference, "oracles")
    sources = [os.path.join(oracles, name) for name in ("projective_geometry.cc", "private_frequency_oracle.cc",
                                                        "util/util.cc", "util/message.cc")]
    subprocess.run(["g++", "-O3", "-std=c++17", "-I", oracles, src, *sources, "-o", exe], check=True)
    return exe


def data(n: int, k: int, seed: int) -> np.ndarray:
    """Zipf(1.1) ranks over k values in a random order."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, k + 1) ** 1.1
    return rng.permutation(k)[rng.choice(k, size=n, p=weights / weights.sum())].astype(np.uint32)


def run_reference(exe: str, work: str, values: np.ndarray, k: int, eps: float, q: int, seed: int):
    vin, vout = os.path.join(work, "values.bin"), os.path.join(work, "est.bin")
    values.tofile(vin)
    out = subprocess.run([exe, str(k), repr(eps), str(q), str(values.size), str(seed), vin, vout], check=True,
                         capture_output=True, text=True).stdout.split()
    client, server = float(out[0]), float(out[1])
    return client, server, np.fromfile(vout, dtype=np.float64)[:k] / values.size


def run_ours(params: pgr.PGRParams, values: np.ndarray, seed: int, threads: int):
    t0 = time.perf_counter()
    reports = pgr.PGRClient(params, rng=seed, threads=threads).perturb(values)
    t1 = time.perf_counter()
    est = pgr.PGRServer(params, threads=threads).update(reports).estimate()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, est


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", required=True, help="checkout of minilek/private_frequency_oracles")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "pgr_reference.json"))
    args = ap.parse_args()
    threads = _core.get_num_threads()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        exe = build(args.reference, work)
        for eps, k in SETTINGS:
            q_ref = reference_q(eps)
            configs = [("reference", q_ref), ("ldpfast 1 thread", q_ref), (f"ldpfast {threads} threads", q_ref),
                       ("ldpfast default q, 1 thread", 0)]
            acc = {name: {"client": [], "server": [], "se": [], "theory": []} for name, _ in configs}
            geometry = {}
            for rep in range(args.reps):
                values = data(args.n, k, 1000 + rep)
                f = np.bincount(values, minlength=k) / args.n
                for name, q in configs:
                    params = pgr.PGRParams(epsilon=eps, d=k, q=q)
                    geometry[name] = (params.q, params.t, params.points)
                    if name == "reference":
                        client, server, est = run_reference(exe, work, values, k, eps, q, 7 + rep)
                    else:
                        client, server, est = run_ours(params, values, 7 + rep, 1 if "1 thread" in name else threads)
                    acc[name]["client"].append(client)
                    acc[name]["server"].append(server)
                    acc[name]["se"].append(float(np.mean((est - f) ** 2)))
                    acc[name]["theory"].append(float(np.mean(params.variance(args.n, f))))
            for name, _ in configs:
                a = acc[name]
                rows.append({"eps": eps, "k": k, "implementation": name, "q": geometry[name][0],
                             "t": geometry[name][1], "K": geometry[name][2],
                             "client_ns_per_user": 1e9 * float(np.median(a["client"])) / args.n,
                             "server_s": float(np.median(a["server"])),
                             "mse": float(np.mean(a["se"])),
                             "mse_over_theory": float(np.mean(a["se"]) / np.mean(a["theory"]))})
    ref = {(r["eps"], r["k"]): r for r in rows if r["implementation"] == "reference"}
    print(f"n = {args.n:,}, {args.reps} reps (median times, mean MSE); {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, ldpfast backend {_core.active_backend()}")
    print(f"{'eps':>4} {'k':>7} {'implementation':<28} {'q':>4} {'t':>3} {'K':>8} {'client ns/user':>15} "
          f"{'vs ref':>7} {'server s':>9} {'vs ref':>7} {'MSE/theory':>10}")
    for r in rows:
        base = ref[(r["eps"], r["k"])]
        print(f"{r['eps']:>4g} {r['k']:>7} {r['implementation']:<28} {r['q']:>4} {r['t']:>3} {r['K']:>8} "
              f"{r['client_ns_per_user']:>15.0f} {base['client_ns_per_user'] / r['client_ns_per_user']:>6.2f}x "
              f"{r['server_s']:>9.4f} {base['server_s'] / r['server_s']:>6.2f}x {r['mse_over_theory']:>10.3f}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"n": args.n, "reps": args.reps, "command": " ".join(sys.argv), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
