"""The public path of :mod:`ldpfast.protocols.rhr` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import rhr as _module

if TYPE_CHECKING:
    from .protocols.rhr import *  # noqa: F403

sys.modules[__name__] = _module
