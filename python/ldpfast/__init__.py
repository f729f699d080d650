"""ldpfast: frequency estimation and heavy hitters under local differential privacy.

Protocol families live in submodules (imported on first use; their code is in
:mod:`ldpfast.protocols`): :mod:`ldpfast.ocms`, :mod:`ldpfast.grr`, :mod:`ldpfast.olh`,
:mod:`ldpfast.hadamard`, :mod:`ldpfast.rhr`, :mod:`ldpfast.hadaoracle`, :mod:`ldpfast.hadaheavy`,
:mod:`ldpfast.privsketch` and :mod:`ldpfast.privsketch_ldp` with their baselines (:mod:`ldpfast.multi_pcms`,
:mod:`ldpfast.ps_olh`, :mod:`ldpfast.svim`), and [PAN]'s baselines :mod:`ldpfast.rappor_cms` and
:mod:`ldpfast.subset_selection`; shared pieces in :mod:`ldpfast.kernels`,
:mod:`ldpfast.theory`, :mod:`ldpfast.metrics`, :mod:`ldpfast.datasets`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from . import _core, errors
from . import estimates as _estimates  # noqa: F401  (plugs server.frequencies() into the aggregators)
from ._memory import get_memory_limit, set_memory_limit

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
        estimates,
        experiments,
        grr,
        hadaheavy,
        hadamard,
        hadamard_variants,
        hadaoracle,
        hashtogram,
        kernels,
        metrics,
        multi_pcms,
        npcms,
        ocms,
        olh,
        privsketch,
        privsketch_baselines,
        privsketch_ldp,
        protocols,
        ps_olh,
        rappor_cms,
        rhr,
        subset_selection,
        svim,
        theory,
        treehist_cs,
        wire,
    )

__version__ = "0.1.0"

_SUBMODULES = frozenset({
    "ocms", "grr", "hadamard", "hadaoracle", "hadaheavy", "privsketch", "kernels", "theory",
    "metrics", "datasets", "experiments", "cli", "dask", "wire", "arrow", "privsketch_baselines",
    "estimates", "rappor_cms", "subset_selection", "assignment", "hadamard_variants", "hashtogram", "treehist_cs",
    "npcms", "audit", "protocols", "olh", "multi_pcms", "ps_olh", "svim",
    "rhr", "privsketch_ldp",
})

__all__ = ["backend_info", "set_backend", "set_num_threads", "set_memory_limit", "get_memory_limit", "load",
           "errors", *sorted(_SUBMODULES)]


def load(blob: bytes, key: Optional[bytes] = None) -> Any:
    """The aggregator (Server) of whichever protocol serialized ``blob`` with
    ``to_bytes()``, e.g. a checkpoint or a worker's partial result. ``key``: the HMAC key
    the bytes were written with (``to_bytes(key=...)``), if any.

    Raises:
        ldpfast.errors.FormatError: the bytes are not a valid ldpfast aggregator (or fail
            authentication).
    """
    from ._base import load_aggregator

    return load_aggregator(blob, key=key)


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
    raise AttributeError(f"module 'ldpfast' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | _SUBMODULES)
