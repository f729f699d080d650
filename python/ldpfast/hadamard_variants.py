"""The public path of :mod:`ldpfast.protocols.hadamard_variants` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import hadamard_variants as _module

if TYPE_CHECKING:
    from .protocols.hadamard_variants import *  # noqa: F403

sys.modules[__name__] = _module
