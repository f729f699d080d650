"""Aggregate reports of any registered protocol on Apache Spark, byte-identical to one process.

One call::

    import ldpfast.spark

    server = ldpfast.spark.aggregate("reports/")          # Parquet files of write_parquet
    server = ldpfast.spark.aggregate(df, params)           # or a Spark DataFrame of reports
    freq = server.estimate()

Two routes, chosen by what is given (see docs/spark.md for the measurements):

* **files** (:func:`aggregate_files`, the fast one): Spark runs one task per group of
  files; each task reads its files with pyarrow, page checksums verified, refuses a file
  recorded with other parameters (IncompatibleError naming the file) and folds the reports
  into a copy of the empty aggregator, as :func:`ldpfast.dask.aggregate_files` does in one
  process. The files must be readable from the executors (a shared file system, or a URI
  that ``pyarrow.fs`` opens, e.g. ``s3://...``).
* **DataFrame** (:func:`aggregate_dataframe`): Spark hands each partition's rows to Python
  as Arrow batches (``mapInArrow``). The rows carry no file metadata, so they must carry
  the fingerprint column ``ldpfast_fingerprint`` (``write_parquet(...,
  fingerprint_column=True)``), checked in every row; columns Spark widened (uint32 read as
  bigint, uint64 as decimal(20,0), fixed-size lists as arrays) are converted back, and a
  value that does not fit is refused, never wrapped.

Partial aggregators then travel as their versioned bytes (``to_bytes``), cut into pieces of
at most ``piece_bytes``, through Spark shuffles (never whole through the driver's JVM):
groups of ``fan_in`` partials are merged on the executors until at most ``fan_in`` remain,
and the driver fetches those a bounded number of bytes per Spark job and merges them.
``merge`` is exact, associative and commutative and equal states have equal bytes, so the
result does not depend on the partitioning, the order or the tree.

Errors: a data error (a report out of range, other parameters, a damaged file) is
deterministic, so the task does not raise it (Spark would retry it): it reports it, the job
is cancelled, and the driver raises the same ldpfast error naming the file and the row
within the file (for a DataFrame: the file and row when Spark can say, from the hidden
``_metadata`` column of file sources, else the Spark partition and the row within it).
Anything else (a killed worker, an I/O error) fails the task, which Spark retries.

Needs PySpark >= 3.5 and pandas >= 2.2 (``pip install 'ldpfast[spark]'``). Protocols
registered outside ldpfast must be importable on the executors (e.g. ``addPyFile``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
import shutil
import tempfile
import threading
import uuid
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Type, Union, cast

import numpy as np

from ._base import Aggregator, Params, Protocol, Reports, params_from_json, protocol
from .arrow import FINGERPRINT_COLUMN, check_fingerprint_column
from .errors import DTypeError, FormatError, IncompatibleError, LdpfastError, ParameterError, ReportError

__all__ = ["aggregate", "aggregate_files", "aggregate_dataframe", "list_report_files", "FINGERPRINT_COLUMN"]

PathLike = Union[str, "os.PathLike[str]"]

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

    def empty(self) -> Aggregator:
        if self.zero is not None:
            return self.kind.from_bytes(self.zero)
        return self.kind(params_from_json(self.params_json))


def _job(params_or_zero: Any, piece_bytes: int, batch_rows: int, **files: Any) -> _Job:
    """The job of an aggregation starting from ``params_or_zero`` (Params or an empty
    aggregator, which must be the merge identity)."""
    if isinstance(params_or_zero, Params):
        kind = protocol(params_or_zero.protocol).aggregator
        return _Job(kind, params_or_zero.to_json(), None, piece_bytes, batch_rows, **files)
    kind, zero = _zero_of(params_or_zero)
    return _Job(kind, params_or_zero.params.to_json(), zero, piece_bytes, batch_rows, **files)


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


def _raise_record(record: Dict[str, Any]) -> None:
    kind = {cls.__name__: cls for cls in _DATA_ERRORS}.get(record["type"], ReportError)
    raise kind(record["message"])


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
    from . import arrow

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


def _column_specs(proto: Protocol, params: Params) -> List[_Column]:
    """Each report column's dtype and per-report shape, from the wire fields (every
    protocol shipped with ldpfast declares them) or the declared column types."""
    from . import wire

    try:
        fields = {f.column: f for f in wire.fields(params)}
    except NotImplementedError:
        fields = {}
    reports_type = cast(Type[Reports], proto.reports)
    declared = reports_type.column_types
    specs = []
    for name in reports_type.column_names():
        field = fields.get(name)
        dtype = field.dtype if field is not None else (declared[name][0] if name in declared else None)
        shape = tuple(field.shape) if field is not None else ()
        ndim = declared[name][1] if name in declared else 1 + len(shape)
        if ndim != 1 + len(shape):
            raise ParameterError(f"protocol {proto.id!r}: column {name!r} has {ndim} dimensions but no per-report "
                                 "shape is declared (register wire_fields with the shape to aggregate it "
                                 "from Spark)")
        specs.append(_Column(name, None if dtype is None else np.dtype(dtype).name, shape))
    return specs


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
    reports = cast(Type[Reports], proto.reports).from_columns(columns, params)
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


# -- the driver ----------------------------------------------------------------------------------
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


def _spark_session(spark: Any) -> Any:
    if spark is not None:
        return spark
    try:
        from pyspark.sql import SparkSession
    except ImportError:  # pragma: no cover - exercised only without pyspark
        raise ImportError("ldpfast.spark needs PySpark: pip install 'ldpfast[spark]'") from None
    active = SparkSession.getActiveSession()
    return active if active is not None else SparkSession.builder.getOrCreate()


def _zero_of(params_or_zero: Any) -> Tuple[type, bytes]:
    from .dask import _zero_of as zero_of

    return zero_of(params_or_zero)  # type: ignore[no-any-return]


def _checked_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ParameterError(f"{name} must be an int >= {low}, got {value!r}")
    return value


class _Run:
    """One aggregation: the stages after level 0, the fetch, the errors, the cancellation."""

    def __init__(self, spark: Any, job: _Job, fan_in: int):
        self.spark = spark
        self.sc = spark.sparkContext
        self.job = job
        self.fan_in = fan_in
        self.tag = f"ldpfast-{uuid.uuid4().hex}"
        self.errors = self.sc.accumulator(None, _FirstError())

    def exchange_after(self, parts: int) -> _Exchange:
        """The shuffle that follows a stage with ``parts`` partials."""
        if parts > self.fan_in:
            return _Exchange("merge", -(-parts // self.fan_in), fan_in=self.fan_in)
        return _Exchange("fetch", _FETCH_PARTITIONS, parts=parts)

    def reduce(self, stage: Any, parts: int) -> Tuple[Any, int]:
        """Merge stages until at most ``fan_in`` partials remain; the last stage's rows are
        placed for the fetch."""
        while parts > self.fan_in:
            groups = self.exchange_after(parts).partitions
            stage = stage.repartition(groups, "dest").mapInArrow(
                functools.partial(_merge_task, self.job, self.exchange_after(groups)), _ROWS)
            parts = groups
        return stage, parts

    def fetch(self, stage: Any, parts: int) -> Tuple[Dict[int, bytes], List[Dict[str, Any]], List[bytes]]:
        """Bring the last partials to the driver: partition 0 (piece 0 of every partial,
        errors and file records) in one job, then the other pieces, at most
        ``_FETCH_BYTES`` per job. Returns the partials, the error and the file records."""
        rdd = stage.repartition(_FETCH_PARTITIONS, "dest").rdd
        exchange = _Exchange("fetch", _FETCH_PARTITIONS, parts=parts)
        pieces = _Pieces()
        partials: Dict[int, bytes] = {}
        errors: List[Dict[str, Any]] = []
        files: List[bytes] = []
        fetched: Set[int] = set()

        def take(partitions: List[int]) -> List[Tuple[int, int, int, int, bytes]]:
            fetched.update(partitions)
            return self.sc.runJob(rdd, _fetch_rows, partitions)  # type: ignore[no-any-return]

        rows = take([0])
        expected: Dict[int, int] = {}
        while True:
            for part, piece, count, kind, data in rows:
                if kind == _ERROR:
                    errors.append(json.loads(data))
                elif kind == _FILE:
                    files.append(data)
                else:
                    expected[part] = count
                    whole = pieces.add(part, kind, piece, count, data)
                    if whole is not None:
                        partials[part] = whole
            if errors:
                return partials, errors, files
            wanted: Dict[int, int] = {}
            for part, count in expected.items():
                for piece in range(1, count):
                    target = exchange.target(part, piece)
                    if target not in fetched:
                        wanted[target] = wanted.get(target, 0) + self.job.piece_bytes
            if not wanted:
                break
            batch: List[int] = []
            total = 0
            for target in sorted(wanted):
                if batch and total + wanted[target] > _FETCH_BYTES:
                    break
                batch.append(target)
                total += wanted[target]
            rows = take(batch)
        pieces.check_done()
        return partials, errors, files

    def run(self, level0: Any, parts: int) -> Tuple[Aggregator, List[bytes]]:
        stage, parts = self.reduce(level0, parts)
        done = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(done,), daemon=True)
        self.sc.addJobTag(self.tag)
        watcher.start()
        failure: Optional[Exception] = None
        try:
            partials, errors, files = self.fetch(stage, parts)
        except Exception as exc:  # raised below, once the watcher has stopped
            failure = exc
        finally:
            done.set()
            watcher.join()
            self.sc.removeJobTag(self.tag)
        if failure is not None:
            if self.errors.value is not None:  # the job was cancelled for a data error
                raise self.data_error([json.loads(self.errors.value)]) from None
            raise failure
        if errors:
            raise self.data_error(errors)
        total: Optional[Aggregator] = None
        for part in sorted(partials):
            partial = self.job.kind.from_bytes(partials.pop(part))
            total = partial if total is None else total.merge(partial)
        return (total if total is not None else self.job.empty()), files

    def _watch(self, done: threading.Event) -> None:
        while not done.wait(0.1):
            if self.errors.value is not None:
                self.sc.cancelJobsWithTag(self.tag)
                return

    def data_error(self, records: List[Dict[str, Any]]) -> LdpfastError:
        """The error to raise for the data error records (the first by position)."""
        record = min(records, key=lambda r: r.get("order") or [0])
        try:
            _raise_record(self.describe(record))
        except LdpfastError as exc:
            return exc
        raise AssertionError("unreachable")

    def describe(self, record: Dict[str, Any]) -> Dict[str, Any]:
        return record


class _DataFrameRun(_Run):
    def __init__(self, spark: Any, job: _Job, fan_in: int, df: Any, columns: Sequence[str]):
        super().__init__(spark, job, fan_in)
        self.df = df
        self.columns = list(columns)

    def describe(self, record: Dict[str, Any]) -> Dict[str, Any]:
        """Name the file and the row within it (from the hidden ``_metadata`` column of
        file sources, checked to hold the same values), else the Spark partition and row."""
        if "partition" not in record:
            return record
        partition, row = record["partition"], record.get("row")
        where = (f"Spark partition {partition}, row {row}" if row is not None else
                 f"Spark partition {partition}, rows {record['first_row']} to "
                 f"{record['first_row'] + record['rows'] - 1}")
        if row is not None:
            located = self._file_row(partition, row, record.get("values"))
            if located is not None:
                where = f"{located[0]}, row {located[1]}"
        message = re.sub(r"^(report|row) 0:\s*", "", record["message"])
        return dict(record, message=f"{where}: {message}")

    def _file_row(self, partition: int, row: int, values: Optional[List[Any]]) -> Optional[Tuple[str, int]]:
        from pyspark.sql import functions as F

        try:
            located = self.df.select(*self.columns, F.col("_metadata.file_path"), F.col("_metadata.row_index"))
            found = self.sc.runJob(located.rdd, functools.partial(_nth_row, row), [partition])
        except Exception:  # not a file source (no _metadata), or Spark cannot say
            return None
        if not found or values is None or [str(v) for v in found[0][:-2]] != values:
            return None
        return str(found[0][-2]), int(found[0][-1])


def _nth_row(row: int, rows: Iterator[Any]) -> List[Tuple[Any, ...]]:
    for i, value in enumerate(rows):
        if i == row:
            return [tuple(value)]
    return []


def list_report_files(source: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    """The report files of ``source``: a directory (its ``*.parquet`` files in sorted name
    order, as ``ldpfast aggregate`` ingests them), one file, or a list of files (in order).
    Directories given as URIs (``s3://bucket/reports/``) are listed with ``pyarrow.fs``."""
    if isinstance(source, (list, tuple)):
        return [_absolute(os.fspath(p)) for p in source]
    path = _absolute(os.fspath(cast(PathLike, source)))
    if "://" in path and not path.startswith("file://"):
        from pyarrow import fs

        filesystem, inner = fs.FileSystem.from_uri(path)
        info = filesystem.get_file_info(inner)
        if info.type != fs.FileType.Directory:
            return [path]
        outer, within = path.rstrip("/"), inner.rstrip("/")
        prefix = outer[:len(outer) - len(within)] if outer.endswith(within) else path[:path.index("://") + 3]
        entries = filesystem.get_file_info(fs.FileSelector(inner))
        return [prefix + e.path for e in sorted(entries, key=lambda e: e.base_name)
                if e.base_name.endswith(".parquet") and e.type == fs.FileType.File]
    if os.path.isdir(path):
        return [os.path.join(path, name) for name in sorted(os.listdir(path)) if name.endswith(".parquet")]
    return [path]


def _absolute(path: str) -> str:
    """A local path made absolute (executors do not share the driver's working directory)."""
    if "://" in path and not path.startswith("file://"):
        return path
    local = path[len("file://"):] if path.startswith("file://") else path
    return os.path.abspath(local)


@contextlib.contextmanager
def _spill_directory(spark: Any, spill: Optional[PathLike]) -> Iterator[Optional[str]]:
    """A new directory under ``spill`` for one aggregation's partials (None: no spilling;
    ``"auto"``: the temporary directory when every executor runs on this machine), removed
    with what it holds at the end."""
    if spill == "auto":
        master = str(spark.sparkContext.master)
        spill = tempfile.gettempdir() if master.startswith(("local[", "local-cluster[")) or master == "local" \
            else None
    if spill is None:
        yield None
        return
    root = os.fspath(spill)
    if "://" not in root:
        directory = tempfile.mkdtemp(prefix="ldpfast-spark-", dir=root)
        try:
            yield directory
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        return
    from pyarrow import fs

    filesystem, inner = fs.FileSystem.from_uri(root)
    name = f"ldpfast-spark-{uuid.uuid4().hex}"
    filesystem.create_dir(f"{inner.rstrip('/')}/{name}")
    try:
        yield f"{root.rstrip('/')}/{name}"
    finally:
        with contextlib.suppress(OSError):
            filesystem.delete_dir(f"{inner.rstrip('/')}/{name}")


def _file_groups(paths: Sequence[str], tasks: int) -> List[Tuple[str, ...]]:
    """``paths`` cut into ``tasks`` runs of consecutive files with about equal bytes."""
    sizes = []
    for path in paths:
        try:
            sizes.append(os.path.getsize(path) if "://" not in path else 1)
        except OSError:
            sizes.append(1)  # the task that reads it names the problem
    total = float(sum(sizes)) or 1.0
    groups: List[List[str]] = [[]]
    seen = 0.0
    for path, size in zip(paths, sizes):
        if groups[-1] and seen >= total * len(groups) / tasks and len(groups) < tasks:
            groups.append([])
        groups[-1].append(path)
        seen += size
    return [tuple(g) for g in groups]


def aggregate_files(paths: Union[PathLike, Sequence[PathLike]], params: Any = None, *, spark: Any = None,
                    tasks: Optional[int] = None, fan_in: int = 8, batch_rows: int = 1 << 20,
                    piece_bytes: int = _PIECE_BYTES, spill: Optional[PathLike] = "auto") -> Aggregator:
    """Aggregate Parquet report files (written by :func:`ldpfast.arrow.write_parquet`).

    Args:
        paths: a directory (its ``*.parquet`` files), one file, or a list of files; local
            paths must be the same on the executors (a shared file system), URIs are opened
            with ``pyarrow.fs``.
        params: the parameters the reports were made with, or an empty aggregator to start
            from (e.g. ``ocms.Server(params, candidates=...)``); None: those recorded in the
            first file. Every file must record exactly these parameters.
        spark: the SparkSession (default: the active one, else a new local one).
        tasks: Spark tasks reading files (default: twice the default parallelism), each
            given consecutive files of about equal bytes.
        fan_in: partial aggregators merged per task, and the most the driver merges.
        batch_rows: rows read at a time within a file (bounds a task's memory).
        piece_bytes: partial aggregators travel in pieces of at most this many bytes.
        spill: a directory (local path or URI) that the driver and every executor can read
            and write: partial aggregators are written there (in a new subdirectory,
            removed at the end) and only their names go through Spark, which is faster
            for large states. ``"auto"``: a temporary directory when the master is local
            (``local[...]``, ``local-cluster[...]``: one machine), else none. None: partial
            aggregators always travel in pieces through Spark's shuffles.

    Returns:
        The aggregator, byte-identical to folding the files in one process.

    Raises:
        IncompatibleError: a file records other parameters (names the file).
        FormatError: a file is not a report file, or a page checksum does not match.
        ReportError, DTypeError: a report does not fit the parameters (names file and row).
    """
    files = list_report_files(paths)
    if params is None:
        if not files:
            raise ParameterError("aggregate_files needs params when there are no report files")
        from .arrow import read_parquet_params

        params = read_parquet_params(_read_source(files[0]), None)
    return _aggregate_paths(files, params, spark=spark, tasks=tasks, fan_in=fan_in, batch_rows=batch_rows,
                            piece_bytes=piece_bytes, spill=spill)[0]


def _aggregate_paths(files: List[str], params: Any, *, spark: Any = None, tasks: Optional[int] = None,
                     fan_in: int = 8, batch_rows: int = 1 << 20, piece_bytes: int = _PIECE_BYTES,
                     spill: Optional[PathLike] = "auto",
                     hash_files: bool = False) -> Tuple[Aggregator, List[Dict[str, Any]]]:
    """:func:`aggregate_files`, also returning what the tasks recorded of each file, in
    file order (see :func:`_fold_file`)."""
    fan_in = _checked_int("fan_in", fan_in, 2)
    piece_bytes = min(_checked_int("piece_bytes", piece_bytes, 1), _FETCH_BYTES // fan_in)
    job = _job(params, piece_bytes, _checked_int("batch_rows", batch_rows, 1), hash_files=hash_files)
    if not files:
        return job.empty(), []
    spark = _spark_session(spark)
    if tasks is None:
        tasks = 2 * spark.sparkContext.defaultParallelism
    groups = _file_groups(files, min(_checked_int("tasks", tasks, 1), len(files)))
    with _spill_directory(spark, spill) as directory:
        job = dataclasses.replace(job, files=tuple(groups), spill=directory)
        run = _Run(spark, job, fan_in)
        level0 = spark.range(0, len(groups), 1, numPartitions=len(groups)).mapInArrow(
            functools.partial(_files_task, job, run.exchange_after(len(groups)), run.errors), _ROWS)
        total, records = run.run(level0, len(groups))
    order = {path: i for i, path in enumerate(files)}
    entries = sorted((json.loads(r) for r in records), key=lambda e: order[e["path"]])
    return total, entries


def _checksums_verified(spark: Any) -> bool:
    key = "spark.hadoop.parquet.page.verify-checksum.enabled"
    try:
        value = spark.conf.get(key, None)
    except Exception:  # pragma: no cover - old or restricted sessions
        value = None
    if value is None:
        value = spark.sparkContext.getConf().get(key, None)
    return str(value).lower() == "true"


def _check_schema(df: Any, specs: Sequence[_Column]) -> None:
    """Refuse, before any job, a DataFrame whose rows cannot be checked or converted."""
    from pyspark.sql import types as T

    fields = {f.name: f.dataType for f in df.schema.fields}
    missing = [s.name for s in specs if s.name not in fields]
    if missing:
        raise ReportError(f"the DataFrame lacks the report columns {missing} (it has {sorted(fields)})")
    if FINGERPRINT_COLUMN not in fields:
        raise ParameterError(
            f"the DataFrame has no {FINGERPRINT_COLUMN!r} column, so rows made with other parameters "
            "could not be told apart (Spark drops the files' metadata). Write the reports with "
            "ldpfast.arrow.write_parquet(reports, path, params, fingerprint_column=True), or pass the "
            "files to ldpfast.spark.aggregate_files (which checks each file's metadata), or, if every "
            f"row is known to be made with these parameters, add the column yourself: df.withColumn("
            f"{FINGERPRINT_COLUMN!r}, pyspark.sql.functions.lit(ldpfast.arrow.fingerprint_value(params)))")
    integers = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType)
    if not isinstance(fields[FINGERPRINT_COLUMN], (T.IntegerType, T.LongType)):
        raise DTypeError(f"column {FINGERPRINT_COLUMN!r} must be a bigint (ldpfast.arrow.fingerprint_value), "
                         f"got {fields[FINGERPRINT_COLUMN].simpleString()}")
    for spec in specs:
        kind = fields[spec.name]
        inner = kind.elementType if isinstance(kind, T.ArrayType) else kind
        if isinstance(kind, T.ArrayType) != bool(spec.shape) or not isinstance(inner, integers) \
                or isinstance(inner, T.DecimalType) and inner.scale != 0:
            want = f"an array of {int(np.prod(spec.shape))} integers" if spec.shape else "integers"
            raise DTypeError(f"report column {spec.name!r} must hold {want}, got {kind.simpleString()}")


def _planned_partitions(df: Any) -> int:
    """The number of partitions Spark plans for ``df``, without running it: with adaptive
    query execution on, asking a DataFrame with a shuffle for its partitions runs the
    shuffle, so it is off while the plan is made (only the count is used, to shape the
    merge tree; a run with other partitions still aggregates every row)."""
    conf = df.sparkSession.conf
    key = "spark.sql.adaptive.enabled"
    before = conf.get(key, None)
    conf.set(key, "false")
    try:
        return int(df.select("*").rdd.getNumPartitions())
    finally:
        if before is None:
            conf.unset(key)
        else:
            conf.set(key, before)


def aggregate_dataframe(df: Any, params: Any, *, fan_in: int = 8, piece_bytes: int = _PIECE_BYTES,
                        spill: Optional[PathLike] = "auto", require_page_checksums: bool = True) -> Aggregator:
    """Aggregate a Spark DataFrame of reports: the report columns and the fingerprint
    column ``ldpfast_fingerprint`` (e.g. ``spark.read.parquet`` of files written with
    ``write_parquet(..., fingerprint_column=True)``).

    Args:
        df: the DataFrame; other columns are ignored.
        params: the parameters the reports were made with, or an empty aggregator to
            start from (as in :func:`aggregate_files`).
        fan_in, piece_bytes, spill: as in :func:`aggregate_files`.
        require_page_checksums: refuse a DataFrame read from Parquet files unless the
            session verifies page checksums (``spark.hadoop.parquet.page.verify-checksum.enabled
            = true``); pass False only when the reader verifies them otherwise.

    Raises:
        ParameterError: no fingerprint column, or page checksums not verified (before any
            job).
        IncompatibleError: a row was made with other parameters.
        ReportError, DTypeError: a report does not fit (names the file and row when Spark
            can tell, else the Spark partition and row).
    """
    fan_in = _checked_int("fan_in", fan_in, 2)
    piece_bytes = min(_checked_int("piece_bytes", piece_bytes, 1), _FETCH_BYTES // fan_in)
    job = _job(params, piece_bytes, 1)
    job_params = params_from_json(job.params_json)
    specs = _column_specs(protocol(job_params.protocol), job_params)
    _check_schema(df, specs)
    spark = df.sparkSession
    if require_page_checksums and not _checksums_verified(spark) and \
            any(str(f).endswith(".parquet") for f in df.inputFiles()):
        raise ParameterError(
            "the DataFrame is read from Parquet files but this Spark session does not verify their page "
            "checksums, so a damaged page would be aggregated silently: start the session with "
            ".config('spark.hadoop.parquet.page.verify-checksum.enabled', 'true'), or aggregate the files "
            "with ldpfast.spark.aggregate_files (which verifies them)")
    columns = [s.name for s in specs] + [FINGERPRINT_COLUMN]
    selected = df.select(*columns)
    parts = _planned_partitions(selected)
    if parts == 0:
        return job.empty()
    with _spill_directory(spark, spill) as directory:
        job = dataclasses.replace(job, spill=directory)
        run = _DataFrameRun(spark, job, fan_in, df, columns)
        level0 = selected.mapInArrow(
            functools.partial(_dataframe_task, job, run.exchange_after(parts), tuple(specs), run.errors), _ROWS)
        return run.run(level0, parts)[0]


def aggregate(source: Any, params: Any = None, **kwargs: Any) -> Aggregator:
    """Aggregate reports on Spark: a Spark DataFrame (:func:`aggregate_dataframe`; ``params``
    required), else report files (:func:`aggregate_files`: a directory, a file, or a list
    of files)."""
    if type(source).__module__.startswith("pyspark."):
        if params is None:
            raise ParameterError("params is required for a DataFrame (its rows do not record them)")
        return aggregate_dataframe(source, params, **kwargs)
    return aggregate_files(source, params, **kwargs)
