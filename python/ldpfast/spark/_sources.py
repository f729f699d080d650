"""The checks the DataFrame route makes, before any Spark job, of the Parquet files a
DataFrame reads: the file relations of its optimized plan, seen through Spark's JVM with
the Hadoop settings Spark reads them with. Their page checksums must be verified; every
file must be a non-empty Parquet file whose ldpfast metadata, when it has some, records
the aggregation's parameters, and whose report columns have the types the DataFrame reads
(else Spark fails the task on the first such file, again at every retry)."""

from __future__ import annotations

import functools
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import unquote, urlparse

from .._base import Params
from ..arrow import _table_params
from ..errors import DTypeError, FormatError, IncompatibleError, LdpfastError, ParameterError

#: The parquet-mr key that makes Spark's Parquet readers verify page checksums.
VERIFY_KEY = "parquet.page.verify-checksum.enabled"
_LOGICAL_RELATION = "org.apache.spark.sql.execution.datasources.LogicalRelation"
_FILE_RELATION = "org.apache.spark.sql.execution.datasources.HadoopFsRelation"
_PARQUET_FORMAT = "org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat"
_METADATA_KEYS = ("ldpfast.protocol", "ldpfast.reports", "ldpfast.params", "ldpfast.fingerprint")
_READERS = 8  # footers read at a time


def check_sources(df: Any, params: Params, columns: Sequence[str], require_page_checksums: bool) -> None:
    """Refuse ``df`` if one of the Parquet files it reads fails a check (naming the first
    such file of the first relation, by name); ``columns``: those the aggregation reads."""
    relations, unseen = _file_relations(df)
    if unseen and require_page_checksums:
        raise ParameterError(
            f"the DataFrame reads files ({_shown(unseen[0])}, ...) through a source ldpfast cannot inspect "
            "(not a file relation of Spark's plan, e.g. a DataSource V2 table), so it cannot tell whether "
            "their page checksums are verified: aggregate the files with ldpfast.spark.aggregate_files, or "
            "pass require_page_checksums=False if that reader verifies them")
    spark = df.sparkSession
    state = spark._jsparkSession.sessionState()
    footers = _Footers(spark._jvm, state.conf())
    for relation, files in relations:
        conf = state.newHadoopConfWithOptions(relation.options())
        if require_page_checksums and not conf.getBoolean(VERIFY_KEY, False):
            raise ParameterError(_unverified(spark, min(files), conf.get(VERIFY_KEY)))
        read_as = {field["name"]: _type(field["type"]) for field in json.loads(relation.dataSchema().json())["fields"]
                   if field["name"] in columns}
        with ThreadPoolExecutor(_READERS) as pool:  # overlaps the round trips to the JVM and the file system
            for failure in pool.map(functools.partial(footers.check, conf, params, read_as), sorted(files)):
                if failure is not None:
                    raise failure


def _file_relations(df: Any) -> Tuple[List[Tuple[Any, List[str]]], List[str]]:
    """The Parquet file relations of the plan Spark runs (with the files each reads, after
    partition pruning), and the files ``df`` reads that no file relation accounts for."""
    leaves = df._jdf.queryExecution().optimizedPlan().collectLeaves()
    parquet: List[Tuple[Any, List[str]]] = []
    seen = set()
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if leaf.getClass().getName() != _LOGICAL_RELATION or \
                leaf.relation().getClass().getName() != _FILE_RELATION:
            continue
        relation = leaf.relation()
        files = [str(f) for f in relation.inputFiles()]
        seen.update(files)
        if files and _is_parquet(relation.fileFormat()):
            parquet.append((relation, files))
    return parquet, [f for f in df.inputFiles() if f not in seen]


def _is_parquet(file_format: Any) -> bool:
    """Whether a FileFormat is Spark's Parquet format or derives from it."""
    cls = file_format.getClass()
    while cls is not None:
        if cls.getName() == _PARQUET_FORMAT:
            return True
        cls = cls.getSuperclass()
    return False


def _unverified(spark: Any, first: str, value: Any) -> str:
    """Why a DataFrame read without page checksum verification is refused, and the fixes."""
    set_late = str(spark.conf.get(f"spark.hadoop.{VERIFY_KEY}", None)).lower() == "true" and \
        str(spark.sparkContext._jsc.hadoopConfiguration().get(VERIFY_KEY)).lower() != "true"
    why = (f" ('spark.hadoop.{VERIFY_KEY}' is set in spark.conf, but Spark applies spark.hadoop.* keys only "
           "when the session starts)" if set_late else "")
    return (f"the DataFrame reads Parquet files ({_shown(first)}, ...) with {VERIFY_KEY} = {value}{why}, so a "
            f"damaged page would be aggregated silently: spark.conf.set('{VERIFY_KEY}', 'true') (applied at run "
            f"time), or start the session with .config('spark.hadoop.{VERIFY_KEY}', 'true'), or read the files "
            f"with .option('{VERIFY_KEY}', 'true'); or aggregate the files with ldpfast.spark.aggregate_files "
            "(which verifies them)")


class _Footers:
    """Reads footers through Spark's JVM (parquet-mr, Spark's own schema conversion)."""

    def __init__(self, jvm: Any, sql_conf: Any):
        self.jvm = jvm
        self.converter = jvm.org.apache.spark.sql.execution.datasources.parquet.ParquetToSparkSchemaConverter(sql_conf)
        self.everything = jvm.org.apache.parquet.format.converter.ParquetMetadataConverter.NO_FILTER

    def check(self, conf: Any, params: Params, read_as: Dict[str, Any], uri: str) -> Optional[LdpfastError]:
        """The error of one file, read with the Hadoop settings Spark reads it with, or None."""
        from py4j.protocol import Py4JJavaError

        name = _shown(uri)
        path = self.jvm.org.apache.hadoop.fs.Path(uri)
        try:
            footer = self.jvm.org.apache.parquet.hadoop.ParquetFileReader.readFooter(
                conf, path, self.everything).getFileMetaData()
        except Py4JJavaError as exc:
            try:
                empty = path.getFileSystem(conf).getFileStatus(path).getLen() == 0
            except Py4JJavaError:
                empty = False
            if empty:
                return FormatError(f"{name} is empty (0 bytes), not a Parquet file of reports (Spark skips such "
                                   "files without a word, so it would be aggregated as no reports)")
            return FormatError(f"{name} is not a readable Parquet file (or is damaged): {exc.java_exception}")
        recorded = footer.getKeyValueMetaData()
        metadata = {key: recorded.get(key) for key in _METADATA_KEYS}
        metadata = {key: value for key, value in metadata.items() if value is not None}
        if metadata:
            try:
                _table_params({key.encode(): str(value).encode() for key, value in metadata.items()}, params)
            except (FormatError, IncompatibleError) as exc:
                return type(exc)(f"{name}: {exc}")
            fingerprint = str(metadata.get("ldpfast.fingerprint", params.fingerprint))
            if fingerprint != params.fingerprint:  # e.g. the same parameters over another label domain
                return IncompatibleError(f"{name}: its metadata records parameters of fingerprint {fingerprint[:16]}, "
                                         f"not {params.fingerprint[:16]} ({params})")
        stored = {field["name"]: _type(field["type"])
                  for field in json.loads(self.converter.convert(footer.getSchema()).json())["fields"]}
        for column, expected in read_as.items():
            if column in stored and stored[column] != expected:
                return DTypeError(f"{name}: report column {column!r} is {_shown_type(stored[column])} in this file, "
                                  f"but the DataFrame reads it as {_shown_type(expected)}")
        return None


def _type(spark_type: Any) -> Any:
    """A Spark data type (its JSON form) without its nullability, to compare."""
    if isinstance(spark_type, dict):
        return {key: _type(value) for key, value in spark_type.items()
                if key not in ("nullable", "containsNull", "valueContainsNull", "metadata")}
    if isinstance(spark_type, list):
        return [_type(item) for item in spark_type]
    return spark_type


def _shown_type(spark_type: Any) -> str:
    if isinstance(spark_type, dict) and spark_type.get("type") == "array":
        return f"array<{_shown_type(spark_type['elementType'])}>"
    return spark_type if isinstance(spark_type, str) else json.dumps(spark_type, sort_keys=True)


def _shown(uri: str) -> str:
    """A file as errors name it: a local file by its path, others by their URI."""
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri
