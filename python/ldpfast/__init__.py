"""ldpfast: frequency estimation and heavy hitters under local differential privacy.

Every protocol is in a family sub-package of :mod:`ldpfast.protocols` (imported on first
use), grouped by the data a user holds: :mod:`~ldpfast.protocols.frequency` (OCMS, GRR, OLH,
the Hadamard protocols, HadaOracle, [PAN]'s baselines, ...), :mod:`~ldpfast.protocols.heavy`
(HadaHeavy, TreeHist-CS, PEM), :mod:`~ldpfast.protocols.sets` (PrivSketch and its baselines),
:mod:`~ldpfast.protocols.repeated` (RAPPOR and the longitudinal oracles),
:mod:`~ldpfast.protocols.numeric` and :mod:`~ldpfast.protocols.multiattribute`.
:func:`protocol` finds any protocol's classes by id (``ldpfast.protocol("ocms").Params``); a
protocol module's one public home is ``ldpfast.protocols.<family>.<module>``. Shared pieces
are in :mod:`ldpfast.kernels`, :mod:`ldpfast.theory`, :mod:`ldpfast.metrics`,
:mod:`ldpfast.datasets`. The old paths ``ldpfast.ocms``, ``ldpfast.grr``, ... and
``ldpfast.protocols.ocms``, ... still work, with a ``DeprecationWarning``, until ldpfast 0.3.0.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List, Optional

import warnings

from . import _aggregator, _core, _deprecated, errors
from . import estimates as _estimates  # noqa: F401  (plugs server.frequencies() into the aggregators)
from ._memory import get_memory_limit, set_memory_limit
from ._progress import set_progress
from ._registry import protocol
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
           "set_progress", "protocol",
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
    return sorted({*__all__, "__version__"})
