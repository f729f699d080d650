"""The public path of :mod:`ldpfast.protocols.subset_selection` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import subset_selection as _module

if TYPE_CHECKING:
    from .protocols.subset_selection import *  # noqa: F403

sys.modules[__name__] = _module
