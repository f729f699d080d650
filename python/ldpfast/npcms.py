"""The public path of :mod:`ldpfast.protocols.npcms` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import npcms as _module

if TYPE_CHECKING:
    from .protocols.npcms import *  # noqa: F403

sys.modules[__name__] = _module
