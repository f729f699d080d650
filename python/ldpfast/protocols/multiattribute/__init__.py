"""Records of several attributes: per-attribute frequencies (SPL, SMP, RS+FD),
k-way marginals (CALM, the full joint), multi-dimensional range queries and key-value data.
Its protocol modules (those not starting with ``_``) are imported on first use
(``ldpfast.protocols.multiattribute.<module>``), and all of them by the registry
(:func:`ldpfast.protocols.load_all`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._family import lazy_family

if TYPE_CHECKING:
    # Type checkers see the protocol modules as attributes (``ldpfast.protocols.multiattribute.<module>``;
    # the ``__getattr__`` below imports them at run time); tests/test_layout.py keeps this list
    # equal to the family's modules.
    from . import (adaptive_grid, calm, hdg, multifreq, pckv, privkv, tdg)
else:
    __getattr__ = lazy_family(__name__, __path__)
