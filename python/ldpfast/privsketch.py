"""The public path of :mod:`ldpfast.protocols.privsketch` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import privsketch as _module

if TYPE_CHECKING:
    from .protocols.privsketch import *  # noqa: F403

sys.modules[__name__] = _module
