"""Reports as Arrow tables and Parquet files: metadata, validation on read, streaming."""

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import _toy_protocol as toy  # noqa: E402
from ldpfast import arrow  # noqa: E402
from ldpfast._base import params_from_json  # noqa: E402
from ldpfast.errors import FormatError, IncompatibleError, ParameterError  # noqa: E402


@pytest.fixture
def batch():
    params = toy.ToyParams(m=37)
    return params, toy.ToyClient(params, rng=4).perturb(np.arange(1000) % 37)


def _same(a, b):
    assert type(a) is type(b)
    for name, column in a.columns().items():
        got = getattr(b, name)
        assert got.dtype == column.dtype
        np.testing.assert_array_equal(got, column)


def test_table_round_trip_and_metadata(batch):
    params, reports = batch
    table = arrow.to_arrow(reports, params)
    meta = table.schema.metadata
    assert meta[b"ldpfast.protocol"] == b"toy-count"
    assert meta[b"ldpfast.fingerprint"] == params.fingerprint.encode()
    assert params_from_json(meta[b"ldpfast.params"].decode()) == params
    assert table.column_names == ["y", "s"]
    assert table.schema.field("y").type == pa.uint64() and table.schema.field("s").type == pa.int8()
    _same(reports, arrow.from_arrow(table, params, reports_type=toy.ToyReports))
    _same(reports, arrow.from_arrow(table))  # protocol found through the registry
    chunked = pa.concat_tables([table.slice(0, 10), table.slice(10)])
    assert chunked.column("y").num_chunks == 2
    _same(reports, arrow.from_arrow(chunked))
    (record_batch,) = table.to_batches()
    _same(reports, arrow.from_arrow(record_batch))


def test_reader_validates_what_it_reads(batch):
    params, reports = batch
    table = arrow.to_arrow(reports, params)
    with pytest.raises(IncompatibleError, match="different parameters"):
        arrow.from_arrow(table, toy.ToyParams(m=38))
    with pytest.raises(FormatError, match="no ldpfast metadata"):
        arrow.from_arrow(table.replace_schema_metadata({}))
    bad_meta = dict(table.schema.metadata)
    bad_meta[b"ldpfast.fingerprint"] = b"0" * 64
    with pytest.raises(FormatError, match="fingerprint"):
        arrow.from_arrow(table.replace_schema_metadata(bad_meta))
    bad_meta = dict(table.schema.metadata)
    bad_meta[b"ldpfast.reports"] = b"99"
    with pytest.raises(FormatError, match="version"):
        arrow.from_arrow(table.replace_schema_metadata(bad_meta))
    meta = table.schema.metadata
    renamed = table.rename_columns(["y", "sign"]).replace_schema_metadata(meta)
    with pytest.raises(FormatError, match="columns must be"):
        arrow.from_arrow(renamed)
    nulls = pa.array([None] + reports.y[1:].tolist(), pa.uint64())
    with_nulls = table.set_column(0, "y", nulls).replace_schema_metadata(meta)
    with pytest.raises(FormatError, match="missing values"):
        arrow.from_arrow(with_nulls)
    strings = table.set_column(1, "s", pa.array(["x"] * len(reports))).replace_schema_metadata(meta)
    with pytest.raises(FormatError, match="not a number"):
        arrow.from_arrow(strings)
    with pytest.raises(ParameterError):
        arrow.from_arrow({"y": [1]})


def test_tables_without_params_still_name_the_protocol(batch):
    params, reports = batch
    table = arrow.to_arrow(reports)
    assert b"ldpfast.params" not in table.schema.metadata
    _same(reports, arrow.from_arrow(table, params))


def test_parquet_round_trip_streaming_and_validation(batch, tmp_path):
    params, reports = batch
    path = tmp_path / "r.parquet"
    arrow.write_parquet(reports, path, params, row_group_size=128)
    assert not (tmp_path / "r.parquet.tmp").exists()
    got_params, got = arrow.read_parquet(path)
    assert got_params == params
    _same(reports, got)
    assert arrow.read_parquet_params(path) == params
    pieces = list(arrow.iter_parquet(path, batch_rows=300))
    assert len(pieces) > 1 and all(len(r) <= 300 and p == params for p, r in pieces)
    _same(reports, toy.ToyReports(y=np.concatenate([r.y for _, r in pieces]),
                                  s=np.concatenate([r.s for _, r in pieces])))
    with pytest.raises(IncompatibleError):
        arrow.read_parquet(path, toy.ToyParams(m=36))
    # A plain Parquet file that ldpfast did not write.
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"y": reports.y, "s": reports.s}), plain)
    with pytest.raises(FormatError, match="no ldpfast metadata"):
        arrow.read_parquet(plain)
    # Parameters missing from the file.
    pq.write_table(arrow.to_arrow(reports), tmp_path / "noparams.parquet")
    with pytest.raises(FormatError, match="does not record its parameters"):
        arrow.read_parquet(tmp_path / "noparams.parquet")
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"PAR1 not really")
    with pytest.raises(FormatError, match="not a readable Parquet"):
        arrow.read_parquet(garbage)


def test_write_refuses_params_of_another_protocol(batch, tmp_path):
    _, reports = batch

    class Fake:
        protocol = "other"

    with pytest.raises(IncompatibleError):
        arrow.to_arrow(reports, Fake())
    with pytest.raises(ParameterError):
        arrow.to_arrow({"y": 1})


def test_fingerprint_column_is_written_checked_and_dropped(batch, tmp_path):
    """The optional column that keeps rows checkable where the metadata is lost (Spark):
    the same int64 (first 64 bits of the fingerprint) in every row, checked on read against
    the recorded parameters, then dropped."""
    params, reports = batch
    table = arrow.to_arrow(reports, params, fingerprint_column=True)
    assert table.column_names == ["y", "s", arrow.FINGERPRINT_COLUMN]
    expected = int.from_bytes(bytes.fromhex(params.fingerprint[:16]), "big", signed=True)
    assert arrow.fingerprint_value(params) == expected
    assert set(table.column(arrow.FINGERPRINT_COLUMN).to_pylist()) == {expected}
    _same(reports, arrow.from_arrow(table, params))
    arrow.write_parquet(reports, tmp_path / "f.parquet", params, fingerprint_column=True)
    assert pq.read_schema(tmp_path / "f.parquet").names == ["y", "s", arrow.FINGERPRINT_COLUMN]
    _same(reports, arrow.read_parquet(tmp_path / "f.parquet", params)[1])
    values = np.full(len(reports), expected, dtype=np.int64)
    values[123] = arrow.fingerprint_value(toy.ToyParams(m=38))
    other = table.set_column(2, arrow.FINGERPRINT_COLUMN, pa.array(values))
    with pytest.raises(IncompatibleError, match="row 123: made with other parameters"):
        arrow.from_arrow(other, params)
    nulls = table.set_column(2, arrow.FINGERPRINT_COLUMN, pa.array([expected] * 7 + [None] * (len(reports) - 7)))
    with pytest.raises(IncompatibleError, match="row 7: no parameter fingerprint"):
        arrow.from_arrow(nulls, params)
    text = table.set_column(2, arrow.FINGERPRINT_COLUMN, pa.array([params.fingerprint] * len(reports)))
    with pytest.raises(FormatError, match="must hold integers"):
        arrow.from_arrow(text, params)
    with pytest.raises(ParameterError, match="needs params"):
        arrow.to_arrow(toy.ToyReports.from_columns(reports.columns()), fingerprint_column=True)


def test_iter_parquet_can_yield_the_raw_tables(batch, tmp_path):
    params, reports = batch
    arrow.write_parquet(reports, tmp_path / "f.parquet", params)
    tables = [t for _, t in arrow.iter_parquet(tmp_path / "f.parquet", params, batch_rows=300, tables=True)]
    assert [t.num_rows for t in tables] == [300, 300, 300, 100]
    assert all(t.schema.metadata[b"ldpfast.fingerprint"] == params.fingerprint.encode() for t in tables)
    _same(reports, arrow.from_arrow(pa.concat_tables(tables), params))
