"""What the memoized (longitudinal) protocols share: user secrets, the client base with its
permanent and instantaneous responses, exact sampler thresholds and the budgets they give.

Memoization (Erlingsson, Pihur, Korolova, CCS 2014; Ding, Kulkarni, Yekhanin, NeurIPS
2017). A user who reports the same value on many days must not spend a fresh budget each
day, or averaging the reports reveals the value. So each user holds a **secret** (32 bytes,
kept on the device) and the report is built in two steps:

1. the **permanent randomized response** (PRR) of a value is a deterministic function of
   ``(secret, value)``: ChaCha20 keyed by the secret with the value as the block counter
   (RAPPOR: HMAC-SHA256 as its reference clients), so no per-value table is stored and the
   same value always gives the same PRR;
2. the **instantaneous randomized response** (IRR) perturbs the PRR afresh for every report.

Two budgets, both computed from the integer thresholds the samplers use:

* ``eps_inf``: what an observer of unboundedly many reports of one value learns, i.e. the
  privacy of the PRR itself (the IRRs average out);
* ``eps_1``: what one report reveals (the composition PRR then IRR).

What memoization does **not** protect (docs/longitudinal.md):

* values that change: each distinct value reported gets its own PRR, so a user who reports
  ``u`` distinct values over time loses up to ``u * eps_inf``; memoization bounds the loss
  by the number of distinct values, not by the number of reports;
* correlated values: values that determine each other (a value and a function of it) are
  distinct values with independent PRRs, and their information adds up;
* linkability: the PRR is a stable, high-entropy fingerprint of the user while the value
  stays the same (the IRR hides it only partially), so reports of one user can be linked
  across rounds, and a change of PRR reveals that the value changed.

One secret per user and collection: reusing a secret across collections reuses its PRRs.
Secrets come from the operating system by default; seeded secrets reproduce a simulation
and must never be used on a device.
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal
from typing import Any, Callable, Tuple

import numpy as np

from .. import _budget
from .._client import ClientBase
from .._params import params_summary
from .._random import SECRET_BYTES, new_secrets
from .._validate import check_epsilon
from ..errors import ParameterError

__all__ = ["SECRET_BYTES", "new_secrets", "check_secrets", "MemoClient", "MemoServer", "Budgets", "budget_summary",
           "threshold", "probability", "solve_threshold", "unary_epsilon", "binary_epsilon", "rr_epsilon_exact",
           "two_stage_rr", "own_variance", "simulations", "audit_hooks", "check_bit_budget"]

_TWO64 = 2**64
_PRECISION = 80


def check_secrets(secrets: Any, n: int, name: str = "secrets") -> np.ndarray:
    """``secrets`` as a contiguous ``uint8[n, 32]`` array (ParameterError otherwise)."""
    arr = np.asarray(secrets)
    if arr.dtype != np.uint8 or arr.ndim != 2 or arr.shape != (n, SECRET_BYTES):
        raise ParameterError(f"{name} must be a uint8 array of shape ({n}, {SECRET_BYTES}) (one secret per value, "
                             f"see new_secrets), got {arr.dtype} of shape {arr.shape}")
    return np.ascontiguousarray(arr)


def budget_summary(params: Any) -> str:
    """``"epsilon=..., eps_inf=..."``: one report's and the permanent response's budgets."""
    return f"epsilon={float(params.epsilon):.6g} per report, eps_inf={float(params.eps_inf):.6g}"


class Budgets:
    """Mixin of Params with ``eps_inf`` and ``eps_1`` fields: ``epsilon`` is the budget of one
    report; :meth:`check_budgets` validates both (``eps_1 <= eps_inf``)."""

    eps_inf: float
    eps_1: float

    @property
    def epsilon(self) -> float:
        """The budget of one report, :attr:`eps_1`."""
        return self.eps_1

    def check_budgets(self) -> None:
        eps_inf, eps_1 = check_epsilon(self.eps_inf), check_epsilon(self.eps_1)
        if eps_1 > eps_inf:
            raise ParameterError(f"eps_1 (one report) must be <= eps_inf (the permanent response), got "
                                 f"eps_1={eps_1!r} > eps_inf={eps_inf!r}")
        object.__setattr__(self, "eps_inf", eps_inf)
        object.__setattr__(self, "eps_1", eps_1)


class MemoServer:
    """Mixin of the memoized protocols' servers: ``repr`` names both budgets."""

    params: Any

    def _repr_extra(self) -> str:
        return budget_summary(self.params)


class MemoClient(ClientBase):
    """Client of a memoized protocol: ``perturb(values, secrets)`` sends the instantaneous
    response of each value's permanent response, ``permanent(values, secrets)`` returns
    the permanent responses themselves (what unboundedly many reports reveal; never sent).

    ``secrets`` (``uint8[n, 32]``, one per value, see :func:`new_secrets`) are the users'
    own: the same user passes the same secret every round. ``secrets=None`` draws a fresh
    secret per value (from the OS, or from the seed of a seeded client), i.e. every value
    is a new user: one-shot collection, and what the audits measure."""

    def __repr__(self) -> str:
        text = super().__repr__()
        if "epsilon=" in params_summary(self.params):
            return text
        return text.replace(", rng=", f", {budget_summary(self.params)}, rng=", 1)

    def _secrets(self, secrets: Any, n: int) -> np.ndarray:
        if secrets is not None:
            return check_secrets(secrets, n)
        if not self._keys.seeded:
            return new_secrets(n)
        return np.asarray(self._keys.generator().integers(0, 256, size=(n, SECRET_BYTES), dtype=np.uint8))


# -- exact thresholds ---------------------------------------------------------------------------
#: The largest epsilon whose randomized-response probability ``1/(e^eps + 1)`` is at least
#: 2^-32, where the 64-bit samplers represent it to 2^-32 relative (as
#: :func:`ldpfast._validate.rr_threshold`): ``ln(2^32 - 1) = 22.18``.
MAX_BIT_EPSILON = math.log(2.0**32 - 1)


def check_bit_budget(name: str, value: float, halves: bool = False) -> float:
    """Refuse a budget whose smallest bit probability, ``1/(e^value + 1)`` (``halves``:
    ``1/(e^(value/2) + 1)``, symmetric unary encodings), is below 2^-32."""
    limit = MAX_BIT_EPSILON * (2 if halves else 1)
    if value > limit:
        raise ParameterError(f"{name} must be at most {limit:.6g} (the largest epsilon whose bit probabilities stay "
                             f">= 2^-32, the 64-bit samplers' resolution), got {value!r}")
    return value


def _context() -> decimal.Context:
    return decimal.Context(prec=_PRECISION)


def threshold(prob: Decimal, up: bool) -> int:
    """The integer threshold ``t`` of a probability for the C++ samplers (``P = t / 2^64``),
    rounded up or down from ``prob`` (a Decimal to 80 digits), kept in ``[1, 2^64 - 1]``."""
    with decimal.localcontext(_context()):
        scaled = prob * _TWO64
        t = int(scaled.to_integral_value(rounding=decimal.ROUND_CEILING if up else decimal.ROUND_FLOOR))
    return min(max(t, 1), _TWO64 - 1)


def probability(t: int) -> Decimal:
    """``t / 2^64`` as a Decimal (exact)."""
    with decimal.localcontext(_context()):
        return Decimal(t) / Decimal(_TWO64)


def exp(x: float) -> Decimal:
    """``e^x`` to 80 digits."""
    with decimal.localcontext(_context()):
        return Decimal(float(x)).exp()


def _ln(x: Decimal) -> float:
    """``|ln x|`` (``x > 0``) to 90 digits, rounded up to a double: an effective epsilon is
    never reported below the exact one (:func:`ldpfast._budget.effective`)."""
    with decimal.localcontext() as ctx:
        ctx.prec = _budget.PRECISION
        return _budget.effective(abs(x.ln()))


def unary_epsilon(p_one: Decimal, p_zero: Decimal) -> float:
    """The epsilon of independent bits that are 1 with probability ``p_one`` where the input
    bit is 1 and ``p_zero`` where it is 0, for inputs that differ in one 1-bit moving
    (unary encoding): ``|ln(p_one (1 - p_zero) / (p_zero (1 - p_one)))|``."""
    with decimal.localcontext(_context()):
        if p_zero <= 0 or p_one >= 1 or p_one <= 0 or p_zero >= 1:
            return math.inf
        return _ln(p_one * (1 - p_zero) / (p_zero * (1 - p_one)))


def binary_epsilon(p_one: Decimal, p_zero: Decimal) -> float:
    """The epsilon of one bit that is 1 with probability ``p_one`` from one input and
    ``p_zero`` from the other: ``max |ln| of the two outcomes' ratios``."""
    if p_zero <= 0 or p_one <= 0 or p_one >= 1 or p_zero >= 1:
        return math.inf
    with decimal.localcontext(_context()):
        return max(_ln(p_one / p_zero), _ln((1 - p_one) / (1 - p_zero)))


def rr_epsilon_exact(keep: Decimal, other: Decimal) -> float:
    """The epsilon of k-ary randomized response with ``P(y = x) = keep`` and each other
    symbol ``other``: ``|ln(keep / other)|``."""
    if keep <= 0 or other <= 0:
        return math.inf
    with decimal.localcontext(_context()):
        return _ln(keep / other)


def two_stage_rr(t1: int, t2: int, m: int) -> Tuple[Decimal, Decimal]:
    """``(P, Q)`` of k-ary RR on ``m`` symbols applied twice with flip thresholds ``t1`` and
    ``t2``: ``P = p1 p2 + (m-1) q1 q2`` on the diagonal, ``Q = p1 q2 + q1 p2 + (m-2) q1 q2``
    off it (a k-ary randomized response again)."""
    with decimal.localcontext(_context()):
        f1, f2 = probability(t1), probability(t2)
        p1, q1 = 1 - f1, f1 / (m - 1)
        p2, q2 = 1 - f2, f2 / (m - 1)
        return p1 * p2 + (m - 1) * q1 * q2, p1 * q2 + q1 * p2 + (m - 2) * q1 * q2


def solve_threshold(epsilon_of: Callable[[int], float], target: float, low: int, high: int,
                    name: str = "eps_1") -> int:
    """The smallest threshold ``t`` in ``[low, high]`` with ``epsilon_of(t) <= target``, for
    ``epsilon_of`` non-increasing in ``t`` (integer bisection, so the budget spent is at
    most the one asked for and as close to it as the 2^-64 resolution allows).

    Raises:
        ParameterError: even ``t = high`` spends more than ``target``.
    """
    if epsilon_of(high) > target:
        raise ParameterError(f"{name}={target!r} cannot be reached by this two-stage channel (at most "
                             f"{epsilon_of(high):.6g} ... {epsilon_of(low):.6g})")
    while low < high:
        mid = (low + high) // 2
        if epsilon_of(mid) <= target:
            high = mid
        else:
            low = mid + 1
    return high



# -- registration hooks the memoized families share ---------------------------------------------
def own_variance(server: Any, candidates: Any) -> Tuple[Any, str]:
    """The composed channel's ``Params.variance(n, f)``."""
    from ..estimates import PLUG_IN

    p, n = server.params, server.n
    return (lambda f: p.variance(n, f)), f"{PLUG_IN} (Params.variance of the composed channel)"


def simulations(pid: str, label: str, module: str, make: Any, variance: Any, summary: str) -> Any:
    """The ``Algorithm`` entry of a memoized protocol (``eps``: one report's budget)."""
    def entries() -> Tuple[Any, ...]:
        from ..experiments import Algorithm

        return (Algorithm(pid, label, module, make, variance, None, summary),)
    return entries


def audit_hooks(make: Any, plan: Any) -> Any:
    """Audit hooks of both budgets: ``make(eps)`` builds parameters whose report spends
    ``eps`` and whose permanent response ``2 eps``; effective budgets from the thresholds."""
    from .._base import AuditHooks

    return AuditHooks(lambda e, **kw: make(e, **kw), plan, lambda p: float(p.effective_eps_1),
                      permanent_epsilon=lambda p: float(p.effective_eps_inf))
