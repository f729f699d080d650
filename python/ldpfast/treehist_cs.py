"""The public path of :mod:`ldpfast.protocols.treehist_cs` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import treehist_cs as _module

if TYPE_CHECKING:
    from .protocols.treehist_cs import *  # noqa: F403

sys.modules[__name__] = _module
