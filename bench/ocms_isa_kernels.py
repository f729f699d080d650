"""OCMS+RR decode kernels per instruction set, one thread, in G (report, candidate) pairs/s.

    PYTHONPATH=python python bench/ocms_isa_kernels.py [--baseline DIR] [--rounds R]

--baseline DIR: another build of the package (DIR holds ldpfast/, e.g. a copy of python/
made before a change). Both builds are measured in alternating subprocesses on the same
inputs, the best of R rounds each, and the table shows new / baseline. Short cases
(about 0.1-0.3 s each): compare ratios, not absolute numbers, on a shared machine.
"""

import argparse
import json
import os
import subprocess
import sys
import time

PRIME = 2**64 - 59
KEY = bytes(range(32))

# (name, field, m, kind, reports, candidates, method)
CASES = [
    ("range prime m=5", "prime", 5, "range", 2_000, 1 << 17, "scan"),
    ("range prime m=149", "prime", 149, "range", 2_000, 1 << 17, "scan"),
    ("range prime m=2^63+1", "prime", 2**63 + 1, "range", 2_000, 1 << 17, "scan"),
    ("range gf64 m=5", "gf64", 5, "range", 500, 1 << 16, "scan"),
    ("list prime m=5", "prime", 5, "list", 1_000, 1 << 14, None),
    ("list gf64 m=5", "gf64", 5, "list", 200, 1 << 14, None),
]


def measure(repeats):
    """{backend: {case: best seconds}} for the ldpfast on sys.path."""
    import numpy as np

    import ldpfast
    from ldpfast import _core

    fields = {"prime": _core.Field.prime(PRIME), "gf64": _core.Field.binary(64, 0x1B)}
    out = {}
    for backend in _core.supported_backends():
        ldpfast.set_backend(backend)
        out[backend] = {}
        for name, field_name, m, kind, n, d, method in CASES:
            field = fields[field_name]
            values = np.random.default_rng(1).integers(0, d, n).astype(np.uint64)
            z, a0, a1 = _core.ocms_perturb(field, KEY, values, m, 2**62, 1)
            xs = np.random.default_rng(2).integers(0, 10**9, d).astype(np.uint64)
            best = float("inf")
            for _ in range(repeats):
                counts = np.zeros(d, np.uint64)
                t0 = time.perf_counter()
                if kind == "range":
                    _core.ocms_count_range(field, z, a0, a1, m, 0, counts, 1, method)
                else:
                    _core.ocms_count_list(field, z, a0, a1, m, xs, counts, 1)
                best = min(best, time.perf_counter() - t0)
            out[backend][name] = best
    return out


def run_build(path, repeats):
    env = dict(os.environ, PYTHONPATH=path)
    proc = subprocess.run([sys.executable, __file__, "--worker", str(repeats)], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(proc.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", help="directory holding a baseline build of ldpfast/")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker)))
        return
    current_path = os.environ.get("PYTHONPATH", "")
    builds = {"new": current_path} | ({"baseline": args.baseline} if args.baseline else {})
    best = {}
    for _ in range(args.rounds):  # alternate builds so load changes hit both alike
        for label, path in builds.items():
            for backend, cases in run_build(path, 3).items():
                for case, seconds in cases.items():
                    key = (label, backend, case)
                    best[key] = min(best.get(key, float("inf")), seconds)
    pairs = {c[0]: c[4] * c[5] for c in CASES}
    backends = sorted({k[1] for k in best}, key=["scalar", "avx2", "avx512"].index)
    header = f"{'case':<22} {'backend':<8} {'new Gp/s':>9}"
    if args.baseline:
        header += f" {'base Gp/s':>9} {'new/base':>8}"
    print(header)
    for case in pairs:
        for backend in backends:
            rate = pairs[case] / best[("new", backend, case)] / 1e9
            line = f"{case:<22} {backend:<8} {rate:9.3f}"
            if args.baseline:
                base = pairs[case] / best[("baseline", backend, case)] / 1e9
                line += f" {base:9.3f} {rate / base:8.3f}"
            print(line)


if __name__ == "__main__":
    main()
