"""Exact loss derivations of the numeric family (tests/test_budgets.py reads them).

Each entry maps params to the largest likelihood ratio ``R`` of one report between two
inputs, in exact rational arithmetic, from the integer thresholds (and dyadic doubles) the
client really samples with; the protocol is ``log(R)``-LDP.
"""

import math
from fractions import Fraction
from typing import Any, Callable, Dict

import numpy as np

from ldpfast.protocols.numeric import _grid, multidim

TWO53 = 2**53
TWO64 = 2**64


def _rr_ratio(threshold: int, symbols: int) -> Fraction:
    """k-ary randomized response: keep with ``1 - t/2^64``, else one of the ``m - 1`` other
    symbols uniformly (``rng.below``, unbiased): ``(2^64 - t)(m - 1)/t``."""
    return Fraction((TWO64 - threshold) * (symbols - 1), threshold)


def _duchi_bit(epsilon: float) -> Fraction:
    """Duchi's sign: ``+B`` iff ``floor(2^53 u) < plus(t)`` with ``plus`` clipped to
    ``[2^53 - T, T]`` (its values at ``t = -1`` and ``t = 1``); ``u`` is a 53-bit uniform, so
    ``P(+B)`` runs over ``[(2^53 - T)/2^53, T/2^53]`` and the worst ratio is ``T/(2^53 - T)``."""
    top = _grid.duchi_threshold(epsilon)
    return max(Fraction(top, TWO53 - top), Fraction(TWO53 - top, top))


def _duchi(params: Any) -> Fraction:
    """``duchi`` (Duchi et al., JASA 2018; ``_grid.perturb``): one grid step, so the index is
    the sign bit itself (no rounding randomness)."""
    return _duchi_bit(params.epsilon)


def _bin_mass(edges: np.ndarray, index: int) -> Fraction:
    """``P(searchsorted(edges, u, 'right') == index)`` for ``u = j/2^53``, ``j`` uniform in
    ``[0, 2^53)``: the count of ``j`` with ``edges[index-1] <= j/2^53 < edges[index]``."""
    def below(x: float) -> int:               # #{j in [0, 2^53): j/2^53 < x}
        return min(max(math.ceil(Fraction(x) * TWO53), 0), TWO53)
    low = below(float(edges[index - 1])) if index > 0 else 0
    high = below(float(edges[index])) if index < edges.size else TWO53
    return Fraction(high - low, TWO53)


def _duchi_md(params: Any) -> Fraction:
    """``duchi-md`` (Duchi et al., JASA 2018; ``DuchiMdClient.perturb``): given the signs ``v``,
    the number ``s`` of output signs agreeing with ``v`` is drawn by a 53-bit uniform against
    the cumulative agreement weights (doubles: their exact bin masses ``W(s)``), mirrored to
    ``d - s`` unless ``floor(2^53 u') < T`` (Duchi's threshold), and the agreeing coordinates
    are a uniformly random ``s``-subset (a random permutation; ties of 53-bit uniforms in the
    argsort, probability below ``d^2/2^54``, are left out). So an output ``z`` with agreement
    ``s`` has ``P(z | v) = g(s) = [T W(s) + (2^53 - T) W(d - s)]/(2^53 C(d, s))``; for ``t`` at
    the corners ``v`` is deterministic and any two agreements are reachable (a mixture over
    ``v`` only lowers the ratio): ``R = max g / min g``."""
    d = params.attributes
    edges = np.cumsum(multidim._agreement_weights(d))[:-1]
    weight = [_bin_mass(edges, s) for s in range(d + 1)]
    top = Fraction(_grid.duchi_threshold(params.epsilon), TWO53)
    g = [(top * weight[s] + (1 - top) * weight[d - s]) / math.comb(d, s) for s in range(d + 1)]
    return max(g) / min(g)


def _square_wave(params: Any) -> Fraction:
    """``square-wave`` (Li et al., SIGMOD 2020; ``square_wave_perturb`` in C++): RR over
    ``[0, d)`` with threshold ``F``; a kept value goes uniformly (``rng.below``) to one of the
    ``w = 2 band + 1`` outputs of its band, a flipped one to the other symbol's output outside
    it. Each band output has ``near = (1 - F/2^64)/w``, each other output ``far = F/(2^64 (d - 1))``:
    ``R = max(near/far, far/near)``."""
    if params.d == 1:
        return Fraction(1)                    # every output lies in the one band
    width = 2 * params.band + 1
    near_over_far = _rr_ratio(params.flip_threshold, params.d) / width
    return max(near_over_far, 1 / near_over_far)


def _level(oracle: Any) -> Fraction:
    """One level's oracle (``_levels.LevelOracle.perturb``): GRR over the nodes (at least 2
    symbols) or OLH's RR over the hash range ``g``; the hash itself is data-independent."""
    return _rr_ratio(oracle.threshold, oracle.symbols)


def _hh(params: Any) -> Fraction:
    """``hh`` (Kulkarni et al.'s hierarchical histogram; ``HHClient.perturb``): each user
    reports once, at a level drawn independently of the value: the max over the levels."""
    return max(_level(oracle) for oracle in params.oracles)


def _ahead(params: Any) -> Fraction:
    """``ahead`` (Du et al., CCS 2021; ``AHEADClient.perturb``): one round's oracle on the
    interval holding the value."""
    return _level(params.oracle)


NUMERIC_LOSS: Dict[str, Callable[[Any], Fraction]] = {
    "duchi": _duchi, "duchi-md": _duchi_md, "square-wave": _square_wave, "hh": _hh, "ahead": _ahead,
}
