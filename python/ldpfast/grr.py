"""The public path of :mod:`ldpfast.protocols.grr` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import grr as _module

if TYPE_CHECKING:
    from .protocols.grr import *  # noqa: F403

sys.modules[__name__] = _module
