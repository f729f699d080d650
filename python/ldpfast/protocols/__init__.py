"""Every protocol of ldpfast, one module per protocol family.

A module here that does not start with ``_`` is a protocol module: importing it registers
its protocols, one ``register_protocol(Protocol(...))`` call each (the classes and every
hook the generic layers read, see :mod:`ldpfast._registry`), and :func:`load_all` imports
them all. Modules starting with ``_`` hold pieces shared by several families
(``_registration`` the hooks several families fill alike). The modules that predate this
package are also importable under their historical path (``ldpfast.ocms`` is
``ldpfast.protocols.ocms``). CONTRIBUTING.md walks through adding a protocol.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import List


def module_names() -> List[str]:
    """The protocol modules of this package, by name."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))


def load_all() -> None:
    """Import (and so register) every protocol module."""
    for name in module_names():
        importlib.import_module(f"{__name__}.{name}")
