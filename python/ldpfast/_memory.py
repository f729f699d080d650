"""The memory budget: servers refuse, before allocating, parameters whose state would exceed
it, and every call on a server (update, merge, query) refuses, before allocating, work
whose temporaries would take the server's memory over it (instead of failing inside numpy
after minutes, or swapping).

The limit is, in order of precedence: :func:`set_memory_limit`, the environment variable
``LDPFAST_MEMORY_LIMIT`` (bytes, read at first use), or half of the physical memory.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional, Union

import numpy as np

from .errors import ParameterError

__all__ = ["set_memory_limit", "get_memory_limit", "check_allocation"]

_limit: Optional[int] = None
_default: Optional[int] = None  # the environment's or the machine's limit, once read


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # not POSIX: assume 8 GiB
        return 8 << 30


def _parse_limit(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ParameterError(f"{name} must be a positive number of bytes, got {value!r}")
    try:
        limit = int(value)
    except ValueError:
        raise ParameterError(f"{name} must be a positive number of bytes, got {value!r}") from None
    if limit <= 0:
        raise ParameterError(f"{name} must be a positive number of bytes, got {value!r}")
    return limit


def set_memory_limit(limit: Optional[int]) -> None:
    """The most memory (bytes) one server may use: its state, and beside it the temporaries
    of one call on it (an update's copy of the batch and its scratch, a merge, a query's
    candidates, decode buffers and results); ``None`` goes back to the default
    (``LDPFAST_MEMORY_LIMIT`` or half of the physical memory). A server or call that would
    exceed it raises ParameterError before allocating."""
    global _limit, _default
    _limit = None if limit is None else _parse_limit(limit, "memory limit")
    _default = None


def get_memory_limit() -> int:
    """The memory budget in bytes (see :func:`set_memory_limit`)."""
    global _default
    if _limit is not None:
        return _limit
    if _default is None:  # read at first use (and after set_memory_limit(None)): asked on every call
        env = os.environ.get("LDPFAST_MEMORY_LIMIT")
        _default = _parse_limit(env, "LDPFAST_MEMORY_LIMIT") if env else _physical_memory() // 2
    return _default


def _human(nbytes: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes} bytes"


def check_allocation(nbytes: int, what: Union[str, Callable[[], str]], held: int = 0) -> None:
    """Raise ParameterError naming ``what`` (or what the function ``what`` returns) and the
    size when ``nbytes`` (beside ``held`` bytes the server already holds) exceeds the
    budget."""
    limit = get_memory_limit()
    if nbytes + held > limit:
        if callable(what):
            what = what()
        beside = f" beside the {_human(held)} the server holds" if held else ""
        raise ParameterError(
            f"{what} would need {_human(nbytes)} ({nbytes} bytes){beside}, over the memory limit of "
            f"{_human(limit)}; use smaller parameters or batches, or raise the limit with "
            "ldpfast.set_memory_limit(bytes) or LDPFAST_MEMORY_LIMIT")


def _fits(buffer: Optional[np.ndarray], dtype: np.dtype, size: int) -> bool:
    """True when ``buffer`` (a kept buffer) can take ``size`` values of ``dtype``: same
    dtype, large enough and at most 4 times too large (a buffer grown for one huge batch is
    let go)."""
    return buffer is not None and buffer.dtype == dtype and size <= buffer.size <= 4 * max(size, 1 << 12)


def _length(values: Any) -> int:
    """Number of values in an array or sequence (1 for a scalar, 0 when unknown)."""
    if isinstance(values, np.ndarray):
        return int(values.size)
    try:
        return len(values)
    except TypeError:
        return 0 if hasattr(values, "__iter__") else 1
