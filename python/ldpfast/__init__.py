"""ldpfast: frequency estimation and heavy hitters under local differential privacy.

Every protocol family is one module of :mod:`ldpfast.protocols` (imported on first use),
its one public home: :mod:`ldpfast.protocols.ocms`, :mod:`~ldpfast.protocols.grr`,
:mod:`~ldpfast.protocols.olh`, :mod:`~ldpfast.protocols.hadamard`, :mod:`~ldpfast.protocols.rhr`,
:mod:`~ldpfast.protocols.hadaoracle`, :mod:`~ldpfast.protocols.hadaheavy`,
:mod:`~ldpfast.protocols.privsketch` and :mod:`~ldpfast.protocols.privsketch_ldp` with their
baselines (:mod:`~ldpfast.protocols.multi_pcms`, :mod:`~ldpfast.protocols.ps_olh`,
:mod:`~ldpfast.protocols.svim`), [PAN]'s baselines :mod:`~ldpfast.protocols.rappor_cms` and
:mod:`~ldpfast.protocols.subset_selection`, and more (``ldpfast.protocols.module_names()``).
Shared pieces are in :mod:`ldpfast.kernels`, :mod:`ldpfast.theory`, :mod:`ldpfast.metrics`,
:mod:`ldpfast.datasets`. The old paths ``ldpfast.ocms``, ``ldpfast.grr``, ... still work,
with a ``DeprecationWarning``, until ldpfast 0.3.0.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List, Optional

import warnings

from . import _aggregator, _core, _deprecated, errors
from . import estimates as _estimates  # noqa: F401  (plugs server.frequencies() into the aggregators)
from ._memory import get_memory_limit, set_memory_limit
from ._progress import set_progress
from .domain import Domain, HashedDomain, PrefixDomain
from .planning import recommend

if TYPE_CHECKING:
    # Type checkers and IDEs see every lazily imported submodule (the ``__getattr__`` below
    # imports them at run time, on first use); keep this list equal to _SUBMODULES.
    from . import (
        arrow,
        assignment,
        audit,
        cli,
        dask,
        datasets,
        domain,
        estimates,
        experiments,
        kernels,
        metrics,
        planning,
        protocols,
        testing,
        theory,
        wire,
    )

__version__ = "0.1.0"

_SUBMODULES = frozenset({
    "protocols", "kernels", "theory", "metrics", "datasets", "experiments", "cli", "dask", "wire", "arrow",
    "estimates", "assignment", "audit", "testing", "domain", "planning",
})
_deprecated.install()

__all__ = ["backend_info", "set_backend", "set_num_threads", "set_memory_limit", "get_memory_limit", "load",
           "set_progress",
           "Domain", "HashedDomain", "PrefixDomain", "recommend", "errors", *sorted(_SUBMODULES)]


def load(blob: bytes, key: Optional[bytes] = None, domain: Any = None) -> "_aggregator.Aggregator":
    """The aggregator (Server) of whichever protocol serialized ``blob`` with
    ``to_bytes()``, e.g. a checkpoint or a worker's partial result. ``key``: the HMAC key
    the bytes were written with (``to_bytes(key=...)``), if any. ``domain``: the
    :class:`Domain` (vocabulary) the parameters were made with; bytes record it by its
    fingerprint only.

    Raises:
        ldpfast.errors.FormatError: the bytes are not a valid ldpfast aggregator (or fail
            authentication).
    """
    from ._base import load_aggregator

    return load_aggregator(blob, key=key, domain=domain)


def backend_info() -> Dict[str, Any]:
    """Which kernel copy runs and what this build and CPU offer.

    Returns a dict with ``active`` (``"scalar"``, ``"avx2"`` or ``"avx512"``; forced with
    the ``LDPFAST_ISA`` environment variable or :func:`set_backend`), ``supported`` (what
    this CPU runs), ``compiled`` (what this build contains) and ``threads`` (the default
    thread count for server-side aggregation; ``LDPFAST_NUM_THREADS`` overrides it).
    """
    return {
        "active": _core.active_backend(),
        "supported": list(_core.supported_backends()),
        "compiled": list(_core.compiled_backends()),
        "threads": _core.get_num_threads(),
    }


def set_backend(name: str) -> None:
    """Switch every kernel to the copy compiled for ``name`` (process-wide)."""
    if name not in _core.compiled_backends():
        raise errors.ParameterError(
            f"backend must be one of {list(_core.compiled_backends())}, got {name!r}")
    if name not in _core.supported_backends():
        raise errors.ParameterError(f"backend {name!r} is not supported by this CPU")
    _core.set_backend(name)


def set_num_threads(threads: int) -> None:
    """Default number of threads for server-side aggregation (0 = automatic)."""
    if not isinstance(threads, int) or threads < 0:
        raise errors.ParameterError(f"threads must be a non-negative int, got {threads!r}")
    _core.set_num_threads(threads)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    if name in _deprecated.MOVED:
        warnings.warn(_deprecated.module_message(name), DeprecationWarning, stacklevel=2)
        return _deprecated.moved_module(name)
    raise AttributeError(f"module 'ldpfast' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | _SUBMODULES)
