"""Closed-form variances, error bounds and optimal parameters for every protocol."""

from .hadamard import *  # noqa: F401,F403
from .ocms import *  # noqa: F401,F403
from .pan_baselines import *  # noqa: F401,F403
from .privsketch import *  # noqa: F401,F403
from .projective import *  # noqa: F401,F403
