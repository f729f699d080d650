"""Machine description and the limits benchmarks are measured against, in the same run.

* :func:`describe` -- CPU model, cores, caches, memory, ISA backends, library versions,
  git commit and the load average (a loaded machine explains slow numbers).
* :func:`stream_bandwidth` -- a STREAM-like copy and triad in numpy over ``threads``
  Python threads (numpy releases the GIL inside large array operations), in GB/s counted
  as bytes read + written, on arrays larger than the last-level cache (best of several).
* :func:`median_time` -- the median wall time of repeated calls.
* :func:`median_cpu` -- a call's result and the median process CPU time of repeated calls.

Used by ``bench/run_all.py`` and the scaling scripts; runnable alone:

    PYTHONPATH=python python3 bench/machine.py
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import threading
import time
from typing import Any, Callable, Tuple

import numpy as np


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def median_cpu(fn: Callable[..., Any], *args: Any, repeat: int = 1, **kwargs: Any) -> Tuple[Any, float]:
    """``(fn(*args, **kwargs), median process CPU seconds over repeat calls)``."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn(*args, **kwargs)
        times.append(time.process_time() - t0)
    return out, float(np.median(times))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _lscpu() -> dict[str, str]:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    keep = ("L1d cache", "L2 cache", "L3 cache", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
            "NUMA node(s)", "Hypervisor vendor")
    info = {}
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in keep:
            info[key.strip()] = value.strip()
    return info


def _memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _git_commit() -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10,
                             check=False)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def describe() -> dict[str, object]:
    import ldpfast
    from ldpfast import _core

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "lscpu": _lscpu(),
        "memory_bytes": _memory_bytes(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "backends": list(_core.supported_backends()),
        "active_backend": _core.active_backend(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "ldpfast": getattr(ldpfast, "__version__", None),
        "git_commit": _git_commit(),
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _run_threads(threads: int, work: Callable[[int], None]) -> float:
    """Wall time of work(t) run on `threads` threads started together."""
    barrier = threading.Barrier(threads + 1)
    done = []

    def body(t):
        barrier.wait()
        work(t)
        done.append(time.perf_counter())

    pool = [threading.Thread(target=body, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    barrier.wait()
    t0 = time.perf_counter()
    for th in pool:
        th.join()
    return max(done) - t0


def stream_bandwidth(threads: int, mib_per_thread: int = 64, repeat: int = 5) -> dict[str, float]:
    """Copy (b = a) and triad (c = a + 2 b) bandwidth in GB/s (bytes read + written) with
    `threads` threads, each on its own float64 arrays of `mib_per_thread` MiB. The best of
    `repeat` runs: a limit is what the machine can do, not what a noisy run got."""
    n = mib_per_thread * 2**20 // 8
    arrays = [(np.ones(n), np.ones(n), np.ones(n)) for _ in range(threads)]

    def copy(t):
        a, b, _ = arrays[t]
        np.copyto(b, a)

    def triad(t):
        a, b, c = arrays[t]
        np.multiply(b, 2.0, out=c)
        np.add(c, a, out=c)  # numpy needs two passes: c = 2b (r+w), c += a (2r+w)

    copy_s = min(_run_threads(threads, copy) for _ in range(repeat))
    triad_s = min(_run_threads(threads, triad) for _ in range(repeat))
    bytes_each = n * 8
    copy_gbs = threads * 2 * bytes_each / copy_s / 1e9
    triad_gbs = threads * 5 * bytes_each / triad_s / 1e9
    return {"threads": threads, "copy_gbs": copy_gbs, "triad_gbs": triad_gbs, "stream_gbs": max(copy_gbs, triad_gbs)}


def stream_table(thread_counts: list[int], mib_per_thread: int = 64) -> list[dict[str, float]]:
    return [stream_bandwidth(t, mib_per_thread) for t in thread_counts]


if __name__ == "__main__":
    print(json.dumps(describe(), indent=2))
    for row in stream_table(list(range(1, (os.cpu_count() or 1) + 1))):
        print(f"threads {row['threads']:2d}  copy {row['copy_gbs']:6.1f} GB/s  triad {row['triad_gbs']:6.1f} GB/s")
