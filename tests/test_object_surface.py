"""One object surface across every registered protocol: repr, report equality,
``estimate(candidates, counts=False)``, ``frequencies``, ``ldpfast.load``."""

import dataclasses
import inspect
import re

import numpy as np
import pytest

import ldpfast as lf
from ldpfast.protocols.frequency import grr
from ldpfast._base import protocols
from ldpfast.errors import FormatError
from test_conformance import SUBJECTS

EXAMPLES = {subject: (pid, protocols()[pid].example, make_server)
            for subject, (pid, make_server, _) in SUBJECTS.items() if protocols()[pid].builtin}
CASES = sorted(EXAMPLES)
ADDRESS = re.compile(r"object at 0x[0-9a-f]+")


def _build(case):
    pid, make, zero = EXAMPLES[case]
    family = protocols()[pid]
    params, values = make()
    client = family.client(params, rng=11)
    reports = client.perturb(values)
    server = zero(params) if zero else family.aggregator(params)
    server.update(reports)
    return family, client, reports, server


def _candidates(server):
    return np.asarray(server.frequencies().candidates[:8]) if server.protocol != "hadaheavy" else np.arange(8)


def test_every_registered_protocol_is_covered():
    assert {EXAMPLES[c][0] for c in CASES} == {pid for pid, proto in protocols().items() if proto.builtin}


@pytest.mark.parametrize("case", CASES)
def test_reprs_summarize_protocol_parameters_and_size(case):
    family, client, reports, server = _build(case)
    for obj in (client, reports, server):
        text = repr(obj)
        assert not ADDRESS.search(text), text
        assert f"protocol={family.id!r}" in text, text
        assert len(text) < 600, text                         # summaries, not data dumps
    assert f"n={len(reports)}" in repr(reports)
    assert f"n={server.n}" in repr(server)
    assert "epsilon=" in repr(server) and "epsilon=" in repr(client)
    assert "seeded (simulation only)" in repr(client)


@pytest.mark.parametrize("case", CASES)
def test_reports_compare_by_content(case):
    _, _, reports, _ = _build(case)
    same = type(reports)(**{k: np.copy(v) for k, v in reports.columns().items()})
    assert reports == same and not reports != same
    columns = reports.columns()
    name = next(iter(columns))
    changed = {k: np.copy(v) for k, v in columns.items()}
    flat = changed[name].reshape(-1)
    flat[0] = flat[0] + 1 if flat.dtype.kind == "u" or flat[0] != 1 else -1
    assert reports != type(reports)(**changed)
    assert reports != 0 and reports.__eq__(object()) is NotImplemented
    with pytest.raises(TypeError):
        hash(reports)


@pytest.mark.parametrize("case", CASES)
def test_estimate_counts_keyword_everywhere(case):
    _, _, _, server = _build(case)
    signature = inspect.signature(server.estimate)
    names = list(signature.parameters)
    assert names[:2] == ["candidates", "counts"], names
    assert signature.parameters["counts"].default is False
    cands = _candidates(server)
    np.testing.assert_allclose(server.estimate(cands, counts=True), server.n * server.estimate(cands),
                               rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("case", CASES)
def test_frequencies_and_load(case):
    _, _, _, server = _build(case)
    cands = _candidates(server)
    est = server.frequencies(cands)
    np.testing.assert_array_equal(est.values, server.estimate(cands))
    assert est.n == server.n and est.protocol == server.protocol and len(est) == len(cands)
    assert np.all(est.std > 0) or (np.isnan(est.std).all() and est.note)
    restored = lf.load(server.to_bytes())
    assert type(restored) is type(server) and restored == server


def test_old_spellings_still_work():
    params = lf.protocols.frequency.ocms.OCMSParams.optimal(epsilon=2.0, d=50, field="compact")
    ocms = lf.protocols.frequency.ocms
    server = ocms.OCMSServer(params).update(ocms.OCMSClient(params, rng=1).perturb(np.arange(500) % 50))
    np.testing.assert_allclose(server.estimate_counts(np.arange(5)), server.estimate(np.arange(5), counts=True))
    np.testing.assert_allclose(server.estimate(np.arange(5), clip=True), np.clip(server.estimate(np.arange(5)), 0, 1))
    g = grr.GRRParams(epsilon=1.0, d=8)
    gs = grr.GRRServer(g).update(grr.GRRClient(g, rng=1).perturb(np.arange(80) % 8))
    np.testing.assert_allclose(gs.estimate_counts(clip=True), gs.n * gs.estimate(clip=True))


def test_load_rejects_garbage():
    with pytest.raises(FormatError):
        lf.load(b"not an aggregator")


def test_repr_of_a_large_parameter_tuple_is_cut():
    params = lf.protocols.sets.svim.SVIMLengthParams(epsilon=1.0, d=1000, candidates=tuple(range(500)))
    text = repr(lf.protocols.sets.svim.SVIMLengthServer(params))
    assert "500 items" in text and len(text) < 400


def test_dataclass_equality_is_not_generated_per_class():
    """Every Reports class uses the base class's array-aware equality."""
    for family in protocols().values():
        assert family.reports.__eq__ is lf._base.Reports.__eq__, family.id
        assert dataclasses.is_dataclass(family.reports)
