"""Argument checks shared by every protocol: each error names the parameter, the
constraint and the value received."""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import numpy as np

from .errors import ParameterError

#: Largest accepted epsilon: e^eps must stay finite in double precision (SPEC 5.5).
MAX_EPSILON = 700.0


def check_epsilon(epsilon: Any) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer, np.floating)):
        raise ParameterError(f"epsilon must be a real number, got {epsilon!r}")
    value = float(epsilon)
    if not math.isfinite(value) or not 0.0 < value <= MAX_EPSILON:
        raise ParameterError(f"epsilon must be finite and in (0, {MAX_EPSILON:g}], got {epsilon!r}")
    return value


def check_int(name: str, value: Any, low: int, high: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{name} must be an int, got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ParameterError(f"{name} must be {bound}, got {value}")
    return value


def check_choice(name: str, value: Any, choices: Tuple[str, ...]) -> str:
    if value not in choices:
        raise ParameterError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_threads(threads: Any) -> int:
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 0:
        raise ParameterError(f"threads must be a non-negative int (0 = default), got {threads!r}")
    return int(threads)


def probability_threshold(prob: float) -> int:
    """``P = threshold / 2^64`` for the C++ Bernoulli draw (SPEC 5.5): the probability is
    resolved to 2^-64, after its own 53-bit float rounding."""
    return min(int(prob * 2**64), 2**64 - 1)
