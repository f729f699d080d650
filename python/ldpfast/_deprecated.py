"""The old import paths of the protocol modules, kept working until ldpfast 0.3.0 with a
``DeprecationWarning`` that names each name's one public home: those of ldpfast 0.1
(``ldpfast.ocms``, ``ldpfast.grr``, ..., ``ldpfast.privsketch_baselines``) and the flat ones of
0.2 (``ldpfast.protocols.ocms``, ...; :data:`ldpfast.protocols.FLAT_PATHS`), before the
protocols moved into family sub-packages (``ldpfast.protocols.frequency.ocms``).

An old path is a small stand-in module, not the protocol module under a second name: its
attributes are looked up in the modules listed in :data:`MOVED` (the first that has the
name) and every lookup warns. The ``ldpfast`` and ``ldpfast.protocols`` packages hand it out
for ``ldpfast.<old>`` and ``from ldpfast import <old>``; :class:`_Finder` (on ``sys.meta_path``)
for ``import ldpfast.<old>`` and ``from ldpfast.<old> import Name``, which pickles made with
those paths also use. The protocol modules are named, not imported: they sit below this
module's layer only by name.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

from .protocols import FLAT_PATHS

#: The release that removes the old paths.
REMOVED_IN = "0.3.0"
_MISSING = object()

#: Old module path (under ``ldpfast.``) -> the modules (under ``ldpfast.``) that hold its
#: names now, searched in order: the protocol module of the same name, then those that the
#: old module re-exported (OLH and RHR were in ``hadamard``; the sketch baselines in
#: ``privsketch``; some helpers of ``hadamard`` are internal now and simply go).
MOVED: Dict[str, Tuple[str, ...]] = {
    **{name: (f"protocols.{FLAT_PATHS[name]}.{name}",) for name in (
        "grr", "hadaheavy", "hadamard_variants", "hadaoracle", "hashtogram", "multi_pcms", "npcms", "ocms", "olh",
        "privsketch_ldp", "ps_olh", "rappor_cms", "rhr", "subset_selection", "svim", "treehist_cs")},
    "hadamard": ("protocols.frequency.hadamard", "protocols.frequency.olh", "protocols.frequency.rhr",
                 "kernels.field", "protocols._hadamard_layout", "_validate"),
    "privsketch": ("protocols.sets.privsketch", "protocols.sets.privsketch_ldp", "protocols.sets.multi_pcms",
                   "protocols.sets.ps_olh", "protocols.sets.svim", "errors"),
    "privsketch_baselines": ("protocols.sets.multi_pcms", "protocols.sets.ps_olh", "protocols.sets.svim"),
    **{f"protocols.{name}": (f"protocols.{family}.{name}",) for name, family in FLAT_PATHS.items()},
}


class _MovedModule(types.ModuleType):
    """``ldpfast.<old>``: each attribute comes from its new home, with a warning."""

    _homes: Tuple[str, ...]

    def __getattr__(self, name: str) -> object:
        if name == "__all__":  # for ``from ldpfast.<old> import *``
            return sorted({n for home in self._homes for n in getattr(importlib.import_module(home), "__all__", ())})
        if name.startswith("__"):
            raise AttributeError(name)
        found = _lookup(self._homes, name)
        if found is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r} (its names moved to "
                                 f"{' / '.join(self._homes)})")
        value, home = found
        new_name = value.__name__ if isinstance(value, type) else name   # grr.Params is GRRParams now
        warnings.warn(f"{self.__name__}.{name} is deprecated and will be removed in ldpfast {REMOVED_IN}"
                      + ("" if _internal(home) else f"; use {home}.{new_name}"), DeprecationWarning, stacklevel=2)
        return value

    def __dir__(self) -> List[str]:
        return sorted({name for home in self._homes for name in dir(importlib.import_module(home))})


def _internal(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def _lookup(homes: Sequence[str], name: str) -> Optional[Tuple[object, str]]:
    """``(value, public home)`` of ``name``: the first of ``homes`` that exports it (``__all__``),
    else the module that defines it (internal when its path has a ``_`` part), else None."""
    modules = [importlib.import_module(home) for home in homes]
    for home, module in zip(homes, modules):
        if name in getattr(module, "__all__", ()):
            return getattr(module, name), home
    for module in modules:
        with warnings.catch_warnings():  # a module's own deprecated bare name (grr.Params): one warning, the caller's
            warnings.simplefilter("ignore", DeprecationWarning)
            value = getattr(module, name, _MISSING)
        if value is not _MISSING:
            return value, getattr(value, "__module__", None) or module.__name__
    return None


def _homes(fullname: str) -> Tuple[str, ...]:
    return tuple(f"ldpfast.{name}" for name in MOVED[fullname[len("ldpfast."):]])


def module_message(old: str) -> str:
    """The warning for the module path ``ldpfast.<old>`` itself."""
    public = [home for home in _homes(f"ldpfast.{old}") if not _internal(home)]
    return f"ldpfast.{old} is deprecated and will be removed in ldpfast {REMOVED_IN}; use {' / '.join(public)}"


def moved_module(old: str) -> types.ModuleType:
    """The stand-in module of ``ldpfast.<old>`` (one per process, kept in ``sys.modules``)."""
    fullname = f"ldpfast.{old}"
    module = sys.modules.get(fullname)
    if module is None:
        module = importlib.import_module(fullname)  # through _Finder
    return module


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``ldpfast.<old>`` for the import statement (no file exists for it)."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[types.ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if not fullname.startswith("ldpfast.") or fullname[len("ldpfast."):] not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _MovedModule(spec.name, f"Deprecated: the names of {' / '.join(_homes(spec.name))}.")
        module._homes = _homes(spec.name)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def install() -> None:
    """Put :class:`_Finder` on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
