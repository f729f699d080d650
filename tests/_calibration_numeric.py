"""Calibration cases of the numeric family (tests/_calibration.py imports them)."""

from typing import Any, Dict

import numpy as np

from _calibration import D, THRESHOLD, Case, frequency, value_data
from ldpfast.protocols.numeric import ahead, hierarchy, mean, multidim

#: Users per run of the mean protocols and their bounds: the numbers spread a little past
#: both ends, so the clipping is part of the target.
N_NUMBERS = 5000
BOUNDS = (0.0, 1.0)


def numbers(attributes: int = 0) -> np.ndarray:
    """``N_NUMBERS`` numbers (``attributes`` > 0: rows of that many, each column its own Beta
    law) on ``[-0.05, 1.05]``: about 2% of them outside ``BOUNDS``."""
    rng = np.random.default_rng(11)
    columns = [rng.beta(2.0 + j, 3.0, size=N_NUMBERS) * 1.1 - 0.05 for j in range(max(attributes, 1))]
    return np.column_stack(columns) if attributes else columns[0]


def _unit(data: Any) -> np.ndarray:
    lo, hi = BOUNDS
    return np.asarray(np.clip((np.asarray(data, dtype=np.float64) - lo) / (hi - lo), 0.0, 1.0))


def clipped_mean(params: Any, data: Any, candidates: np.ndarray) -> np.ndarray:
    """The mean protocols' target: each attribute's mean of the clipped values as a fraction
    of the range."""
    u = _unit(data)
    return np.atleast_1d(u.mean(axis=0))[candidates]


def clipped_moments(params: Any, data: Any, candidates: np.ndarray) -> np.ndarray:
    """``moments``: ``[mean u, mean u^2]`` of the clipped fractions ``u``."""
    u = _unit(data)
    return np.array([u.mean(), (u * u).mean()])[candidates]


def interval_share(params: Any, data: Any, candidates: np.ndarray) -> np.ndarray:
    """AHEAD's target: the frequency of the round's interval holding the candidate over its
    length."""
    f = np.bincount(data, minlength=params.d) / data.size
    ends = np.append(params.partition[1:], params.d)
    node = np.searchsorted(params.partition, candidates, side="right") - 1
    sums = np.array([f[s:e].sum() for s, e in zip(params.partition, ends)])
    return sums[node] / (ends - params.partition)[node]


#: The heavy-hitter threshold of the one-number cases: the target itself (the boundary of the
#: null, so every declaration is false), as for 1bitmean.
_MEAN_AT_NULL = float(_unit(numbers()).mean())
#: Of the rows: the first attribute's mean (the second and third are larger: non-nulls).
_ROW_NULL = float(_unit(numbers(3)[:, 0]).mean())


def _one(cls: Any, epsilon: float, exact: bool = True) -> Case:
    return Case(lambda: cls(epsilon=epsilon, bounds=BOUNDS), numbers, clipped_mean, _MEAN_AT_NULL, exact=exact)


NUMERIC_CASES: Dict[str, Case] = {
    # Duchi's standard error is the bound at the mean (Jensen): it covers at least its level
    "duchi": _one(mean.DuchiParams, 1.0, exact=False),
    "pm": _one(mean.PiecewiseParams, 1.0),
    "hm": _one(mean.HybridParams, 1.0),
    "laplace": _one(mean.LaplaceParams, 1.0),
    "sampled-mean": Case(lambda: multidim.SampledMeanParams(epsilon=2.0, attributes=3, sampled=1, bounds=BOUNDS),
                         lambda: numbers(3), clipped_mean, _ROW_NULL),
    "duchi-md": Case(lambda: multidim.DuchiMdParams(epsilon=2.0, attributes=3, bounds=BOUNDS), lambda: numbers(3),
                     clipped_mean, _ROW_NULL, exact=False),
    "moments": Case(lambda: multidim.MomentsParams(epsilon=2.0, bounds=BOUNDS), numbers, clipped_moments,
                    _MEAN_AT_NULL),
    # consistent leaves of the 4-ary tree over the 40 values (three levels, users split over them)
    "hh": Case(lambda: hierarchy.HHParams(epsilon=2.0, d=D, branching=4), value_data, frequency, THRESHOLD),
    # one round on a partition into intervals of 4, 4, 8, 16 and 8 values
    "ahead": Case(lambda: ahead.AHEADParams(epsilon=2.0, d=D, branching=2, starts=(0, 4, 8, 16, 32)), value_data,
                  interval_share, THRESHOLD),
}
