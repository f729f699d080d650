"""The driver's side of :mod:`ldpfast.spark`: the job, the merge stages, the fetch of the
last partials, the data errors (cancelling the job, naming the file and row), the spill
directory and the checks made before any Spark job."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

import numpy as np

from .._base import Aggregator, Params, Protocol, protocol
from ..arrow import FINGERPRINT_COLUMN
from ..errors import DTypeError, LdpfastError, ParameterError, ReportError
from .._optional import require
from ._tasks import (_DATA_ERRORS, _ERROR, _FETCH_BYTES, _FETCH_PARTITIONS, _FILE, _PIECE_BYTES, _ROWS, _Column,
                     _Exchange, _FirstError, _Job, _Pieces, _fetch_rows, _files_task, _merge_task, _nth_row)

PathLike = Union[str, "os.PathLike[str]"]


def _job(params_or_zero: Any, piece_bytes: int, batch_rows: int, **files: Any) -> _Job:
    """The job of an aggregation starting from ``params_or_zero`` (Params or an empty
    aggregator, which must be the merge identity)."""
    if isinstance(params_or_zero, Params):
        kind = protocol(params_or_zero.protocol).aggregator
        return _Job(kind, params_or_zero.to_json(), None, piece_bytes, batch_rows, **files)
    kind, zero = _zero_of(params_or_zero)
    return _Job(kind, params_or_zero.params.to_json(), zero, piece_bytes, batch_rows, **files)


def _label_domain(params_or_zero: Any) -> Any:
    """The label domain (:mod:`ldpfast.domain`) of the parameters an aggregation starts from."""
    return (params_or_zero if isinstance(params_or_zero, Params) else params_or_zero.params).label_domain


def _error_of(record: Dict[str, Any]) -> LdpfastError:
    """The exception an error record describes (its ldpfast type and message)."""
    kind = {cls.__name__: cls for cls in _DATA_ERRORS}.get(record["type"], ReportError)
    return kind(record["message"])


def _column_specs(proto: Protocol, params: Params) -> List[_Column]:
    """Each report column's dtype and per-report shape, from the wire fields (every
    protocol shipped with ldpfast declares them) or the declared column types."""
    from .. import wire

    try:
        fields = {f.column: f for f in wire.fields(params)}
    except NotImplementedError:
        fields = {}
    reports_type = proto.reports
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


def _spark_session(spark: Any) -> Any:
    """``spark``, else the active session, else a new one (see :func:`_with_this_python`)."""
    if spark is not None:
        return spark
    SparkSession = require("pyspark.sql", "ldpfast.spark").SparkSession
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    starts = require("pyspark", "ldpfast.spark").SparkContext._active_spark_context is None
    session = SparkSession.builder.getOrCreate()
    return _with_this_python(session) if starts else session


def _with_this_python(session: Any) -> Any:
    """``session``, a new one, with its Python workers made to run this interpreter when its
    master is local (one machine) and neither ``spark.pyspark.python`` nor ``PYSPARK_PYTHON``
    names one: PySpark starts them as ``python3`` from the PATH (it reads only
    ``PYSPARK_PYTHON``, when the context starts), which from a virtual environment that is
    not activated is another Python, without ldpfast."""
    sc = session.sparkContext
    master = str(sc.master)
    if master == "local" or master.startswith(("local[", "local-cluster[")):
        sc.pythonExec = sc.getConf().get("spark.pyspark.python", None) or os.environ.get("PYSPARK_PYTHON") \
            or sys.executable
    return session


def _zero_of(params_or_zero: Any) -> Tuple[type, bytes]:
    from ..dask import _zero_of as zero_of

    return zero_of(params_or_zero)


def _checked_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ParameterError(f"{name} must be an int >= {low}, got {value!r}")
    return value


class _Run:
    """One aggregation: the stages after level 0, the fetch, the errors, the cancellation."""

    def __init__(self, spark: Any, job: _Job, fan_in: int, domain: Any = None):
        self.spark = spark
        self.sc = spark.sparkContext
        self.job = job
        self.fan_in = fan_in
        self.domain = domain  # the caller's label domain, put back on the result (never shipped)
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
            partial = self.job.kind.from_bytes(partials.pop(part), domain=self.domain if total is None else None)
            total = partial if total is None else total.merge(partial)
        return (total if total is not None else self.job.empty(self.domain)), files

    def _watch(self, done: threading.Event) -> None:
        while not done.wait(0.1):
            if self.errors.value is not None:
                self.sc.cancelJobsWithTag(self.tag)
                return

    def data_error(self, records: List[Dict[str, Any]]) -> LdpfastError:
        """The error to raise for the data error records (the first by position)."""
        return _error_of(self.describe(min(records, key=lambda r: r.get("order") or [0])))

    def describe(self, record: Dict[str, Any]) -> Dict[str, Any]:
        return record


class _DataFrameRun(_Run):
    def __init__(self, spark: Any, job: _Job, fan_in: int, df: Any, columns: Sequence[str], domain: Any = None):
        super().__init__(spark, job, fan_in, domain)
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


def _aggregate_paths(files: List[str], params: Any, *, spark: Any = None, tasks: Optional[int] = None,
                     fan_in: int = 8, batch_rows: int = 1 << 20, piece_bytes: int = _PIECE_BYTES,
                     spill: Optional[PathLike] = "auto",
                     hash_files: bool = False) -> Tuple[Aggregator, List[Dict[str, Any]]]:
    """:func:`aggregate_files`, also returning what the tasks recorded of each file, in
    file order (see :func:`_fold_file`)."""
    fan_in = _checked_int("fan_in", fan_in, 2)
    piece_bytes = min(_checked_int("piece_bytes", piece_bytes, 1), _FETCH_BYTES // fan_in)
    job = _job(params, piece_bytes, _checked_int("batch_rows", batch_rows, 1), hash_files=hash_files)
    domain = _label_domain(params)
    if not files:
        return job.empty(domain), []
    spark = _spark_session(spark)
    if tasks is None:
        tasks = 2 * spark.sparkContext.defaultParallelism
    groups = _file_groups(files, min(_checked_int("tasks", tasks, 1), len(files)))
    with _spill_directory(spark, spill) as directory:
        job = dataclasses.replace(job, files=tuple(groups), spill=directory)
        run = _Run(spark, job, fan_in, domain)
        level0 = spark.range(0, len(groups), 1, numPartitions=len(groups)).mapInArrow(
            functools.partial(_files_task, job, run.exchange_after(len(groups)), run.errors), _ROWS)
        total, records = run.run(level0, len(groups))
    order = {path: i for i, path in enumerate(files)}
    entries = sorted((json.loads(r) for r in records), key=lambda e: order[e["path"]])
    return total, entries


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


