"""Exact loss derivations of the record protocols (tests/test_budgets.py reads them).

Each entry maps params to the largest likelihood ratio ``R`` of one report between two
records (the client is ``log R``-LDP), recomputed in exact rationals from the integer
thresholds the clients sample with (``t / 2^64``). The per-unit oracles are the registered
GRR, OUE or OLH (``ldpfast.protocols.multiattribute._records.Oracle``), reached through
``params.oracles()`` only for their thresholds; how the units compose is derived here from
the clients' code paths (multifreq.py, calm.py, _grid.py).
"""

from fractions import Fraction
from functools import reduce
from typing import Any, Callable, Dict

TWO64 = 2**64


def _p(t: int) -> Fraction:
    """A sampler's probability ``t / 2^64`` (its Bernoulli draw is 1 iff a uniform word is ``< t``)."""
    return Fraction(t, TWO64)


def _rr(t: int, symbols: int) -> Fraction:
    """Randomized response over ``symbols`` flipping with ``t / 2^64`` to a uniform other
    symbol: keep ``1 - t/2^64`` against one other symbol's ``t/(2^64 (symbols - 1))``."""
    return Fraction((TWO64 - t) * (symbols - 1), t)


def _oracle(oracle: Any) -> Fraction:
    """One unit's oracle. GRR: RR over the unit's ``k`` values. OLH: the hash (a0, a1) is
    drawn independently of the value, then RR over ``g`` hash values. OUE: independent bits,
    1 with ``one`` at the value and ``zero`` elsewhere; two values swap one hot and one cold
    bit, so the worst pair is ``one (1 - zero) / (zero (1 - one))``."""
    if oracle.name == "grr":
        return _rr(oracle.params.flip_threshold, oracle.k)
    if oracle.name == "olh":
        return _rr(oracle.params.flip_threshold, oracle.params.g)
    one, zero = (_p(t) for t in oracle.params.thresholds())
    return one * (1 - zero) / (zero * (1 - one))


def _every_unit(params: Any) -> Fraction:
    """SPL (every attribute reported, each oracle at ``split(eps, A)``) and the full joint (one
    unit): independent reports of every unit, so the record's ratio is the product."""
    return reduce(lambda a, b: a * b, (_oracle(o) for o in params.oracles()), Fraction(1))


def _one_unit(params: Any) -> Fraction:
    """SMP and CALM (one unit drawn uniformly, independently of the record, and named) and RS+FD
    (the sampled attribute's true value, uniform fake values of the others, none named): a
    report's probability is a mixture over the drawn unit whose branch ratios are each unit's
    oracle ratio (a fake value's report does not depend on the record), so the mixture's ratio
    is at most the largest of them; two records differing in every attribute reach it."""
    return max(_oracle(o) for o in params.oracles())


def _grids(params: Any) -> Fraction:
    """TDG, HDG, adaptive grid (Yang et al., VLDB 2020; _grid.GridClient.perturb): the user's
    grid is drawn uniformly and independently of the record, then its cell goes through RR
    over the grid's hash range (the cells under GRR's identity hash, ``g`` under OLH's
    record-independent hash): the largest of the grids' RR ratios."""
    return max(_rr(t, int(m)) for t, m in zip(params.flip_thresholds, params.hash_ranges))


RECORD_LOSS: Dict[str, Callable[[Any], Fraction]] = {
    "spl": _every_unit, "joint": _every_unit, "smp": _one_unit, "calm": _one_unit, "rsfd": _one_unit,
    "tdg": _grids, "hdg": _grids, "adaptive-grid": _grids,
}
