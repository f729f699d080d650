"""The public path of :mod:`ldpfast.protocols.svim` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import svim as _module

if TYPE_CHECKING:
    from .protocols.svim import *  # noqa: F403

sys.modules[__name__] = _module
