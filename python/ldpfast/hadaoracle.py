"""The public path of :mod:`ldpfast.protocols.hadaoracle` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import hadaoracle as _module

if TYPE_CHECKING:
    from .protocols.hadaoracle import *  # noqa: F403

sys.modules[__name__] = _module
