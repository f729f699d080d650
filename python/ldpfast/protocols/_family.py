"""A protocol family sub-package: importing it imports (and so registers) its protocol
modules, those whose names do not start with ``_``."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Iterable, List


def family_modules(package: str, path: Iterable[str]) -> List[str]:
    """The protocol modules of the family package ``package`` (found on ``path``), by name."""
    return sorted(info.name for info in pkgutil.iter_modules(path) if not info.name.startswith("_"))


def load_family(package: str, path: Iterable[str]) -> None:
    """Import every protocol module of the family package ``package``."""
    for name in family_modules(package, path):
        importlib.import_module(f"{package}.{name}")
