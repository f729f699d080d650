"""Every single-bit flip of small Parquet report files: is any damaged file counted?

For each workload (HRR, d = 64: one scalar column per field; OUE, d = 8: a fixed-size list
column) and compression (none, zstd), a file of --reports seeded reports is written with
ldpfast.arrow.write_parquet; then each of its 8 x size single-bit flips is streamed with
ldpfast.arrow.iter_parquet into an empty server. Each outcome is one of

* refused: an ldpfast error whose message starts with the file's name,
* identical: the server's bytes equal those of the undamaged reports (the flip hit bytes no
  reader uses, e.g. statistics or the writer's name),
* unnamed: an ldpfast error that does not name the file, or another exception type,
* silent: aggregated without an error to another state (a damaged file counted).

The exit status is 1 unless every flip is refused or identical. tests/test_parquet_trust.py
runs a subset (every byte XOR 0xFF and one bit per byte, every bit of the footer, 200
reports) on every test run.

    PYTHONPATH=python python3 bench/parquet_damage.py [--reports 2000]

Measured on the 2-core development VM (shared, load 6-12), 2026-11-28, pyarrow 26.0.1:

    workload  compression  bytes  flips   refused  identical  unnamed  silent  seconds
    hrr       none          3345  26760     23112       3648        0       0       84
    hrr       zstd          3224  25792     22192       3600        0       0       41
    oue       none          4177  33416     30280       3136        0       0       70
    oue       zstd          3527  28216     25102       3114        0       0       79

The same files before the footer-count checks and the vocabulary-aware parameter check
(main at d477254): silent 53, 48, 24 and 24 (aggregated to another state without an
error), unnamed 1006, 1010, 1193 and 1192.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Tuple

import numpy as np

import ldpfast
from ldpfast import arrow
from ldpfast.protocols.frequency import hadamard, unary

NAME = "damaged.parquet"


def _workloads(n: int) -> Dict[str, Tuple[Any, Any, Callable[[Any], Any]]]:
    """name -> (params, reports, empty server of params)."""
    hrr = hadamard.HRRParams(epsilon=1.0, d=64)
    oue = unary.OUEParams(epsilon=1.0, d=8)
    rng = np.random.default_rng(2026)
    return {"hrr": (hrr, hadamard.HRRClient(hrr, rng=rng).perturb(np.arange(n) % 64), hadamard.HRRServer),
            "oue": (oue, unary.OUEClient(oue, rng=rng).perturb(np.arange(n) % 8), unary.OUEServer)}


def sweep(data: bytes, params: Any, server: Callable[[Any], Any], expected: bytes) -> Dict[str, int]:
    outcomes: Dict[str, int] = collections.Counter()
    for offset in range(len(data)):
        for bit in range(8):
            damaged = bytearray(data)
            damaged[offset] ^= 1 << bit
            aggregator = server(params)
            try:
                for _, batch in arrow.iter_parquet(bytes(damaged), params, name=NAME):
                    aggregator.update(batch)
            except ldpfast.errors.LdpfastError as exc:
                outcomes["refused" if str(exc).startswith(NAME) else "unnamed"] += 1
                continue
            except Exception:  # noqa: BLE001 - any other exception type is a defect, counted
                outcomes["unnamed"] += 1
                continue
            outcomes["identical" if aggregator.to_bytes() == expected else "silent"] += 1
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reports", type=int, default=2000, help="reports per file (default 2000)")
    parser.add_argument("--workloads", default="hrr,oue", help="comma-separated: hrr, oue")
    args = parser.parse_args()
    print(f"{'workload':8}  {'compression':11}  {'bytes':>5}  {'flips':>6}  {'refused':>8}  {'identical':>9}  "
          f"{'unnamed':>7}  {'silent':>6}  {'seconds':>7}")
    defects = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, (params, reports, server) in _workloads(args.reports).items():
            if name not in args.workloads.split(","):
                continue
            expected = server(params).update(reports).to_bytes()
            for compression in ("none", "zstd"):
                path = Path(tmp) / f"{name}-{compression}.parquet"
                arrow.write_parquet(reports, path, params, compression=compression)
                data = path.read_bytes()
                started = time.perf_counter()
                outcomes = sweep(data, params, server, expected)
                defects += outcomes["unnamed"] + outcomes["silent"]
                print(f"{name:8}  {compression:11}  {len(data):5}  {8 * len(data):6}  {outcomes['refused']:8}  "
                      f"{outcomes['identical']:9}  {outcomes['unnamed']:7}  {outcomes['silent']:6}  "
                      f"{time.perf_counter() - started:7.0f}", flush=True)
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
