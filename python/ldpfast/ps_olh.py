"""The public path of :mod:`ldpfast.protocols.ps_olh` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import ps_olh as _module

if TYPE_CHECKING:
    from .protocols.ps_olh import *  # noqa: F403

sys.modules[__name__] = _module
