"""Fast Walsh-Hadamard transform (in place, unnormalized)."""

from __future__ import annotations

import numbers

import numpy as np

from .. import _core
from ..errors import DTypeError, ParameterError

__all__ = ["fwht"]

_MAX_THREADS = 1 << 16


def fwht(data: np.ndarray, threads: int = 0) -> np.ndarray:
    """Apply the Walsh-Hadamard transform in place: ``data <- H data``.

    ``H[r, c] = (-1)^popcount(r & c)`` is the unnormalized Sylvester-Hadamard matrix
    ([WW] Fact 2.1), so applying the transform twice multiplies by the
    length. A 2-D array is transformed row by row.

    The butterfly stages ``h = 1, 2, 4, ...`` are applied in this order with the textbook
    ``(a + b, a - b)`` operations, so the result is bit-for-bit the same on every backend
    and for every thread count, floats included (with inf/NaN inputs, NaN outputs are NaN
    everywhere but their sign and payload bits may differ). Each float output is within
    ``log2(n) * eps * sum(|x|)`` (to first order) of the exact value.

    Parameters
    ----------
    data : numpy.ndarray
        1-D array, or 2-D array of rows, C-contiguous, aligned and writable; dtype float32,
        float64 or int64; last dimension a power of two in ``[2, 2^30]``. It is never
        copied or cast. int64 transforms are exact while ``max|x| * length < 2^63``
        (beyond that they wrap modulo 2^64, like numpy integer arithmetic).
    threads : int, optional
        Threads to use; 0 (default) means the library default (see
        :func:`ldpfast.set_num_threads`). Rows are split among threads; rows of >= 2^18
        elements that do not split evenly (a single row, say) are themselves cut into
        blocks transformed in parallel, then combined in parallel over column ranges. The
        GIL is released while the transform runs.

    Returns
    -------
    numpy.ndarray
        ``data`` itself, transformed.

    Raises
    ------
    DTypeError
        ``data`` is not a numpy array, or has another dtype.
    ParameterError
        Wrong number of dimensions, length not a power of two in ``[2, 2^30]``, an array
        that is not C-contiguous, aligned and writable, or ``threads`` not an integer in
        ``[0, 2^16]``.
    """
    if type(threads) is not int or not 0 <= threads <= _MAX_THREADS:
        threads = _checked_threads(threads)
    # The C++ binding validates data (type, dtype, shape, layout) without copying;
    # translate its errors into ldpfast's.
    try:
        _core.fwht(data, threads)
    except TypeError as exc:
        raise DTypeError(str(exc)) from None
    except ValueError as exc:
        raise ParameterError(str(exc)) from None
    return data


def _checked_threads(threads: object) -> int:
    if (isinstance(threads, bool) or not isinstance(threads, numbers.Integral)
            or not 0 <= int(threads) <= _MAX_THREADS):
        raise ParameterError(f"threads must be an integer in [0, {_MAX_THREADS}] (0 = default), "
                             f"got {threads!r}")
    return int(threads)
