"""ldpfast.dask on a real multi-process LocalCluster: the result is bit-identical to
single-process aggregation for every partitioning, tree shape and input kind."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

dask = pytest.importorskip("dask")
db = pytest.importorskip("dask.bag")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

import _toy_protocol as toy  # noqa: E402
import ldpfast.dask as ldask  # noqa: E402
from ldpfast import arrow  # noqa: E402
from ldpfast._base import protocols  # noqa: E402
from ldpfast.errors import IncompatibleError, ParameterError  # noqa: E402

N = 3000


@pytest.fixture(scope="module")
def client():
    """Two worker processes, one thread each (kept small: tests must be cheap on 2 cores)."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, worker_dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


def _family(pid):
    proto = protocols().get(pid)
    if proto is None:
        pytest.skip(f"protocol {pid!r} is not merged on this branch")
    return proto


@pytest.fixture(scope="module")
def hrr_case():
    proto = _family("hrr")
    params = proto.params(epsilon=1.0, d=1000)
    values = np.random.default_rng(3).zipf(1.4, size=N) % 1000
    reports = proto.client(params, rng=8).perturb(values)
    return proto, params, reports, proto.aggregator(params).update(reports).to_bytes()


def _slices(reports, cuts):
    bounds = [0, *cuts, len(reports)]
    return [type(reports).from_columns({k: v[a:b] for k, v in reports.columns().items()})
            for a, b in zip(bounds[:-1], bounds[1:])]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(0, N), max_size=12).map(sorted), split_every=st.sampled_from([2, 3, 8]))
def test_any_partitioning_gives_identical_bytes(client, hrr_case, cuts, split_every):
    proto, params, reports, expected = hrr_case
    parts = _slices(reports, cuts)  # empty partitions included
    bag = db.from_sequence(parts, npartitions=len(parts))
    result = ldask.aggregate_bag(bag, params, split_every=split_every)
    assert type(result) is proto.aggregator
    assert result.to_bytes() == expected


def test_zero_aggregator_with_state_options(client):
    """OCMS streaming match counts for candidates: the zero carries the candidates."""
    proto = _family("ocms")
    params = proto.params.optimal(epsilon=2.0, d=5000)
    reports = proto.client(params, rng=1).perturb(np.random.default_rng(2).integers(0, 5000, size=N))
    zero = proto.aggregator(params, candidates=np.arange(0, 5000, 50))
    expected = proto.aggregator(params, candidates=np.arange(0, 5000, 50)).update(reports).to_bytes()
    bag = db.from_sequence(_slices(reports, [100, 1700, 2900]), npartitions=4)
    assert ldask.aggregate_bag(bag, zero, split_every=2).to_bytes() == expected
    with pytest.raises(ParameterError, match="must be empty"):
        ldask.aggregate_bag(bag, proto.aggregator(params, candidates=[1, 2]).update(reports))


def test_records_bag_and_empty_bag(client):
    params = toy.ToyParams(m=37)
    reports = toy.ToyClient(params, rng=3).perturb(np.arange(500) % 37)
    expected = toy.ToyServer(params).update(reports).to_bytes()
    dicts = [{"y": int(y), "s": int(s)} for y, s in zip(reports.y, reports.s)]
    assert ldask.aggregate_bag(db.from_sequence(dicts, npartitions=5), params).to_bytes() == expected
    tuples = [(int(y), int(s)) for y, s in zip(reports.y, reports.s)]
    assert ldask.aggregate(db.from_sequence(tuples, npartitions=3), params).to_bytes() == expected
    empty = ldask.aggregate_bag(db.from_sequence([], npartitions=1), params)
    assert empty.to_bytes() == toy.ToyServer(params).to_bytes()


@pytest.fixture(scope="module")
def parquet_files(tmp_path_factory, hrr_case):
    proto, params, reports, expected = hrr_case
    folder = tmp_path_factory.mktemp("hrr")
    paths = []
    for i, part in enumerate(_slices(reports, [400, 1000, 1001, 2500])):
        paths.append(str(folder / f"part-{i}.parquet"))
        arrow.write_parquet(part, paths[-1], params, row_group_size=256)
    return paths


def test_parquet_files(client, hrr_case, parquet_files):
    proto, params, reports, expected = hrr_case
    assert ldask.aggregate_parquet(parquet_files).to_bytes() == expected  # params from the files
    assert ldask.aggregate(parquet_files, params, files_per_task=2, batch_rows=300,
                           split_every=2).to_bytes() == expected
    other = proto.params(epsilon=2.0, d=1000)
    with pytest.raises(IncompatibleError, match="different parameters"):
        ldask.aggregate_parquet(parquet_files, other)


def test_dataframe_from_parquet(client, hrr_case, parquet_files):
    proto, params, reports, expected = hrr_case
    df = dd.read_parquet(parquet_files)
    assert ldask.aggregate_dataframe(df, params, split_every=3).to_bytes() == expected
    with pytest.raises(IncompatibleError, match="columns must be"):
        ldask.aggregate_dataframe(df[["rows"]], params)


def test_argument_checks():
    params = toy.ToyParams(m=5)
    bag = db.from_sequence([], npartitions=1)
    with pytest.raises(ParameterError, match="split_every"):
        ldask.aggregate_bag(bag, params, split_every=1)
    with pytest.raises(ParameterError, match="params must be"):
        ldask.aggregate_bag(bag, {"m": 5})
    with pytest.raises(ParameterError, match="collection must be"):
        ldask.aggregate(object(), params)
    with pytest.raises(ParameterError, match="files_per_task"):
        ldask.aggregate_parquet([], params, files_per_task=0)


def test_engine_neutral_halves_accept_plain_arrow_and_pandas(hrr_case):
    """What Spark's mapInArrow hands over: Arrow batches without ldpfast metadata, with
    unsigned columns widened to int64. They are converted back with range checks."""
    pa = pytest.importorskip("pyarrow")
    pd = pytest.importorskip("pandas")
    from ldpfast.errors import ReportError

    proto, params, reports, expected = hrr_case
    zero = proto.aggregator(params).to_bytes()
    widened = [pa.RecordBatch.from_pydict({"rows": part.rows.astype(np.int64), "bits": part.bits})
               for part in _slices(reports, [1000, 2000])]
    blob = ldask.aggregate_partition(proto.aggregator, zero, widened)
    assert blob == expected
    frame = pd.DataFrame({"rows": reports.rows.astype(np.int64), "bits": reports.bits})
    assert ldask.aggregate_partition(proto.aggregator, zero, frame) == expected
    halves = [ldask.aggregate_partition(proto.aggregator, zero, [part]) for part in _slices(reports, [1234])]
    assert ldask.merge_partials(proto.aggregator, *halves) == expected
    negative = pa.RecordBatch.from_pydict({"rows": np.array([-1, 2], np.int64), "bits": np.array([1, 1], np.int8)})
    with pytest.raises(ReportError, match="must fit uint32"):
        ldask.aggregate_partition(proto.aggregator, zero, [negative])
    too_big = pa.RecordBatch.from_pydict({"rows": np.array([5000, 2], np.int64), "bits": np.array([1, 1], np.int8)})
    with pytest.raises(ReportError, match="row 5000 is out of range"):
        ldask.aggregate_partition(proto.aggregator, zero, [too_big])


def test_decimal_columns_as_spark_reads_uint64():
    from decimal import Decimal

    pa = pytest.importorskip("pyarrow")
    from ldpfast.errors import ReportError

    proto = _family("ocms")
    params = proto.params.optimal(epsilon=2.0, d=100)
    reports = proto.client(params, rng=6).perturb(np.arange(200) % 100)
    zero = proto.aggregator(params, candidates=np.arange(100)).to_bytes()
    expected = proto.aggregator.from_bytes(zero).update(reports).to_bytes()

    def decimals(values):
        return pa.array([Decimal(int(v)) for v in values], pa.decimal128(20, 0))

    batch = pa.RecordBatch.from_pydict({name: decimals(col) for name, col in reports.columns().items()})
    assert ldask.aggregate_partition(proto.aggregator, zero, [batch]) == expected
    bad = pa.RecordBatch.from_pydict({"z": decimals([1]), "a0": pa.array([Decimal("1.5")], pa.decimal128(20, 1)),
                                      "a1": decimals([2])})
    with pytest.raises(ReportError, match="not uint64"):
        ldask.aggregate_partition(proto.aggregator, zero, [bad])


def test_bag_of_client_wire_messages(client, hrr_case):
    """What a collector receives: one compact message per client (ldpfast.wire)."""
    from ldpfast import wire
    from ldpfast.errors import ReportError

    proto, params, reports, expected = hrr_case
    messages = wire.encode_each(params, reports)
    assert all(len(m) == 2 for m in messages)  # 10-bit row + 1 bit
    assert ldask.aggregate_bag(db.from_sequence(messages, npartitions=6), params).to_bytes() == expected
    with pytest.raises(ReportError, match="partition elements must be"):
        ldask.aggregate_partition(proto.aggregator, proto.aggregator(params).to_bytes(), [1, 2])


def test_labelled_reports_come_back_with_their_vocabulary(client, tmp_path):
    """Partials travel as bytes, which know a vocabulary by its fingerprint only: the result
    has the caller's vocabulary back (labels as candidates), on every route."""
    from ldpfast import Domain

    labels = [f"word-{i}" for i in range(64)]
    proto = _family("grr")
    params = proto.params(epsilon=1.0, d=64).with_domain(Domain(labels))
    reports = proto.client(params, rng=5).perturb([labels[(7 * i) % 64] for i in range(2000)])
    expected = proto.aggregator(params).update(reports)
    path = str(tmp_path / "labelled.parquet")
    arrow.write_parquet(reports, path, params)
    for got in (ldask.aggregate_parquet([path], params),
                ldask.aggregate_parquet([path], proto.aggregator(params)),
                ldask.aggregate_bag(db.from_sequence([reports], npartitions=1), params)):
        assert got.to_bytes() == expected.to_bytes()
        assert np.array_equal(got.estimate(labels[:3]), expected.estimate(labels[:3]))
