"""The public path of :mod:`ldpfast.protocols.olh` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import olh as _module

if TYPE_CHECKING:
    from .protocols.olh import *  # noqa: F403

sys.modules[__name__] = _module
