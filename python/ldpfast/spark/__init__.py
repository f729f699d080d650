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
  value that does not fit is refused, never wrapped. Before any job, the footer of every
  Parquet file the DataFrame reads is checked (:mod:`ldpfast.spark._sources`).

Partial aggregators then travel as their versioned bytes (``to_bytes``), never whole
through a JVM: written to a directory that the driver and the executors share (``spill``;
by default a temporary directory on a local master) with only their names going through
Spark, or cut into pieces of at most ``piece_bytes`` through Spark's shuffles. Groups of
``fan_in`` partials are merged on the executors until at most ``fan_in`` remain; the driver
fetches those (at most 64 MiB of pieces per Spark job) and merges them. ``merge`` is exact,
associative and commutative and equal states have equal bytes, so the result does not
depend on the partitioning, the order or the tree.

Errors: a data error (a report out of range, other parameters, a damaged file) is
deterministic, so the task does not raise it (Spark would retry it): it reports it, the job
is cancelled, and the driver raises the same ldpfast error naming the file and the row
within the file (for a DataFrame: the file and row when Spark can say, from the hidden
``_metadata`` column of file sources, else the Spark partition and the row within it).
Anything else (a killed worker, an I/O error) fails the task, which Spark retries.

Needs PySpark >= 4.0 and pandas >= 2.2 (``pip install 'ldpfast[spark]'``). Protocols
registered outside ldpfast must be importable on the executors (e.g. ``addPyFile``).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, List, Optional, Sequence, Union, cast

from .._base import Aggregator, params_from_json, protocol
from ..arrow import FINGERPRINT_COLUMN
from ..errors import ParameterError, StorageError
from ._run import (PathLike, _absolute, _aggregate_paths, _check_schema, _checked_int,
                   _column_specs, _DataFrameRun, _job, _label_domain, _planned_partitions,
                   _spill_directory)
from ._sources import check_sources
from ._tasks import _FETCH_BYTES, _PIECE_BYTES, _ROWS, _dataframe_task, _read_source

__all__ = ["aggregate", "aggregate_files", "aggregate_dataframe", "list_report_files", "FINGERPRINT_COLUMN"]


def list_report_files(source: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    """The report files of ``source``: a directory (its ``*.parquet`` files in sorted name
    order, as ``ldpfast aggregate`` ingests them), one file, or a list of files (in order).
    Directories given as URIs (``s3://bucket/reports/``) are listed with ``pyarrow.fs``.
    A local path or a URI that does not exist raises StorageError."""
    if isinstance(source, (list, tuple)):
        return [_existing(_absolute(os.fspath(p))) for p in source]
    path = _absolute(os.fspath(cast(PathLike, source)))
    if "://" in path and not path.startswith("file://"):
        from pyarrow import fs

        filesystem, inner = fs.FileSystem.from_uri(path)
        info = filesystem.get_file_info(inner)
        if info.type == fs.FileType.NotFound:
            raise StorageError(f"no such directory or file: {path}")
        if info.type != fs.FileType.Directory:
            return [path]
        outer, within = path.rstrip("/"), inner.rstrip("/")
        prefix = outer[:len(outer) - len(within)] if outer.endswith(within) else path[:path.index("://") + 3]
        entries = filesystem.get_file_info(fs.FileSelector(inner))
        return [prefix + e.path for e in sorted(entries, key=lambda e: e.base_name)
                if e.base_name.endswith(".parquet") and e.type == fs.FileType.File]
    if os.path.isdir(path):
        return [os.path.join(path, name) for name in sorted(os.listdir(path)) if name.endswith(".parquet")]
    return [_existing(path)]


def _existing(path: str) -> str:
    """``path``, unless it is a local path to nothing (a URI in a list is left to the task
    that reads it)."""
    if "://" not in path and not os.path.exists(path):
        raise StorageError(f"no such directory or file: {path}")
    return path


def aggregate_files(paths: Union[PathLike, Sequence[PathLike]], params: Any = None, *, spark: Any = None,
                    tasks: Optional[int] = None, fan_in: int = 8, batch_rows: int = 1 << 20,
                    piece_bytes: int = _PIECE_BYTES, spill: Optional[PathLike] = "auto") -> Aggregator:
    """Aggregate Parquet report files (written by :func:`ldpfast.arrow.write_parquet`).

    Args:
        paths: a directory (its ``*.parquet`` files), one file, or a list of files; local
            paths must be the same on the executors (a shared file system), URIs are opened
            with ``pyarrow.fs``.
        params: the parameters the reports were made with, or an empty aggregator to start
            from (e.g. ``OCMSServer(params, candidates=...)``); None: those recorded in the
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
        StorageError: a local path (or the URI given) does not exist.
        IncompatibleError: a file records other parameters (names the file).
        FormatError: a file is not a report file, or a page checksum does not match.
        ReportError, DTypeError: a report does not fit the parameters (names file and row).
    """
    files = list_report_files(paths)
    if params is None:
        if not files:
            raise ParameterError("aggregate_files needs params when there are no report files")
        from ..arrow import read_parquet_params

        params = read_parquet_params(_read_source(files[0]), None, name=files[0])
    return _aggregate_paths(files, params, spark=spark, tasks=tasks, fan_in=fan_in, batch_rows=batch_rows,
                            piece_bytes=piece_bytes, spill=spill)[0]


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
        require_page_checksums: refuse a DataFrame read from Parquet files unless Spark
            reads each of them with ``parquet.page.verify-checksum.enabled = true`` (at run
            time ``spark.conf.set('parquet.page.verify-checksum.enabled', 'true')``, when the
            session starts ``spark.hadoop.parquet.page.verify-checksum.enabled``, or the
            reader option); pass False only when the reader verifies them otherwise.

    Before any job, every Parquet file the DataFrame reads (found in its plan) is checked:
    not empty, its ldpfast metadata (when it has some) records these parameters, its report
    columns have the types the DataFrame reads.

    Raises:
        ParameterError: no fingerprint column, or page checksums not verified (before any
            job).
        IncompatibleError: a file's metadata or a row records other parameters (names the
            file; the row when Spark can tell).
        FormatError: a file is empty or not Parquet (names the file, before any job).
        DTypeError: a report column of the wrong type (names the file, before any job).
        ReportError, DTypeError: a report does not fit (names the file and row when Spark
            can tell, else the Spark partition and row).
    """
    fan_in = _checked_int("fan_in", fan_in, 2)
    piece_bytes = min(_checked_int("piece_bytes", piece_bytes, 1), _FETCH_BYTES // fan_in)
    job = _job(params, piece_bytes, 1)
    job_params = params_from_json(job.params_json)
    specs = _column_specs(protocol(job_params.protocol), job_params)
    _check_schema(df, specs)
    columns = [s.name for s in specs] + [FINGERPRINT_COLUMN]
    check_sources(df, job_params, columns, require_page_checksums)
    spark = df.sparkSession
    selected = df.select(*columns)
    parts = _planned_partitions(selected)
    domain = _label_domain(params)
    if parts == 0:
        return job.empty(domain)
    with _spill_directory(spark, spill) as directory:
        job = dataclasses.replace(job, spill=directory)
        run = _DataFrameRun(spark, job, fan_in, df, columns, domain)
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
