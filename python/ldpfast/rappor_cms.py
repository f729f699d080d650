"""The public path of :mod:`ldpfast.protocols.rappor_cms` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import rappor_cms as _module

if TYPE_CHECKING:
    from .protocols.rappor_cms import *  # noqa: F403

sys.modules[__name__] = _module
