"""Argument checks shared by every protocol: each error names the parameter, the
constraint and the value received.

Scalars: :func:`check_int` (the one integer check), :func:`check_real`, :func:`check_bool`,
:func:`check_epsilon` and the randomized-response ranges (:func:`rr_threshold`),
:func:`check_choice`, :func:`check_threads`. Arrays:
:func:`check_array` (a report column: dtype, dimensions, optional cast with range check),
:func:`uint64_column` (integers from any input, no silent conversion), :func:`check_below`
(a range ``[0, bound)``), :func:`check_bits` (+-1 values) and the client-input forms built
on them (:func:`check_values`, :func:`as_values`, :func:`candidate_array`,
:func:`optional_index_array`).
"""

from __future__ import annotations

import decimal
import functools
import math
from typing import Any, Optional, Tuple

import numpy as np

from . import _budget
from .errors import DTypeError, ParameterError, ReportError

#: Smallest accepted epsilon, 2^-20 (about 9.5e-7). Closed forms such as ``e^eps - 1`` keep
#: at least 32 significant bits in double precision above it, and no estimate overflows.
MIN_EPSILON = 2.0**-20
#: Largest accepted epsilon, ``log(2^64 (2^32 - 1))`` rounded down: the largest budget any
#: 64-bit randomized-response sampler can represent (see :func:`rr_threshold`); each
#: mechanism's own limit is lower (binary RR: 22.18) and its Params say so.
MAX_EPSILON = 66.5
#: The C++ samplers flip iff a uniform 64-bit word is below an integer threshold ``t``.
_TWO64 = 2**64
#: Fidelity bound of :func:`rr_threshold`: flip and keep probabilities >= 2^-32 and
#: ``p - q >= 2^-31``, so rounding ``t`` moves each probability and ``p - q`` by a relative
#: 2^-32 at most.
_MIN_PROBABILITY = 2.0**-32
_RANGE = f"[{MIN_EPSILON:.6g}, {MAX_EPSILON:g}]"


def check_epsilon(epsilon: Any) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer, np.floating)):
        raise ParameterError(f"epsilon must be a real number, got {epsilon!r}")
    value = float(epsilon)
    if not math.isfinite(value) or not MIN_EPSILON <= value <= MAX_EPSILON:
        raise ParameterError(f"epsilon must be finite and in {_RANGE}, got {epsilon!r}")
    return value


def check_binary_epsilon(epsilon: Any) -> float:
    """:func:`check_epsilon`, then the binary-RR range of :func:`rr_threshold` (at most
    ``log(2^32 - 1) = 22.18``)."""
    value = check_epsilon(epsilon)
    rr_threshold(value, 2)
    return value


def check_derived_range(epsilon: float, g: int, rule: str, high: int = 2**62) -> int:
    """``g`` derived from epsilon by ``rule`` (a hash range such as ``round(e^eps) + 1``)
    must be at most ``high``: refuse the epsilon, naming the largest usable one."""
    if g > high:
        raise ParameterError(f"epsilon must be <= {math.log(high - 1):.6g} so that {rule} <= 2^62, got {epsilon!r}")
    return g


def rr_epsilon_range(m: int) -> Tuple[float, float]:
    """The budgets ``[low, high]`` :func:`rr_threshold` accepts for RR over ``m`` symbols:
    ``high = log((m-1)(2^32-1))`` (flip probability >= 2^-32), ``low`` the larger of
    ``log((m-1)/(2^32-1))`` (keep probability >= 2^-32) and ``log((2^31+m-1)/(2^31-1))``
    (``p - q >= 2^-31``)."""
    high = math.log(m - 1) + math.log(2.0**32 - 1)
    low = max(math.log(m - 1) - math.log(2.0**32 - 1), math.log1p(m / (2.0**31 - 1)))
    return low, high


@functools.lru_cache(maxsize=4096)
def _exact_threshold(budget: float, m: int) -> int:
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        e = decimal.Decimal(budget).exp()             # correctly rounded to 80 digits
        exact = decimal.Decimal(_TWO64 * (m - 1)) / (e + (m - 1))
        return int(exact.to_integral_value(rounding=decimal.ROUND_CEILING))


def rr_threshold(budget: float, m: int, name: str = "epsilon") -> int:
    """The integer threshold ``t`` for k-ary randomized response over ``m`` symbols with
    budget ``budget`` (``m = 2``: a binary flip): the C++ sampler flips (moves to a uniform
    other symbol) iff a uniform 64-bit word is ``< t``, so the flip probability is exactly
    ``f = t / 2^64`` and the mechanism is ``log((1 - f)(m - 1)/f)``-LDP.

    ``t = ceil(2^64 (m - 1)/(e^budget + m - 1))``, computed with 80 significant digits, so
    ``f`` is at least the exact flip probability and the effective epsilon is **at most**
    ``budget`` (never above it), and below it by at most ``2^-64 (1/f + 1/(1-f))``.

    Refused (ParameterError naming ``name``, the value and the usable range of
    :func:`rr_epsilon_range`): budgets whose flip or keep probability is below 2^-32 or
    whose ``p - q = (e^budget - 1)/(e^budget + m - 1)`` is below 2^-31. Inside, the
    2^-64 resolution changes ``f``, ``1 - f``, ``q = f/(m-1)`` and ``p - q`` by a relative
    2^-32 at most, so the effective epsilon is within 2^-31 of ``budget`` and an estimator
    debiased with the exact probabilities is biased by at most 2^-32 of the expected
    matching count: below 2^-32 sqrt(n) standard deviations, under 1/4000 of one for up to
    2^40 reports. (Above the range the sampler could not flip at all for large budgets:
    eps >= 44.4 was deterministic binary RR.)
    """
    low, high = rr_epsilon_range(m)
    if not (math.isfinite(budget) and budget > 0):
        raise ParameterError(f"{name} must be finite and > 0, got {budget!r}")
    t = _exact_threshold(float(budget), int(m))
    min_count = int(_MIN_PROBABILITY * _TWO64)
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        e = decimal.Decimal(float(budget)).exp()
        gap_ok = (e - 1) / (e + (m - 1)) >= decimal.Decimal(2 * _MIN_PROBABILITY)
    if not (min_count <= t <= _TWO64 - min_count and gap_ok):
        raise ParameterError(
            f"{name} must be in [{low:.6g}, {high:.6g}] for randomized response over {m} symbols "
            f"(the 64-bit sampler represents its flip probability to 2^-32 relative there), got {budget!r}")
    return t


def rr_effective_epsilon(threshold: int, m: int) -> float:
    """The epsilon randomized response over ``m`` symbols really satisfies with flip
    threshold ``threshold`` (flip probability ``threshold / 2^64``):
    ``log((2^64 - t)(m - 1)/t)`` (inf for ``t = 0``), rounded up to a double
    (:func:`ldpfast._budget.effective`)."""
    if threshold <= 0:
        return math.inf
    return _budget.effective(_budget.rr_loss(threshold, m))


def check_int(name: str, value: Any, low: int, high: Optional[int] = None) -> int:
    """``value`` as a Python int in ``[low, high]`` (``high=None``: no upper bound); bools,
    floats and other types are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    number = int(value)
    if number < low or (high is not None and number > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ParameterError(f"{name} must be {bound}, got {number}")
    return number


def check_real(name: str, value: Any, low: float = 0.0, high: float = math.inf, high_closed: bool = False) -> float:
    """``value`` as a float: a finite real number (not a bool) in ``(low, high)``, or
    ``(low, high]`` with ``high_closed``."""
    ok = (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
          and math.isfinite(value) and low < value and (value <= high if high_closed else value < high))
    if not ok:
        if math.isinf(high):
            rule = "a finite positive number" if low == 0 else f"a finite number > {low:g}"
        else:
            rule = f"a number in ({low:g}, {high:g}{']' if high_closed else ')'}"
        raise ParameterError(f"{name} must be {rule}, got {value!r}")
    return float(value)


def check_bool(name: str, value: Any) -> bool:
    """``value`` as a Python bool (a ``bool`` or ``numpy.bool_``; 0 and 1 are refused)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def check_choice(name: str, value: Any, choices: Tuple[str, ...]) -> str:
    if value not in choices:
        raise ParameterError(f"{name} must be one of {list(choices)}, got {value!r}")
    return choices[choices.index(value)]


def check_threads(threads: Any) -> int:
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 0:
        raise ParameterError(f"threads must be a non-negative int (0 = default), got {threads!r}")
    return int(threads)


def probability_threshold(prob: float) -> int:
    """``P = threshold / 2^64`` for the C++ Bernoulli draw, rounded up (more flipping).
    Only as exact as the double ``prob``: privacy-relevant flips use :func:`rr_threshold`,
    which rounds from the exact probability."""
    return min(math.ceil(prob * 2**64), 2**64 - 1)


# -- arrays ----------------------------------------------------------------------------------
_U64 = 2**64


def check_array(name: str, value: Any, dtype: Any, ndim: int = 1, cast: bool = False) -> np.ndarray:
    """A report column as a contiguous array of ``dtype`` with ``ndim`` dimensions.

    ``cast=False``: the dtype must be exactly ``dtype`` (no silent casts; DTypeError).
    ``cast=True``: any integer array whose values fit ``dtype`` is converted (DTypeError for
    a non-integer dtype, ReportError naming the range otherwise). A wrong number of
    dimensions raises ReportError."""
    arr = np.asarray(value)
    dtype = np.dtype(dtype)
    if not cast and arr.dtype != dtype:
        raise DTypeError(f"{name} must have dtype {dtype.name}, got {arr.dtype}")
    if arr.ndim != ndim:
        raise ReportError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if arr.dtype != dtype:
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise DTypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
        info = np.iinfo(dtype)
        if arr.size and (int(arr.min()) < info.min or int(arr.max()) > info.max):
            raise ReportError(f"{name} values must fit {dtype.name}, got range "
                              f"[{int(arr.min())}, {int(arr.max())}]")
    return np.ascontiguousarray(arr, dtype=dtype)


def uint64_column(value: Any, name: str, error: type = ReportError) -> np.ndarray:
    """``value`` (an int, a sequence of ints or an integer numpy array) as a contiguous
    1-D uint64 array, without silent conversions: negatives, values ``>= 2^64``,
    non-integers (floats, bools, strings) and multi-dimensional input raise ``error``
    naming ``name`` and the offending value. A contiguous uint64 array is used as is
    (not copied)."""
    if isinstance(value, np.ndarray):
        arr = _python_ints(value, name, error) if value.dtype == object and value.ndim == 1 else value
    elif isinstance(value, (bool, np.bool_)):
        raise error(f"{name} must be integers, got {value!r}")
    elif isinstance(value, (int, np.integer)):
        if not 0 <= int(value) < _U64:
            raise error(f"{name} must be integers in [0, 2^64), got {int(value)}")
        return np.array([int(value)], dtype=np.uint64)
    else:
        try:
            arr = np.asarray(value)
        except (OverflowError, ValueError, TypeError) as exc:
            raise error(f"{name} must be a sequence of integers: {exc}") from None
        if arr.dtype.kind in "fO" and arr.ndim == 1:
            arr = _python_ints(value, name, error)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise error(f"{name} must be one-dimensional, got shape {arr.shape}")
    kind = arr.dtype.kind
    if kind == "i":
        if arr.size and arr.min() < 0:
            bad = int(np.argmax(arr < 0))
            raise error(f"{name} must be non-negative integers, got {int(arr[bad])} at index {bad}")
    elif kind != "u":
        raise error(f"{name} must hold integers, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.uint64)


def _python_ints(values: Any, name: str, error: type) -> np.ndarray:
    out = np.empty(len(values), dtype=np.uint64)
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise error(f"{name} must hold integers, got {v!r} at index {i}")
        if not 0 <= int(v) < _U64:
            raise error(f"{name} must be integers in [0, 2^64), got {int(v)} at index {i}")
        out[i] = int(v)
    return out


def check_below(arr: np.ndarray, bound: int, name: str, what: str = "in", error: type = ReportError,
                label: Optional[str] = None) -> None:
    """Every value of the integer array ``arr`` in ``[0, bound)``; else ``error`` naming the
    first offender and its index: ``"{name} must be {what} [0, {bound}), ..."``, or, with
    ``label`` (the parameter the bound comes from), ``"{name} must be < {label}={bound}, ..."``."""
    if not arr.size or bound >= _U64 or int(arr.max()) < bound:
        return
    flat = arr.ravel()
    bad = int(np.argmax(flat >= np.uint64(bound) if flat.dtype.kind == "u" else flat >= bound))
    rule = f"< {label}={bound}" if label else f"{what} [0, {bound})"
    raise error(f"{name} must be {rule}, got {int(flat[bad])} at index {bad}")


def check_values(value: Any, bound: int, name: str = "values", what: str = "integers in",
                 error: type = ParameterError, distinct: bool = False) -> np.ndarray:
    """:func:`uint64_column` then :func:`check_below`: client values or query candidates as
    uint64, each in ``[0, bound)``; ``distinct=True`` also refuses repeated values."""
    arr = uint64_column(value, name, error)
    check_below(arr, bound, name, what, error)
    if distinct and np.unique(arr).size != arr.size:
        raise error(f"{name} must be distinct")
    return arr


def check_bits(name: str, bits: np.ndarray) -> None:
    """Every value of ``bits`` is -1 or +1 (ReportError naming the first other one)."""
    wide = bits.astype(np.int16).ravel()
    if wide.size and not np.all(np.abs(wide) == 1):
        bad = int(np.flatnonzero(np.abs(wide) != 1)[0])
        raise ReportError(f"{name} must be -1 or +1, got {int(wide[bad])} at flat index {bad}")


def as_values(values: Any, d: int, name: str = "values") -> np.ndarray:
    """Client inputs (or query candidates) as a contiguous uint64 array, each in ``[0, d)``
    (ParameterError; DTypeError for a non-integer dtype)."""
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ParameterError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise DTypeError(f"{name} must be integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "i" and arr.size and arr.min() < 0:
        raise ParameterError(f"{name} must be in [0, {d}), got {int(arr.min())}")
    arr = np.ascontiguousarray(arr, dtype=np.uint64)
    check_below(arr, d, name, "in", ParameterError)
    return arr


def candidate_array(candidates: Any, d: int, name: str = "candidates", distinct: bool = False) -> np.ndarray:
    """Query candidates (1-D integers in ``[0, d)``, with ``distinct=True`` no repeats) as
    int64 indices (ParameterError, or DTypeError for a non-integer dtype)."""
    arr = np.asarray(candidates)
    if arr.ndim != 1:
        raise ParameterError(f"{name} must be 1-D, got ndim={arr.ndim}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise DTypeError(f"{name} must be integers, got dtype {arr.dtype}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= d):
        raise ParameterError(f"{name} must lie in [0, d={d}), got range [{int(arr.min())}, {int(arr.max())}]")
    if distinct and np.unique(arr).size != arr.size:
        raise ParameterError(f"{name} must be distinct")
    return arr.astype(np.int64)


def optional_index_array(name: str, value: Any, n: int) -> Optional[np.ndarray]:
    """Server-assigned indices (groups, rows) for ``n`` users as uint32, or None."""
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ParameterError(f"{name} must be a 1-D array of length {n}, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise DTypeError(f"{name} must be integers, got dtype {arr.dtype}")
    if arr.size and arr.dtype.kind == "i" and arr.min() < 0:
        raise ParameterError(f"{name} must be non-negative, got {int(arr.min())}")
    if arr.size and int(arr.max()) >= 2**32:
        raise ParameterError(f"{name} must be < 2^32, got {int(arr.max())}")
    return np.ascontiguousarray(arr, dtype=np.uint32)
