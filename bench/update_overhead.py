"""Cost of ``update`` per batch: time and peak memory, against the bare kernel and against
other builds of ldpfast, all measured in the same run.

* **HRR end to end vs the bare kernel**: ``HRRServer.update`` (checks, in-place commit
  with the report counts) against ``_core.hadamard_update`` adding the same batch into a
  preallocated vector, at d = 2^12 .. 2^24 with 1e4- and 1e6-report batches. Target:
  ratio <= 1.15. Column ``floor``: the least Python around the kernel (snapshot, one-call
  column check, lock, kernel; no type, fingerprint or memory-budget check) over the kernel,
  the ratio no Python template can beat. Also the update with the batch copied into library
  memory first (the alternative to the kernel reading each value once from the caller's
  columns).
* **A one-report update at d = 2^27** (GRR, HRR, RHR): milliseconds and bytes allocated
  (tracemalloc: numpy's allocations; peak RSS above the resident size before the call:
  the C++ scratch too). Target: under 10 ms and 10 MB.
* **Every protocol**: update of its example batch tiled to ~1e5 reports (steady state, on
  a server that already holds 20 batches).

With ``--baseline DIR`` (a directory holding another build's ``ldpfast`` package, e.g.
an unpacked wheel of an older commit), every measurement also runs on that build, each
in fresh processes for both builds, alternating baseline and current ``--rounds`` times
per row (the best of each is kept), and the table shows the speed ratio ``baseline time
/ current time`` (> 1: current faster) and both peak memories. Peak memory is the growth
of the peak resident size during one update (``/proc/self/clear_refs`` resets the peak
first; Linux).

    PYTHONPATH=python python bench/update_overhead.py [--baseline DIR] [--repeat 5] [--rounds 3]
        [--only hrr,one,protocols]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

WORKER_PRELUDE = """
import sys
if {path!r}:
    # another build: drop the editable-install finder that would import this checkout
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()]
    sys.path.insert(0, {path!r})
"""


def _peak_reset() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _vm(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _measure(job: dict) -> dict:
    """Runs one measurement in this (fresh) process; returns seconds and bytes."""
    import tracemalloc

    import numpy as np

    from ldpfast import _core

    repeat, kind = job["repeat"], job["kind"]
    if kind == "hrr":
        H = _protocol_module("hadamard")

        params = H.HRRParams(epsilon=1.0, d=2 ** job["log2d"])
        batch = H.HRRClient(params, rng=1).perturb(np.random.default_rng(1).integers(0, params.d, job["n"]))
        server = H.HRRServer(params)
        run = lambda: server.update(batch)  # noqa: E731
        out = {}
        if job.get("kernel") and hasattr(_core, "hadamard_update"):
            layout = params.layout()
            z = np.zeros(layout.n_cells, np.int64)
            rows, base = np.ascontiguousarray(layout.rows), np.ascontiguousarray(layout.table[:, 5])
            kernel = lambda: _core.hadamard_update(None, batch.rows, batch.bits, rows, base, z, 0)  # noqa: E731
            out["kernel"] = _best(kernel, repeat, job["inner"])
            plain = getattr(type(batch), "_plain_spec", lambda: None)()
            if plain is not None and hasattr(_core, "plain_columns_length"):
                out["floor"] = _best(_floor_update(server, batch, plain), repeat, job["inner"])
        # interleave update and kernel timings: alternate rounds
        out["update"] = _best(run, repeat, job["inner"])
        if "kernel" in out:
            out["kernel"] = min(out["kernel"], _best(kernel, repeat, job["inner"]))
            # the alternative to the kernel reading each value once: copying the batch first
            server._reads_once = False
            out["copy_first"] = _best(run, repeat, job["inner"])
            server._reads_once = True
        out.update(_peak(run))
        return out
    if kind == "one":
        server, client = _one_report_server(job["protocol"], job["log2d"])
        one = client.perturb(np.array([3]))
        server.update(one)  # warm: imports, caches
        tracemalloc.start()
        start = time.perf_counter()
        server.update(one)
        seconds = time.perf_counter() - start
        traced = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return {"update": min(seconds, _best(lambda: server.update(one), repeat, 1)), "traced": traced,
                **_peak(lambda: server.update(one))}
    if kind == "protocol":
        import warnings

        from ldpfast._base import protocols

        warnings.simplefilter("ignore")
        proto = protocols()[job["protocol"]]
        params, values = proto.example()
        reports = proto.client(params, rng=1).perturb(values)
        times = max(1, job["reports"] // len(reports))
        columns = {k: np.concatenate([v] * times) for k, v in reports.columns().items()}
        batch = type(reports).from_columns(columns)
        server = proto.aggregator(params)
        for _ in range(20):
            server.update(batch)
        return {"update": _best(lambda: server.update(batch), repeat, 1),
                "cpu": _best(lambda: server.update(batch), repeat, 1, time.process_time), "n": len(batch),
                **_peak(lambda: server.update(batch))}
    raise ValueError(kind)


def _floor_update(server, batch, plain):
    """The least an update can do in Python around the kernel: a shallow snapshot of the
    batch, its columns checked in one C++ call, the server's lock, the kernel adding into
    the state with the report counts; no type, fingerprint or memory-budget check."""
    from ldpfast import _core

    layout, st, lock = server.params.layout(), server._st, server._lock

    def floor() -> None:
        snapshot = object.__new__(type(batch))
        snapshot.__dict__.update(batch.__dict__)
        _core.plain_columns_length(snapshot.__dict__, *plain)
        with lock:
            _core.hadamard_update(snapshot.groups, snapshot.rows, snapshot.bits, layout.group_rows, layout.cell_base,
                                  st["z"], server.threads, st["group_sizes"], st["n"])

    return floor


def _protocol_module(name: str):
    """``ldpfast.protocols.frequency.<name>``, or the home of a build that predates it
    (``ldpfast.protocols.<name>``, ``ldpfast.<name>``)."""
    import importlib

    for home in (f"ldpfast.protocols.frequency.{name}", f"ldpfast.protocols.{name}"):
        try:
            return importlib.import_module(home)
        except ImportError:
            pass
    return importlib.import_module(f"ldpfast.{name}")


def _one_report_server(protocol: str, log2d: int):
    grr, hadamard, rhr = (_protocol_module(name) for name in ("grr", "hadamard", "rhr"))
    if protocol == "grr":
        # GRRParams, ...: the names since the <Protocol><Role> rule; Params, ... before it
        params_type, server_type, client_type = (getattr(grr, f"GRR{role}", None) or getattr(grr, role)
                                                 for role in ("Params", "Server", "Client"))
        params = params_type(epsilon=1.0, d=2**log2d)
        return server_type(params), client_type(params, rng=1)
    if protocol == "hrr":
        params = hadamard.HRRParams(epsilon=1.0, d=2**log2d)
        return hadamard.HRRServer(params), hadamard.HRRClient(params, rng=1)
    params = rhr.RHRParams(epsilon=1.0, d=2**log2d)
    return rhr.RHRServer(params), rhr.RHRClient(params, rng=1)


def _best(fn, repeat: int, inner: int, clock=time.perf_counter) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        for _ in range(inner):
            fn()
        best = min(best, (clock() - start) / inner)
    return best


def _peak(fn) -> dict:
    """Peak resident growth (bytes) during one call of fn."""
    _peak_reset()
    before = _vm("VmRSS")
    fn()
    return {"peak": max(0, _vm("VmHWM") - before)}


def _run(job: dict, path: str) -> dict:
    code = WORKER_PRELUDE.format(path=path) + (
        "import json, sys\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        "import update_overhead as bench\n"
        "print(json.dumps(bench._measure(json.loads(sys.argv[1]))))\n")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(job)], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"rc {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _mib(nbytes) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:.1f}"


def _ratio(seconds, kernel) -> str:
    return "-" if seconds is None else f"{seconds / kernel:.2f}"


def _ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="", help="directory holding another build's ldpfast package")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per build and row, alternating")
    ap.add_argument("--only", default="hrr,one,protocols")
    args = ap.parse_args()
    only = set(args.only.split(","))
    base = os.path.abspath(args.baseline) if args.baseline else ""

    def both(job):
        """Baseline and current build, alternating ``--rounds`` times; the best of each
        measure (a loaded machine slows some processes more than others)."""
        before: dict = {}
        now: dict = {}
        builds = ((before, base), (now, "")) if base else ((now, ""),)
        for _ in range(args.rounds):
            for out, path in builds:
                got = _run(job, path)
                for key, value in got.items():
                    if isinstance(value, (int, float)) and key in out and key not in ("n",):
                        out[key] = min(out[key], value)
                    else:
                        out.setdefault(key, value)
        return before, now

    import ldpfast

    info = ldpfast.backend_info()
    print(f"backend = {info['active']}, threads = {info['threads']}, cpus = {os.cpu_count()}, "
          f"load = {os.getloadavg()[0]:.1f}, baseline = {base or 'none'}")
    if "hrr" in only:
        print("\nHRR update per batch: end to end vs the bare kernel (same process), vs copying the batch before "
              "the kernel\n(instead of the kernel reading each value once), and vs the baseline build")
        print(f"{'d':>5} {'batch':>9} {'update ms':>10} {'kernel ms':>10} {'ratio':>6} {'floor':>6} {'copy 1st':>9} | "
              f"{'base ms':>9} {'speedup':>7} | {'peak MiB':>8} {'base MiB':>8}")
        for log2d in (12, 16, 20, 24):
            for n in (10_000, 1_000_000):
                job = {"kind": "hrr", "log2d": log2d, "n": n, "repeat": args.repeat, "kernel": True,
                       "inner": max(1, 200_000 // n)}
                before, now = both(job)
                if "error" in now:
                    print(f"2^{log2d:<3} {n:>9,} error: {now['error']}")
                    continue
                b = before.get("update")
                print(f"2^{log2d:<3} {n:>9,} {_ms(now['update']):>10} {_ms(now['kernel']):>10} "
                      f"{now['update'] / now['kernel']:>6.2f} {_ratio(now.get('floor'), now['kernel']):>6} "
                      f"{_ms(now['copy_first']):>9} | {_ms(b):>9} "
                      f"{(b / now['update']) if b else float('nan'):>7.2f} | {_mib(now['peak']):>8} "
                      f"{_mib(before.get('peak')):>8}")
    if "one" in only:
        print("\nOne-report update at d = 2^27 (target: < 10 ms, < 10 MB)")
        print(f"{'protocol':>8} {'ms':>9} {'traced MiB':>10} {'peak MiB':>8} | {'base ms':>9} {'base traced':>11} "
              f"{'base peak':>9}")
        for protocol in ("grr", "hrr", "rhr"):
            before, now = both({"kind": "one", "protocol": protocol, "log2d": 27, "repeat": args.repeat})
            if "error" in now:
                print(f"{protocol:>8} error: {now['error']}")
                continue
            print(f"{protocol:>8} {_ms(now['update']):>9} {_mib(now['traced']):>10} {_mib(now['peak']):>8} | "
                  f"{_ms(before.get('update')):>9} {_mib(before.get('traced')):>11} {_mib(before.get('peak')):>9}")
    if "protocols" in only:
        from ldpfast._base import protocols

        print("\nEvery protocol: update of ~1e5 reports on a server holding 20 such batches (wall and CPU "
              "time: the best of the repeats)")
        print(f"{'protocol':>18} {'reports':>8} {'ms':>9} {'cpu ms':>9} {'peak MiB':>8} | {'base ms':>9} "
              f"{'base cpu':>9} {'cpu speedup':>11} {'base MiB':>8}")
        for pid in sorted(protocols()):
            before, now = both({"kind": "protocol", "protocol": pid, "reports": 100_000, "repeat": args.repeat})
            if "error" in now:
                print(f"{pid:>18} error: {now['error']}")
                continue
            b = before.get("cpu")
            print(f"{pid:>18} {now['n']:>8} {_ms(now['update']):>9} {_ms(now['cpu']):>9} {_mib(now['peak']):>8} | "
                  f"{_ms(before.get('update')):>9} {_ms(b):>9} {(b / now['cpu']) if b else float('nan'):>11.2f} "
                  f"{_mib(before.get('peak')):>8}")


if __name__ == "__main__":
    main()
