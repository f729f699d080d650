"""Every server's throughput as a fraction of the machine's own limits, measured in the same run.

Limits (one thread; bench/machine.py):

* read: sequential read bandwidth, a C loop summing 256 MiB (numpy's sum without a C
  compiler), GB/s;
* scatter: increments/s of the plain C loop ``counts[y[i]]++`` over uniform ``y``, for
  a table of the server's size (L1/L2-resident tables are faster than large ones).

A server cannot ingest reports faster than it reads their bytes: column ``of read`` is
its throughput over ``read / bytes per report`` (bytes per report: the batch's report
columns' nbytes over its length). Servers that make one random increment per report (the
histogram servers: GRR, L-GRR, Square Wave; the Hadamard cell servers: HRR, HE, CMS+HE,
HadaOracle, HadaHeavy, RHR) are also compared with the C scatter loop over a uint64 table
of their state's size (column ``of scatter``; above 1 where the server counts smarter,
e.g. HRR's narrow tables). Every server runs with threads=1 (``ldpfast.set_num_threads(1)``
and ``threads=1`` where its constructor takes it).

Special rows, two sizes each:

* GRR: a uint64 symbol per report, one increment into ``d`` uint64 counters;
* OUE: a row of ``d`` bits per report counted column by column, no scatter; its bare kernel
  (``_core.bitvec_column_counts``) is timed too (column ``of kernel``: update time over
  kernel time is its inverse);
* HRR: a uint32 row and an int8 sign per report, one increment into ``d`` int64 cells.

Every other registered protocol, grouped by family, at epsilon = 1 (eps_1 = 1 for the
memoized protocols, eps_inf as in the registry's example) and dictionary size ``--d`` (the
next power of two, then the example's ``d``, where the Params refuse it): built by the
Params' ``create`` (sized for ``n`` users) or ``optimal`` where they have one, else from the
example's required fields with the others at their defaults. Records, numbers, RAPPOR and
1-bit mean keep the example's domains, bounds, attributes and RAPPOR's p, q, f. Inputs:
uniform values in ``[0, d)``; sets and key-value pairs of 0 to 4 distinct items of ``[0, d)``
(values uniform in [-1, 1]); records and numbers drawn from the example's. The seeded
client perturbs up to ``BLOCK`` users (fewer where that would take more than
``CLIENT_SECONDS``), repeated to a batch of ``8 n`` bytes or ``n``
reports, whichever is fewer, and fewer where one update would take more than a third of
``--budget`` (column ``batch``); none of this is timed. Each timed update is given a new
server, built untimed (a server that keeps its reports would otherwise grow by a batch per
call). A protocol whose Params, client or
server refuse this setting is listed with the reason instead of a row.

With ``--clock cpu`` every time is the thread's CPU time rather than wall time (on a shared,
loaded machine the time slices other processes take are then left out; their cache and
memory traffic still count). The load average is printed with the table.

    PYTHONPATH=python python3 bench/limits.py [--n 16777216] [--d 10000] [--budget 0.5]
        [--clock wall|cpu] [--only grr,olh,...]
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
import warnings
from functools import partial
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence

import numpy as np

import ldpfast
from ldpfast import _core
from ldpfast._registry import Protocol, protocols
from ldpfast._params import Params
from ldpfast._reports import Reports
from ldpfast.errors import LdpfastError
from ldpfast.protocols._hadamard_layout import LayoutServer
from ldpfast.protocols._histogram import HistogramServer
from ldpfast.protocols.frequency import grr, hadamard, rhr, unary

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402  (found through sys.path above)


CLOCK: Callable[[], float] = time.perf_counter
#: Users the client perturbs per batch at most, and seconds it may take (the batch repeats
#: them; not timed).
BLOCK = 1 << 18
CLIENT_SECONDS = 1.0
#: The protocols measured by the special rows, not by a generic one.
SPECIAL = ("grr", "oue", "hrr")
FAMILIES = ("frequency", "heavy", "numeric", "sets", "multiattribute", "repeated")


def best(fn: Callable[[], object], budget: float, setup: Optional[Callable[[], object]] = None) -> float:
    """The best time of as many calls as fit ``budget`` seconds (3 to 100) after one untimed
    call; ``setup`` runs untimed before each call."""
    if setup is None:
        once = machine.best_time(fn, 1, CLOCK)
        return machine.best_time(fn, int(min(100, max(3, budget / max(once, 1e-6)))), CLOCK)

    def timed() -> float:
        setup()
        start = CLOCK()
        fn()
        return CLOCK() - start

    once = timed()
    return min(timed() for _ in range(int(min(100, max(3, budget / max(once, 1e-6))))))


def scatter_rate(loops: Optional[machine.CLoops], size: int, n: int, budget: float) -> Optional[float]:
    """Increments/s of the C histogram loop over ``n`` uniform values into ``size`` counters."""
    if loops is None:
        return None
    y = np.random.default_rng(size).integers(0, size, n, dtype=np.uint64)
    counts = np.zeros(size, dtype=np.uint64)
    return n / best(lambda: loops.histogram(y, counts), budget)


class Row(NamedTuple):
    """One server to time: ``update()`` ingests ``reports`` reports of ``nbytes`` bytes in
    all; ``table``: the size of the state a one-increment-per-report server scatters into
    (None: not such a server); ``kernel``: its bare kernel, or None; ``setup``: what runs
    untimed before each update, or None."""

    name: str
    reports: int
    update: Callable[[], object]
    nbytes: int
    table: Optional[int] = None
    kernel: Optional[Callable[[], object]] = None
    setup: Optional[Callable[[], object]] = None


class FreshServer:
    """``setup()`` builds a new server, ``update()`` gives it the batch: a server that keeps
    its reports (OLH, OCMS, ...) does not grow over repeated calls."""

    def __init__(self, make: Callable[[], Any], batch: Reports):
        self.make, self.batch, self.server = make, batch, make()

    def setup(self) -> None:
        self.server = None   # the previous server's memory is free before the next is built
        self.server = self.make()

    def update(self) -> None:
        self.server.update(self.batch)


class NotRun(Exception):
    """A protocol whose update cannot be run generically (the message says why)."""


def report_bytes(batch: Reports) -> int:
    return sum(column.nbytes for column in batch.columns().values())


def special(pid: str, n: int) -> Iterator[Row]:
    """GRR, OUE and HRR at two sizes each, each batch ``8 n`` bytes or ``n`` reports (larger
    than the last-level cache for the default n: read from memory, like the bandwidth)."""
    values = np.random.default_rng(1).integers(0, 1 << 20, n)
    if pid == "grr":
        for d in (10_000, 100_000):
            params = grr.GRRParams(epsilon=1.0, d=d)
            reports = grr.GRRClient(params, rng=1).perturb(values % d)
            yield Row(f"grr d={d}", n, partial(grr.GRRServer(params).update, reports), report_bytes(reports), d)
    elif pid == "oue":
        for d in (10_000, 100_000):
            rows = 64 * n // d  # 8 n bytes of rows
            oue = unary.OUEParams(epsilon=1.0, d=d)
            bits = unary.OUEClient(oue, rng=1).perturb(values[:rows] % d)
            kernel = partial(_core.bitvec_column_counts, bits.bits, d, None, 1, 1)
            yield Row(f"oue d={d}", rows, partial(unary.OUEServer(oue, threads=1).update, bits), report_bytes(bits),
                      None, kernel)
    elif pid == "hrr":
        for log_d in (16, 20):
            hrr = hadamard.HRRParams(epsilon=1.0, d=1 << log_d)
            batch = hadamard.HRRClient(hrr, rng=1).perturb(values % (1 << log_d))
            yield Row(f"hrr d=2^{log_d}", n, partial(hadamard.HRRServer(hrr, threads=1).update, batch),
                      report_bytes(batch), 1 << log_d)


def _build(proto: Protocol, example: Params, d: Optional[int], n: int) -> Params:
    """The Params at epsilon (or eps_1) = 1 for ``n`` users and dictionary size ``d`` (None:
    the example's domain): through the class's ``create`` (sized for ``n`` users) or
    ``optimal`` where it has one, else from the example's required fields (the optional
    ones at their defaults, which follow ``d``)."""
    given = example.to_dict()
    size = {} if d is None else {"d": d}
    for name in ("create", "optimal"):
        factory = getattr(proto.Params, name, None)
        if factory is not None:
            takes = inspect.signature(factory).parameters
            options = {"epsilon": 1.0, "domains": given.get("domains"), "n": n, "seed": 1, "d": given.get("d"),
                       **size}
            return factory(**{key: value for key, value in options.items() if key in takes})
    required = [name for name, field in inspect.signature(proto.Params).parameters.items()
                if field.default is inspect.Parameter.empty]
    if not required:   # RAPPOR: every field has a default; the example's describe its deployment
        return example
    fields = {name: given[name] for name in required}
    fields.update({key: 1.0 for key in ("epsilon", "eps_1") if key in fields})
    return proto.Params(**{**fields, **(size if "d" in fields else {})})


def configured(proto: Protocol, d: int, n: int) -> Params:
    """The protocol's parameters for this table (see :func:`_build`): dictionary size ``d``,
    else the next power of two, else the example's, whichever the Params accept first."""
    example, _ = proto.example()
    if getattr(example, "d", None) is None or "domains" in example.to_dict():
        return _build(proto, example, None, n)
    refusals = []
    for size in dict.fromkeys((d, 1 << (d - 1).bit_length(), int(example.d))):
        try:
            return _build(proto, example, size, n)
        except LdpfastError as exc:
            refusals.append(f"d={size}: {exc}")
    raise NotRun("; ".join(refusals))


def _distinct_items(rng: np.random.Generator, users: int, d: int) -> Dict[str, np.ndarray]:
    """0 to 4 distinct items of ``[0, d)`` per user: ``s + j t mod d`` for ``j`` below the
    user's count, with ``1 <= t <= d / 4`` (so ``j t < d``: distinct)."""
    counts = rng.integers(0, 5, users)
    offsets = np.concatenate(([0], np.cumsum(counts)))
    owner = np.repeat(np.arange(users), counts)
    rank = np.arange(offsets[-1]) - offsets[owner]
    start, step = rng.integers(0, d, users), rng.integers(1, max(2, d // 4 + 1), users)
    items = ((start[owner] + rank * step[owner]) % d).astype(np.uint64)
    return {"offsets": offsets, "items": items}


def inputs(proto: Protocol, params: Params, users: int, seed: int = 1) -> Any:
    """``users`` client inputs for ``params`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    d = getattr(params, "d", None)
    if proto.inputs == "values" and d is not None:
        return rng.integers(0, d, users)
    if proto.inputs in ("sets", "pairs"):
        drawn = _distinct_items(rng, users, int(params.d))
        if proto.inputs == "sets":
            return drawn["offsets"], drawn["items"]
        return drawn["offsets"], drawn["items"], rng.uniform(-1.0, 1.0, drawn["items"].size)
    example = np.asarray(proto.example()[1])
    return example[rng.integers(0, len(example), users)]


def repeated(batch: Reports, count: int) -> Reports:
    """The first ``count`` reports of ``batch`` repeated (every column has one row per report)."""
    if count == len(batch):
        return batch
    times = -(-count // len(batch))
    return type(batch).from_columns({k: np.concatenate([v] * times)[:count] for k, v in batch.columns().items()})


def scatter_table(server: Any) -> Optional[int]:
    """The number of cells a one-increment-per-report server counts into, else None."""
    if isinstance(server, HistogramServer):
        return int(server.histogram_size(server.params))
    if isinstance(server, (LayoutServer, rhr.RHRServer)):
        return int(server._st["z"].size)
    return None


def describe(proto: Protocol, params: Params) -> str:
    """``id`` and the configuration's size: the record domains, ``d``, the attributes or ``m``."""
    fields = params.to_dict()
    for key in ("domains", "d", "attributes", "m"):
        value = fields.get(key)
        if value is not None:
            shown = "x".join(map(str, value)) if isinstance(value, (tuple, list)) else value
            return f"{proto.id} {key}={shown}"
    return proto.id


def generic(proto: Protocol, n: int, d: int, budget: float) -> Row:
    """One row for any registered protocol (see the module docstring): raises NotRun with
    the reason where it cannot be built or updated."""
    try:
        params = configured(proto, d, n)
        client = proto.Client(params, rng=1)
        takes_threads = "threads" in inspect.signature(proto.Server).parameters
        make = partial(proto.Server, params, threads=1) if takes_threads else partial(proto.Server, params)
        server = make()
        probe_users = 64
        while True:  # the client's and the update's rates on growing batches (slow ones: a few reports)
            start = time.perf_counter()
            probe = client.perturb(inputs(proto, params, probe_users))
            perturbing = time.perf_counter() - start
            server.update(probe)
            seconds = max(machine.best_time(partial(server.update, probe), 3, CLOCK), 1e-7)
            if seconds > budget / 30 or perturbing * 16 > CLIENT_SECONDS or probe_users >= BLOCK:
                break
            probe_users *= 16
        per_report = report_bytes(probe) / len(probe)
        wanted = max(1, min(n, int(8 * n / per_report), int(len(probe) * budget / 3 / seconds)))
        affordable = max(probe_users, int(probe_users * CLIENT_SECONDS / max(perturbing, 1e-7)))
        users = max(1, min(BLOCK, affordable, wanted * probe_users // len(probe)))
        batch = repeated(client.perturb(inputs(proto, params, users, seed=2)), wanted)
    except (LdpfastError, TypeError, ValueError) as exc:
        raise NotRun(f"{type(exc).__name__}: {exc}") from None
    fresh = FreshServer(make, batch)
    return Row(describe(proto, params), len(batch), fresh.update, report_bytes(batch), scatter_table(server),
               setup=fresh.setup)


def family(proto: Protocol) -> str:
    """The package a built-in protocol lives in (``frequency``, ``sets``, ...), else "plug-in"."""
    return proto.module.split(".")[2] if proto.builtin else "plug-in"


def selected(only: Optional[str]) -> List[Protocol]:
    """The protocols to measure, by family (``--only``: ids or aliases, comma-separated)."""
    known = protocols()
    ids = list(known) if only is None else [ldpfast.protocol(name.strip()).id for name in only.split(",")]
    order = {name: i for i, name in enumerate(FAMILIES)}
    return sorted((known[pid] for pid in dict.fromkeys(ids)), key=lambda proto: order.get(family(proto), len(order)))


def table(chosen: Sequence[Protocol], args: argparse.Namespace, loops: Optional[machine.CLoops],
          read_gbs: float) -> None:
    print(f"{'server':>24} {'batch':>9} {'B/report':>8} {'reports/s':>10} {'GB/s':>6} {'of read':>7} "
          f"{'scatter/s':>10} {'of scatter':>10} {'of kernel':>9}")
    heading = None
    for proto in chosen:
        if family(proto) != heading:
            heading = family(proto)
            print(f"-- {heading}")
        try:
            rows = list(special(proto.id, args.n)) if proto.id in SPECIAL else [
                generic(proto, args.n, args.d, args.budget)]
        except NotRun as exc:
            print(f"{proto.id:>24} not run: {exc}", flush=True)
            continue
        for row in rows:
            seconds = best(row.update, args.budget, row.setup)
            rate = row.reports / seconds
            gbs = row.nbytes / seconds / 1e9
            scatter = scatter_rate(loops, row.table, min(args.n, max(row.reports, 1 << 20)), args.budget) \
                if row.table else None
            versus = f"{scatter:10.3g} {rate / scatter:10.2f}" if scatter else f"{'-':>10} {'-':>10}"
            of_kernel = f"{best(row.kernel, args.budget) / seconds:9.2f}" if row.kernel else f"{'-':>9}"
            print(f"{row.name:>24} {row.reports:9d} {row.nbytes / row.reports:8.4g} {rate:10.3g} {gbs:6.2f} "
                  f"{gbs / read_gbs:7.2f} {versus} {of_kernel}", flush=True)


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 24, help="reports per GRR/HRR batch (8 n bytes per batch at most)")
    ap.add_argument("--d", type=int, default=10_000, help="dictionary size of the generic rows")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time calls by wall time or by the thread's CPU time")
    ap.add_argument("--only", help="protocol ids (or aliases), comma-separated (default: every registered one)")
    args = ap.parse_args(argv)
    for name, value, least in (("n", args.n, 1), ("d", args.d, 2), ("budget", args.budget, 1e-9)):
        if value < least:
            ap.error(f"--{name} must be at least {least:g}, got {value:g}")
    global CLOCK
    CLOCK = time.thread_time if args.clock == "cpu" else time.perf_counter
    try:
        chosen = selected(args.only)
    except LdpfastError as exc:
        ap.error(str(exc))
    warnings.simplefilter("ignore")   # the deprecation notes of the older protocols' names
    ldpfast.set_num_threads(1)
    loops = machine.c_loops()
    read_gbs = machine.read_bandwidth(loops, clock=CLOCK)
    info = ldpfast.backend_info()
    print(f"limits: backend = {info['active']}, threads = 1, clock = {args.clock}, n = {args.n}, d = {args.d}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"read bandwidth: {read_gbs:.2f} GB/s ({'C loop' if loops else 'numpy sum'})")
    table(chosen, args, loops, read_gbs)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
