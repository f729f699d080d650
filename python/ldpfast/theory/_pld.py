"""Privacy-loss distributions of the shuffle accountant's pairs, discretized on a grid and
composed over rounds by FFT (:func:`ldpfast.theory.shuffle.shuffle_epsilon` with
``rounds > 1``).

A pair ``(P, Q)`` has the loss ``L = log(P/Q)`` under ``P``; over ``T`` independent rounds
the losses add, and ``delta(eps) = E[(1 - e^(eps - L_T))_+] + P(L_T = +inf)``. Rounding
every loss **up** to the grid (and moving the far tail to ``+inf``) can only increase that
expression, so the composed result is a certified upper bound; rounding **down** (and
dropping the far tails) a certified lower bound, up to the FFT's rounding (below 1e-10
absolute in delta for the grids used, against deltas of 1e-6 and up).
"""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import numpy as np

from . import _shuffle_math as _sh

#: Largest composed grid (bins) before the grid is coarsened.
_MAX_BINS = 1 << 22
#: Fewest blocks of values of C (each at its first value) in the upper pair's distribution.
_PLD_BLOCKS = 32


class _Pld:
    """Masses on the grid ``(offset + i) h`` plus a mass at ``+inf``."""

    def __init__(self, h: float, offset: int, mass: np.ndarray, infinite: float):
        self.h, self.offset, self.mass, self.infinite = h, offset, mass, infinite

    def compose(self, rounds: int) -> "_Pld":
        size = rounds * (self.mass.size - 1) + 1
        fft_size = 1 << max(size - 1, 1).bit_length()
        spectrum = np.fft.rfft(self.mass, fft_size) ** rounds
        mass = np.maximum(np.fft.irfft(spectrum, fft_size)[:size], 0.0)
        return _Pld(self.h, rounds * self.offset, mass, 1.0 - (1.0 - self.infinite) ** rounds)

    def delta(self, eps: float) -> float:
        """``sum_{L > eps} mass (1 - e^(eps - L)) + mass(+inf)`` for ``eps >= 0``, from suffix
        sums; the second one in log space (``e^eps`` overflows past eps = 709, which rounds
        composed over many rounds reach), so ``e^(eps + log sum_{L > eps} mass e^-L)`` is at
        most the first suffix sum."""
        if not hasattr(self, "_suffix"):
            loss = (self.offset + np.arange(self.mass.size)) * self.h
            positive = loss > 0
            self._loss = loss[positive]
            weights = self.mass[positive]
            self._suffix = np.cumsum(weights[::-1])[::-1]
            with np.errstate(divide="ignore"):      # log 0 = -inf: an empty bin adds nothing
                log_scaled = np.log(weights) - self._loss
            self._log_suffix_scaled = np.logaddexp.accumulate(log_scaled[::-1])[::-1]
        start = int(np.searchsorted(self._loss, eps, side="right"))
        if start >= self._loss.size:
            return self.infinite
        return float(self._suffix[start] - math.exp(eps + self._log_suffix_scaled[start])) + self.infinite


def _clone_pld(eps0: float, n: int, analysis: str, h: float, cap: float) -> _Pld:
    """The dominating pair of the generic bound (``w = 0``), each block of ``C`` taken at its
    first value, losses rounded up, losses above ``cap`` moved to ``+inf``."""
    special = _sh._special()
    pair = _sh._pair(eps0, n, analysis, None)
    lo, hi, _, _ = _sh._c_range(special, pair)
    # blocks no wider than 0.1% of their smallest clone count (each is represented by it)
    blocks = int(np.clip((hi - lo + 1) / (1e-3 * max(lo, 1)), _PLD_BLOCKS, 4 * _PLD_BLOCKS))
    first, _last, mass, below, above = _sh._c_blocks(special, pair, blocks)
    mass = mass.copy()
    mass[-1] += above                      # larger C is dominated by the last block's first value
    p = pair.p
    keep, flip = p / (p + 1.0), 1.0 / (p + 1.0)
    i_lo, i_hi = -int(math.ceil(cap / h)), int(math.ceil(cap / h))
    out = np.zeros(i_hi - i_lo + 1)
    infinite = below
    for c, weight in zip(first, mass):
        if weight <= 0.0:
            continue

        def tail(m: np.ndarray, c: float = c) -> np.ndarray:   # P(a' >= m)
            return np.asarray(keep * _sh._tail(special, np.full(m.shape, c), m - 1.0)
                              + flip * _sh._tail(special, np.full(m.shape, c), m))

        def first_above(i: np.ndarray, c: float = c) -> np.ndarray:
            e = np.exp(i * h)
            return np.asarray(np.floor((c + 1.0) * (e * p - 1.0) / ((p - 1.0) * (e + 1.0))) + 1.0)

        # losses in ((i-1)h, ih] -> bin i, for the bins the outcomes within 10 sd of c/2 reach;
        # the outcomes below go to the first of those bins (rounded up), those above to +inf
        spread = 5.0 * math.sqrt(c) + 2.0
        reach = np.array([max(0.0, math.floor(c / 2.0 - spread)), min(c + 1.0, math.ceil(c / 2.0 + spread))])
        loss = np.log((p * reach + (c + 1.0 - reach)) / (reach + p * (c + 1.0 - reach)))
        b_lo, b_hi = (int(np.clip(math.ceil(v / h), i_lo, i_hi)) for v in loss)
        edges = first_above(np.arange(b_lo - 1, b_hi + 1, dtype=np.float64))
        edges[0] = 0.0
        tails = tail(edges)
        out[b_lo - i_lo:b_hi - i_lo + 1] += weight * np.maximum(tails[:-1] - tails[1:], 0.0)
        infinite += weight * float(tails[-1])
    return _Pld(h, i_lo, out, min(infinite, 1.0))


def _binary_rr_plds(eps0: float, n: int, h: float, cap: float) -> Tuple[_Pld, _Pld]:
    """Both directions of shuffled binary RR on ``(0, ..., 0)`` vs ``(1, 0, ..., 0)``: losses
    rounded down, tails beyond ``+-cap`` dropped (a lower bound)."""
    special = _sh._special()
    q = 1.0 / (math.exp(eps0) + 1.0)
    others = n - 1

    def at_least(k: np.ndarray) -> np.ndarray:      # P(Bin(n-1, q) >= k)
        return _sh._at_least(special, k, others, q)

    i_lo, i_hi = -int(math.floor(cap / h)), int(math.floor(cap / h))
    idx = np.arange(i_lo, i_hi + 2, dtype=np.float64)
    e = np.exp(np.clip(idx * h, -eps0 * 0.999999, eps0 * 0.999999))
    # K ones: P1/P0 = ((1-q)^2 u + q^2)/(q (1-q)(u + 1)), u = k/(n-k), increasing in k
    u = q * (e * (1.0 - q) - q) / ((1.0 - q) * (1.0 - q - e * q))
    first = np.floor(n * u / (1.0 + u)) + 1.0      # first k with P1/P0 > e^(i h)
    p1_tail = (1.0 - q) * at_least(first - 1.0) + q * at_least(first)
    p0_tail = q * at_least(first - 1.0) + (1.0 - q) * at_least(first)
    # direction D1 || D0: loss log(P1/P0) in [i h, (i+1) h) -> bin i (rounded down)
    forward = np.maximum(p1_tail[:-1] - p1_tail[1:], 0.0)
    # direction D0 || D1: loss log(P0/P1) = -log(P1/P0); P1/P0 in (e^{ih}, e^{(i+1)h}] -> loss in [-(i+1)h, -ih)
    backward = np.maximum(p0_tail[:-1] - p0_tail[1:], 0.0)[::-1]
    return _Pld(h, i_lo, forward, 0.0), _Pld(h, -i_hi - 1, backward, 0.0)


def composed_bounds(eps0: float, n: int, delta: float, rounds: int, analysis: str,
                    k: Optional[int]) -> Tuple[float, float]:
    """``(upper, lower)`` central epsilon of ``rounds`` shuffled collections (see the module docstring)."""
    scale = max(_sh._smallest_eps(lambda e: _sh.pair_delta(eps0, n, e, analysis)[0], delta / rounds, eps0), 1e-9)
    h = scale / (200.0 * math.sqrt(rounds))
    cap = min(eps0, 20.0 * scale)
    while True:
        bins = 2 * int(math.ceil(cap / h)) + 1
        if bins * rounds > _MAX_BINS:       # coarser grid: looser, still certified
            h = 2.0 * cap * rounds / (_MAX_BINS - 4 * rounds)
            continue
        upper_pld = _clone_pld(eps0, n, analysis, h, cap)
        if upper_pld.infinite * rounds <= delta / 100.0 or cap >= eps0:
            break
        cap = min(eps0, 2.0 * cap)
    composed = upper_pld.compose(rounds)
    high = eps0 * rounds
    upper = _sh._smallest_eps(composed.delta, delta, high)
    if k is not None:
        return upper, 0.0       # binary RR is not k-RR: the caller keeps k-RR's one-round bound
    lower = max(_sh._largest_eps(pld.compose(rounds).delta, delta, high) for pld in _binary_rr_plds(eps0, n, h, cap))
    return upper, lower


__all__: Any = []
