"""The protocol registry (ldpfast._registry) and the base client (ldpfast._client): what a
registration must satisfy, what the shared client constructor checks, and how each generic
layer says that a protocol lacks one of its hooks."""

import dataclasses

import numpy as np
import pytest

import _toy_protocol as toy
from ldpfast import _base, audit, estimates, wire
from ldpfast.errors import ParameterError


def _toy(**changes):
    return dataclasses.replace(toy.PROTOCOL, **changes)


@pytest.mark.parametrize("field, value, error, match", [
    ("params", dict, TypeError, "subclass of ldpfast._base.Params"),
    ("client", object, TypeError, "subclass of ldpfast._base.ClientBase"),
    ("aggregator", toy.ToyReports, TypeError, "subclass of ldpfast._base.Aggregator"),
    ("id", "toy-other", ValueError, "registered as 'toy-other'"),
    ("inputs", "bags", TypeError, "inputs must be one of"),
])
def test_bad_registrations_are_refused(field, value, error, match):
    before = dict(_base._REGISTRY)
    with pytest.raises(error, match=match):
        _base.register_protocol(_toy(**{field: value}))
    assert _base._REGISTRY == before


def test_an_id_belongs_to_one_module():
    class Impostor(toy.ToyParams):
        pass

    Impostor.__module__ = "somewhere.else"
    with pytest.raises(ValueError, match="already registered by"):
        _base.register_protocol(_toy(params=Impostor))
    assert _base.protocol(toy.PROTOCOL_ID) is toy.PROTOCOL


def test_builtin_means_shipped_in_ldpfast_protocols():
    known = _base.protocols()
    assert known["grr"].builtin and known["grr"].module == "ldpfast.protocols.frequency.grr"
    assert not known[toy.PROTOCOL_ID].builtin


def test_client_base_checks_params_threads_and_rng():
    params = toy.ToyParams(m=8)
    with pytest.raises(ParameterError, match=r"params must be ToyParams, got GRRParams"):
        toy.ToyClient(_base.protocols()["grr"].example()[0])
    with pytest.raises(ParameterError, match="threads must be a non-negative int"):
        toy.ToyClient(params, threads=-1)
    with pytest.raises(ParameterError, match="rng must be None"):
        toy.ToyClient(params, rng="seed")
    assert not toy.ToyClient(params).seeded and toy.ToyClient(params, rng=1).seeded
    assert "rng='os-entropy'" in repr(toy.ToyClient(params))


def test_missing_hooks_are_named_by_the_layer_that_needs_them():
    params, values = toy._example()
    server = toy.ToyServer(params).update(toy.ToyClient(params, rng=1).perturb(values))
    est = server.frequencies(np.arange(4))
    assert np.isnan(est.std).all() and "registers none" in est.note
    assert estimates._uncertainty_for(server, np.arange(4))[0] is None
    assert toy.PROTOCOL_ID not in audit.AUDITED
    with pytest.raises(ParameterError, match="registers no audit plan"):
        audit.audit(params, reports=10)
    with pytest.raises(ParameterError, match="toy-count"):
        audit.default_params(toy.PROTOCOL_ID, 1.0)


def test_wire_fields_from_the_registration(monkeypatch):
    """Registration ``wire_fields`` are used when the Reports class has none; the class's
    own classmethod takes precedence; register_fields sets the registration's."""
    grr = _base.protocols()["grr"]
    params = grr.example()[0]
    assert [f.column for f in wire.fields(params)] == ["y"]
    monkeypatch.setitem(_base._REGISTRY, "grr", dataclasses.replace(grr, wire_fields=None))
    with pytest.raises(NotImplementedError, match="has no wire encoding"):
        wire.fields(params)
    wire.register_fields("grr", lambda p: [("y", wire.bits_for(p.d))])
    assert wire.report_bits(params) == wire.bits_for(params.d)
    # the toy's Reports.wire_fields classmethod wins over a registration hook
    monkeypatch.setitem(_base._REGISTRY, toy.PROTOCOL_ID, _toy(wire_fields=lambda p: [("y", 64), ("s", 1, (-1, 1))]))
    assert wire.report_bits(toy.ToyParams(m=8)) == 3 + 1
