"""In-place changes to an aggregator's state with exact rollback (:class:`Delta`), the state
container they change (:class:`_State`) and the sparse counting a batch's changes are built
from (see :class:`ldpfast._aggregator.Aggregator` for the template that commits them)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from .errors import IncompatibleError


class _State(Dict[str, Any]):
    """An aggregator's state: name -> array (or other value), owned by the aggregator and
    changed in place under its lock by :class:`Delta` commits (or, for aggregators that
    build a whole new state, replaced with one assignment). Caches derived from a state
    (e.g. decoded transforms) are stored as attributes of it; :meth:`changed`, which every
    commit calls before it writes, drops them."""

    def changed(self) -> None:
        """Drop the cached values derived from this state (it is about to change)."""
        self.__dict__.clear()


class Delta:
    """Changes to an aggregator's state, all computed from the batch (or the other
    aggregator) and the current state before any is written; :meth:`commit` then writes
    them in place, all or nothing.

    * :meth:`add` (and :meth:`add_counts`): ``state[name] += values`` at distinct flat
      positions. The old and new values of those positions are kept, so writing the new
      ones and, on failure, writing the old ones back are idempotent: an exception or a
      KeyboardInterrupt at any point of the commit leaves the state as it was. Cost and
      memory O(positions), i.e. O(batch).
    * :meth:`add_dense`: ``state[name] += values`` over the whole array (merges), chunk by
      chunk; a failed commit subtracts the chunks already added back out (integers: exact)
      and restores the chunk in flight from its saved old values. Temporaries O(chunk).
    * :meth:`replace`: ``state[name] = value`` (e.g. a tuple of kept report chunks).

    A sum that would wrap around the state's integer dtype is refused (IncompatibleError)
    before anything is written (``add``) or rolled back (``add_dense``). Each name may be
    changed by one step only."""

    # 64 KiB of 8-byte values per chunk: temporaries this small are reused from the
    # allocator's heap, where 512 KiB ones were fresh pages (faults, zeroing) every chunk
    # (2x slower merges and dense batch adds, bench/limits.py's OUE d = 1e5)
    _CHUNK = 1 << 13

    def __init__(self, state: "_State", budget: Optional[Callable[[int, str], None]] = None):
        self._state = state
        self._budget = budget  # checks a step's temporaries (bytes, what) against the memory budget
        self._steps: List[Any] = []
        self._names: Set[str] = set()
        self._outside: Dict[str, np.ndarray] = {}  # positions add_counts met beyond an array

    def _check(self, nbytes: int, what: str) -> None:
        if self._budget is not None:
            self._budget(nbytes, what)

    def _target(self, name: str) -> np.ndarray:
        if name in self._names:
            raise ValueError(f"state array {name!r} is changed twice in one Delta")
        self._names.add(name)
        array = self._state[name]
        flat: np.ndarray = array.reshape(-1)
        if not np.shares_memory(flat, array):  # reshape copied: not contiguous
            raise ValueError(f"state array {name!r} must be contiguous")
        return flat

    def add(self, name: str, values: Any, index: Any = None) -> "Delta":
        """``state[name].flat[index] += values`` (``index``: distinct flat positions;
        None: the whole array, ``values`` of its size)."""
        target = self._target(name)
        values = np.asarray(values).reshape(-1)
        count = target.size if index is None else np.size(index)
        # the old and new values and the index
        self._check(3 * count * target.itemsize, f"adding {count} values to the state array {name!r}")
        if values.dtype != target.dtype:
            if target.dtype.kind == "u" and values.size and values.min() < 0:
                raise ValueError(f"cannot add negative values to the unsigned state array {name!r}")
            values = values.astype(target.dtype)
        if index is None:
            old = target.copy()
        else:
            index = np.asarray(index, dtype=np.intp)
            old = target[index]
        new = _checked_sum(name, old, values, "adding the batch")
        self._steps.append(("write", target, index, old, new))
        return self

    def add_counts(self, name: str, positions: np.ndarray, weights: Optional[np.ndarray] = None,
                   size: Optional[int] = None) -> "Delta":
        """``state[name].flat[p] += (number of p in positions)`` (or the sum of their
        ``weights``, integers), via :func:`sparse_counts`. ``size`` (default: the array's
        size) bounds the positions; positions at or beyond the array's size are not added
        but recorded (see :meth:`touches`), e.g. a sentinel for out-of-range values."""
        length, count = self._state[name].size, np.size(positions)
        size = length if size is None else size
        # the positions as indices, and a histogram of the state's size when it is at most 8 of them
        self._check(16 * count + (8 * size if 8 * count >= size else 16 * count),
                    f"counting {count} reports into the state array {name!r}")
        index, sums = sparse_counts(positions, size, weights)
        inside = index < length
        if not inside.all():
            self._outside[name] = index[~inside]
            index, sums = index[inside], sums[inside]
        return self.add(name, sums, index)

    def touches(self, name: str, position: int) -> bool:
        """True when :meth:`add_counts` met ``position`` (at or beyond the array's size)."""
        return bool(np.any(self._outside.get(name, np.zeros(0, np.intp)) == position))

    def add_nonzero(self, name: str, values: np.ndarray) -> "Delta":
        """``state[name] += values`` (same size), writing only where ``values`` is not 0 (a
        batch's increments over the whole array, e.g. a decode's per-candidate counts)."""
        values = np.asarray(values).reshape(-1)
        index = np.flatnonzero(values)
        return self.add(name, values[index], index)

    def add_dense(self, name: str, values: np.ndarray, doing: str = "merging") -> "Delta":
        """``state[name] += values`` (same shape and dtype), written chunk by chunk (a merge,
        or a batch whose counts cover the whole array; ``doing`` names it in errors)."""
        target = self._target(name)
        values = np.asarray(values).reshape(-1)
        if values.shape != target.shape or values.dtype != target.dtype:
            raise IncompatibleError(f"state array {name!r} is {values.size} {values.dtype} values, expected "
                                    f"{target.size} {target.dtype}")
        # name, target, values, values added below, chunk in flight (lo, hi, old), undo in flight
        # (lo, hi, now), what is being done
        self._steps.append(["dense", name, target, values, 0, None, None, doing])
        return self

    def replace(self, name: str, value: Any) -> "Delta":
        """``state[name] = value``."""
        if name in self._names:
            raise ValueError(f"state entry {name!r} is changed twice in one Delta")
        self._names.add(name)
        self._steps.append(("replace", name, self._state.get(name), value))
        return self

    def commit(self) -> None:
        """Drop the state's caches, then write every step; on any exception (a
        KeyboardInterrupt included) undo them all and re-raise."""
        self._state.changed()
        try:
            for step in self._steps:
                if step[0] == "write":
                    _, target, index, _, new = step
                    target[slice(None) if index is None else index] = new
                elif step[0] == "replace":
                    self._state[step[1]] = step[3]
                else:
                    self._add_dense(step)
        except BaseException:
            self._rollback()
            raise

    def _add_dense(self, step: List[Any]) -> None:
        _, name, target, values = step[:4]
        for lo in range(0, target.size, self._CHUNK):
            hi = min(lo + self._CHUNK, target.size)
            old = target[lo:hi].copy()
            new = _checked_sum(name, old, values[lo:hi], step[7])
            step[5] = (lo, hi, old)  # in flight: restored from `old` whether written or not
            target[lo:hi] = new
            step[4] = hi             # chunks below hi are added
        step[5] = None

    def _rollback(self) -> None:
        # Every undo is idempotent: it writes saved values, and a dense step takes its
        # chunks back out one at a time, each from a saved copy, moving its record only
        # once the chunk is done; so a second interrupt restarts the rollback safely.
        while True:
            try:
                for step in reversed(self._steps):
                    if step[0] == "write":
                        _, target, index, old, _ = step
                        target[slice(None) if index is None else index] = old
                    elif step[0] == "replace":
                        self._state[step[1]] = step[2]
                    else:
                        self._undo_dense(step)
                return
            except KeyboardInterrupt:
                continue

    def _undo_dense(self, step: List[Any]) -> None:
        target, values = step[2], step[3]
        if step[6] is not None:  # a chunk's undo was interrupted: redo it from its saved values
            lo, hi, now = step[6]
            target[lo:hi] = np.subtract(now, values[lo:hi], dtype=target.dtype)
            step[4], step[6] = lo, None
        while step[4] > 0:
            hi = step[4]
            lo = (hi - 1) // self._CHUNK * self._CHUNK
            now = target[lo:hi].copy()
            step[6] = (lo, hi, now)
            target[lo:hi] = np.subtract(now, values[lo:hi], dtype=target.dtype)
            step[4], step[6] = lo, None
        if step[5] is not None:  # the chunk being added: back to its old values, written or not
            lo, hi, old = step[5]
            target[lo:hi] = old
            step[5] = None


def sparse_counts(positions: np.ndarray, size: int,
                  weights: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """``(index, sums)``: the distinct values of ``positions`` (integers in ``[0, size)``)
    and how often each occurs (or the sum of its integer ``weights``), in time and memory
    O(len(positions)): a histogram of ``size`` bins when the batch is at least 1/8 of it,
    else a sort."""
    positions = np.asarray(positions).reshape(-1)
    if positions.dtype.kind in "iu" and positions.dtype.itemsize == np.dtype(np.intp).itemsize:
        positions = positions.view(np.intp)  # positions below size: the same values, no copy
    else:
        positions = positions.astype(np.intp)
    if weights is not None:
        weights = np.asarray(weights).reshape(-1)
    if 8 * positions.size >= size:
        if weights is None:
            hist = np.bincount(positions, minlength=size)
        else:  # float64 sums of small integers: exact while every partial sum is below 2^53
            hist = np.bincount(positions, weights, minlength=size).astype(np.int64)
        index = np.flatnonzero(hist)
        return index, hist[index]
    if weights is None:
        index, sums = np.unique(positions, return_counts=True)
        return index, sums.astype(np.int64)
    order = np.argsort(positions, kind="stable")
    ordered = positions[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if ordered.size else np.zeros(0, np.intp)
    sums = np.add.reduceat(weights[order].astype(np.int64), starts) if ordered.size else np.zeros(0, np.int64)
    return ordered[starts], sums


def _checked_sum(name: str, a: np.ndarray, b: np.ndarray, doing: str = "merging") -> np.ndarray:
    """``a + b`` in ``a``'s dtype, refusing a sum that would wrap around."""
    total: np.ndarray = np.add(a, b, dtype=a.dtype)
    if a.dtype.kind in "iu" and a.size:
        with np.errstate(over="ignore"):
            wrapped = (total < a) if a.dtype.kind == "u" else ((b > 0) & (total < a)) | ((b < 0) & (total > a))
        if wrapped.any():
            raise IncompatibleError(f"{doing} would overflow the {a.dtype} state array {name!r}")
    return total
