"""Fast Walsh-Hadamard transform (in place, unnormalized)."""

from __future__ import annotations

import numpy as np

from .. import _core
from ..errors import DTypeError, ParameterError

__all__ = ["fwht"]

_DTYPES = (np.float32, np.float64, np.int64)


def fwht(data: np.ndarray, threads: int = 0) -> np.ndarray:
    """Transform ``data`` in place: ``data <- H data`` for a 1-D array, or each row of a
    2-D array, with ``H[r, c] = (-1)^popcount(r & c)`` (unnormalized, so applying it
    twice multiplies by the length). The last dimension must be a power of two in
    ``[2, 2^30]``; dtype float32, float64 or int64 (integers transform exactly while
    ``|values| * length < 2^63``). The array is never copied: a non-contiguous or
    read-only array, or another dtype, raises. Returns ``data``."""
    if not isinstance(data, np.ndarray):
        raise DTypeError(f"data must be a numpy array, got {type(data).__name__}")
    if data.dtype not in _DTYPES:
        raise DTypeError(f"data must have dtype float32, float64 or int64, got {data.dtype}")
    if not data.flags.c_contiguous:
        raise ParameterError("data must be C-contiguous (fwht works in place and never copies)")
    if not data.flags.writeable:
        raise ParameterError("data must be writable")
    if data.ndim not in (1, 2):
        raise ParameterError(f"data must be 1-D or 2-D, got ndim={data.ndim}")
    length = data.shape[-1]
    if length < 2 or length > 2**30 or length & (length - 1):
        raise ParameterError(f"data's last dimension must be a power of two in [2, 2^30], got {length}")
    _core.fwht(data, threads)
    return data
