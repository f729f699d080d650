"""The public path of :mod:`ldpfast.protocols.hashtogram` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import hashtogram as _module

if TYPE_CHECKING:
    from .protocols.hashtogram import *  # noqa: F403

sys.modules[__name__] = _module
