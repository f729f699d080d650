"""The public path of :mod:`ldpfast.protocols.multi_pcms` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import multi_pcms as _module

if TYPE_CHECKING:
    from .protocols.multi_pcms import *  # noqa: F403

sys.modules[__name__] = _module
