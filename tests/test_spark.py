"""The Spark recipe of docs/spark.md on a local Spark session (skipped without PySpark,
which is not a test dependency of ldpfast). Slow: starting the JVM takes tens of seconds."""

import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from ldpfast import arrow  # noqa: E402
from ldpfast._base import protocols  # noqa: E402
from ldpfast.dask import aggregate_partition, merge_partials  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("ldpfast-test")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .getOrCreate())
    yield session
    session.stop()


def test_map_in_arrow_then_tree_reduce_is_byte_identical(spark, tmp_path):
    proto = protocols().get("hrr")
    if proto is None:
        pytest.skip("HRR is not merged on this branch")
    params = proto.params(epsilon=1.0, d=1000)
    server_cls = proto.aggregator
    expected = server_cls(params)
    for i in range(3):
        batch = proto.client(params, rng=i).perturb(np.random.default_rng(i).integers(0, 1000, size=2000))
        arrow.write_parquet(batch, tmp_path / f"part-{i}.parquet", params)
        expected.update(batch)
    zero = server_cls(params).to_bytes()

    def fold(batches):
        import pyarrow as pa

        yield pa.RecordBatch.from_pydict({"state": [aggregate_partition(server_cls, zero, batches)]})

    partials = (spark.read.parquet(str(tmp_path)).repartition(5)
                .mapInArrow(fold, "state binary").rdd.map(lambda row: bytes(row.state)))
    blob = partials.treeReduce(lambda a, b: merge_partials(server_cls, a, b), depth=2)
    assert blob == expected.to_bytes()
    np.testing.assert_array_equal(server_cls.from_bytes(blob).estimate(), expected.estimate())


def test_uint64_columns_read_as_decimals_by_spark(spark, tmp_path):
    """OCMS reports are three uint64 columns; Spark reads them as decimal(20,0)."""
    proto = protocols().get("ocms")
    if proto is None:
        pytest.skip("OCMS is not merged on this branch")
    params = proto.params.optimal(epsilon=2.0, d=1000)
    server_cls = proto.aggregator
    batch = proto.client(params, rng=5).perturb(np.random.default_rng(5).integers(0, 1000, size=3000))
    arrow.write_parquet(batch, tmp_path / "ocms.parquet", params)
    zero = server_cls(params, candidates=np.arange(0, 1000, 10)).to_bytes()
    expected = server_cls.from_bytes(zero).update(batch).to_bytes()

    def fold(batches):
        import pyarrow as pa

        yield pa.RecordBatch.from_pydict({"state": [aggregate_partition(server_cls, zero, batches)]})

    partials = (spark.read.parquet(str(tmp_path)).repartition(3)
                .mapInArrow(fold, "state binary").rdd.map(lambda row: bytes(row.state)))
    assert partials.treeReduce(lambda a, b: merge_partials(server_cls, a, b)) == expected
