"""Categorical frequency oracles: one value of a known domain ``[0, d)`` per user and report,
estimated frequencies of every value or of candidates (GRR, OLH, BLH, OUE/SUE, the Hadamard
family, OCMS, PGR, Subset Selection, the CMS baselines). Its protocol modules (those not
starting with ``_``) are imported on first use (``ldpfast.protocols.frequency.<module>``), and all
of them by the registry (:func:`ldpfast.protocols.load_all`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._family import lazy_family

if TYPE_CHECKING:
    # Type checkers see the protocol modules as attributes (``ldpfast.protocols.frequency.<module>``;
    # the ``__getattr__`` below imports them at run time); tests/test_layout.py keeps this list
    # equal to the family's modules.
    from . import (blh, grr, hadamard, hadamard_variants, hadaoracle, hashtogram, ocms, olh, pgr, rappor_cms,
                   rhr, subset_selection, unary)
else:
    __getattr__ = lazy_family(__name__, __path__)
