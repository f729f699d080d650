"""The public path of :mod:`ldpfast.protocols.ocms` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import ocms as _module

if TYPE_CHECKING:
    from .protocols.ocms import *  # noqa: F403

sys.modules[__name__] = _module
