"""CONTRIBUTING.md's "Add a protocol" walkthrough, followed by a test.

The module shown in CONTRIBUTING.md is written as a new file of its family package (a
temporary folder added to the package's path, so it is discovered exactly like a file added
to ``python/ldpfast/protocols/<family>/``), and the protocol must then appear everywhere a built-in
one does: the registry and ``params_from_json``, every conformance check of
``ldpfast.testing.check_protocol`` (the contract, fuzzing, concurrency, the registered
variance against simulation, the privacy audit), the wire encoding's bit count, Dask,
standard errors, the audit command, the golden-file script and the test that asks for a
golden file, the simulation tables and ``ldpfast simulate --list``. If the walkthrough goes stale (an API it
uses changes, a layer stops reading the registry), this fails.
"""

import importlib
import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import ldpfast
import test_contract as contract
from ldpfast import _base, audit, estimates, testing, wire
from ldpfast.cli import main
from ldpfast.protocols._family import family_modules
from ldpfast.testing._case import slice_reports

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = re.compile(r"<!-- contributing-example: python/ldpfast/protocols/(\w+)/(\w+)\.py -->\s*```python\n(.*?)```",
                     re.S)


def _walkthrough():
    """(family, module name, code) of the protocol module in CONTRIBUTING.md."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    found = EXAMPLE.findall(text)
    assert len(found) == 1, "CONTRIBUTING.md must show exactly one marked protocol module"
    return found[0]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The walkthrough's protocol, registered for this module's tests only."""
    family, name, code = _walkthrough()
    folder = tmp_path_factory.mktemp(family)
    (folder / f"{name}.py").write_text(code, encoding="utf-8")
    package = importlib.import_module(f"ldpfast.protocols.{family}")
    before = set(_base.protocols())
    package.__path__.append(str(folder))
    added = []
    try:
        assert name in family_modules(package.__name__, package.__path__)
        added = sorted(set(_base.protocols()) - before)
        assert len(added) == 1, f"the walkthrough's module must register one protocol, registered {added}"
        yield _base.protocols()[added[0]]
    finally:
        package.__path__.remove(str(folder))
        sys.modules.pop(f"{package.__name__}.{name}", None)
        for pid in added:
            _base._REGISTRY.pop(pid, None)


def test_one_module_one_registration(demo):
    family, name, _ = _walkthrough()
    assert demo.builtin and demo.module == f"ldpfast.protocols.{family}.{name}"
    assert _base.protocol(demo.id) is demo
    params, _ = demo.example()
    assert _base.params_from_json(params.to_json()) == params


def test_every_conformance_check(demo):
    results = testing.check_protocol(demo.id)
    skipped = {r.name: r.detail for r in results if r.outcome == "skipped"}
    assert skipped == {"batch_with_unequal_columns_is_rejected": "a single column cannot have unequal lengths"}


def _reports(demo, seed=3):
    params, values = demo.example()
    return params, demo.client(params, rng=seed).perturb(values)


def test_wire_bits(demo):
    params, _ = _reports(demo)
    assert wire.report_bits(params) == wire.bits_for(params.d)


def test_dask(demo):
    dask = pytest.importorskip("dask")
    db = pytest.importorskip("dask.bag")
    from ldpfast import dask as ldask

    params, reports = _reports(demo)
    expected = demo.aggregator(params).update(reports).to_bytes()
    halves = [slice_reports(reports, 0, 1000), slice_reports(reports, 1000, len(reports))]
    with dask.config.set(scheduler="synchronous"):
        got = ldask.aggregate_bag(db.from_sequence(halves, npartitions=2), params)
    assert got.to_bytes() == expected


def test_standard_errors_come_from_the_registered_variance(demo):
    params, reports = _reports(demo)
    server = demo.aggregator(params).update(reports)
    est = server.frequencies()
    np.testing.assert_array_equal(est.candidates, np.arange(params.d))
    # the closed form is quadratic in f: the standard error is its value at the raw estimate, or at
    # the nearest point of [0, 1] where that is larger (issue 29: it falls below 0 for this protocol)
    raw, clipped = (params.variance(len(reports), f) for f in (est.values, est.values.clip(0, 1)))
    assert (clipped > raw).any()
    np.testing.assert_allclose(est.std, np.sqrt(np.maximum(raw, clipped)), rtol=1e-9)
    assert "DemoParams.variance" in est.note
    assert estimates._uncertainty_for(server, est.candidates)[0] is not None


def test_audit_and_its_command(demo, capsys):
    assert demo.id in audit.AUDITED
    # eps_lb is a 99%-confidence lower bound on the true loss (= epsilon for k-RR); seeded.
    result = audit.audit_protocol(demo.id, 1.0, reports=200_000, rng=7)
    assert result.eps_lb <= 1.0 and result.effective_epsilon == 1.0
    # the bound is informative: with 200,000 reports per input it is within 0.05 of eps
    # (Clopper-Pearson half-widths ~ 3 sqrt(p(1-p)/n) ~ 0.004 on p ~ 0.5 and 0.2).
    assert result.eps_lb > 0.95
    assert main(["audit", demo.id, "--eps", "1", "--reports", "20000", "--seed", "1"]) == 0
    assert demo.id in capsys.readouterr().out


def test_golden_file_is_asked_for_and_written(demo, tmp_path, monkeypatch):
    with pytest.raises(AssertionError, match=demo.id):
        contract.test_every_builtin_protocol_has_a_golden_file()
    spec = importlib.util.spec_from_file_location("make_golden", ROOT / "tests" / "golden" / "make_golden.py")
    make_golden = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_golden)
    shutil.copy(contract.GOLDEN / "MANIFEST.json", tmp_path / "MANIFEST.json")
    monkeypatch.setattr(make_golden, "HERE", tmp_path)
    assert make_golden.main([]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["MANIFEST.json", f"{demo.id}.bin", f"{demo.id}.estimate.npy"]
    entry = json.loads((tmp_path / "MANIFEST.json").read_text())[demo.id]
    agg = ldpfast.load((tmp_path / f"{demo.id}.bin").read_bytes())
    assert type(agg) is demo.aggregator and agg.params == _base.params_from_json(entry["params"])


def test_simulation_tables_and_simulate_command(demo, capsys, tmp_path):
    from ldpfast import experiments

    entry = experiments.ALGORITHMS["krr-demo"]
    assert experiments.algorithm_kind("krr-demo") == "values" and entry.classes(demo.example()[0]) == (
        demo.client, demo.aggregator)
    assert main(["simulate", "--list"]) == 0
    assert "krr-demo" in capsys.readouterr().out
    path = tmp_path / "res.json"
    assert main(["simulate", "-p", "krr-demo", "--data", "zipf", "--n", "500", "--eps", "1", "--runs", "2",
                 "--no-plot", "--quiet", "--json", str(path)]) == 0
    cell = json.loads(path.read_text())["cells"][0]
    assert cell["algorithm"] == "krr-demo" and cell["theory_mse"] > 0   # the registered closed form
