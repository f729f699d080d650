"""Parameter files (``Params.to_json()``) with missing, unexpected or mistyped fields: a
one-line ParameterError from ``params_from_json`` (and ``Params.from_json``/``from_dict``),
and ``ldpfast aggregate --params FILE`` prints it on one line and exits 2 (no traceback)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ldpfast
from ldpfast.protocols.frequency import grr, ocms
from ldpfast._base import params_from_json, protocols
from ldpfast.errors import LdpfastError, ParameterError

WRONG_VALUES = ["x", [1, 2], None, {"a": 1}, 1.5, -3, True, 2**70]


def _examples():
    return [pytest.param(proto.example()[0], id=pid) for pid, proto in sorted(protocols().items()) if proto.example]


@pytest.mark.parametrize("params", _examples())
def test_missing_unexpected_and_mistyped_fields_are_one_line_errors(params):
    doc = json.loads(params.to_json())
    fields = list(doc["params"])
    required = [f for f in fields if _required(params, f)]
    for name in required:
        short = json.loads(params.to_json())
        del short["params"][name]
        with pytest.raises(ParameterError, match=rf"missing \['{name}'\]"):
            params_from_json(json.dumps(short))
    extra = json.loads(params.to_json())
    extra["params"]["bogus"] = 1
    with pytest.raises(ParameterError, match=r"unexpected \['bogus'\]"):
        params_from_json(json.dumps(extra))
    for name in fields:
        for value in WRONG_VALUES:
            changed = json.loads(params.to_json())
            changed["params"][name] = value
            try:
                params_from_json(json.dumps(changed))
            except LdpfastError as exc:
                assert "\n" not in str(exc) and str(exc)
            # any other exception (TypeError, AttributeError, ...) fails the test


def _required(params, name):
    import dataclasses

    field = {f.name: f for f in dataclasses.fields(params)}[name]
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def test_from_json_and_from_dict_name_the_fields():
    with pytest.raises(ParameterError, match=r"grr parameters must have the fields \['epsilon', 'd'\]: "
                                             r"missing \['d'\], unexpected \['e'\]"):
        grr.GRRParams.from_json('{"protocol": "grr", "params": {"epsilon": 1.0, "e": 3}}')
    with pytest.raises(ParameterError, match="m"):
        ocms.OCMSParams.from_dict({**ocms.OCMSParams.optimal(1.0, 100).to_dict(), "m": "four"})


RUNNER = "import sys; from ldpfast.cli import main; sys.exit(main())"


@pytest.mark.parametrize("change", [
    lambda p: p.pop("d"), lambda p: p.update(bogus=1), lambda p: p.update(d="many"), lambda p: p.update(d=[3])])
def test_aggregate_with_a_bad_params_file_exits_2_with_one_line(tmp_path, change):
    pytest.importorskip("pyarrow")
    doc = json.loads(grr.GRRParams(epsilon=1.0, d=16).to_json())
    change(doc["params"])
    params_file = tmp_path / "params.json"
    params_file.write_text(json.dumps(doc))
    (tmp_path / "reports").mkdir()
    env_path = str(Path(ldpfast.__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-c", RUNNER, "aggregate", "--params", str(params_file), "--reports",
                           str(tmp_path / "reports"), "--state", str(tmp_path / "state"), "--output",
                           str(tmp_path / "out.bin")],
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": env_path, "PATH": ""})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ldpfast aggregate: error: "), proc.stderr
    assert "d" in lines[0].split("error: ")[1] or "bogus" in lines[0]
