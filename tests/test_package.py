"""Every lazily imported submodule named by the package exists and imports."""

import importlib

import pytest

import ldpfast


@pytest.mark.parametrize("name", sorted(ldpfast._SUBMODULES))
def test_lazy_submodules_import(name):
    if name == "dask":
        pytest.importorskip("dask")
    if name == "arrow":
        pytest.importorskip("pyarrow")
    assert getattr(ldpfast, name) is importlib.import_module(f"ldpfast.{name}")
