"""The public path of :mod:`ldpfast.protocols.privsketch_baselines` (the very same module object)."""

import sys
from typing import TYPE_CHECKING

from .protocols import privsketch_baselines as _module

if TYPE_CHECKING:
    from .protocols.privsketch_baselines import *  # noqa: F403

sys.modules[__name__] = _module
