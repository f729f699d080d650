"""Single-valued data (:class:`ValueData`: one value per user, the setting of frequency
oracles such as OCMS+RR, HE, RHR, OLH, GRR), with the values of interest ``X`` an experiment
evaluates on and the prior ``f*`` [PAN] gives MSE-OCMS; read from files or made from
set-valued data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union

import numpy as np

from .._random import RngLike
from ..errors import FormatError, ParameterError
from .sets import SetData, _domain_size, _lines, _resolve

__all__ = ["ValueData", "load_values", "sets_to_values"]


@dataclass(frozen=True, eq=False)
class ValueData:
    """One value per user, in ``[0, d)``, plus what an experiment evaluates on.

    Attributes:
        values: int64 array of length ``n`` (user ``i`` holds ``values[i]``).
        d: dictionary size; every value is ``< d``.
        candidates: the values of interest ``X`` of [PAN] Eq. 19 (int64, distinct), on
            which worst-case MSE, l1 and l2 are measured.
        f_star: the prior ``f*`` (upper bound on ``max f`` over ``X``) that [PAN] gives
            MSE-OCMS+RR on this data set.
        name: short name; ``note``: one line saying what the data set measures.
    """

    values: np.ndarray
    d: int
    candidates: np.ndarray
    f_star: float = 1.0
    name: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        values = np.ascontiguousarray(self.values, dtype=np.int64)
        candidates = np.ascontiguousarray(self.candidates, dtype=np.int64)
        if not isinstance(self.d, (int, np.integer)) or self.d < 1:
            raise ParameterError(f"d must be a positive integer, got {self.d!r}")
        if values.ndim != 1:
            raise ParameterError(f"values must be one-dimensional, got shape {values.shape}")
        if values.size and (values.min() < 0 or values.max() >= self.d):
            raise ParameterError(
                f"values must lie in [0, d) = [0, {self.d}), got range "
                f"[{int(values.min())}, {int(values.max())}]")
        if candidates.size and (candidates.min() < 0 or candidates.max() >= self.d):
            raise ParameterError(f"candidates must lie in [0, d) = [0, {self.d})")
        if np.unique(candidates).size != candidates.size:
            raise ParameterError("candidates must be distinct")
        if not 0.0 <= float(self.f_star) <= 1.0:
            raise ParameterError(f"f_star must be in [0, 1], got {self.f_star!r}")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "candidates", candidates)
        object.__setattr__(self, "d", int(self.d))

    @property
    def n(self) -> int:
        """Number of users (reports)."""
        return int(self.values.size)

    def counts(self, x: Optional[np.ndarray] = None) -> np.ndarray:
        """Number of users holding each value of ``x`` (default: the candidates)."""
        x = self.candidates if x is None else np.asarray(x, dtype=np.int64)
        uniq, cnt = np.unique(self.values, return_counts=True)
        pos = np.searchsorted(uniq, x)
        found = pos < uniq.size
        found[found] = uniq[pos[found]] == x[found]
        out = np.zeros(x.shape, dtype=np.int64)
        out[found] = cnt[pos[found]]
        return out

    def frequencies(self, x: Optional[np.ndarray] = None) -> np.ndarray:
        """True frequencies ``f(x)`` (fractions of users) at ``x`` (default: candidates)."""
        return self.counts(x) / max(self.n, 1)

    def max_frequency(self) -> float:
        """``max_x f(x)`` over the whole domain."""
        if self.n == 0:
            return 0.0
        return float(np.unique(self.values, return_counts=True)[1].max() / self.n)

    def with_candidates(self, candidates: np.ndarray) -> "ValueData":
        """The same data evaluated on other values of interest."""
        return ValueData(self.values, self.d, candidates, self.f_star, self.name, self.note)


def _check_int(name: str, value: object, low: int, high: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ParameterError(f"{name} must be {bound}, got {value}")
    return int(value)


def _top_values(values: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` most frequent values (ties broken by the smaller value), most frequent first."""
    uniq, cnt = np.unique(values, return_counts=True)
    order = np.lexsort((uniq, -cnt))
    return uniq[order[:k]]


def load_values(name_or_path: str, d: Optional[int] = None, *,
                candidates: Union[int, Sequence[int], None] = 100, f_star: float = 1.0) -> ValueData:
    """Load a file (optionally ``.gz``) with one user per line holding one integer value.

    Blank lines are skipped.

    Args:
        name_or_path: path of the file.
        d: dictionary size (default: largest value + 1).
        candidates: values of interest: an int ``k`` for the ``k`` most frequent values,
            a sequence of values, or None for the whole domain ``[0, d)``.
        f_star: prior for MSE-OCMS (1 = no prior knowledge).

    Raises:
        FormatError: a line holds more than one token, or a token is not an integer.
        ParameterError: a negative value, or ``d`` not above every value.
    """
    path, name = _resolve(name_or_path)
    values = []
    for lineno, line in enumerate(_lines(path), start=1):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) != 1:
            raise FormatError(
                f"{name} line {lineno}: expected one value per line, got {len(tokens)} tokens "
                "(for set-valued files use load_sets and sets_to_values)")
        try:
            values.append(int(tokens[0]))
        except ValueError:
            raise FormatError(f"{name} line {lineno}: value must be an integer, got {tokens[0]!r}") from None
    arr = np.array(values, dtype=np.int64)
    d = _domain_size(arr, d, "values", empty_size=1)
    return ValueData(arr, d, _candidates(arr, d, candidates), f_star, name,
                     f"{name}: one value per user from a file")


def _candidates(values: np.ndarray, d: int, spec: Union[int, Sequence[int], None]) -> np.ndarray:
    if spec is None:
        return np.arange(d, dtype=np.int64)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return _top_values(values, _check_int("candidates", spec, 1))
    return np.asarray(spec, dtype=np.int64)


def sets_to_values(sets: SetData, mode: str = "entries", *, rng: RngLike = None,
                   candidates: Union[int, Sequence[int], None] = 100) -> ValueData:
    """Turn set-valued data into single-valued data.

    Args:
        sets: the users' item sets.
        mode: ``"entries"``: every (user, item) entry becomes one report (n = number of
            entries; this is how [PAN] treats Kosarak: a user with k items would spend
            k*eps, so it measures estimation accuracy, not a per-user guarantee);
            ``"sample"``: each non-empty user reports one item drawn uniformly from the
            set (n = non-empty users; eps-LDP per user; frequencies are then of the
            sampled items).
        rng: seed or numpy Generator for ``"sample"`` (simulation only).
        candidates: as in :func:`load_values`.
    """
    if mode == "entries":
        values = sets.items.copy()
        note = f"{sets.name}: every (user, item) entry is one report"
    elif mode == "sample":
        sizes = sets.sizes()
        users = np.flatnonzero(sizes > 0)
        gen = np.random.default_rng(rng)
        picks = sets.offsets[users] + (gen.random(users.size) * sizes[users]).astype(np.int64)
        values = sets.items[picks]
        note = f"{sets.name}: one uniformly sampled item per user"
    else:
        raise ParameterError(f"mode must be 'entries' or 'sample', got {mode!r}")
    return ValueData(values, sets.d, _candidates(values, sets.d, candidates), 1.0, sets.name, note)
