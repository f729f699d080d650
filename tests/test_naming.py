"""One way in to every protocol (issue 30): ``ldpfast.protocol(name)`` hands out its classes,
every protocol class is named ``<Protocol><Role>``, no base class is reachable under a
protocol module's bare ``Params``/``Client``/``Server``/``Reports``, and the bare names the
modules had keep working, with a DeprecationWarning, until ldpfast 0.3.0."""

import importlib
import re

import pytest

import ldpfast
from ldpfast import _base
from ldpfast.errors import ParameterError

ROLES = ("Params", "Client", "Server", "Reports")

#: The modules whose classes had bare names before the rule, with the protocol each named.
BARE_NAMES = {
    "frequency.grr": ("grr", "GRR"), "frequency.blh": ("blh", "BLH"), "frequency.ocms": ("ocms", "OCMS"),
    "frequency.pgr": ("pgr", "PGR"), "frequency.hadamard": ("hrr", "HRR"),
    "frequency.hadaoracle": ("hadaoracle", "HadaOracle"), "frequency.hashtogram": ("hashtogram", "Hashtogram"),
    "frequency.rappor_cms": ("cms-rappor", "CMSRAPPOR"), "frequency.subset_selection": ("ss", "SubsetSelection"),
    "heavy.hadaheavy": ("hadaheavy", "HadaHeavy"), "heavy.pem": ("pem", "PEM"),
    "heavy.treehist_cs": ("treehist-cs", "TreeHistCS"), "sets.npcms": ("npcms", "NPCMS"),
    "sets.privsketch": ("privsketch", "PrivSketch"), "repeated.rappor": ("rappor", "RAPPOR"),
}


def test_protocol_hands_out_the_classes_by_id_or_alias():
    olh = ldpfast.protocol("olh")
    params = olh.Params(epsilon=2, d=10)   # the example: OLHParams, not the base class
    assert type(params).__name__ == "OLHParams" and params.d == 10
    reports = olh.Client(params, rng=1).perturb([1, 2, 3])
    assert isinstance(reports, olh.Reports)
    assert olh.Server(params).update(reports).n == 3
    assert (olh.id, olh.module) == ("olh", "ldpfast.protocols.frequency.olh")
    assert olh is _base.protocol("olh") and olh.variance is not None   # the registration, hooks included
    assert ldpfast.protocol("ocms-mse") is ldpfast.protocol("ocms")     # a simulation alias
    with pytest.raises(ParameterError, match=r"protocol must be one of .*got 'no-such'"):
        ldpfast.protocol("no-such")


def test_every_protocol_class_is_named_protocol_role():
    for pid, proto in _base.protocols().items():
        if not proto.builtin:
            continue
        names = [cls.__name__ for cls in (proto.Params, proto.Client, proto.Server, proto.Reports)]
        prefix = names[0][:-len("Params")]
        assert prefix and names == [prefix + role for role in ROLES], (pid, names)
        module = importlib.import_module(proto.module)
        assert all(getattr(module, name) is cls for name, cls in zip(names, (proto.params, proto.client,
                                                                           proto.aggregator, proto.reports)))


def test_no_bare_role_name_in_a_protocol_module():
    """A module's namespace has no ``Params``/``Client``/``Server``/``Reports``: not its own
    classes (deprecated names come from ``__getattr__``, with a warning), not a base class."""
    modules = {proto.module for proto in _base.protocols().values() if proto.builtin}
    assert len(modules) >= 25
    for name in modules:
        module = importlib.import_module(name)
        assert not set(ROLES) & set(vars(module)), name
    olh = importlib.import_module("ldpfast.protocols.frequency.olh")
    with pytest.raises(AttributeError):
        olh.Params  # noqa: B018  (was ldpfast._base.Params, "Params() takes no arguments")


@pytest.mark.parametrize("module, role", [(m, r) for m in sorted(BARE_NAMES) for r in ROLES])
def test_a_bare_name_warns_and_is_the_new_class(module, role):
    pid, prefix = BARE_NAMES[module]
    mod = importlib.import_module(f"ldpfast.protocols.{module}")
    new = f"{prefix}{role}"
    path = re.escape(f"ldpfast.protocols.{module}")
    message = (rf"{path}\.{role} is deprecated and will be removed in ldpfast 0\.3\.0; "
               rf"use {path}\.{new} or ldpfast\.protocol\('{pid}'\)\.{role}$")
    with pytest.warns(DeprecationWarning, match=message):
        cls = getattr(mod, role)
    assert cls is getattr(mod, new) is getattr(_base.protocol(pid), role)


def test_dir_shows_only_public_names():
    names = dir(ldpfast)
    assert not {"Any", "Dict", "List", "Optional", "importlib", "warnings", "annotations"} & set(names)
    assert all(not n.startswith("_") for n in names if n != "__version__")
    assert {"protocol", "protocols", "recommend", "load"} <= set(names)
    assert all(hasattr(ldpfast, n) for n in names)
