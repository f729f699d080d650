"""Epsilon range: for every registered protocol, the epsilon implied by the integer flip
thresholds its samplers really use never exceeds the claimed one, across the accepted range
(edges included), and budgets the 64-bit sampler cannot represent are refused."""

import decimal
import math

import pytest

from ldpfast import audit
from ldpfast._validate import MAX_EPSILON, MIN_EPSILON, rr_effective_epsilon, rr_epsilon_range, rr_threshold
from ldpfast.errors import ParameterError

BINARY_MAX = rr_epsilon_range(2)[1]                       # log(2^32 - 1) = 22.18
GRID = sorted({MIN_EPSILON, 1e-4, 0.01, 0.5, 1.0, 4.0, 10.0, 20.0, math.nextafter(BINARY_MAX, 0), 30.0, 43.0,
               MAX_EPSILON})


#: Protocols whose sampler draws from a coarser uniform than 64 bits: Duchi's bit compares a
#: 53-bit uniform with its threshold (protocols/numeric/_grid.duchi_threshold).
SAMPLER_UNIT = {"duchi": 2.0**-53}


def _claimed(params) -> float:
    """The epsilon the protocol documents for its reports (PS-OLH with amplify, R3's SVIM:
    their true_epsilon; PrivSketch: only its randomized-response part)."""
    return getattr(params, "true_epsilon", params.epsilon)


@pytest.mark.parametrize("pid", audit.AUDITED)
def test_effective_epsilon_never_exceeds_the_claim(pid):
    accepted = []
    for eps in GRID:
        try:
            params = audit.default_params(pid, eps)
        except ParameterError as exc:
            assert "epsilon" in str(exc) and "must be" in str(exc) and "got" in str(exc), exc
            continue
        accepted.append(eps)
        effective = audit.effective_epsilon(params)
        assert effective <= _claimed(params), (pid, eps, effective)
        # Faithful: each threshold is rounded by < 1 unit where flip and keep probabilities
        # are >= 2^-32, moving the log-ratio by < 2 * 2^-32 per flipped bit (KM bits at most).
        bits = params.K * params.M if hasattr(params, "bit_divisor") else 1
        slack = bits * 2**-30 * max(1.0, _claimed(params))
        if pid in SAMPLER_UNIT:   # one unit of a coarser sampler moves the flip probability e^-eps by unit/e^-eps
            slack = max(slack, 2 * SAMPLER_UNIT[pid] * (math.exp(min(_claimed(params), 700.0)) + 1))
        assert _claimed(params) - effective <= slack, (pid, eps, effective)
    # a protocol splitting its budget (SPL: epsilon / attributes) starts at its own min_epsilon
    floor = getattr(audit.default_params(pid, 1.0), "min_epsilon", MIN_EPSILON)
    assert {0.5, 1.0, 4.0} <= set(accepted) and (floor > MIN_EPSILON or MIN_EPSILON in accepted), (pid, accepted)
    audit.default_params(pid, floor)


def exactly_within(t: int, m: int, eps: float) -> bool:
    """``(1 - f)(m - 1)/f <= e^eps`` for ``f = t/2^64``, in 80-digit arithmetic: exact at
    the scale of one threshold unit (a float comparison of the logs could not see the
    2^-64 rounding that separates floor from ceiling)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        return (2**64 - t) * (m - 1) <= t * decimal.Decimal(eps).exp()


@pytest.mark.parametrize("m", [2, 3, 5, 17, 1000, 2**20, 2**40, 2**64 - 1])
def test_thresholds_round_toward_more_flipping(m):
    low, high = rr_epsilon_range(m)
    grid = [e for e in GRID + [0.1 * k for k in range(1, 200)] if max(low, MIN_EPSILON) <= e <= high]
    assert grid
    for eps in grid:
        t = rr_threshold(eps, m)
        assert exactly_within(t, m, eps) and not exactly_within(t - 1, m, eps), (m, eps)


@pytest.mark.parametrize("m", [2, 3, 17, 1000, 2**20, 2**40, 2**64 - 1])
def test_rr_range_edges(m):
    low, high = rr_epsilon_range(m)
    for eps in (max(low, MIN_EPSILON) * (1 + 1e-9), high * (1 - 1e-12), (max(low, MIN_EPSILON) + high) / 2):
        t = rr_threshold(eps, m)
        assert rr_effective_epsilon(t, m) <= eps
        assert 2**32 <= t <= 2**64 - 2**32
    with pytest.raises(ParameterError, match=rf"epsilon must be in \[.*\] for randomized response over {m} symbols"):
        rr_threshold(high * (1 + 1e-9), m)
    if low > 1e-9:
        with pytest.raises(ParameterError, match=f"over {m} symbols"):
            rr_threshold(low * (1 - 1e-6), m)


def test_large_epsilon_used_to_be_overstated():
    # Binary RR at eps = 44 rounded its flip threshold down to 2^64/(e^44 + 1) -> 1 (eps 44.36),
    # and eps >= 44.4 never flipped. Now refused with the usable range in the message.
    with pytest.raises(ParameterError, match=r"epsilon must be in \[9.31323e-10, 22.1807\] for randomized "
                                             r"response over 2 symbols .* got 44.0"):
        rr_threshold(44.0, 2)
    for bad in (5e-324, 0.0, -1.0, 700.0, float("inf")):
        with pytest.raises(ParameterError, match=r"epsilon must be finite and in \[9.53674e-07, 66.5\]"):
            audit.default_params("grr", bad)
