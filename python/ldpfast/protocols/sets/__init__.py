"""Set-valued data: each user holds a set of distinct items, the server estimates item
frequencies (PrivSketch and its LDP variant, the Multi-PCMS, PS-OLH and SVIM baselines,
nPCMS). Importing this package imports (and so registers) every protocol module in it:
modules not starting with ``_``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._family import load_family

if TYPE_CHECKING:
    # Type checkers see the protocol modules as attributes (``ldpfast.protocols.sets.<module>``;
    # importing the package imports them at run time); tests/test_layout.py keeps this list equal
    # to the family's modules.
    from . import (multi_pcms, npcms, privsketch, privsketch_ldp, ps_olh, svim)

load_family(__name__, __path__)
