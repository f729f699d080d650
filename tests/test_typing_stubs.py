"""The typing surface shipped with the package matches what runs.

`_core.pyi` is hand-curated, so it can drift from the bindings: these tests compare its
names, parameter names and defaults with the signatures pybind11 records at run time, and
check that the lazily imported submodules are all visible to type checkers.
"""

import ast
import importlib.resources
import inspect
import re
from pathlib import Path

import pytest

import ldpfast
from ldpfast import _core

PACKAGE_DIR = Path(ldpfast.__file__).parent
STUB = ast.parse((PACKAGE_DIR / "_core.pyi").read_text())


def _stub_functions(body):
    return {node.name: node for node in body if isinstance(node, ast.FunctionDef)}


def _stub_params(node):
    """[(name, has_default)] of a stub function, positional-only parameters named argN."""
    args = node.args
    positional = args.posonlyargs + args.args
    defaults = [False] * (len(positional) - len(args.defaults)) + [True] * len(args.defaults)
    names = [f"arg{i}" if i < len(args.posonlyargs) else a.arg for i, a in enumerate(positional)]
    return list(zip(names, defaults))


def _runtime_params(func):
    """[(name, has_default)] parsed from pybind11's signature line in the docstring."""
    first = func.__doc__.splitlines()[0]
    inside = re.match(r"^\w+\((.*)\) -> ", first).group(1)
    params, depth, current = [], 0, ""
    for char in inside + ",":
        if char == "," and depth == 0:
            if current.strip():
                params.append(current.strip())
            current = ""
            continue
        depth += char in "([{"
        depth -= char in ")]}"
        current += char
    return [(p.split(":")[0].strip(), "=" in p) for p in params]


def _public_names(module):
    return {name for name in dir(module) if not name.startswith("_")}


def test_package_ships_py_typed_and_stub():
    files = {p.name for p in importlib.resources.files("ldpfast").iterdir()}
    assert {"py.typed", "_core.pyi"} <= files


def test_stub_declares_exactly_the_extension_names():
    declared = {node.name for node in STUB.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert declared == _public_names(_core)


@pytest.mark.parametrize("name", sorted(_stub_functions(STUB.body)))
def test_stub_function_signature_matches_binding(name):
    assert _stub_params(_stub_functions(STUB.body)[name]) == _runtime_params(getattr(_core, name))


def test_stub_field_class_matches_binding():
    (field,) = [node for node in STUB.body if isinstance(node, ast.ClassDef) and node.name == "Field"]
    methods = _stub_functions(field.body)
    for name in ("prime", "binary"):
        assert _stub_params(methods[name]) == _runtime_params(getattr(_core.Field, name))
    assert isinstance(inspect.getattr_static(_core.Field, "is_binary"), property)
    assert "is_binary" in methods
    assert _public_names(_core.Field) == set(methods)


def test_type_checkers_see_every_lazy_submodule():
    tree = ast.parse((PACKAGE_DIR / "__init__.py").read_text())
    (guard,) = [node for node in tree.body
                if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"]
    imported = {alias.name for stmt in guard.body for alias in stmt.names}
    assert imported == set(ldpfast._SUBMODULES)
