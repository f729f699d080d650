"""The public path of :mod:`ldpfast.protocols.hadaheavy` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import hadaheavy as _module

if TYPE_CHECKING:
    from .protocols.hadaheavy import *  # noqa: F403

sys.modules[__name__] = _module
