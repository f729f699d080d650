"""A protocol family sub-package: its protocol modules are those whose names do not start
with ``_``. :func:`load_family` imports (and so registers) them all, as
:func:`ldpfast.protocols.load_all` does for every family; a family may import them when it is
imported, or on first use (:func:`lazy_family`)."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Callable, Iterable, List


def family_modules(package: str, path: Iterable[str]) -> List[str]:
    """The protocol modules of the family package ``package`` (found on ``path``), by name."""
    return sorted(info.name for info in pkgutil.iter_modules(path) if not info.name.startswith("_"))


def load_family(package: str, path: Iterable[str]) -> None:
    """Import every protocol module of the family package ``package``."""
    for name in family_modules(package, path):
        importlib.import_module(f"{package}.{name}")


def lazy_family(package: str, path: Iterable[str]) -> Callable[[str], ModuleType]:
    """The ``__getattr__`` of a family package that imports a protocol module on first use
    (``ldpfast.protocols.frequency.grr`` imports ``grr`` and what it needs, not the family)."""
    def __getattr__(name: str) -> ModuleType:
        if name in family_modules(package, path):
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return __getattr__
