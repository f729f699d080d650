"""A protocol shipped by another package (tests/plugin_example/, Warner's randomized response)
registers through the ``ldpfast.protocols`` entry point group and passes every conformance
check of ldpfast.testing, as the built-in protocols do.

The package is installed the way pip lays it out, into a temporary folder put on sys.path:
its module, and a ``.dist-info`` folder whose ``entry_points.txt`` holds the entry point its
pyproject.toml declares (what importlib.metadata reads; no build, no network)."""

import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import ldpfast
from ldpfast import _base, testing

EXAMPLE = Path(__file__).resolve().parent / "plugin_example"


def _declared(pyproject):
    """(name, version, {entry point: module}) of the example's pyproject.toml."""
    text = pyproject.read_text(encoding="utf-8")
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]
    name = re.search(r'^name = "([^"]+)"', project, re.M).group(1)
    version = re.search(r'^version = "([^"]+)"', project, re.M).group(1)
    section = text.split('[project.entry-points."ldpfast.protocols"]', 1)[1].split("\n[", 1)[0]
    return name, version, dict(re.findall(r'^([\w.-]+) = "([\w.:]+)"', section, re.M))


def _install(site, entry_points, name="ldpfast-warner", version="0.1.0"):
    dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    lines = [f"{key} = {value}" for key, value in entry_points.items()]
    (dist / "entry_points.txt").write_text("[ldpfast.protocols]\n" + "\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The example package, installed for one test; the registry forgets it afterwards."""
    name, version, entry_points = _declared(EXAMPLE / "pyproject.toml")
    assert entry_points == {"warner-rr": "ldpfast_warner"}
    assert "warner-rr" not in _base.protocols()
    shutil.copytree(EXAMPLE / "ldpfast_warner", tmp_path / "ldpfast_warner")
    _install(tmp_path, entry_points, name, version)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield _base.protocols()["warner-rr"]
    finally:
        _base._REGISTRY.pop("warner-rr", None)
        sys.modules.pop("ldpfast_warner", None)


def test_the_entry_point_registers_the_protocol_everywhere(plugin):
    assert plugin.module == "ldpfast_warner" and not plugin.builtin
    params, values = plugin.example()
    server = plugin.aggregator(params).update(plugin.client(params, rng=1).perturb(values))
    assert type(ldpfast.load(server.to_bytes())) is plugin.aggregator          # found through the registry
    assert _base.params_from_json(params.to_json()) == params
    est = server.frequencies()
    assert est.candidates.tolist() == [0, 1] and np.isfinite(est.std).all() and "WarnerParams" in est.note


def test_the_plugin_passes_every_conformance_check(plugin):
    results = testing.check_protocol(sys.modules["ldpfast_warner"])   # a module: each protocol it registers
    assert {r.protocol for r in results} == {"warner-rr"} and len(results) == len(testing.CHECK_NAMES)
    skipped = {r.name: r.detail for r in results if r.outcome == "skipped"}
    assert skipped == {"batch_with_unequal_columns_is_rejected": "a single column cannot have unequal lengths",
                       "absurd_parameter_values_fail_fast_and_small": "protocol 'warner-rr' has no integer parameter"}


def test_a_broken_plugin_is_skipped_with_a_warning(tmp_path, monkeypatch):
    _install(tmp_path, {"broken": "no_such_module_for_ldpfast"}, name="ldpfast-broken")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(RuntimeWarning, match="plug-in 'broken' .*failed to load: ModuleNotFoundError"):
        known = _base.protocols()
    assert "grr" in known and "broken" not in known
