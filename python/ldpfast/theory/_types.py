"""Types of the closed forms: they take numbers or arrays (``f``, and ``m`` where a function
says so) and broadcast, returning a float for scalar inputs and an array otherwise."""

from __future__ import annotations

from typing import Union

import numpy as np
import numpy.typing as npt

#: A number or an array of numbers (anything ``np.asarray`` turns into floats).
RealLike = npt.ArrayLike
#: A float for scalar inputs, an array (same shape as the broadcast inputs) otherwise.
Real = Union[float, np.ndarray]
