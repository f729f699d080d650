"""Runtime kernel dispatch: backend_info, set_backend, and the LDPFAST_ISA variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ldpfast
from ldpfast import _core
from ldpfast.errors import ParameterError

PYTHON_DIR = str(Path(ldpfast.__file__).resolve().parent.parent)


def run_python(code, **env):
    environment = dict(os.environ)
    environment["PYTHONPATH"] = PYTHON_DIR + os.pathsep + environment.get("PYTHONPATH", "")
    environment.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                          timeout=60)


def test_backend_info_keys():
    info = ldpfast.backend_info()
    assert set(info) == {"active", "supported", "compiled", "threads"}
    assert info["active"] in info["supported"]
    assert set(info["supported"]) <= set(info["compiled"])
    assert "scalar" in info["supported"]
    assert isinstance(info["threads"], int) and info["threads"] >= 1


def test_set_backend_each_supported(backend):
    assert ldpfast.backend_info()["active"] == backend
    assert _core.active_backend() == backend


def test_set_backend_restores_previous():
    previous = _core.active_backend()
    ldpfast.set_backend("scalar")
    try:
        assert _core.active_backend() == "scalar"
    finally:
        ldpfast.set_backend(previous)
    assert _core.active_backend() == previous


def test_unknown_backend_raises_naming_value():
    with pytest.raises(ParameterError, match="'neon'"):
        ldpfast.set_backend("neon")


@pytest.mark.skipif(set(_core.compiled_backends()) == set(_core.supported_backends()),
                    reason="every compiled backend runs on this CPU")
def test_unsupported_backend_raises():
    missing = sorted(set(_core.compiled_backends()) - set(_core.supported_backends()))[0]
    with pytest.raises(ParameterError, match=repr(missing)):
        ldpfast.set_backend(missing)


def test_env_var_forces_backend():
    result = run_python("import ldpfast; print(ldpfast.backend_info()['active'])", LDPFAST_ISA="scalar")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "scalar"


def test_env_var_invalid_value_fails_import():
    result = run_python("import ldpfast", LDPFAST_ISA="sse9")
    assert result.returncode != 0
    assert "LDPFAST_ISA must be one of scalar, avx2, avx512; got 'sse9'" in result.stderr
