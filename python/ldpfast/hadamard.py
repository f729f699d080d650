"""The public path of :mod:`ldpfast.protocols.hadamard` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import hadamard as _module

if TYPE_CHECKING:
    from .protocols.hadamard import *  # noqa: F403

sys.modules[__name__] = _module
