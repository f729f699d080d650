"""Numeric data: means and variances of bounded numbers (one or several per user),
distributions, quantiles and range queries over an ordered domain.
Its protocol modules (those not starting with ``_``) are imported on first use
(``ldpfast.protocols.numeric.<module>``), and all of them by the registry
(:func:`ldpfast.protocols.load_all`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._family import lazy_family

if TYPE_CHECKING:
    # Type checkers see the protocol modules as attributes (``ldpfast.protocols.numeric.<module>``;
    # the ``__getattr__`` below imports them at run time); tests/test_layout.py keeps this list
    # equal to the family's modules.
    from . import (ahead, binned, distribution, hierarchy, mean, multidim, square_wave)
else:
    __getattr__ = lazy_family(__name__, __path__)
