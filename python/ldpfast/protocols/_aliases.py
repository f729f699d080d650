"""The bare class names a protocol module had before every protocol class was named
``<Protocol><Role>`` (``grr.Params`` is ``grr.GRRParams`` now): a module's ``__getattr__``
hands them out with a ``DeprecationWarning`` until ldpfast 0.3.0."""

from __future__ import annotations

import warnings
from typing import Callable, Mapping

#: The release that removes the bare names.
REMOVED_IN = "0.3.0"


def deprecated_names(module: str, protocol_id: str, renamed: Mapping[str, type]) -> Callable[[str], type]:
    """The module ``__getattr__`` of ``module``: each old name of ``renamed`` (``"Params"``)
    returns its class, with a warning naming the new name and ``ldpfast.protocol(protocol_id)``."""
    def __getattr__(name: str) -> type:
        cls = renamed.get(name)
        if cls is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(f"{module}.{name} is deprecated and will be removed in ldpfast {REMOVED_IN}; use "
                      f"{module}.{cls.__name__} or ldpfast.protocol({protocol_id!r}).{name}",
                      DeprecationWarning, stacklevel=2)
        return cls
    return __getattr__
