"""Machine description and the limits benchmarks are measured against, in the same run.

* :func:`describe` -- CPU model, cores, caches, memory, ISA backends, library versions,
  git commit and the load average (a loaded machine explains slow numbers).
* :func:`stream_bandwidth` -- a STREAM-like copy and triad in numpy over ``threads``
  Python threads (numpy releases the GIL inside large array operations), in GB/s counted
  as bytes read + written, on arrays larger than the last-level cache (best of several).
* :func:`median_time` / :func:`best_time` -- the median / shortest wall time of repeated calls.
* :func:`median_cpu` -- a call's result and the median process CPU time of repeated calls.
* :func:`c_loops` -- plain C loops (a scalar histogram, a streaming read) built with the
  system C compiler, the yardsticks of bench/limits.py and bench/grr_server.py.

Used by ``bench/run_all.py`` and the scaling scripts; runnable alone:

    PYTHONPATH=python python3 bench/machine.py
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Any, Callable, Optional, Tuple

import numpy as np


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def best_time(fn: Callable[[], object], repeat: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """The shortest time of repeated calls (other processes add time, never remove it): wall
    time, or with ``clock=time.thread_time`` the calling thread's CPU time (on a loaded
    machine: the time slices other processes take are left out, their cache and memory
    traffic are not)."""
    times = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return min(times)


def median_cpu(fn: Callable[..., Any], *args: Any, repeat: int = 1, **kwargs: Any) -> Tuple[Any, float]:
    """``(fn(*args, **kwargs), median process CPU seconds over repeat calls)``."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn(*args, **kwargs)
        times.append(time.process_time() - t0)
    return out, float(np.median(times))


_C_LOOPS = r"""
#include <stddef.h>
#include <stdint.h>
void histogram(const uint64_t* y, size_t n, uint64_t* counts) {
  for (size_t i = 0; i < n; ++i) ++counts[y[i]];
}
uint64_t read_sum(const uint64_t* a, size_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) { s0 += a[i]; s1 += a[i + 1]; s2 += a[i + 2]; s3 += a[i + 3]; }
  for (; i < n; ++i) s0 += a[i];
  return s0 + s1 + s2 + s3;
}
"""


class CLoops:
    """The loops of ``_C_LOOPS`` on numpy arrays (no checks beyond dtypes: ``histogram``
    trusts every ``y`` to be below ``len(counts)``)."""

    def __init__(self, lib: ctypes.CDLL):
        self._lib = lib
        u64p, size = ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t
        lib.histogram.argtypes, lib.histogram.restype = [u64p, size, u64p], None
        lib.read_sum.argtypes, lib.read_sum.restype = [u64p, size], ctypes.c_uint64

    @staticmethod
    def _pointer(a: np.ndarray) -> Any:
        assert a.dtype == np.uint64 and a.flags.c_contiguous
        return a.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64))

    def histogram(self, y: np.ndarray, counts: np.ndarray) -> None:
        """``counts[y[i]] += 1`` (scalar loop, ``cc -O2``)."""
        self._lib.histogram(self._pointer(y), y.size, self._pointer(counts))

    def histogram_call(self, y: np.ndarray, counts: np.ndarray) -> Callable[[], None]:
        """:meth:`histogram` bound to its arrays: the numpy-to-ctypes conversions (several
        microseconds, more than the loop itself on 1e4 values) are done once here."""
        y_ptr, counts_ptr, n = self._pointer(y), self._pointer(counts), y.size
        return lambda: self._lib.histogram(y_ptr, n, counts_ptr)

    def read_sum(self, a: np.ndarray) -> int:
        """The sum of ``a`` (one sequential read)."""
        return int(self._lib.read_sum(self._pointer(a), a.size))


def c_loops() -> Optional[CLoops]:
    """:class:`CLoops` built with the system C compiler (``cc -O2``), or None without one."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return None
    with tempfile.TemporaryDirectory(prefix="ldpfast-bench-") as build:  # a loaded library outlives its file
        source, library = os.path.join(build, "loops.c"), os.path.join(build, "loops.so")
        with open(source, "w") as f:
            f.write(_C_LOOPS)
        done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", library, source], capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            print(f"bench: cannot build the C yardsticks ({compiler}): {done.stderr.strip()}")
            return None
        return CLoops(ctypes.CDLL(library))


def read_bandwidth(loops: Optional[CLoops], mib: int = 256, repeat: int = 5,
                   clock: Callable[[], float] = time.perf_counter) -> float:
    """Single-thread sequential read bandwidth in GB/s over an array larger than the
    last-level cache: the C read loop, else numpy's sum (best of ``repeat``, timed by ``clock``)."""
    a = np.ones(mib * 2**20 // 8, dtype=np.uint64)
    read = (lambda: loops.read_sum(a)) if loops else (lambda: a.sum())
    return a.nbytes / best_time(read, repeat, clock) / 1e9


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
