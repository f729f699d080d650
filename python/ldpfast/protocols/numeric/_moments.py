"""What the mean protocols share: bounds and clipping on the client, and the aggregator of
grid indices (exact integer sums per attribute) with its estimates and standard errors.

**Bounds.** The user declares ``bounds=(lo, hi)``; the client clips every input into them
(counting how many it clipped below and above, :attr:`NumericClient.clipped`) and maps it
to ``t = 2 (x - lo)/(hi - lo) - 1``. The report carries nothing else, so the server cannot
estimate the clipped share without spending budget on it: the estimates are of the mean of
the *clipped* values. NaN and infinity are refused, naming the index.

**Server state** per attribute ``j``: the reports that carry it (``counts``), and the exact
128-bit sums of their grid indices and of the squared indices (``totals``, ``squares``: low
and high 64-bit words), plus the number of users ``n``. Merge adds them exactly. The
estimate of the mean of ``t_j`` is ``(A/k) sum y / n`` (Wang et al.'s scaling: each user
reports ``k`` of the ``A`` attributes); ``estimate()`` gives it as a fraction of the range,
``(mean t + 1)/2``, and :meth:`MeanServer.mean` in the user's units.

**Standard errors.** ``Var(mean t_j) = ((A/k) M_j - Q_j)/n`` with ``M_j`` the users' mean of
``E[y^2 | t] = a + b t^2`` and ``Q_j`` their mean of ``t^2``. ``(A/k) sum y^2 / n`` is
unbiased for ``M_j``; where ``b > 0`` it gives ``Q_j = (M_j - a)/b`` (kept in
``[mean^2, 1]``), so the standard error is the closed form at the users' own spread. Duchi's
reports (``b = 0``) say nothing of ``Q_j``: there ``Q_j >= mean^2`` (Jensen) makes
``((A/k) a - mean^2)/n`` an upper bound, exact when all users hold the same value.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ... import _base
from ..._delta import _State
from ..._client import ClientBase
from ..._validate import check_real
from ...errors import FormatError, ParameterError, ReportError
from ...uncertainty import PlugIn

_WORD = 2**64
#: The target of the mean protocols' intervals.
MEAN_TARGET = "the mean of the users' clipped values, as a fraction of the range (x - lo)/(hi - lo)"


def check_bounds(bounds: Any) -> Tuple[float, float]:
    """``(lo, hi)``: two finite reals with ``lo < hi``."""
    if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        raise ParameterError(f"bounds must be a pair (lo, hi), got {bounds!r}")
    lo = check_real("bounds[0] (lo)", bounds[0], -np.inf)
    hi = check_real("bounds[1] (hi)", bounds[1], -np.inf)
    if not (np.isfinite(lo) and np.isfinite(hi)) or not lo < hi or not np.isfinite(hi - lo):
        raise ParameterError(f"bounds must be finite with lo < hi, got {bounds!r}")
    return lo, hi


class NumericClient(ClientBase):
    """Base of the mean clients: ``clipped`` counts the inputs clipped into the bounds
    (below, above) over every batch this client perturbed; the count stays on the device."""

    def __init__(self, params: Any, rng: Any = None, threads: int = 0):
        super().__init__(params, rng, threads)
        self.clipped = (0, 0)

    def _unit(self, values: Any, columns: Optional[int] = None) -> np.ndarray:
        """``values`` (float64[n], or float64[n, columns]) clipped into the bounds and mapped
        to ``[-1, 1]``; NaN and infinity refused with their index."""
        x = np.asarray(values)
        if x.dtype.kind not in "fiu":
            raise ParameterError(f"values must be real numbers, got dtype {x.dtype}")
        x = np.asarray(x, dtype=np.float64)
        want = (1,) if columns is None else (2, columns)
        if x.ndim != want[0] or (columns is not None and x.shape[1] != columns):
            shape = "[n]" if columns is None else f"[n, {columns}]"
            raise ParameterError(f"values must have shape {shape}, got {x.shape}")
        bad = np.flatnonzero(~np.isfinite(x.ravel()))
        if bad.size:
            where = np.unravel_index(int(bad[0]), x.shape)
            index = int(where[0]) if columns is None else tuple(int(i) for i in where)
            raise ParameterError(f"values must be finite, got {x[where]} at index {index}")
        lo, hi = self.params.bounds
        below, above = int(np.count_nonzero(x < lo)), int(np.count_nonzero(x > hi))
        self.clipped = (self.clipped[0] + below, self.clipped[1] + above)
        # np.minimum/np.maximum: several times faster than np.clip on floats
        t = (np.minimum(np.maximum(x, lo), hi) - lo) / (hi - lo) * 2.0 - 1.0
        return np.asarray(np.minimum(np.maximum(t, -1.0), 1.0))


def _words(value: int) -> List[int]:
    return [value % _WORD, value // _WORD]


def _int(words: Any) -> int:
    return int(words[0]) + int(words[1]) * _WORD


#: Indices summed per step: small enough to stay in cache, and a step's sums never wrap.
_CHUNK = 1 << 16


def exact_sums(index: np.ndarray, largest: int) -> Tuple[int, int]:
    """The exact sums of uint32 indices (at most ``largest``) and of their squares, one
    cache-sized chunk at a time (squares in uint32 when ``largest < 2^16``, else split into
    32-bit halves)."""
    flat = index.ravel()
    narrow = largest < 1 << 16
    total = squares = 0
    for start in range(0, flat.size, _CHUNK):
        chunk = flat[start:start + _CHUNK]
        total += int(np.add.reduce(chunk, dtype=np.uint64))
        if narrow:
            squares += int(np.add.reduce(chunk * chunk, dtype=np.uint64))
        else:
            wide = chunk.astype(np.uint64)
            sq = wide * wide
            squares += (int(np.add.reduce(sq >> np.uint64(32), dtype=np.uint64)) << 32) + int(
                np.add.reduce(sq & np.uint64(0xFFFFFFFF), dtype=np.uint64))
    return total, squares


class MeanServer(_base.Aggregator):
    """The aggregator of every mean protocol (see the module docstring). A subclass gives
    ``_columns(reports) -> (attributes or None, indices)``."""

    params: Any

    def __init__(self, params: Any):
        super().__init__(params)
        a = params.attributes
        self._st = _State(n=np.zeros(1, np.uint64), counts=np.zeros(a, np.uint64),
                                totals=np.zeros((a, 2), np.uint64), squares=np.zeros((a, 2), np.uint64))

    @classmethod
    def _state_layout(cls, params: Any) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        a = params.attributes
        return {"n": ((1,), "uint64"), "counts": ((a,), "uint64"), "totals": ((a, 2), "uint64"),
                "squares": ((a, 2), "uint64")}

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State({k: np.array(state[k], dtype=np.uint64) for k in ("n", "counts", "totals", "squares")})

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    def _columns(self, reports: Any) -> Tuple[Optional[np.ndarray], np.ndarray]:
        raise NotImplementedError

    def _validate(self, reports: Any) -> None:
        attributes, index = self._columns(reports)
        top = self.params.largest_index
        if index.size and int(index.max()) > top:
            raise ReportError(f"index must be on the grid [0, {top}], got {int(index.max())}")
        if attributes is not None and attributes.size:
            if attributes.shape != index.shape:
                raise ReportError(f"attributes and index must have the same shape, got {attributes.shape} "
                                  f"and {index.shape}")
            if int(attributes.max()) >= self.params.attributes:
                raise ReportError(f"attributes must be < {self.params.attributes}, got {int(attributes.max())}")
            if attributes.shape[1] > 1 and bool((np.diff(attributes.astype(np.int64), axis=1) <= 0).any()):
                raise ReportError("each report's attributes must be distinct and ascending")

    def _ingest(self, reports: Any) -> _base.Delta:
        attributes, index = self._columns(reports)
        if len(reports) >= 2**32:
            raise ReportError(f"a batch must hold fewer than 2^32 reports, got {len(reports)}")
        state = {k: np.array(v) for k, v in self._st.items()}
        moments = self._moments(attributes, index)
        n = self.n + len(reports)
        for j, (count, total, squares) in moments.items():
            count += int(state["counts"][j])
            total += _int(state["totals"][j])
            squares += _int(state["squares"][j])
            if max(n, count) >= _WORD or squares >= _WORD**2:
                raise ReportError("the server's sums would exceed their 64/128 bits: merge into a new server")
            state["counts"][j] = count
            state["totals"][j] = _words(total)
            state["squares"][j] = _words(squares)
        state["n"][0] = n
        return self._replacing(state)

    def _replacing(self, state: Dict[str, np.ndarray]) -> _base.Delta:
        """The new state (a few words per attribute) as one all-or-nothing change."""
        delta = self._delta()
        for name, value in state.items():
            delta.replace(name, value)
        return delta

    def _moments(self, attributes: Optional[np.ndarray], index: np.ndarray) -> Dict[int, Tuple[int, int, int]]:
        """``{attribute: (reports, sum of indices, sum of squares)}`` of one batch."""
        top = self.params.largest_index
        if attributes is None:
            if index.ndim == 1:
                return {0: (index.size,) + exact_sums(index, top)}
            return {j: (index.shape[0],) + exact_sums(index[:, j], top) for j in range(index.shape[1])}
        flat_a, flat_i = attributes.ravel(), index.ravel()
        order = np.argsort(flat_a, kind="stable")
        flat_a, flat_i = flat_a[order], flat_i[order]
        found, starts = np.unique(flat_a, return_index=True)
        ends = np.append(starts[1:], flat_a.size)
        return {int(j): (int(e - s),) + exact_sums(flat_i[s:e], top) for j, s, e in zip(found, starts, ends)}

    def _merged(self, theirs: Mapping[str, Any]) -> _base.Delta:
        state = {k: np.array(v) for k, v in self._st.items()}
        n = self.n + int(theirs["n"][0])
        if n >= _WORD:
            raise ReportError("the merged report count would exceed 2^64")
        state["n"][0] = n
        for j in range(self.params.attributes):
            count = int(state["counts"][j]) + int(theirs["counts"][j])
            total = _int(state["totals"][j]) + _int(theirs["totals"][j])
            squares = _int(state["squares"][j]) + _int(theirs["squares"][j])
            if count >= _WORD or squares >= _WORD**2:
                raise ReportError("the merged sums would exceed their 64/128 bits")
            state["counts"][j], state["totals"][j], state["squares"][j] = count, _words(total), _words(squares)
        return self._replacing(state)

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        p = self.params
        n, top = int(state["n"][0]), p.largest_index
        for j in range(p.attributes):
            count, total, squares = int(state["counts"][j]), _int(state["totals"][j]), _int(state["squares"][j])
            impossible = total > count * top or squares > count * top * top or total * total > squares * count
            if count > n or impossible:
                raise FormatError(f"stored sums of attribute {j} are impossible for {count} reports of {n}")
        if p.k * n != sum(int(c) for c in state["counts"]):
            raise FormatError(f"stored counts do not sum to k * n = {p.k} * {n}")

    # -- estimates ------------------------------------------------------------------------------
    def _attributes(self, candidates: Any) -> np.ndarray:
        a = self.params.attributes
        if candidates is None:
            return np.arange(a)
        chosen = np.asarray(candidates).ravel()
        if chosen.dtype.kind not in "iu" or (chosen.size and (chosen.min() < 0 or chosen.max() >= a)):
            raise ParameterError(f"candidates must be attribute numbers in [0, {a}), got {chosen[:8]}")
        return chosen.astype(np.intp)

    def _sums(self, j: int) -> Tuple[float, float]:
        st = self._st
        sum_y, sum_sq = self.params.value_sums(int(st["counts"][j]), _int(st["totals"][j]), _int(st["squares"][j]))
        return float(sum_y), float(sum_sq)

    def _t_means(self, chosen: np.ndarray) -> np.ndarray:
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate the mean from zero reports")
        share = self.params.attributes / self.params.k
        return np.array([share * self._sums(int(j))[0] / n for j in chosen])

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """The mean of each attribute (``candidates``: attribute numbers, default all) as a
        fraction of its range, ``(mean t + 1)/2``; ``counts=True`` gives ``n`` times that."""
        fraction = (self._t_means(self._attributes(candidates)) + 1.0) / 2.0
        return fraction * self.n if counts else fraction

    def mean(self) -> Any:
        """The estimated mean in the user's units: a float, or one per attribute."""
        lo, hi = self.params.bounds
        values = lo + (hi - lo) * np.asarray(self.estimate())
        return float(values[0]) if self.params.attributes == 1 else values

    def t_variances(self, candidates: Any = None) -> Tuple[np.ndarray, np.ndarray]:
        """``(Var, informative)``: the estimated variance of each attribute's mean of ``t``,
        and whether it came from the reports' squares (False: Duchi's upper bound at the mean)."""
        chosen = self._attributes(candidates)
        n, share = self.n, self.params.attributes / self.params.k
        a, b = self.params.second_moment
        means = self._t_means(chosen)
        out = np.empty(chosen.size)
        for i, j in enumerate(chosen):
            least = min(means[i] ** 2, 1.0)                      # Jensen: Q >= mean^2
            second = share * self._sums(int(j))[1] / n           # unbiased for M = a + b Q
            square = min(max((second - a) / b, least), 1.0) if b > 0 else least
            out[i] = max(share * (a + b * square) - square, 0.0) / n
        return out, np.full(chosen.size, b > 0)


def unit_inputs(lo: float, hi: float) -> Callable[[int, int], np.ndarray]:
    """``make`` of an audit Plan: ``n`` users at ``hi`` (input 0) or at ``lo`` (input 1)."""
    return lambda i, n: np.full(n, (hi, lo)[i], dtype=np.float64)


def mean_variance(server: MeanServer, candidates: Any) -> PlugIn:
    """``Protocol.variance`` of the mean protocols: in fraction units, the closed form at the
    reports' second moment (constant), or Duchi's bound ``((A/k) a - (2f - 1)^2)/(4n)``."""
    chosen = server._attributes(candidates)
    variances, informative = server.t_variances(chosen)
    share = server.params.attributes / server.params.k
    a = server.params.second_moment[0]
    n = server.n
    if informative.all():
        fixed = variances / 4.0
        return PlugIn(lambda f: fixed + 0.0 * np.asarray(f), chosen.size, note="closed form at the reports' "
                      "second moment (Var = ((A/k) E[y^2] - mean t^2)/n)", target=MEAN_TARGET)
    return PlugIn(lambda f: (share * a - (2.0 * np.asarray(f) - 1.0) ** 2) / (4.0 * n), chosen.size,
                  note="Duchi's closed form (B^2 - t^2)/n at the mean: an upper bound, exact for equal values",
                  target=MEAN_TARGET)
