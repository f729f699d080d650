"""Low-level kernels (C++ core, runtime-dispatched): the fast Walsh-Hadamard transform,
finite-field pairwise-independent hashing, and batched randomized response."""

from .field import *  # noqa: F401,F403
from .fwht import *  # noqa: F401,F403
from .rr import *  # noqa: F401,F403
