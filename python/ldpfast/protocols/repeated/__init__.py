"""Repeated collection: memoized protocols whose client keeps a permanent response per value,
so that reporting the same value again spends no new budget for it (RAPPOR, the longitudinal
oracles L-GRR/L-OLH/L-OUE/L-SUE/L-OSUE, dBitFlip and its numeric-mean sibling 1BitMean).
Its frequency oracles are the ones with the ``rounds`` hook (``ldpfast simulate --rounds``).
Importing this package imports (and so registers) every protocol module in it: modules not
starting with ``_``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._family import load_family

if TYPE_CHECKING:
    # Type checkers see the protocol modules as attributes (``ldpfast.protocols.repeated.<module>``;
    # importing the package imports them at run time); tests/test_layout.py keeps this list equal
    # to the family's modules.
    from . import (dbitflip, longitudinal, longitudinal_unary, rappor)

load_family(__name__, __path__)
