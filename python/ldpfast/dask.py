"""Aggregate reports of any protocol on Dask: partial aggregators per partition, merged
in a tree.

The contract that makes this exact (the same as for Spark, see docs/spark.md):

1. every partition is folded into an empty aggregator built from the parameters (the
   merge identity) with ``update``;
2. the partial aggregators travel as their versioned bytes (``to_bytes``), never as
   pickled Python objects of unknown version;
3. groups of at most ``split_every`` partials are merged (``merge`` adds integer counts:
   exact, associative and commutative) until one remains;
4. ``estimate`` runs once, on the caller's side, on the final aggregator.

Because the state is integral, the final bytes are identical to single-process
aggregation for every partitioning, order and tree shape.

Partitions may hold ``Reports`` batches, ``pyarrow`` Tables/RecordBatches (validated
against their ldpfast metadata when they carry it, as written by :mod:`ldpfast.arrow`),
pandas DataFrames with the report columns, or one report per element: a dict
``{column: value}``, a tuple in column order, or a client's wire message (``bytes``, see
:func:`ldpfast.wire.encode_each`).

:func:`aggregate_partition` and :func:`merge_partials` do not need Dask: they are the
two halves of the contract for any engine (see docs/spark.md for Spark).

Example::

    from distributed import Client
    import ldpfast.dask

    client = Client()                                   # or any scheduler
    server = ldpfast.dask.aggregate_parquet(sorted(glob("reports/*.parquet")))
    freq = server.estimate()

Needs ``dask`` (and ``distributed`` for a cluster): install ``ldpfast[dask]``.
"""

from __future__ import annotations

import copy
import os
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Type, Union, cast

import numpy as np

from ._base import Aggregator, Params, Protocol, Reports, protocol
from ._container import _native
from ._optional import require
from .errors import IncompatibleError, LdpfastError, ParameterError, ReportError

__all__ = ["aggregate", "aggregate_bag", "aggregate_dataframe", "aggregate_parquet",
           "aggregate_partition", "aggregate_files", "merge_partials", "tree_reduce"]


def _dask() -> Any:
    return require("dask", "ldpfast.dask")


def _canonical(batch: Reports) -> Reports:
    """``batch`` with numpy's canonical dtype objects. Arrays that were pickled (sent to a
    worker process) carry equal but distinct dtype objects, which the C++ bindings
    (compared by identity) reject; this relabels them without copying."""
    out = copy.copy(batch)
    for name, column in batch.columns().items():
        setattr(out, name, _native(np.asarray(column)))
    return out


def _batches(proto: Protocol, params: Params, partition: Any) -> Iterator[Reports]:
    """The Reports batches held by one partition (see module docstring)."""
    for batch in _raw_batches(proto, params, partition):
        yield _canonical(batch)


def _is_batch(obj: Any) -> bool:
    return isinstance(obj, Reports) or type(obj).__module__.split(".")[0] in ("pyarrow", "pandas")


def _one_batch(proto: Protocol, params: Params, batch: Any) -> Reports:
    if isinstance(batch, Reports):
        return batch
    if type(batch).__module__.split(".")[0] == "pyarrow":
        if batch.schema.metadata and b"ldpfast.protocol" in batch.schema.metadata:
            from . import arrow

            return arrow.from_arrow(batch, params, reports_type=proto.reports)  # validated against the metadata
        # e.g. Spark's mapInArrow batches: the columns alone, checked by the protocol
        return proto.reports.from_columns(_typed(params, {
            name: _plain_arrow_column(name, batch.column(name)) for name in batch.schema.names}), params)
    return proto.reports.from_columns(  # pandas
        _typed(params, {name: batch[name].to_numpy() for name in batch.columns}), params)


def _raw_batches(proto: Protocol, params: Params, partition: Any) -> Iterator[Reports]:
    """Batches of a partition: one batch, or an iterable of batches, records (dicts or
    tuples, one report each) and wire messages (bytes, one report each, see
    :mod:`ldpfast.wire`); runs of records or messages become one batch each."""
    if _is_batch(partition):
        yield _one_batch(proto, params, partition)
        return
    names = proto.reports.column_names()
    run: List[Any] = []
    run_kind: Optional[str] = None
    for element in partition:
        kind: Optional[str]
        if isinstance(element, (bytes, bytearray, memoryview)):
            kind = "wire"
        elif isinstance(element, dict) or (isinstance(element, tuple) and len(element) == len(names)):
            kind = "record"
        elif _is_batch(element):
            kind = None
        else:
            raise ReportError(f"partition elements must be report batches, records (dict/tuple) or wire "
                              f"messages (bytes), got {type(element).__name__}")
        if run and kind != run_kind:
            yield _run_to_batch(proto, params, names, run_kind, run)
            run = []
        if kind is None:
            yield _one_batch(proto, params, element)
        else:
            run.append(element)
            run_kind = kind
    if run:
        yield _run_to_batch(proto, params, names, run_kind, run)


def _run_to_batch(proto: Protocol, params: Params, names: Sequence[str], kind: Optional[str],
                  run: List[Any]) -> Reports:
    if kind == "wire":
        from . import wire

        return wire.decode_each(params, run)
    return _records_to_batch(proto, params, names, run)


def _plain_arrow_column(name: str, column: Any) -> np.ndarray:
    """A numpy column from Arrow; decimals (Spark's reading of Parquet uint64) are cast
    to uint64, which fails for fractions, negatives and values >= 2^64."""
    pa = require("pyarrow", "ldpfast.dask")

    if pa.types.is_decimal(column.type):
        try:
            column = column.cast(pa.uint64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ReportError(f"report column {name!r}: decimal values are not uint64: {exc}") from None
    array: np.ndarray = column.to_numpy(zero_copy_only=False)
    return array


def _typed(params: Params, columns: Dict[str, Any]) -> Dict[str, Any]:
    """Columns converted to the protocol's report dtypes (as its wire fields declare them)
    when they arrive in another integer type, e.g. uint32 read back as int64 by engines
    without unsigned types. Values that do not fit raise ReportError; nothing wraps."""
    from . import wire

    try:
        dtypes = {f.column: np.dtype(f.dtype) for f in wire.fields(params)}
    except NotImplementedError:
        return columns
    out = dict(columns)
    for name, target in dtypes.items():
        column = np.asarray(out.get(name)) if name in out else None
        if column is None or column.dtype == target or column.dtype.kind not in "iu":
            continue
        if column.size:
            info = np.iinfo(target)
            low, high = int(column.min()), int(column.max())
            if low < info.min or high > info.max:
                raise ReportError(f"report column {name!r} must fit {target.name}, got values in "
                                  f"[{low}, {high}]")
        out[name] = column.astype(target)
    return out


def _records_to_batch(proto: Protocol, params: Params, names: Sequence[str], records: List[Any]) -> Reports:
    if isinstance(records[0], dict):
        columns = {name: np.array([r[name] for r in records]) for name in names}
    else:
        columns = {name: np.array([r[i] for r in records]) for i, name in enumerate(names)}
    return proto.reports.from_columns(columns, params)


def _zero(kind: Type[Aggregator], zero: bytes) -> Aggregator:
    return kind.from_bytes(zero)


def aggregate_partition(kind: Type[Aggregator], zero: bytes, partition: Any) -> bytes:
    """Fold one partition into a copy of the empty aggregator ``zero`` (its bytes; ``kind``
    is its class); returns the partial aggregator's bytes."""
    agg = _zero(kind, zero)
    proto = protocol(agg.params.protocol)
    for batch in _batches(proto, agg.params, partition):
        agg.update(batch)
    return agg.to_bytes()


def aggregate_files(kind: Type[Aggregator], zero: bytes, paths: Sequence[str], batch_rows: int = 1 << 20) -> bytes:
    """Fold Parquet files written by :func:`ldpfast.arrow.write_parquet` (streamed in
    batches of ``batch_rows``) into a copy of the empty aggregator ``zero``; returns the
    partial aggregator's bytes. Each file must record exactly the aggregator's parameters."""
    from .arrow import iter_parquet

    agg = _zero(kind, zero)
    for path in paths:
        for _, batch in iter_parquet(path, agg.params, batch_rows=batch_rows):  # its errors name the file
            try:
                agg.update(batch)
            except LdpfastError as exc:
                raise type(exc)(f"{path}: {exc}") from None
    return agg.to_bytes()


def merge_partials(kind: Type[Aggregator], *blobs: bytes) -> bytes:
    """Merge serialized partial aggregators of class ``kind`` (equal parameters) into one."""
    if not blobs:
        raise ParameterError("merge_partials needs at least one partial aggregator")
    total = kind.from_bytes(blobs[0])
    for blob in blobs[1:]:
        total.merge(kind.from_bytes(blob))
    return total.to_bytes()


def tree_reduce(kind: Type[Aggregator], partials: Sequence[Any], split_every: int = 8) -> Any:
    """Merge delayed partial-aggregator bytes in a tree of fan-in ``split_every``, keeping
    the partitions' order; returns one delayed bytes object."""
    dask = _dask()
    if isinstance(split_every, bool) or not isinstance(split_every, int) or split_every < 2:
        raise ParameterError(f"split_every must be an int >= 2, got {split_every!r}")
    level = list(partials)
    while len(level) > 1:
        level = [dask.delayed(merge_partials, pure=True)(kind, *level[i:i + split_every])
                 for i in range(0, len(level), split_every)]
    return level[0]


def _finish(kind: Type[Aggregator], zero: Any, partials: List[Any], split_every: int, compute: bool,
            params: Any, **compute_kwargs: Any) -> Union[Aggregator, Any]:  # Any: dask's Delayed when not compute
    """The root of the merge tree; computed, the final aggregator with the label domain of
    ``params`` (Params or the empty aggregator) reattached: bytes carry a vocabulary by its
    fingerprint only."""
    dask = _dask()
    if not partials:
        partials = [zero]
    root = tree_reduce(kind, partials, split_every)
    if not compute:
        return root
    (blob,) = dask.compute(root, **compute_kwargs)
    return kind.from_bytes(blob, domain=(params if isinstance(params, Params) else params.params).label_domain)


def _zero_of(params_or_zero: Any) -> Tuple[Type[Aggregator], bytes]:
    """(aggregator class, bytes of the empty aggregator) for Params or an empty aggregator."""
    if isinstance(params_or_zero, Aggregator):
        kind, zero = type(params_or_zero), params_or_zero.to_bytes()
        # Every partition starts from a copy, so it must be the merge identity: x + x == x.
        if kind.from_bytes(zero).merge(kind.from_bytes(zero)).to_bytes() != zero:
            raise ParameterError("the aggregator to start from must be empty (it is copied into "
                                 "every partition); merge partial results afterwards instead")
        return kind, zero
    if not isinstance(params_or_zero, Params):
        raise ParameterError("params must be ldpfast Params or an empty aggregator, got "
                             f"{type(params_or_zero).__name__}")
    registered = cast(Type[Aggregator], protocol(params_or_zero.protocol).aggregator)
    return registered, registered(params_or_zero).to_bytes()


def aggregate_bag(bag: Any, params: Any, *, split_every: int = 8, compute: bool = True,
                  **compute_kwargs: Any) -> Aggregator:
    """Aggregate a ``dask.bag.Bag`` of reports (see module docstring for element kinds).

    Args:
        bag: the reports.
        params: the parameters the reports were made with, or an empty aggregator to
            start from (e.g. ``OCMSServer(params, candidates=...)``); every partition is
            folded into a copy of it.
        split_every: fan-in of the merge tree.
        compute: False returns the delayed final bytes instead of computing them.
        compute_kwargs: passed to ``dask.compute`` (e.g. ``scheduler=``).

    Returns:
        The final aggregator (call ``estimate`` on it).
    """
    dask = _dask()
    kind, zero = _zero_of(params)
    zero = dask.delayed(zero, pure=True)  # one graph node shared by every task
    partials = [dask.delayed(aggregate_partition, pure=True)(kind, zero, part) for part in bag.to_delayed()]
    return _finish(kind, zero, partials, split_every, compute, params, **compute_kwargs)


def aggregate_dataframe(df: Any, params: Any, *, split_every: int = 8, compute: bool = True,
                        **compute_kwargs: Any) -> Aggregator:
    """Aggregate a ``dask.dataframe.DataFrame`` whose columns are the report columns
    (e.g. ``dask.dataframe.read_parquet`` of files written by :mod:`ldpfast.arrow`).
    Arguments as :func:`aggregate_bag`."""
    dask = _dask()
    kind, zero = _zero_of(params)
    names = protocol(kind.protocol).reports.column_names()
    if list(df.columns) != names:
        raise IncompatibleError(f"dataframe columns must be {names}, got {list(df.columns)}")
    zero = dask.delayed(zero, pure=True)
    partials = [dask.delayed(aggregate_partition, pure=True)(kind, zero, part) for part in df.to_delayed()]
    return _finish(kind, zero, partials, split_every, compute, params, **compute_kwargs)


def aggregate_parquet(paths: Iterable["os.PathLike[str] | str"], params: Any = None, *,
                      files_per_task: int = 1, split_every: int = 8, batch_rows: int = 1 << 20,
                      compute: bool = True, **compute_kwargs: Any) -> Aggregator:
    """Aggregate Parquet files written by :func:`ldpfast.arrow.write_parquet`.

    Args:
        paths: the files, in order; ``files_per_task`` consecutive files per task.
        params: expected parameters (or an empty aggregator, as in :func:`aggregate_bag`);
            None takes the parameters recorded in the first file. Every file's recorded
            parameters must equal them.
        batch_rows: rows read at a time inside a task (bounds worker memory).

    Other arguments as :func:`aggregate_bag`.
    """
    from .arrow import read_parquet_params

    dask = _dask()
    paths = [os.fspath(p) for p in paths]
    if params is None:
        if not paths:
            raise ParameterError("aggregate_parquet needs params when paths is empty")
        params = read_parquet_params(paths[0])
    kind, zero = _zero_of(params)
    if isinstance(files_per_task, bool) or not isinstance(files_per_task, int) or files_per_task < 1:
        raise ParameterError(f"files_per_task must be an int >= 1, got {files_per_task!r}")
    zero = dask.delayed(zero, pure=True)
    partials = [dask.delayed(aggregate_files, pure=True)(kind, zero, paths[i:i + files_per_task], batch_rows)
                for i in range(0, len(paths), files_per_task)]
    return _finish(kind, zero, partials, split_every, compute, params, **compute_kwargs)


def aggregate(collection: Any, params: Any = None, **kwargs: Any) -> Aggregator:
    """Dispatch on the collection: a Dask Bag, a Dask DataFrame, or a list of Parquet
    paths (see :func:`aggregate_bag`, :func:`aggregate_dataframe`, :func:`aggregate_parquet`)."""
    if isinstance(collection, (list, tuple)) and all(isinstance(p, (str, os.PathLike)) for p in collection):
        return aggregate_parquet(collection, params, **kwargs)
    if params is None:
        raise ParameterError("params is required for Dask collections")
    module = type(collection).__module__
    if module.startswith("dask.bag"):
        return aggregate_bag(collection, params, **kwargs)
    if module.startswith("dask.dataframe") or module.startswith("dask_expr"):
        return aggregate_dataframe(collection, params, **kwargs)
    raise ParameterError(f"collection must be a Dask Bag, a Dask DataFrame or a list of Parquet paths, "
                         f"got {type(collection).__name__}")
