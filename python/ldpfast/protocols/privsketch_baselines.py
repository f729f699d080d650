"""The baselines [PS] compares PrivSketch with ([PS] section 4), one module per family:
:mod:`ldpfast.multi_pcms` (``multi-pcms-mean``, ``multi-pcms-min``), :mod:`ldpfast.ps_olh`
(``ps-olh``) and :mod:`ldpfast.svim` (``svim-items``, ``svim-lengths``, ``svim-padded``).
This module re-exports their names (as does :mod:`ldpfast.privsketch`); it defines and
registers nothing itself.
"""

from . import _svim_run, multi_pcms as _multi_pcms, ps_olh as _ps_olh, svim as _svim
from .multi_pcms import *  # noqa: F401,F403
from .ps_olh import *  # noqa: F401,F403
from .svim import *  # noqa: F401,F403
from ._svim_run import *  # noqa: F401,F403

__all__ = _multi_pcms.__all__ + _ps_olh.__all__ + _svim.__all__ + _svim_run.__all__
