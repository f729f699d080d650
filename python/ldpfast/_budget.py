"""Derived privacy budgets that never round up, and exact effective epsilons.

A protocol that spends ``epsilon`` in ``parts`` independent pieces (nPCMS' ``2L`` entries,
a sketch's ``M`` or ``K M`` bits, sRP's two bits) or transforms it (the amplified
``eps' = log(L (e^eps - 1) + 1)`` of padding and sampling) needs a per-piece budget in
double precision. Rounded to nearest, ``parts * (epsilon / parts)`` or the amplification
of ``eps'`` can exceed ``epsilon`` by a fraction of an ulp. :func:`split` and
:func:`amplified` round the derived budget **down** (exactly: rational arithmetic for the
split, 90-digit arithmetic with a margin for the logarithm), and every sampler's integer
threshold then rounds its own budget down again (:func:`ldpfast._validate.rr_threshold`),
so the effective epsilon of the whole report is at most ``epsilon``.

:func:`effective` turns an exact effective epsilon (a :class:`decimal.Decimal` from
:func:`rr_loss` and the protocol's composition) into the smallest double at or above it,
so a result that is at most ``epsilon`` exactly is at most ``epsilon`` as a double too.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

__all__ = ["split", "amplified", "rr_loss", "effective", "PRECISION"]

#: Significant digits of the decimal arithmetic (the threshold rounding uses 80).
PRECISION = 90
_TWO64 = 2**64


def _below(value: decimal.Decimal) -> float:
    """The largest double strictly inside the error bar of ``value`` (relative 10^-80)."""
    with decimal.localcontext() as ctx:
        ctx.prec = PRECISION
        bound = value - abs(value) * decimal.Decimal(10) ** -80
    out = float(bound)
    while decimal.Decimal(out) > bound:
        out = math.nextafter(out, -math.inf)
    return out


def split(epsilon: float, parts: int) -> float:
    """``epsilon / parts`` rounded down: the largest double ``b`` with ``parts * b <= epsilon``
    in exact rational arithmetic."""
    exact = Fraction(epsilon) / parts
    out = float(exact)                      # correctly rounded to nearest
    if Fraction(out) > exact:
        out = math.nextafter(out, 0.0)
    return out


def amplified(epsilon: float, copies: int) -> float:
    """``eps' = log(copies (e^eps - 1) + 1)`` rounded down to a double, so that
    ``log(1 + (e^eps' - 1)/copies) <= epsilon`` (the amplification of sampling one of
    ``copies`` padded items brings ``eps'`` back to at most ``epsilon``)."""
    with decimal.localcontext() as ctx:
        ctx.prec = PRECISION
        value = (copies * (decimal.Decimal(epsilon).exp() - 1) + 1).ln()
    return _below(value)


def rr_loss(threshold: int, symbols: int) -> decimal.Decimal:
    """The exact privacy loss ``log((2^64 - t)(m - 1)/t)`` of randomized response over
    ``m = symbols`` with flip threshold ``t`` (90 significant digits)."""
    with decimal.localcontext() as ctx:
        ctx.prec = PRECISION
        return (decimal.Decimal((_TWO64 - threshold) * (symbols - 1)) / decimal.Decimal(threshold)).ln()


def effective(loss: decimal.Decimal) -> float:
    """The smallest double at or above ``loss`` (a computed effective epsilon is never
    reported below the exact one)."""
    out = float(loss)
    while decimal.Decimal(out) < loss:
        out = math.nextafter(out, math.inf)
    return out
