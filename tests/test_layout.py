"""The package layout: every module imports on its own (no import cycle), every protocol is
registered exactly once, and the OLH-style protocols agree on the hash range g (the old
import paths: tests/test_deprecations.py; the import graph: tests/test_layers.py)."""

import math
import pathlib
import subprocess
import sys

import pytest

import ldpfast
from ldpfast import theory

_PACKAGE = pathlib.Path(ldpfast.__file__).resolve().parent
_PYTHONPATH = str(_PACKAGE.parent)


def _module_names():
    names = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        parts = path.relative_to(_PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] != "__main__":
            names.append(".".join(parts))
    return names


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": _PYTHONPATH, "PATH": "/usr/bin:/bin"})


def test_module_list_reaches_the_protocols():
    names = _module_names()
    assert {"ldpfast.protocols._hadamard_layout", "ldpfast.protocols.frequency.olh"} <= set(names)


@pytest.mark.parametrize("name", _module_names())
def test_every_module_imports_first_in_a_fresh_interpreter(name):
    # An import cycle fails only for the module imported first (e.g. a module that star-imports
    # one which imports names back from it), so each module gets its own interpreter.
    if name in ("ldpfast.dask",):
        pytest.importorskip("dask")
    if name in ("ldpfast.arrow",):
        pytest.importorskip("pyarrow")
    result = _run(f"import {name}")
    assert result.returncode == 0, result.stderr


def test_a_protocol_module_imports_without_its_whole_family():
    result = _run("import sys, ldpfast.protocols.frequency.grr\n"
                  "print(sorted(m for m in sys.modules if m.startswith('ldpfast.protocols.frequency.')))")
    assert result.returncode == 0, result.stderr
    assert eval(result.stdout) == ["ldpfast.protocols.frequency.grr"]


def test_every_protocol_is_registered_exactly_once():
    result = _run(
        "import collections, ldpfast._base as b\n"
        "calls = collections.Counter()\n"
        "real = b.register_protocol\n"
        "def counting(protocol, *args, **kwargs):\n"
        "    calls[protocol.id] += 1\n"
        "    return real(protocol, *args, **kwargs)\n"
        "b.register_protocol = counting\n"
        "import ldpfast.protocols.sets.privsketch, ldpfast.protocols.frequency.hadamard\n"
        "b.protocols()\n"
        "print(sorted(calls.items()))\n")
    assert result.returncode == 0, result.stderr
    calls = dict(eval(result.stdout))
    assert len(calls) >= 25 and {"olh", "ps-olh", "svim-items", "multi-pcms-min", "hrr"} <= set(calls)
    assert {pid: n for pid, n in calls.items() if n != 1} == {}


def test_he_variance_is_one_function():
    assert ldpfast.theory.he_variance is ldpfast.theory.hadamard.he_variance is ldpfast.theory.ocms.he_variance
    # HE is CMS+RR with m = 2 ([PAN] section 4): both closed forms agree
    for eps in (0.5, 1.0, 3.0):
        for f in (0.0, 0.3):
            assert theory.he_variance(eps, 1e4, f) == pytest.approx(theory.ocms_variance(eps, 2, 1e4, f), rel=1e-12)


# -- one OLH hash range ------------------------------------------------------------------------
def _olh_style_gs(eps):
    """g of every protocol that reports with OLH, at default parameters."""
    from ldpfast.protocols.sets import ps_olh, svim

    candidates = tuple(range(100))
    padded = svim.SVIMPaddedParams(epsilon=eps, d=1000, candidates=candidates, L=1)
    assert not padded.uses_grr            # |C| = 100 >= L e^eps (4L - 1) + 1 (eps <= 3): the OLH branch
    return {
        "olh": ldpfast.protocols.frequency.olh.OLHParams(epsilon=eps, d=1000).g,
        "ps-olh": ps_olh.PSOLHParams(epsilon=eps, d=1000, pad_len=3).g,
        "svim-items": svim.SVIMItemParams(epsilon=eps, d=1000).g,
        "svim-lengths": svim.SVIMLengthParams(epsilon=eps, d=1000, candidates=candidates).g,
        "svim-padded": padded.g,
        "theory.olh_g": theory.olh_g(eps),
    }


def test_olh_g_rounds_an_exact_tie_upward_everywhere():
    eps = math.log(2.5)
    assert math.exp(eps) == 2.5      # the tie is exact in floating point
    assert set(_olh_style_gs(eps).values()) == {4}   # round(2.5) + 1 with the tie upward


@pytest.mark.parametrize("eps, g", [(1.0, 4), (math.log(3.4), 4), (math.log(3.6), 5), (3.0, 21)])
def test_olh_g_agrees_off_ties(eps, g):
    assert set(_olh_style_gs(eps).values()) == {g}


def test_amplified_ps_olh_uses_the_same_rule_on_its_budget():
    eps_prime = math.log(3 * math.expm1(1.0) + 1.0)
    params = ldpfast.protocols.sets.ps_olh.PSOLHParams(epsilon=1.0, d=100, pad_len=3, amplify=True)
    assert params.g == theory.olh_g(eps_prime)


def test_theory_ps_olh_variance_defaults_to_the_same_g():
    eps = math.log(2.5)
    assert theory.ps_olh_variance(eps, 1e4, 0.1, pad_len=2) == theory.ps_olh_variance(eps, 1e4, 0.1, pad_len=2, g=4)


def _type_checking_names(package):
    """The names a package's ``if TYPE_CHECKING:`` block imports (none without a block)."""
    import ast

    tree = ast.parse(pathlib.Path(package.__file__).read_text(encoding="utf-8"))
    blocks = [node for node in tree.body
              if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"]
    return sorted(alias.name for block in blocks for node in block.body for alias in node.names)


def test_type_checkers_see_every_family_and_protocol_module():
    """``ldpfast.protocols`` imports its families lazily, and a family imports its modules by
    name; their ``TYPE_CHECKING`` blocks name them all, so that
    ``ldpfast.protocols.<family>.<module>`` is typed for a user's checker."""
    import importlib

    from ldpfast.protocols._family import family_modules

    import ldpfast.protocols as package

    assert _type_checking_names(package) == package.module_names(), \
        "add the new family to ldpfast/protocols/__init__.py"
    for name in package.module_names():
        family = importlib.import_module(f"ldpfast.protocols.{name}")
        assert _type_checking_names(family) == family_modules(family.__name__, family.__path__), \
            f"list the protocol modules of ldpfast/protocols/{name}/ in its __init__.py's TYPE_CHECKING block"
