"""Batch refusals the issues reported, by name (every protocol's batches are fuzzed by
ldpfast.testing: tests/test_conformance.py): reassigned columns, batches made with other
parameters, the fingerprint through Arrow, Parquet and wire, and merge refusals."""

import copy

import numpy as np
import pytest

from ldpfast.errors import IncompatibleError, ReportError


def _refused(agg, batch, errors=(ReportError,)):
    before = agg.to_bytes()
    with pytest.raises(errors):
        agg.update(batch)
    assert agg.to_bytes() == before


def test_the_issue_reassignments():
    from ldpfast.protocols.frequency import hadamard, ocms
    from ldpfast.protocols.sets import privsketch_ldp

    oparams = ocms.OCMSParams.optimal(epsilon=2.0, d=300, field="compact")
    reports = ocms.OCMSClient(oparams, rng=1).perturb(np.arange(100))
    reports.z = reports.z.astype(np.int64)
    _refused(ocms.OCMSServer(oparams), reports)
    sparams = privsketch_ldp.SafeParams.create(epsilon=1.0, d=20, K=2, M=4, seed=1)
    sreports = privsketch_ldp.SafeClient(sparams, rng=1).perturb([[1, 2]] * 10)
    sreports.bit = np.full(10, 65535, dtype=np.uint16)
    _refused(privsketch_ldp.SafeServer(sparams), sreports)
    hparams = hadamard.HRRParams(epsilon=1.0, d=64)
    hreports = hadamard.HRRClient(hparams, rng=1).perturb(np.arange(64))
    hreports.rows = hreports.rows.astype(np.float64)
    _refused(hadamard.HRRServer(hparams), hreports)


def test_grr_and_ocms_reproducers():
    from ldpfast.protocols.frequency import grr, ocms

    for make_params, client, server in (
            (lambda eps: grr.GRRParams(epsilon=eps, d=64), grr.GRRClient, grr.GRRServer),
            (lambda eps: ocms.OCMSParams.optimal(epsilon=eps, d=300), ocms.OCMSClient, ocms.OCMSServer)):
        made, served = (make_params(2.0), make_params(1.0)) if server is grr.GRRServer else \
            (make_params(2.0), make_params(3.0))
        reports = client(made, rng=1).perturb(np.zeros(500, dtype=np.int64))
        with pytest.raises(IncompatibleError, match="other parameters"):
            server(served).update(reports)


def test_fingerprint_survives_arrow_parquet_and_wire(tmp_path):
    pytest.importorskip("pyarrow")
    from ldpfast import arrow, wire
    from ldpfast.protocols.frequency import grr

    params, other = grr.GRRParams(epsilon=2.0, d=64), grr.GRRParams(epsilon=1.0, d=64)
    reports = grr.GRRClient(params, rng=1).perturb(np.arange(64))
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
        grr.GRRServer(other).update(read)
    decoded = wire.decode(params, wire.encode(params, reports), len(reports))
    assert decoded.params_fingerprint == params.fingerprint
    with pytest.raises(IncompatibleError):
        wire.encode(other, reports)


def test_merge_names_both_protocols_and_refuses_itself():
    from ldpfast.protocols.frequency import grr, hadamard

    g = grr.GRRServer(grr.GRRParams(epsilon=1.0, d=8))
    h = hadamard.HRRServer(hadamard.HRRParams(epsilon=1.0, d=8))
    with pytest.raises(IncompatibleError, match="'hrr' aggregator .*into a 'grr' aggregator"):
        g.merge(h)
    g.update(grr.GRRClient(g.params, rng=1).perturb(np.arange(8)))
    before = g.to_bytes()
    with pytest.raises(IncompatibleError, match="into itself"):
        g.merge(g)
    assert g.to_bytes() == before
    g.merge(copy.copy(g))
    assert g.n == 16
