"""Batch fuzzing, for every registered protocol: a batch is either added whole or refused
with ReportError/IncompatibleError leaving the aggregator byte-for-byte unchanged, also
when its columns were reassigned after construction (wrong dtypes, shapes, lengths,
values) or it was made with other parameters."""

import copy
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _fuzz_cases import case_params, batches, example
from ldpfast.errors import IncompatibleError, ReportError
from ldpfast.protocols import privsketch_ldp

CASES = case_params()
_FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module", params=CASES)
def batch_case(request):
    proto, params, reports, make = example(request.param)
    first, second = batches(reports, 2)
    return proto, params, reports, make, first, second


def _refused(agg, batch, errors=(ReportError,)):
    before = agg.to_bytes()
    with pytest.raises(errors):
        agg.update(batch)
    assert agg.to_bytes() == before


def _reassignments(column: np.ndarray, several_columns: bool):
    """Replacement columns a batch must not be accepted with."""
    n = len(column)
    other = {"uint64": np.int64, "int64": np.uint64, "uint32": np.int64, "uint16": np.int32, "int8": np.int16}
    yield "other integer dtype", column.astype(other.get(column.dtype.name, np.int64))
    yield "float", column.astype(np.float64)
    yield "bool", column.astype(bool)
    yield "object", column.astype(object)
    yield "Python list", column.tolist()
    if several_columns:
        yield "one row short", column[:-1]
    yield "scalar", column[0]
    yield "extra dimension", column.reshape((n, 1) + column.shape[1:])
    if column.ndim > 1:
        yield "missing dimension", column.reshape(n, -1)[:, 0]


def test_reassigned_columns_are_checked_again(batch_case):
    """E.g. an int64 z (whose state then could not be saved), a uint16 bit of 65535
    (counted as +1) or float rows: all refused by update, state unchanged."""
    proto, params, _, make, first, second = batch_case
    agg = make(params).update(first)
    for name, column in second.columns().items():
        for what, replacement in _reassignments(column, len(second.columns()) > 1):
            bad = copy.copy(second)
            setattr(bad, name, replacement)
            try:
                _refused(agg, bad)
            except AssertionError as exc:
                raise AssertionError(f"column {name!r} reassigned as {what}") from exc


def test_the_issue_reassignments():
    from ldpfast.protocols import hadamard, ocms

    oparams = ocms.Params.optimal(epsilon=2.0, d=300, field="compact")
    reports = ocms.Client(oparams, rng=1).perturb(np.arange(100))
    reports.z = reports.z.astype(np.int64)
    _refused(ocms.Server(oparams), reports)
    sparams = privsketch_ldp.SafeParams.create(epsilon=1.0, d=20, K=2, M=4, seed=1)
    sreports = privsketch_ldp.SafeClient(sparams, rng=1).perturb([[1, 2]] * 10)
    sreports.bit = np.full(10, 65535, dtype=np.uint16)
    _refused(privsketch_ldp.SafeServer(sparams), sreports)
    hparams = hadamard.HRRParams(epsilon=1.0, d=64)
    hreports = hadamard.HRRClient(hparams, rng=1).perturb(np.arange(64))
    hreports.rows = hreports.rows.astype(np.float64)
    _refused(hadamard.HRRServer(hparams), hreports)


def _column_strategy(column: np.ndarray, n: int):
    """Arrays of the column's dtype and per-row shape, any values of that dtype."""
    info = np.iinfo(column.dtype)
    shape = (n,) + column.shape[1:]
    size = int(np.prod(shape))
    values = st.lists(st.integers(int(info.min), int(info.max)), min_size=size, max_size=size)
    return values.map(lambda v: np.array(v, dtype=column.dtype).reshape(shape))


@_FUZZ
@given(data=st.data())
def test_random_column_values_are_added_whole_or_refused(batch_case, data):
    """Columns of the right dtypes holding arbitrary values (mostly out of range, some
    valid): update adds the batch (n grows by its length) or raises ReportError with the
    state unchanged."""
    proto, params, _, make, first, second = batch_case
    agg = make(params).update(first)
    n = data.draw(st.integers(1, 6), label="rows")
    bad = copy.copy(second)
    for name, column in second.columns().items():
        if data.draw(st.booleans(), label=f"replace {name}"):
            setattr(bad, name, data.draw(_column_strategy(column, n), label=name))
        else:
            setattr(bad, name, column[:n])
    before, count = agg.to_bytes(), getattr(agg, "n", None)
    try:
        agg.update(bad)
    except ReportError:
        assert agg.to_bytes() == before
    else:
        assert count is None or agg.n == count + n


def test_batches_made_with_other_parameters_are_refused(batch_case):
    """The issue's reproducers, for every protocol with an epsilon: reports made at
    another epsilon (e.g. GRR eps=2 into an eps=1 server) are refused, naming both."""
    proto, params, reports, make, first, _ = batch_case
    if "epsilon" not in {f.name for f in dataclasses.fields(params)}:
        pytest.skip("no epsilon to change")
    other = dataclasses.replace(params, epsilon=params.epsilon * 1.5)
    agg = make(params).update(first)
    foreign = copy.copy(reports)
    foreign.params_fingerprint = other.fingerprint
    before = agg.to_bytes()
    with pytest.raises(IncompatibleError, match="other parameters") as info:
        agg.update(foreign)
    assert str(other.epsilon) in str(info.value) and str(params.epsilon) in str(info.value)
    assert agg.to_bytes() == before
    foreign.params_fingerprint = None  # hand-built: accepted (values checked)
    agg.update(foreign)


def test_clients_record_the_fingerprint(batch_case):
    proto, params, reports, *_ = batch_case
    assert reports.params_fingerprint == params.fingerprint
    assert "params_fingerprint" not in reports.columns()


def test_grr_and_ocms_reproducers():
    from ldpfast.protocols import grr, ocms

    for make_params, client, server in (
            (lambda eps: grr.Params(epsilon=eps, d=64), grr.Client, grr.Server),
            (lambda eps: ocms.Params.optimal(epsilon=eps, d=300), ocms.Client, ocms.Server)):
        made, served = (make_params(2.0), make_params(1.0)) if server is grr.Server else \
            (make_params(2.0), make_params(3.0))
        reports = client(made, rng=1).perturb(np.zeros(500, dtype=np.int64))
        with pytest.raises(IncompatibleError, match="other parameters"):
            server(served).update(reports)


def test_fingerprint_survives_arrow_parquet_and_wire(tmp_path):
    pytest.importorskip("pyarrow")
    from ldpfast import arrow, wire
    from ldpfast.protocols import grr

    params, other = grr.Params(epsilon=2.0, d=64), grr.Params(epsilon=1.0, d=64)
    reports = grr.Client(params, rng=1).perturb(np.arange(64))
    table = arrow.to_arrow(reports)  # no params given: the batch's fingerprint is kept
    assert arrow.from_arrow(table).params_fingerprint == params.fingerprint
    with pytest.raises(IncompatibleError):
        arrow.from_arrow(table, other)
    with pytest.raises(IncompatibleError):
        arrow.to_arrow(reports, other)
    arrow.write_parquet(reports, tmp_path / "r.parquet", params)
    _, read = arrow.read_parquet(tmp_path / "r.parquet")
    assert read.params_fingerprint == params.fingerprint
    with pytest.raises(IncompatibleError):
        grr.Server(other).update(read)
    decoded = wire.decode(params, wire.encode(params, reports), len(reports))
    assert decoded.params_fingerprint == params.fingerprint
    with pytest.raises(IncompatibleError):
        wire.encode(other, reports)


def test_merge_names_both_protocols_and_refuses_itself():
    from ldpfast.protocols import grr, hadamard

    g = grr.Server(grr.Params(epsilon=1.0, d=8))
    h = hadamard.HRRServer(hadamard.HRRParams(epsilon=1.0, d=8))
    with pytest.raises(IncompatibleError, match="'hrr' aggregator .*into a 'grr' aggregator"):
        g.merge(h)
    g.update(grr.Client(g.params, rng=1).perturb(np.arange(8)))
    before = g.to_bytes()
    with pytest.raises(IncompatibleError, match="into itself"):
        g.merge(g)
    assert g.to_bytes() == before
    g.merge(copy.copy(g))
    assert g.n == 16
