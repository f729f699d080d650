"""Set-valued data: each user holds a set of distinct items, the server estimates item
frequencies (PrivSketch and its LDP variant, the Multi-PCMS, PS-OLH and SVIM baselines,
nPCMS). Its protocol modules (those not starting with ``_``) are imported on first use
(``ldpfast.protocols.sets.<module>``), and all of them by the registry
(:func:`ldpfast.protocols.load_all`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._family import lazy_family

if TYPE_CHECKING:
    # Type checkers see the protocol modules as attributes (``ldpfast.protocols.sets.<module>``;
    # the ``__getattr__`` below imports them at run time); tests/test_layout.py keeps this list
    # equal to the family's modules.
    from . import (multi_pcms, npcms, privsketch, privsketch_ldp, ps_olh, svim)
else:
    __getattr__ = lazy_family(__name__, __path__)
