"""Repeated collection: memoized protocols whose client keeps a permanent response per value,
so that reporting the same value again spends no new budget for it (RAPPOR, the longitudinal
oracles L-GRR/L-OLH/L-OUE/L-SUE/L-OSUE, dBitFlip and its numeric-mean sibling 1BitMean).
Its frequency oracles are the ones with the ``rounds`` hook (``ldpfast simulate --rounds``).
Its protocol modules (those not starting with ``_``) are imported on first use
(``ldpfast.protocols.repeated.<module>``), and all of them by the registry
(:func:`ldpfast.protocols.load_all`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._family import lazy_family

if TYPE_CHECKING:
    # Type checkers see the protocol modules as attributes (``ldpfast.protocols.repeated.<module>``;
    # the ``__getattr__`` below imports them at run time); tests/test_layout.py keeps this list
    # equal to the family's modules.
    from . import (dbitflip, longitudinal, longitudinal_unary, rappor)
else:
    __getattr__ = lazy_family(__name__, __path__)
