"""Heavy hitters of a huge domain: each user holds one value of ``[0, d)`` (d up to 2^64),
the server finds the frequent values by prefix search without a candidate list (HadaHeavy,
TreeHist with a count sketch, PEM). Its protocol modules (those not
starting with ``_``) are imported on first use (``ldpfast.protocols.heavy.<module>``), and all
of them by the registry (:func:`ldpfast.protocols.load_all`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._family import lazy_family

if TYPE_CHECKING:
    # Type checkers see the protocol modules as attributes (``ldpfast.protocols.heavy.<module>``;
    # the ``__getattr__`` below imports them at run time); tests/test_layout.py keeps this list
    # equal to the family's modules.
    from . import (hadaheavy, pem, treehist_cs)
else:
    __getattr__ = lazy_family(__name__, __path__)
