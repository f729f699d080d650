"""What the Spark tasks of :mod:`ldpfast.spark` run on the executors: the rows every
stage emits (partial aggregators in pieces or spilled to files, error and file records)
and where Spark's hash partitioning puts them, the fold of report files and of Spark's
Arrow batches (converted back to report columns), and the merge of partials."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import uuid
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Type

import numpy as np

from .._base import Aggregator, Params, Protocol, Reports, params_from_json, protocol
from ..arrow import FINGERPRINT_COLUMN, check_fingerprint_column
from ..errors import DTypeError, FormatError, IncompatibleError, LdpfastError, ParameterError, ReportError

# What a task reports instead of raising: deterministic, a retry cannot pass.
_DATA_ERRORS = (ReportError, IncompatibleError, FormatError, DTypeError, ParameterError)

# Every stage's output, one row per piece: ``dest`` places the row in the next shuffle,
# ``part`` names the partial aggregator at its level, ``kind`` says what ``data`` holds.
_ROWS = "dest long, part long, piece int, pieces int, kind tinyint, data binary"
_STATE, _ERROR, _FILE, _SPILLED = 0, 1, 2, 3  # _SPILLED: data is the path of a partial's bytes

_PIECE_BYTES = 8 << 20      # bytes of one piece of a partial's bytes
_FETCH_BYTES = 64 << 20     # bytes the driver fetches per Spark job (default driver heap: 1 GiB)
_FETCH_PARTITIONS = 128     # partitions of the last shuffle, from which the driver fetches


# -- where rows go: Spark's hash partitioning, reproduced ---------------------------------------
_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _murmur3_mix(h1: int, k1: int) -> int:
    k1 = (_rotl32((k1 * 0xCC9E2D51) & _M32, 15) * 0x1B873593) & _M32
    return (_rotl32(h1 ^ k1, 13) * 5 + 0xE6546B64) & _M32


def _spark_hash_long(value: int, seed: int = 42) -> int:
    """Spark SQL's ``hash()`` of a bigint (Murmur3 x86 32-bit, seed 42), which
    ``DataFrame.repartition(n, column)`` reduces modulo ``n`` to choose a partition."""
    value &= 0xFFFFFFFFFFFFFFFF
    h1 = _murmur3_mix(_murmur3_mix(seed, value & _M32), value >> 32) ^ 8
    h1 = ((h1 ^ (h1 >> 16)) * 0x85EBCA6B) & _M32
    h1 = ((h1 ^ (h1 >> 13)) * 0xC2B2AE35) & _M32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


@functools.lru_cache(maxsize=64)
def _keys(partitions: int) -> Tuple[int, ...]:
    """For each partition p of a ``repartition(partitions, "dest")``, a key that Spark
    places in p (the smallest such non-negative integer). A wrong key would only unbalance
    the tasks: every consumer groups rows by ``part``, wherever they land."""
    keys: List[Optional[int]] = [None] * partitions
    missing, key = partitions, 0
    while missing:
        slot = _spark_hash_long(key) % partitions
        if keys[slot] is None:
            keys[slot] = key
            missing -= 1
        key += 1
    return tuple(k for k in keys if k is not None)


@dataclasses.dataclass(frozen=True)
class _Exchange:
    """The shuffle after a stage, ``repartition(partitions, "dest")``. ``merge``: partial
    ``part`` goes to partition ``part // fan_in`` (modulo ``partitions``, should a stage
    have more partials than planned), whose task merges all it receives into one.
    ``fetch``: piece 0 of every partial, and every error and file record, to partition 0;
    the other pieces spread over the others, from where the driver fetches them."""

    mode: str
    partitions: int
    fan_in: int = 1
    parts: int = 1  # partials entering a fetch exchange

    def target(self, part: int, piece: int) -> int:
        if self.mode == "merge":
            return (part // self.fan_in) % self.partitions
        if piece == 0:
            return 0
        return 1 + (part + (piece - 1) * self.parts) % (self.partitions - 1)

    def dest(self, part: int, piece: int) -> int:
        return _keys(self.partitions)[self.target(part, piece)]


@dataclasses.dataclass(frozen=True)
class _Job:
    """What every task needs (pickled into the closures Spark ships). The empty aggregator
    travels as its parameters when it is the plain ``Server(params)`` (its state may be
    large: a GRR server over d = 2^27 values is 1 GiB of zeros), else as its bytes (e.g.
    OCMS candidates)."""

    kind: Type[Aggregator]     # the aggregator class
    params_json: str
    zero: Optional[bytes]      # None: ``kind(params)``
    piece_bytes: int
    batch_rows: int
    hash_files: bool = False   # files route: record (size, sha256) of each file read
    files: Tuple[Tuple[str, ...], ...] = ()  # files route: the files of each task
    spill: Optional[str] = None  # a directory every task and the driver reach: partials go there

    def empty(self, domain: Any = None) -> Aggregator:
        """The empty aggregator; ``domain``: the label domain to reattach (bytes and JSON
        know a vocabulary by its fingerprint only)."""
        if self.zero is not None:
            return self.kind.from_bytes(self.zero, domain=domain)
        params = params_from_json(self.params_json)
        return self.kind(params if domain is None else params.with_domain(domain))


# -- the rows a stage emits -----------------------------------------------------------------
def _rows(job: _Job, exchange: _Exchange, part: int, kind: int, data: bytes) -> Iterator[Any]:
    """``data`` as Arrow record batches of one piece each (bounded Arrow and JVM buffers),
    or, for a partial aggregator when the job spills, one row naming the file written.
    Error and file records, a few hundred bytes, always travel as one piece."""
    import pyarrow as pa

    if kind == _STATE and job.spill is not None:
        kind, data = _SPILLED, _spill(job.spill, data).encode()
    count = max(1, -(-len(data) // job.piece_bytes)) if kind == _STATE else 1
    size = -(-len(data) // count)
    view = memoryview(data)
    for piece in range(count):
        chunk = view[piece * size:(piece + 1) * size]
        yield pa.RecordBatch.from_arrays(
            [pa.array([exchange.dest(part, piece)], pa.int64()), pa.array([part], pa.int64()),
             pa.array([piece], pa.int32()), pa.array([count], pa.int32()), pa.array([kind], pa.int8()),
             pa.array([chunk.tobytes()], pa.binary())],
            names=["dest", "part", "piece", "pieces", "kind", "data"])


def _spill(directory: str, data: bytes) -> str:
    """Write a partial's bytes to a new file in ``directory`` (a local path or a URI);
    its path. Files are never changed or removed by tasks (a retried task downstream may
    read them again); the driver removes the directory at the end."""
    name = f"{uuid.uuid4().hex}.ldpfagg"
    if "://" not in directory:
        path = os.path.join(directory, name)
        with open(path, "wb") as handle:
            handle.write(data)
        return path
    from pyarrow import fs

    filesystem, inner = fs.FileSystem.from_uri(directory)
    with filesystem.open_output_stream(f"{inner.rstrip('/')}/{name}") as handle:
        handle.write(data)
    return f"{directory.rstrip('/')}/{name}"


def _unspill(path: str) -> bytes:
    if "://" not in path:
        with open(path, "rb") as handle:
            return handle.read()
    return bytes(_read_source(path))


def _error_record(exc: BaseException, **where: Any) -> bytes:
    return json.dumps({"type": type(exc).__name__, "message": str(exc), **where}, sort_keys=True).encode()


def _report_error(accumulator: Any, record: bytes) -> None:
    """Tell the driver at once (it cancels the job); the error row still follows the data."""
    if accumulator is not None:
        accumulator.add(record)


# -- locating a bad report ------------------------------------------------------------------
def _first_bad_row(rows: int, check: Callable[[int, int], None]) -> Optional[Tuple[int, LdpfastError]]:
    """The first row that fails ``check(lo, hi)`` (which raises for rows [lo, hi) when one of
    them is bad) on its own, and its error; found by halving, which checks about ``rows``
    rows again. None if no single row fails alone (an error of the batch as a whole)."""
    if rows == 0:
        return None
    lo, hi = 0, rows
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            check(lo, mid)
        except _DATA_ERRORS:
            hi = mid
        else:
            lo = mid
    try:
        check(lo, lo + 1)
    except _DATA_ERRORS as exc:
        return lo, exc
    return None


def _located(exc: LdpfastError, where: str, offset: int, rows: int,
             check: Callable[[int, int], None]) -> LdpfastError:
    """``exc`` (raised by a batch of ``rows`` rows starting at row ``offset`` of ``where``)
    as the same error type naming ``where`` and the row within it."""
    found = _first_bad_row(rows, check)
    if found is None:
        return type(exc)(f"{where}, rows {offset} to {offset + rows - 1}: {exc}")
    row, alone = found
    message = re.sub(r"^(report|row) 0:\s*", "", str(alone))
    return type(exc)(f"{where}, row {offset + row}: {message}")


# -- files route: one task folds a group of files --------------------------------------------
def _read_source(path: str) -> Any:
    """A local path as is; a URI (``scheme://...``) as its bytes, through ``pyarrow.fs``."""
    if "://" not in path:
        return path
    from pyarrow import fs

    filesystem, inner = fs.FileSystem.from_uri(path)
    with filesystem.open_input_file(inner) as handle:
        return handle.readall()


def _fold_file(agg: Aggregator, scratch: Aggregator, path: str, batch_rows: int,
               hash_file: bool) -> Dict[str, Any]:
    """Add one report file to ``agg``; raises a data error naming the file and the row.
    Returns the file's path, name and number of reports, and with ``hash_file`` (the file
    is then read once into memory) the size and sha256 of exactly the bytes aggregated."""
    from .. import arrow

    params = agg.params
    source = _read_source(path)
    entry: Dict[str, Any] = {"path": path, "name": os.path.basename(path.rstrip("/"))}
    if hash_file:
        import hashlib

        if not isinstance(source, bytes):
            with open(source, "rb") as handle:
                source = handle.read()
        entry.update(size=len(source), sha256=hashlib.sha256(source).hexdigest())
    offset = 0
    try:
        for _, table in arrow.iter_parquet(source, params, batch_rows=batch_rows, name=path, tables=True):
            try:
                agg.update(arrow.from_arrow(table, params))
            except _DATA_ERRORS as exc:
                def check(lo: int, hi: int, table: Any = table) -> None:
                    scratch.update(arrow.from_arrow(table.slice(lo, hi - lo), params))

                raise _located(exc, path, offset, table.num_rows, check) from None
            offset += table.num_rows
    except IncompatibleError as exc:
        if path in str(exc):
            raise
        raise IncompatibleError(f"{path}: {exc}") from None
    entry["reports"] = offset
    return entry


def _files_task(job: _Job, exchange: _Exchange, accumulator: Any, batches: Iterable[Any]) -> Iterator[Any]:
    """mapInArrow over ``spark.range(tasks)``: each id names a group of files to fold."""
    for batch in batches:
        for task in batch.column(0).to_pylist():
            agg, scratch = job.empty(), job.empty()
            try:
                entries = [_fold_file(agg, scratch, path, job.batch_rows, job.hash_files) for path in job.files[task]]
            except _DATA_ERRORS as exc:
                record = _error_record(exc, order=[task, 0])
                _report_error(accumulator, record)
                yield from _rows(job, exchange, task, _ERROR, record)
                continue
            for entry in entries:
                yield from _rows(job, exchange, task, _FILE, json.dumps(entry).encode())
            yield from _rows(job, exchange, task, _STATE, agg.to_bytes())


# -- DataFrame route: Spark's Arrow batches, converted back ----------------------------------
@dataclasses.dataclass(frozen=True)
class _Column:
    name: str
    dtype: Optional[str]     # the report dtype (None: leave it to the Reports class)
    shape: Tuple[int, ...]   # per-report shape of a multi-dimensional column, () for scalars


def _numpy_column(column: _Column, array: Any) -> np.ndarray:
    """One Arrow column as Spark hands it (widened integers, decimal(20,0) for uint64,
    variable-length lists for fixed-size ones) converted back to the report column."""
    import pyarrow as pa

    name = column.name
    if array.null_count:
        first = int(np.flatnonzero(np.asarray(array.is_null().to_numpy(zero_copy_only=False)))[0])
        raise ReportError(f"report column {name!r} has no value in row {first} (a null: e.g. a file "
                          "without this column)")
    if column.shape:
        if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)
                or pa.types.is_fixed_size_list(array.type)):
            raise DTypeError(f"report column {name!r} must be an array of {int(np.prod(column.shape))} "
                             f"values per report, got Arrow type {array.type}")
        size = int(np.prod(column.shape))
        if not pa.types.is_fixed_size_list(array.type):
            offsets = np.asarray(array.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
            lengths = np.diff(offsets)
            if lengths.size and not np.all(lengths == size):
                row = int(np.flatnonzero(lengths != size)[0])
                raise ReportError(f"report column {name!r} must hold {size} values per report, got "
                                  f"{int(lengths[row])} in row {row}")
            inner = array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0])) if lengths.size \
                else array.values.slice(0, 0)
        else:
            inner = array.flatten()
        flat = _numpy_column(_Column(name, column.dtype, ()), inner)
        return flat.reshape((len(array),) + column.shape)
    if pa.types.is_decimal(array.type):
        if array.type.scale != 0:
            raise DTypeError(f"report column {name!r} must hold integers, got Arrow type {array.type}")
        try:  # a safe cast: negatives and values >= 2^64 raise
            array = array.cast(pa.uint64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise ReportError(f"report column {name!r} holds a value outside [0, 2^64)") from None
    if not pa.types.is_integer(array.type):
        raise DTypeError(f"report column {name!r} must hold integers, got Arrow type {array.type}")
    values: np.ndarray = np.asarray(array.to_numpy(zero_copy_only=False))
    if column.dtype is None or values.dtype == np.dtype(column.dtype):
        return values
    target = np.dtype(column.dtype)
    if values.size and target.kind in "iu":
        within, wanted = np.iinfo(values.dtype), np.iinfo(target)
        low, high = max(within.min, wanted.min), min(within.max, wanted.max)  # comparable in values' dtype
        if int(values.min()) < low or int(values.max()) > high:
            row = int(np.flatnonzero((values < low) | (values > high))[0])
            raise ReportError(f"report column {name!r} must fit {target.name}, got {int(values[row])} "
                              f"in row {row}")
    return values.astype(target)


def _dataframe_reports(proto: Protocol, params: Params, specs: Sequence[_Column], batch: Any) -> Reports:
    """A checked Reports batch from one of Spark's Arrow batches (fingerprint column first)."""
    check_fingerprint_column(batch.column(FINGERPRINT_COLUMN), params.fingerprint)
    columns = {spec.name: _numpy_column(spec, batch.column(spec.name)) for spec in specs}
    reports = proto.reports.from_columns(columns, params)
    reports.params_fingerprint = params.fingerprint
    return reports


def _check_rows(proto: Protocol, params: Params, specs: Sequence[_Column], batch: Any, scratch: Aggregator,
                lo: int, hi: int) -> None:
    scratch.update(_dataframe_reports(proto, params, specs, batch.slice(lo, hi - lo)))


def _row_values(batch: Any, row: int) -> List[str]:
    """One row's values as text (to recognise the row again in another query)."""
    return [str(batch.column(i)[row].as_py()) for i in range(batch.num_columns)]


def _dataframe_task(job: _Job, exchange: _Exchange, specs: Sequence[_Column], accumulator: Any,
                    batches: Iterable[Any]) -> Iterator[Any]:
    """mapInArrow over the reports: fold this partition's batches into a copy of the zero."""
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    agg = job.empty()
    params = agg.params
    proto = protocol(params.protocol)
    offset = 0
    for batch in batches:
        try:
            agg.update(_dataframe_reports(proto, params, specs, batch))
        except _DATA_ERRORS as exc:
            scratch = job.empty()
            check = functools.partial(_check_rows, proto, params, specs, batch, scratch)
            found = _first_bad_row(batch.num_rows, check)
            row, alone = found if found is not None else (None, exc)
            record = _error_record(
                alone, partition=partition, row=None if row is None else offset + row,
                first_row=offset, rows=batch.num_rows, order=[partition, offset + (row or 0)],
                values=None if row is None else _row_values(batch, row))
            _report_error(accumulator, record)
            yield from _rows(job, exchange, partition, _ERROR, record)
            return
        offset += batch.num_rows
    if offset:
        yield from _rows(job, exchange, partition, _STATE, agg.to_bytes())


# -- merge stages --------------------------------------------------------------------------------
class _Pieces:
    """Reassembles partial aggregators from their pieces (or spilled files), in whatever
    order rows arrive."""

    def __init__(self) -> None:
        self.pending: Dict[int, Dict[int, bytes]] = {}

    def add(self, part: int, kind: int, piece: int, pieces: int, data: bytes) -> Optional[bytes]:
        """The partial's bytes once its last piece arrived, else None."""
        if kind == _SPILLED:
            return _unspill(data.decode())
        if pieces == 1:
            return data
        have = self.pending.setdefault(part, {})
        have[piece] = data
        if len(have) < pieces:
            return None
        del self.pending[part]
        return b"".join(have[i] for i in range(pieces))

    def check_done(self) -> None:
        if self.pending:  # not an ldpfast error: rows went missing, let Spark retry
            raise RuntimeError(f"pieces of partial aggregators {sorted(self.pending)} never arrived")


def _merge_task(job: _Job, exchange: _Exchange, batches: Iterable[Any]) -> Iterator[Any]:
    """mapInArrow after a merge exchange: merge every partial this partition receives into
    one (streaming: a partial is merged as soon as its last piece arrives), named by the
    partition; error and file records pass on. After an error only errors pass on (the job
    fails anyway)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    part = context.partitionId() if context is not None else 0
    pieces = _Pieces()
    total: Optional[Aggregator] = None
    failed = False
    for batch in batches:
        columns = batch.to_pydict()
        for source, piece, count, kind, data in zip(columns["part"], columns["piece"], columns["pieces"],
                                                    columns["kind"], columns["data"]):
            if kind in (_ERROR, _FILE):
                failed = failed or kind == _ERROR
                yield from _rows(job, exchange, part, kind, data)
                continue
            whole = pieces.add(source, kind, piece, count, data)
            if whole is None or failed:
                continue
            partial = job.kind.from_bytes(whole)
            total = partial if total is None else total.merge(partial)
    pieces.check_done()
    if total is not None and not failed:
        yield from _rows(job, exchange, part, _STATE, total.to_bytes())


def _fetch_rows(rows: Iterable[Any]) -> List[Tuple[int, int, int, int, bytes]]:
    return [(r.part, r.piece, r.pieces, r.kind, bytes(r.data)) for r in rows]


# -- the driver's side of the tasks' reports ----------------------------------------------
class _FirstError:
    """AccumulatorParam keeping the first data error reported (by its ``order``)."""

    def zero(self, value: Any) -> Any:
        return None

    def addInPlace(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        if b is None:
            return a
        return min(a, b, key=lambda r: (json.loads(r).get("order") or [0]))


def _nth_row(row: int, rows: Iterator[Any]) -> List[Tuple[Any, ...]]:
    for i, value in enumerate(rows):
        if i == row:
            return [tuple(value)]
    return []


