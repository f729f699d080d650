"""Every protocol of ldpfast, one module per protocol family: each module here is the one
public home of its protocols (``from ldpfast.protocols import ocms``; ``ldpfast.protocols.ocms``
also imports it on first use).

A module here that does not start with ``_`` is a protocol module: importing it registers
its protocols, one ``register_protocol(Protocol(...))`` call each (the classes and every
hook the generic layers read, see :mod:`ldpfast._registry`), and :func:`load_all` imports
them all. Modules starting with ``_`` hold pieces shared by several families
(``_registration`` the hooks several families fill alike). CONTRIBUTING.md walks through
adding a protocol.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import TYPE_CHECKING, List

if TYPE_CHECKING:
    # Type checkers see the protocol modules as attributes (``ldpfast.protocols.ocms``; the
    # ``__getattr__`` below imports them at run time); tests/test_layout.py keeps this list
    # equal to module_names().
    from . import (blh, dbitflip, grr, hadaheavy, hadamard, hadamard_variants, hadaoracle, hashtogram, longitudinal,
                   longitudinal_unary, multi_pcms, multiattribute, npcms, numeric, ocms, olh, pem, pgr, privsketch,
                   privsketch_ldp, ps_olh,
                   rappor, rappor_cms, rhr, subset_selection, svim, treehist_cs, unary)


def module_names() -> List[str]:
    """The protocol modules of this package, by name."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))


def load_all() -> None:
    """Import (and so register) every protocol module."""
    for name in module_names():
        importlib.import_module(f"{__name__}.{name}")


def __getattr__(name: str) -> ModuleType:
    if name in module_names():
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(module_names()))
