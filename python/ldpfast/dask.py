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

Partitions may hold ``Reports`` batches, ``pyarrow`` Tables/RecordBatches written by
:mod:`ldpfast.arrow`, pandas DataFrames with the report columns, or one report per
element as a dict ``{column: value}`` or a tuple in column order.

Example::

    from distributed import Client
    import ldpfast.dask

    client = Client()                                   # or any scheduler
    server = ldpfast.dask.aggregate_parquet(sorted(glob("reports/*.parquet")))
    freq = server.estimate()

Needs ``dask`` (and ``distributed`` for a cluster): install ``ldpfast[dask]``.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Iterator, List, Optional, Sequence

import numpy as np

from ._base import Aggregator, Params, Protocol, Reports, protocol
from .errors import IncompatibleError, ParameterError

__all__ = ["aggregate", "aggregate_bag", "aggregate_dataframe", "aggregate_parquet",
           "aggregate_partition", "aggregate_files", "merge_partials", "tree_reduce"]


def _dask():
    try:
        import dask
    except ImportError:  # pragma: no cover - exercised only without dask
        raise ImportError("ldpfast.dask needs dask: pip install 'ldpfast[dask]'") from None
    return dask


def _batches(proto: Protocol, params: Params, partition: Any) -> Iterator[Reports]:
    """The Reports batches held by one partition (see module docstring)."""
    if isinstance(partition, Reports):
        yield partition
        return
    kind = type(partition).__module__.split(".")[0]
    if kind == "pyarrow":
        yield proto.reports.from_arrow(partition, params)
        return
    if kind == "pandas":
        yield proto.reports.from_columns(
            {name: partition[name].to_numpy() for name in partition.columns}, params)
        return
    names = proto.reports.column_names()
    records: List[Any] = []
    for element in partition:
        if isinstance(element, dict) or (isinstance(element, tuple) and len(element) == len(names)
                                         and not isinstance(element, Reports)):
            records.append(element)
            continue
        if records:
            yield _records_to_batch(proto, params, names, records)
            records = []
        yield from _batches(proto, params, element)
    if records:
        yield _records_to_batch(proto, params, names, records)


def _records_to_batch(proto: Protocol, params: Params, names: Sequence[str], records: list) -> Reports:
    if isinstance(records[0], dict):
        columns = {name: np.array([r[name] for r in records]) for name in names}
    else:
        columns = {name: np.array([r[i] for r in records]) for i, name in enumerate(names)}
    return proto.reports.from_columns(columns, params)


def aggregate_partition(params: Params, partition: Any) -> bytes:
    """Fold one partition into an empty aggregator; returns its bytes."""
    proto = protocol(params.protocol)
    agg = proto.aggregator(params)
    for batch in _batches(proto, params, partition):
        agg.update(batch)
    return agg.to_bytes()


def aggregate_files(params: Params, paths: Sequence[str], batch_rows: int = 1 << 20) -> bytes:
    """Fold Parquet files written by :func:`ldpfast.arrow.write_parquet` (streamed in
    batches of ``batch_rows``) into an empty aggregator; returns its bytes. Each file must
    record exactly ``params``."""
    from .arrow import iter_parquet

    proto = protocol(params.protocol)
    agg = proto.aggregator(params)
    for path in paths:
        for _, batch in iter_parquet(path, params, batch_rows=batch_rows):
            agg.update(batch)
    return agg.to_bytes()


def merge_partials(*blobs: bytes) -> bytes:
    """Merge serialized partial aggregators (all of the same parameters) into one."""
    if not blobs:
        raise ParameterError("merge_partials needs at least one partial aggregator")
    total = Aggregator.from_bytes(blobs[0])
    for blob in blobs[1:]:
        total.merge(type(total).from_bytes(blob))
    return total.to_bytes()


def tree_reduce(partials: Sequence[Any], split_every: int = 8) -> Any:
    """Merge delayed partial-aggregator bytes in a tree of fan-in ``split_every``;
    returns one delayed bytes object."""
    dask = _dask()
    if split_every < 2:
        raise ParameterError(f"split_every must be >= 2, got {split_every}")
    level = list(partials)
    while len(level) > 1:
        level = [dask.delayed(merge_partials, pure=True)(*level[i:i + split_every])
                 for i in range(0, len(level), split_every)]
    return level[0]


def _finish(params: Params, partials: List[Any], split_every: int, compute: bool, **compute_kwargs):
    dask = _dask()
    proto = protocol(params.protocol)
    if not partials:
        partials = [dask.delayed(proto.aggregator(params).to_bytes())]
    root = tree_reduce(partials, split_every)
    if not compute:
        return root
    (blob,) = dask.compute(root, **compute_kwargs)
    return proto.aggregator.from_bytes(blob)


def _check_params(params: Params) -> Params:
    if not isinstance(params, Params):
        raise ParameterError(f"params must be an ldpfast Params object, got {type(params).__name__}")
    protocol(params.protocol)
    return params


def aggregate_bag(bag: Any, params: Params, *, split_every: int = 8, compute: bool = True,
                  **compute_kwargs) -> Aggregator:
    """Aggregate a ``dask.bag.Bag`` of reports (see module docstring for element kinds).

    Args:
        bag: the reports.
        params: the protocol parameters the reports were made with.
        split_every: fan-in of the merge tree.
        compute: False returns the delayed final bytes instead of computing them.
        compute_kwargs: passed to ``dask.compute`` (e.g. ``scheduler=``).

    Returns:
        The final aggregator (call ``estimate`` on it).
    """
    dask = _dask()
    _check_params(params)
    partials = [dask.delayed(aggregate_partition, pure=True)(params, part) for part in bag.to_delayed()]
    return _finish(params, partials, split_every, compute, **compute_kwargs)


def aggregate_dataframe(df: Any, params: Params, *, split_every: int = 8, compute: bool = True,
                        **compute_kwargs) -> Aggregator:
    """Aggregate a ``dask.dataframe.DataFrame`` whose columns are the report columns
    (e.g. ``dask.dataframe.read_parquet`` of files written by :mod:`ldpfast.arrow`).
    Arguments as :func:`aggregate_bag`."""
    dask = _dask()
    _check_params(params)
    names = protocol(params.protocol).reports.column_names()
    if list(df.columns) != names:
        raise IncompatibleError(f"dataframe columns must be {names}, got {list(df.columns)}")
    partials = [dask.delayed(aggregate_partition, pure=True)(params, part) for part in df.to_delayed()]
    return _finish(params, partials, split_every, compute, **compute_kwargs)


def aggregate_parquet(paths: Iterable["os.PathLike[str] | str"], params: Optional[Params] = None, *,
                      files_per_task: int = 1, split_every: int = 8, batch_rows: int = 1 << 20,
                      compute: bool = True, **compute_kwargs) -> Aggregator:
    """Aggregate Parquet files written by :func:`ldpfast.arrow.write_parquet`.

    Args:
        paths: the files; each becomes part of one task (``files_per_task`` per task).
        params: expected parameters; None takes them from the first file. Every file's
            recorded parameters must equal them.
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
    _check_params(params)
    if files_per_task < 1:
        raise ParameterError(f"files_per_task must be >= 1, got {files_per_task}")
    partials = [dask.delayed(aggregate_files, pure=True)(params, paths[i:i + files_per_task], batch_rows)
                for i in range(0, len(paths), files_per_task)]
    return _finish(params, partials, split_every, compute, **compute_kwargs)


def aggregate(collection: Any, params: Optional[Params] = None, **kwargs) -> Aggregator:
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
