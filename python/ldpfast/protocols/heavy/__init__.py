"""Heavy hitters of a huge domain: each user holds one value of ``[0, d)`` (d up to 2^64),
the server finds the frequent values by prefix search without a candidate list (HadaHeavy,
TreeHist with a count sketch, PEM). Importing this package imports
(and so registers) every protocol module in it: modules not starting with ``_``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._family import load_family

if TYPE_CHECKING:
    # Type checkers see the protocol modules as attributes (``ldpfast.protocols.heavy.<module>``;
    # importing the package imports them at run time); tests/test_layout.py keeps this list equal
    # to the family's modules.
    from . import (hadaheavy, pem, treehist_cs)

load_family(__name__, __path__)
