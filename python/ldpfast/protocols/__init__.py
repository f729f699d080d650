"""Every protocol of ldpfast, in one sub-package per family, grouped by the data a user
holds: :mod:`~ldpfast.protocols.frequency` (one value of a known domain),
:mod:`~ldpfast.protocols.heavy` (heavy hitters of a huge domain), :mod:`~ldpfast.protocols.sets`
(a set of items), :mod:`~ldpfast.protocols.repeated` (memoized, for repeated collection),
:mod:`~ldpfast.protocols.numeric` (numbers) and :mod:`~ldpfast.protocols.multiattribute`
(records). ``ldpfast.protocol("ocms")`` finds a protocol's classes by id; its module's one
public home is ``ldpfast.protocols.<family>.<module>`` (``from ldpfast.protocols.frequency
import ocms``). The flat paths of ldpfast 0.2 (``ldpfast.protocols.ocms``) still work, with a
``DeprecationWarning``, until ldpfast 0.3.0 (:data:`FLAT_PATHS`).

A family's protocol modules are those that do not start with ``_`` (imported on first use, or
when the family is; :func:`load_all` imports them all); each module makes one
``register_protocol(Protocol(...))`` call per protocol (the
classes and every hook the generic layers read, see :mod:`ldpfast._registry`). A family's
``_`` modules are its own helpers; the ``_`` modules here are shared by several families
(``_registration`` the hooks several families fill alike). :func:`load_all` imports every
family. CONTRIBUTING.md walks through adding a protocol.
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Dict, List

from ._family import load_family

if TYPE_CHECKING:
    # Type checkers see the family packages as attributes (``ldpfast.protocols.frequency``; the
    # ``__getattr__`` below imports them at run time); tests/test_layout.py keeps this list
    # equal to module_names().
    from . import frequency, heavy, multiattribute, numeric, repeated, sets

#: The protocol modules that sat directly in this package before the families, by name: the
#: family that holds each now. ``ldpfast.protocols.<name>`` is a deprecated stand-in for
#: ``ldpfast.protocols.<family>.<name>`` until ldpfast 0.3.0 (:mod:`ldpfast._deprecated`).
FLAT_PATHS: Dict[str, str] = {
    **dict.fromkeys(("blh", "grr", "hadamard", "hadamard_variants", "hadaoracle", "hashtogram", "ocms", "olh", "pgr",
                     "rappor_cms", "rhr", "subset_selection", "unary"), "frequency"),
    **dict.fromkeys(("hadaheavy", "pem", "treehist_cs"), "heavy"),
    **dict.fromkeys(("multi_pcms", "npcms", "privsketch", "privsketch_ldp", "ps_olh", "svim"), "sets"),
    **dict.fromkeys(("dbitflip", "longitudinal", "longitudinal_unary", "rappor"), "repeated"),
}


def module_names() -> List[str]:
    """The family packages of this package, by name."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))


def load_all() -> None:
    """Import (and so register) every protocol module of every family (again on each call: a
    module added to a family's path since its import is found too)."""
    for name in module_names():
        family = importlib.import_module(f"{__name__}.{name}")
        load_family(family.__name__, family.__path__)


def __getattr__(name: str) -> ModuleType:
    if name in module_names():
        return importlib.import_module(f"{__name__}.{name}")
    if name in FLAT_PATHS:
        warnings.warn(f"{__name__}.{name} is deprecated and will be removed in ldpfast 0.3.0; use "
                      f"{__name__}.{FLAT_PATHS[name]}.{name}", DeprecationWarning, stacklevel=2)
        return importlib.import_module(f"{__name__}.{name}")  # the stand-in of ldpfast._deprecated
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(module_names()))
