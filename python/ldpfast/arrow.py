"""Report batches as Apache Arrow tables and Parquet files, for any registered protocol.

A table written here carries, in its schema metadata, the protocol id, the canonical
parameter JSON (``Params.to_json()``), the parameter fingerprint and a layout version,
so a reader checks that it reads reports of the protocol and parameters it expects:

=========================  ===============================================
``ldpfast.protocol``       protocol id, e.g. ``"ocms"``
``ldpfast.params``         ``Params.to_json()`` (absent if not given)
``ldpfast.fingerprint``    ``Params.fingerprint`` (of the given parameters, else the
                           batch's ``params_fingerprint``; absent if neither is known)
``ldpfast.reports``        layout version of this metadata (``"1"``)
=========================  ===============================================

Columns are the fields of the protocol's ``Reports`` dataclass, in order, with the
numpy dtypes of the batch, optionally followed by the fingerprint column
``ldpfast_fingerprint`` (``fingerprint_column=True``): in every row, the first 64 bits of
the parameter fingerprint as a signed integer (:func:`fingerprint_value`). It lets an
engine that drops the schema metadata (Spark reads only the columns) still refuse rows made
with other parameters; readers here check it against the metadata and drop it.

A column with more than one dimension per report (e.g. PrivSketch's ordering matrices) is a
fixed-size list per report, its per-report shape recorded in the field metadata
(``ldpfast.shape``, JSON). ``pyarrow`` is optional: install ``ldpfast[arrow]``.

Example::

    lf.arrow.write_parquet(reports, "day1.parquet", params)
    params, reports = lf.arrow.read_parquet("day1.parquet")
    server = lf.protocols.frequency.ocms.OCMSServer(params).update(reports)
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any, Dict, Iterator, Optional, Tuple, Type, Union

import numpy as np

from ._base import Params, Reports, params_from_json
from ._optional import require
from ._registry import protocol_or_format_error
from ._validate import check_int
from .errors import FormatError, IncompatibleError, LdpfastError, ParameterError

__all__ = ["to_arrow", "from_arrow", "write_parquet", "read_parquet", "iter_parquet",
           "read_parquet_params", "fingerprint_value", "check_fingerprint_column", "FINGERPRINT_COLUMN",
           "METADATA_VERSION"]

METADATA_VERSION = "1"
_KEY_PROTOCOL = b"ldpfast.protocol"
_KEY_PARAMS = b"ldpfast.params"
_KEY_FINGERPRINT = b"ldpfast.fingerprint"
_KEY_VERSION = b"ldpfast.reports"
_KEY_SHAPE = b"ldpfast.shape"  # field metadata of multi-dimensional columns
#: The optional per-row fingerprint column (int64, see :func:`fingerprint_value`).
FINGERPRINT_COLUMN = "ldpfast_fingerprint"


def fingerprint_value(params_or_fingerprint: "Params | str") -> int:
    """The value of the fingerprint column for ``params`` (or a fingerprint string): the
    first 64 bits of the SHA-256 fingerprint, big-endian, as a signed 64-bit integer
    (what Spark and pandas store without conversion)."""
    fingerprint = (params_or_fingerprint.fingerprint if isinstance(params_or_fingerprint, Params)
                   else str(params_or_fingerprint))
    try:
        return int.from_bytes(bytes.fromhex(fingerprint[:16]), "big", signed=True)
    except ValueError:
        raise ParameterError(f"a parameter fingerprint is 64 hex digits, got {fingerprint!r}") from None


def _pyarrow() -> Any:
    """pyarrow, or MissingDependencyError naming the ``arrow`` extra."""
    return require("pyarrow", "ldpfast's Arrow/Parquet support")


def _metadata(reports: Reports, params: Optional[Params]) -> Dict[bytes, bytes]:
    reports_type = type(reports)
    meta = {_KEY_PROTOCOL: reports_type.protocol.encode(), _KEY_VERSION: METADATA_VERSION.encode()}
    made_with = reports.params_fingerprint
    if params is not None:
        if params.protocol != reports_type.protocol:
            raise IncompatibleError(f"params are for protocol {params.protocol!r}, reports for "
                                    f"{reports_type.protocol!r}")
        if made_with is not None and made_with != params.fingerprint:
            raise IncompatibleError(f"the reports were made with other parameters (fingerprint "
                                    f"{made_with[:16]}) than the given {params}")
        meta[_KEY_PARAMS] = params.to_json().encode()
        meta[_KEY_FINGERPRINT] = params.fingerprint.encode()
    elif made_with is not None:
        meta[_KEY_FINGERPRINT] = made_with.encode()
    return meta


def to_arrow(reports: Reports, params: Optional[Params] = None, *, fingerprint_column: bool = False) -> Any:
    """``reports`` as a ``pyarrow.Table`` (zero-copy for numeric columns).

    Args:
        reports: a batch of any protocol.
        params: the parameters the reports were made with; stored in the schema metadata
            so readers can validate them. Recommended.
        fingerprint_column: also write the column ``ldpfast_fingerprint`` (int64, the same
            value in every row, :func:`fingerprint_value`), which keeps the reports
            checkable where the metadata is lost (e.g. a Spark DataFrame). Needs ``params``
            or a batch that records its parameters.

    Raises:
        IncompatibleError: ``params`` belong to another protocol, or are not the
            parameters the batch records (``params_fingerprint``).
        ImportError: pyarrow is not installed.
    """
    pa = _pyarrow()
    if not isinstance(reports, Reports):
        raise ParameterError(f"reports must be an ldpfast Reports batch, got {type(reports).__name__}")
    arrays, fields = [], []
    for name, col in reports.columns().items():
        col = np.ascontiguousarray(col)
        if col.ndim == 1:
            arrays.append(pa.array(col))
            fields.append(pa.field(name, arrays[-1].type, nullable=False))
        else:  # one fixed-size list per report; the trailing shape goes in the field metadata
            inner = col.shape[1:]
            size = int(np.prod(inner))
            arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(col.reshape(-1)), size))
            fields.append(pa.field(name, arrays[-1].type, nullable=False,
                                   metadata={_KEY_SHAPE: json.dumps(list(inner)).encode()}))
    metadata = _metadata(reports, params)
    if fingerprint_column:
        if _KEY_FINGERPRINT not in metadata:
            raise ParameterError("fingerprint_column=True needs params (or reports that record their "
                                 "parameters)")
        value = fingerprint_value(metadata[_KEY_FINGERPRINT].decode())
        arrays.append(pa.array(np.full(len(reports), value, dtype=np.int64)))
        fields.append(pa.field(FINGERPRINT_COLUMN, pa.int64(), nullable=False))
    schema = pa.schema(fields, metadata=metadata)
    return pa.Table.from_arrays(arrays, schema=schema)


def _table_params(meta: Dict[bytes, bytes], params: Optional[Params]) -> Tuple[str, Optional[Params]]:
    """Protocol id and parameters of a table's metadata, checked against ``params``
    (also when the table records only the fingerprint)."""
    if _KEY_PROTOCOL not in meta:
        raise FormatError("Arrow data has no ldpfast metadata (was it written by ldpfast.arrow?)")
    version = meta.get(_KEY_VERSION, b"").decode()
    if version != METADATA_VERSION:
        raise FormatError(f"unsupported ldpfast report metadata version {version!r} "
                          f"(this build reads {METADATA_VERSION!r})")
    protocol_id = meta[_KEY_PROTOCOL].decode()
    stored = None
    if _KEY_PARAMS in meta:
        try:
            stored = params_from_json(meta[_KEY_PARAMS].decode())
        except ParameterError as exc:  # the data's own parameters, not the caller's
            raise FormatError(f"stored parameters are invalid: {exc}") from None
        if stored.protocol != protocol_id:
            raise FormatError(f"metadata names protocol {protocol_id!r} but parameters of "
                              f"{stored.protocol!r}")
        if meta.get(_KEY_FINGERPRINT, b"").decode() != stored.fingerprint:
            raise FormatError("stored parameter fingerprint does not match the stored parameters")
    if params is not None:
        if params.protocol != protocol_id:
            raise IncompatibleError(f"data holds {protocol_id!r} reports, expected {params.protocol!r}")
        recorded = meta.get(_KEY_FINGERPRINT)
        if stored is None and recorded is not None and recorded.decode(errors="replace") != params.fingerprint:
            raise IncompatibleError(f"reports were made with other parameters (fingerprint "
                                    f"{recorded.decode(errors='replace')[:16]}) than the expected {params}")
        if stored is not None and stored != params:
            raise IncompatibleError(f"reports were made with different parameters: stored {_described(stored)}, "
                                    f"expected {_described(params)}")
        stored = params
    return protocol_id, stored


def _described(params: Params) -> str:
    """The parameters, their label domain and their fingerprint, for an error message."""
    domain = params.label_domain
    info = {} if domain is None else domain.to_dict()
    text = ("no label domain" if domain is None
            else f"a vocabulary of {info['size']} labels (sha256 {info['sha256'][:16]})" if "sha256" in info
            else f"domain {domain!r}")
    return f"{params!r} with {text}, fingerprint {params.fingerprint[:16]}"


def from_arrow(table: Any, params: Optional[Params] = None,
               reports_type: Optional[Type[Reports]] = None) -> Reports:
    """A Reports batch from a ``pyarrow.Table`` or ``RecordBatch`` written by :func:`to_arrow`.

    Args:
        table: the Arrow data; its metadata must name the protocol.
        params: expected parameters; if the data stores parameters they must be equal.
        reports_type: expected Reports class (``Reports.from_arrow`` passes its own).

    Raises:
        FormatError: no or malformed ldpfast metadata, or columns of the wrong names/types.
        IncompatibleError: the data is of another protocol or other parameters.
        ReportError: the protocol's Reports class rejects the columns.
    """
    pa = _pyarrow()
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise ParameterError(f"table must be a pyarrow Table or RecordBatch, got {type(table).__name__}")
    protocol_id, stored = _table_params(table.schema.metadata or {}, params)
    if reports_type is None:
        reports_type = protocol_or_format_error(protocol_id).reports
    elif reports_type.protocol != protocol_id:
        raise IncompatibleError(f"data holds {protocol_id!r} reports, not {reports_type.protocol!r}")
    names = reports_type.column_names()
    recorded = (table.schema.metadata or {}).get(_KEY_FINGERPRINT)
    if table.column_names == names + [FINGERPRINT_COLUMN]:
        known = stored.fingerprint if stored is not None else (recorded or b"").decode(errors="replace")
        check_fingerprint_column(table.column(FINGERPRINT_COLUMN), known)
        table = table.drop_columns([FINGERPRINT_COLUMN])
    if table.column_names != names:
        raise FormatError(f"{reports_type.__name__} columns must be {names}, got {table.column_names}")
    columns = {}
    for name in names:
        column = table.column(name)
        if column.null_count:
            raise FormatError(f"report column {name!r} has {column.null_count} missing values")
        chunk = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        if pa.types.is_fixed_size_list(column.type):
            field = table.schema.field(name)
            try:
                inner = tuple(json.loads((field.metadata or {})[_KEY_SHAPE]))
            except (KeyError, ValueError):
                raise FormatError(f"report column {name!r} is a list without its ldpfast shape") from None
            if int(np.prod(inner)) != column.type.list_size:
                raise FormatError(f"report column {name!r}: shape {inner} does not match list size "
                                  f"{column.type.list_size}")
            values = chunk.flatten()
            if values.null_count:
                raise FormatError(f"report column {name!r} has missing values")
            _check_numeric(name, values.type, pa)
            columns[name] = values.to_numpy(zero_copy_only=False).reshape((len(chunk),) + inner)
        else:
            _check_numeric(name, column.type, pa)
            columns[name] = chunk.to_numpy(zero_copy_only=False)
    batch = reports_type.from_columns(columns, stored)
    if stored is not None:
        batch.params_fingerprint = stored.fingerprint
    elif recorded is not None:
        batch.params_fingerprint = recorded.decode(errors="replace")
    return batch


def check_fingerprint_column(column: Any, fingerprint: str) -> None:
    """Raise unless every row of the fingerprint column ``column`` (Arrow, integers) holds
    the value of ``fingerprint``: IncompatibleError naming the first other row, FormatError
    for a missing value or a column of another type."""
    pa = _pyarrow()
    if not pa.types.is_integer(column.type):
        raise FormatError(f"column {FINGERPRINT_COLUMN!r} must hold integers (ldpfast.arrow.fingerprint_value), "
                          f"got Arrow type {column.type}")
    if not fingerprint:
        raise FormatError(f"column {FINGERPRINT_COLUMN!r} present but the data records no parameters to check "
                          "it against")
    values = column.to_numpy(zero_copy_only=False) if not column.null_count else None
    if values is None:
        first = int(np.flatnonzero(np.asarray(column.is_null().to_numpy(zero_copy_only=False)))[0])
        raise IncompatibleError(f"row {first}: no parameter fingerprint (a null in {FINGERPRINT_COLUMN!r})")
    expected = fingerprint_value(fingerprint)
    other = np.flatnonzero(values != expected)
    if other.size:
        raise IncompatibleError(
            f"row {int(other[0])}: made with other parameters (its {FINGERPRINT_COLUMN} is {int(values[other[0]])}, "
            f"these parameters' is {expected}: fingerprint {fingerprint[:16]})")


def _check_numeric(name: str, arrow_type: Any, pa: Any) -> None:
    if not (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
            or pa.types.is_boolean(arrow_type)):
        raise FormatError(f"report column {name!r} has Arrow type {arrow_type}, not a number")


def write_parquet(reports: Reports, path: "os.PathLike[str] | str", params: Params, *,
                  row_group_size: int = 1 << 20, compression: str = "zstd",
                  fingerprint_column: bool = False) -> None:
    """Write a batch to a Parquet file whose metadata records the protocol and parameters.

    ``fingerprint_column=True`` adds the column ``ldpfast_fingerprint`` (see
    :func:`to_arrow`; a few bytes per file once compressed), which Spark DataFrames read
    from the files need (:func:`ldpfast.spark.aggregate_dataframe`).

    Every data page carries a CRC-32 checksum, verified when ldpfast reads the file. The
    file is written to ``path + ".tmp"`` and renamed, so a reader never sees a partial
    file under ``path``; if writing fails (e.g. a full disk) the temporary file is removed
    and the ``OSError`` propagates.
    """
    pq = _parquet()
    table = to_arrow(reports, params, fingerprint_column=fingerprint_column)
    tmp = f"{os.fspath(path)}.tmp"
    try:
        pq.write_table(table, tmp, row_group_size=row_group_size, compression=compression,
                       write_page_checksum=True)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _parquet() -> Any:
    return require("pyarrow.parquet", "ldpfast's Arrow/Parquet support")


# A Parquet file given by path, or its contents.
Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]


def _source_name(source: Source, name: Optional[str]) -> str:
    if name is not None:
        return name
    return "Parquet data" if isinstance(source, (bytes, bytearray, memoryview)) else os.fspath(source)


@contextlib.contextmanager
def _read_errors(name: str) -> Iterator[None]:
    """Turns what pyarrow raises on a damaged or foreign file (OSError, ArrowInvalid,
    UnicodeDecodeError, TypeError, ...) into FormatError naming the file; ldpfast's own
    errors keep their class and get the file's name in front."""
    pa = _pyarrow()
    try:
        yield
    except LdpfastError as exc:
        if str(exc).startswith(name):
            raise
        raise type(exc)(f"{name}: {exc}") from None
    except (OSError, ValueError, TypeError, KeyError, IndexError, NotImplementedError,
            pa.ArrowException) as exc:
        raise FormatError(f"{name} is not a readable Parquet file (or is damaged): "
                          f"{type(exc).__name__}: {exc}") from None


def _open(source: Source, params: Optional[Params], name: Optional[str] = None) -> Tuple[Any, Params]:
    pq = _parquet()
    name = _source_name(source, name)
    with _read_errors(name):
        if isinstance(source, (bytes, bytearray, memoryview)):
            source = _pyarrow().BufferReader(source)
        handle = pq.ParquetFile(source, page_checksum_verification=True)
        protocol_id, stored = _table_params(handle.schema_arrow.metadata or {}, params)
        if stored is None:
            raise FormatError("it does not record its parameters; "
                              "write it with ldpfast.arrow.write_parquet(reports, path, params)")
        _check_footer(handle)
    return handle, stored


def _check_footer(handle: Any) -> None:
    """The footer's file row count is the sum of its row groups' and it has one column chunk
    per column (what the page checksums, which cover the data only, cannot vouch for)."""
    meta, schema = handle.metadata, handle.schema_arrow
    group_rows = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    if sum(group_rows) != meta.num_rows:
        raise FormatError(f"the footer records {meta.num_rows} rows but row groups of {group_rows}")
    if meta.num_columns != len(schema):
        raise FormatError(f"the footer has {meta.num_columns} column chunks per row group for {len(schema)} columns")


def _check_chunks(group: Any, index: int, schema: Any) -> None:
    """Each column chunk of row group ``index`` records one value per row (``list_size`` per
    row of a fixed-size list column). Called once the reader has decoded the group:
    pyarrow aborts the process (an uncaught C++ exception) on some damaged column chunk
    metadata read directly, while its reader turns the same damage into an error."""
    is_list = _pyarrow().types.is_fixed_size_list
    for column, field in enumerate(schema):
        expected = group.num_rows * (field.type.list_size if is_list(field.type) else 1)
        if group.column(column).num_values != expected:
            raise FormatError(f"row group {index} records {group.num_rows} rows but its column {field.name!r} "
                              f"{group.column(column).num_values} values (expected {expected})")


def _verified_tables(handle: Any, name: str, batch_rows: int) -> Iterator[Any]:
    """The file's rows as Tables of at most ``batch_rows`` rows with the file's metadata,
    page checksums verified, each row group's column chunk counts checked before its first
    batch; FormatError when a row group yields other than the number of rows its footer
    records (after that group's earlier batches)."""
    pa, meta, schema = _pyarrow(), handle.metadata, handle.schema_arrow
    for index in range(meta.num_row_groups):
        group = meta.row_group(index)
        read = 0
        batches = handle.iter_batches(batch_size=batch_rows, row_groups=[index])
        while True:
            with _read_errors(name):
                batch = next(batches, None)
                if batch is None:
                    if read != group.num_rows:
                        raise FormatError(f"row group {index} yielded {read} rows, its footer records {group.num_rows}")
                    break
                if read == 0:
                    _check_chunks(group, index, schema)
                read += batch.num_rows
                table = pa.Table.from_batches([batch]).replace_schema_metadata(schema.metadata)
            yield table


def read_parquet_params(path: Source, params: Optional[Params] = None, *, name: Optional[str] = None) -> Params:
    """The parameters recorded in a Parquet file (checked against ``params`` if given);
    ``name``: how errors call the file (default: the path)."""
    return _open(path, params, name)[1]


def read_parquet(path: Source, params: Optional[Params] = None) -> Tuple[Params, Reports]:
    """Read a Parquet file written by :func:`write_parquet` (a path, or its bytes).

    Returns:
        ``(params, reports)``: the recorded parameters and the whole batch.

    Raises:
        FormatError: not such a file, or its metadata/columns are invalid, a page
            checksum does not match, or the rows read are not the rows its footer records.
        IncompatibleError: ``params`` given and different from the recorded ones (label
            domain included).
    """
    name = _source_name(path, None)
    handle, stored = _open(path, params, name)
    tables = list(_verified_tables(handle, name, 1 << 20))
    with _read_errors(name):
        table = _pyarrow().concat_tables(tables) if tables else handle.schema_arrow.empty_table()
        return stored, from_arrow(table, stored)


def iter_parquet(path: Source, params: Optional[Params] = None, batch_rows: int = 1 << 20, *,
                 name: Optional[str] = None, tables: bool = False) -> Iterator[Tuple[Params, Any]]:
    """Stream a Parquet file written by :func:`write_parquet` (a path, or its bytes) in
    batches of at most ``batch_rows`` reports (bounded memory for large files); yields
    ``(params, reports)``, or with ``tables=True`` ``(params, table)``: the batch as a
    ``pyarrow.Table`` with the file's metadata, page checksums verified, for the caller to
    convert with :func:`from_arrow` (e.g. slices of it, to find a bad row). ``name``: how
    errors call the file (default: the path); every error names it. Raises the errors of
    :func:`read_parquet`, possibly after some batches (a row group that yields fewer or
    more rows than its footer records is refused when it ends)."""
    batch_rows = check_int("batch_rows", batch_rows, 1, 2**63 - 1)     # Arrow's batch size is an int64
    name = _source_name(path, name)
    handle, stored = _open(path, params, name)
    reports_type = protocol_or_format_error(stored.protocol).reports
    for table in _verified_tables(handle, name, batch_rows):
        with _read_errors(name):
            out = table if tables else from_arrow(table, stored, reports_type=reports_type)
        yield stored, out
