"""Batched k-ary randomized response (GRR), the client mechanism of OCMS+RR.

[PAN] section 2.1: on ``m >= 2`` symbols, keep the true symbol ``y`` with
probability ``p = e^eps / (e^eps + m - 1)``; otherwise output one of the other ``m - 1``
symbols uniformly. Sampling is exact integer arithmetic on ChaCha20 output (C++ core):

* the flip is ``u < threshold`` for a uniform 64-bit word ``u``, so its probability is
  ``threshold / 2^64`` (resolution 2^-64, see :func:`rr_flip_threshold`);
* the replacement symbol is uniform on ``[0, m-1)`` by rejection (no ``floor(u*m)`` bias),
  then shifted past ``y``.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike

from .. import _core
from .._random import KeySource, RngLike
from .._validate import check_epsilon, rr_threshold
from ..errors import DTypeError, ParameterError

__all__ = ["randomized_response", "rr_flip_threshold"]

_U64_MAX = 2**64 - 1


def _check_m(m: object) -> int:
    if isinstance(m, bool) or not isinstance(m, Integral):
        raise ParameterError(f"m must be an integer >= 2, got {m!r}")
    m = int(m)
    if m < 2 or m > _U64_MAX:
        raise ParameterError(f"m must be an integer in [2, 2^64 - 1], got {m}")
    return m


def rr_flip_threshold(epsilon: float, m: int) -> int:
    """The integer threshold ``t`` with which k-ary RR flips iff a uniform 64-bit word is ``< t``.

    The flip probability ``(m - 1) / (e^eps + m - 1)`` ([PAN] section 2.1) is rounded
    **up** to a multiple of 2^-64 from its exact value (80-digit arithmetic), so the
    realized mechanism is at most eps-LDP; budgets the sampler cannot represent to 2^-32
    relative accuracy are refused (see :func:`ldpfast._validate.rr_threshold`).

    Parameters
    ----------
    epsilon : float
        Privacy parameter (range: :func:`ldpfast._validate.rr_epsilon_range`).
    m : int
        Number of symbols, ``m >= 2``.

    Returns
    -------
    int
        Threshold in ``[0, 2^64 - 1]``.

    Raises
    ------
    ParameterError
        If ``epsilon`` or ``m`` is out of range or of the wrong type, or the flip
        probability cannot be represented faithfully.
    """
    eps = check_epsilon(epsilon)
    m = _check_m(m)
    return rr_threshold(eps, m)


def _as_symbols(values: ArrayLike, m: int) -> np.ndarray:
    arr = np.asarray(values)
    if not np.issubdtype(arr.dtype, np.integer):
        if arr.size == 0 and arr.dtype == np.float64:  # np.asarray([]) is float64
            return np.zeros(0, dtype=np.uint64)
        raise DTypeError(f"values must be an integer array, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ParameterError(f"values must be 1-D, got ndim={arr.ndim}")
    if arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < 0 or high >= m:
            if low < 0:
                bad = int(np.argmax(arr < 0))
            else:
                bad = int(np.argmax(arr.astype(np.uint64) >= np.uint64(m)))
            raise ParameterError(
                f"values must lie in [0, m) with m={m}, got values[{bad}] = {int(arr[bad])}")
    return np.ascontiguousarray(arr, dtype=np.uint64)


def randomized_response(values: ArrayLike, m: int, epsilon: float, rng: RngLike = None, *,
                        threads: int = 0) -> np.ndarray:
    """Perturb each symbol of ``values`` with k-ary randomized response on ``[0, m)``.

    Implements GRR as used by [PAN] (Algorithm 1, ``RR``): output ``y`` with
    probability ``e^eps / (e^eps + m - 1)``, else a uniform symbol among the other
    ``m - 1``. Each call is eps-LDP for every element. Exact integer sampling; see
    :func:`rr_flip_threshold` for the 2^-64 resolution of the flip probability.

    Parameters
    ----------
    values : array_like of int, 1-D
        True symbols, each in ``[0, m)``.
    m : int
        Number of symbols, ``m >= 2``.
    epsilon : float
        Privacy parameter (range: :func:`ldpfast._validate.rr_epsilon_range`).
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        ``None`` (default): a fresh key from OS entropy, the only choice for real clients.
        Anything else gives reproducible output and is **for simulation only**.
    threads : int, keyword-only
        Threads to use (0 = default). The output does not depend on it.

    Returns
    -------
    numpy.ndarray of uint64
        The perturbed symbols, same length as ``values``.

    Raises
    ------
    ParameterError
        Bad ``m``, ``epsilon``, ``rng`` or ``threads``, or a value outside ``[0, m)``.
    DTypeError
        ``values`` is not an integer array.
    """
    threshold = rr_flip_threshold(epsilon, m)
    m = int(m)
    if isinstance(threads, bool) or not isinstance(threads, Integral) or threads < 0:
        raise ParameterError(f"threads must be a non-negative int, got {threads!r}")
    symbols = _as_symbols(values, m)
    key = KeySource(rng).key()
    return _core.randomized_response(key, symbols, m, threshold, int(threads))
