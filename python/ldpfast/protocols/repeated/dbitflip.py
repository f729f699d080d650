"""Microsoft's telemetry mechanisms with memoization: dBitFlip (histograms) and 1BitMean
(counter means). Ding, Kulkarni, Yekhanin, "Collecting Telemetry Data Privately", NeurIPS
2017 (deployed in Windows).

**dBitFlip** (``dbitflip``): values are bucket indices in ``[0, d)``. Each user draws
``sampled`` distinct buckets ``j_1 < ... < j_s`` once (from its secret) and reports, for
each, a bit that is 1 with probability ``e^(eps/2)/(e^(eps/2) + 1)`` if its value is that
bucket and ``1/(e^(eps/2) + 1)`` otherwise: two values change at most two of the bits, so
a report is eps-LDP. The response depends only on *which* sampled bucket holds the value
(one of ``sampled + 1`` states), and is memoized per state (permanent memoization): a user
reveals at most ``sampled + 1`` responses however often its value changes, so its
cumulative loss is at most ``(sampled + 1) eps`` and ``eps`` while the value (its state)
stays. There is no instantaneous noise (``eps_1 = eps_inf = eps``), and the memoized
response links a user's reports. Estimator: ``fhat(v) = d/(n s) * (o_v (e^(eps/2) + 1) -
s_v)/(e^(eps/2) - 1)`` with ``s_v`` reports that sampled ``v`` and ``o_v`` those of them
with bit 1; ``Var = d/(n s) (e^(eps/2)/(e^(eps/2) - 1)^2 + f) - f/n``.

**1BitMean** (``1bitmean``): counters ``x in [0, m]``. Each user draws ``alpha`` uniform on
``[0, 1)`` once and rounds ``x`` to ``m`` if ``x/m > alpha``, else to 0 (alpha-point
rounding: unbiased, and a user only ever uses two points); the 1BitMean bit of each point
(1 with probability ``1/(e^eps_inf + 1)`` at 0 and ``e^eps_inf/(e^eps_inf + 1)`` at ``m``)
is memoized, and each report flips it with probability ``gamma`` (the paper's output
perturbation), chosen so that one report spends ``eps_1``. A user's cumulative loss is at
most ``2 eps_inf`` whatever its values. The server estimates the mean
``m (ones/n - P0)/(P1 - P0)`` with ``P1 = (1 - gamma) p + gamma (1 - p)``,
``P0 = 1 - P1``; ``estimate()`` gives it as a fraction of ``m``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar, Dict, Mapping, Optional, Tuple

import numpy as np

from ... import _base, _core
from ..._aggregator import _exact_sum
from ..._delta import _State
from ..._base import AuditHooks
from ..._validate import check_array, check_epsilon, check_int, check_threads, check_values
from ...errors import FormatError, ParameterError, ReportError
from ...estimates import PLUG_IN
from ..._base import WireField, bits_for
from .._memo import (MemoClient, MemoServer, binary_epsilon, check_bit_budget, exp, probability, solve_threshold,
                    threshold, unary_epsilon)
from ..._validate import MAX_EPSILON, MIN_EPSILON
from .._registration import edges, simulated_own_l2, simulated_own_variance, zipf_values

__all__ = ["DBitFlipParams", "DBitFlipReports", "DBitFlipClient", "DBitFlipServer", "OneBitMeanParams",
           "OneBitMeanReports", "OneBitMeanClient", "OneBitMeanServer"]

_TWO64 = 2**64
_ALPHA_PURPOSE = 2   # memo_draws purpose of 1BitMean's rounding point alpha


# -- dBitFlip ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DBitFlipParams(_base.Params):
    """dBitFlip with permanent memoization.

    Attributes:
        epsilon: budget of one report (and of the memoized response of one state).
        d: number of buckets (values are bucket indices), ``2 <= d <= 2^32``.
        sampled: buckets each user samples and reports a bit for (the paper's ``d``),
            ``1 <= sampled <= min(d, 4096)``.
    """

    protocol: ClassVar[str] = "dbitflip"
    epsilon: float
    d: int
    sampled: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_bit_budget("epsilon", check_epsilon(self.epsilon), halves=True))
        object.__setattr__(self, "d", check_int("d", self.d, 2, 2**32))
        object.__setattr__(self, "sampled", check_int("sampled", self.sampled, 1, min(self.d, 4096)))
        _ = self.thresholds

    @property
    def thresholds(self) -> Tuple[int, int]:
        """``(t_hot, t_cold)``: ``e^(eps/2)/(e^(eps/2) + 1)`` rounded down, its complement up."""
        half = exp(self.epsilon / 2)
        return threshold(half / (half + 1), up=False), threshold(1 / (half + 1), up=True)

    @property
    def eps_inf(self) -> float:
        """Budget of one state's memoized response (reports of one value): ``epsilon``."""
        return self.epsilon

    @property
    def effective_epsilon(self) -> float:
        """Two sampled bits change between values: ``ln(p (1-q)/(q (1-p)))`` of the thresholds."""
        return unary_epsilon(*(probability(t) for t in self.thresholds))

    def variance(self, n: int, f: Any) -> Any:
        """``Var(fhat) = d/(n s) (p q/(p - q)^2 + f) - f/n`` (``e^(eps/2)/(e^(eps/2)-1)^2`` for
        the exact ``p = 1 - q``; ``s`` = ``sampled``)."""
        p, q = (t / _TWO64 for t in self.thresholds)
        f = np.asarray(f, dtype=np.float64)
        # Z = [v sampled] (bit - q)/(p - q): E[Z^2 | sampled] = (f p(1-p) + (1-f) q(1-q) + f (p-q)^2)/(p-q)^2
        spread = (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (p - q) ** 2 + f
        return self.d / (n * self.sampled) * spread - f / n


@dataclasses.dataclass(eq=False)
class DBitFlipReports(_base.Reports):
    """dBitFlip reports: the user's ``sampled`` buckets (``uint32[n, s]``, ascending) and its
    bits for them (``uint8[n, s]``, 0/1)."""

    protocol: ClassVar[str] = "dbitflip"
    column_types: ClassVar = {"buckets": ("uint32", 2), "bits": ("uint8", 2)}
    buckets: np.ndarray
    bits: np.ndarray

    def __post_init__(self) -> None:
        self.buckets = check_array("buckets", self.buckets, np.uint32, 2, cast=True)
        self.bits = check_array("bits", self.bits, np.uint8, 2, cast=True)
        self._check_lengths()


class DBitFlipClient(MemoClient):
    """dBitFlip client: ``perturb(values, secrets=None)`` (see
    :class:`ldpfast.protocols._memo.MemoClient`). Reports are the memoized responses: there
    is no instantaneous noise, so ``permanent`` is ``perturb``."""

    def perturb(self, values: Any, secrets: Any = None) -> DBitFlipReports:
        """One report per bucket index in ``[0, d)``; ``secrets``: one per value."""
        p = self.params
        x = check_values(values, p.d)
        t_hot, t_cold = p.thresholds
        buckets, bits = _core.dbitflip_perturb(self._secrets(secrets, x.size), x, p.d, p.sampled, t_hot, t_cold,
                                               self.threads)
        return DBitFlipReports(buckets=buckets, bits=bits)

    def permanent(self, values: Any, secrets: Any = None) -> DBitFlipReports:
        """The memoized responses (what is sent)."""
        return self.perturb(values, secrets)


class DBitFlipServer(_base.Aggregator):
    """dBitFlip aggregator: per bucket, the reports that sampled it (``sampled``) and those of
    them with bit 1 (``ones``). Thread-safe (see :class:`ldpfast._base.Aggregator`)."""

    protocol: ClassVar[str] = "dbitflip"
    params_type: ClassVar[type] = DBitFlipParams
    reports_type: ClassVar[Optional[type]] = DBitFlipReports
    params: DBitFlipParams

    def __init__(self, params: DBitFlipParams, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        self._st = _State(sampled=np.zeros(params.d, dtype=np.uint64), ones=np.zeros(params.d, dtype=np.uint64),
                          n=np.zeros(1, dtype=np.uint64))

    @classmethod
    def _state_layout(cls, params: Any) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        return {"sampled": ((params.d,), "uint64"), "ones": ((params.d,), "uint64"), "n": ((1,), "uint64")}

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State({k: np.array(state[k], dtype=np.uint64) for k in ("sampled", "ones", "n")})

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    def _validate(self, reports: DBitFlipReports) -> None:
        p = self.params
        if reports.buckets.shape[1:] != (p.sampled,) or reports.bits.shape[1:] != (p.sampled,):
            raise ReportError(f"buckets and bits must have {p.sampled} columns (sampled), got "
                              f"{reports.buckets.shape} and {reports.bits.shape}")
        if reports.buckets.size and int(reports.buckets.max()) >= p.d:
            raise ReportError(f"buckets must be < d={p.d}, got {int(reports.buckets.max())}")
        if reports.bits.size and int(reports.bits.max()) > 1:
            raise ReportError(f"bits must be 0 or 1, got {int(reports.bits.max())}")
        if p.sampled > 1 and reports.buckets.size and bool((np.diff(reports.buckets.astype(np.int64), axis=1) <= 0)
                                                           .any()):
            raise ReportError("each report's buckets must be distinct and ascending")

    def _ingest(self, reports: DBitFlipReports) -> _base.Delta:
        # the batch is the library's copy, checked by _validate: each value read once
        buckets = reports.buckets.ravel()
        return (self._delta().add_counts("sampled", buckets)
                .add_counts("ones", buckets[reports.bits.ravel() != 0]).add("n", [len(reports)]))

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        if bool((state["ones"] > state["sampled"]).any()):
            raise FormatError("a stored count of ones exceeds its count of reports")
        if _exact_sum(state["sampled"]) != self.params.sampled * int(state["n"][0]):
            raise FormatError("stored sampled counts do not sum to sampled * n")

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """``fhat(v) = d/(n s) * (o_v - q s_v)/(p - q)`` for the candidates (default: all of
        ``[0, d)``), with the samplers' exact ``p`` and ``q``; ``counts=True`` gives ``n fhat``."""
        # per candidate: its index, the two counts as floats and the intermediates
        self._check_query(candidates, 56, self.params.d, "a dBitFlip query")
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        p = self.params
        hot, cold = (t / _TWO64 for t in p.thresholds)
        sampled, ones = self._st["sampled"], self._st["ones"]
        if candidates is not None:
            index = check_values(candidates, p.d, "candidates", "values in").astype(np.intp)
            sampled, ones = sampled[index], ones[index]
        sampled, ones = sampled.astype(np.float64), ones.astype(np.float64)
        fhat = p.d / (n * p.sampled) * (ones - cold * sampled) / (hot - cold)
        return np.asarray(fhat * n if counts else fhat, dtype=np.float64)


# -- 1BitMean ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class OneBitMeanParams(_base.Params):
    """1BitMean with alpha-point rounding to ``{0, m}``, memoization and output perturbation.

    Attributes:
        eps_inf: budget of the memoized bits (each of the two points).
        eps_1: budget of one report, ``<= eps_inf`` (the output flip is solved from it).
        m: largest counter value; values are integers in ``[0, m]``, ``1 <= m <= 2^53``.
    """

    protocol: ClassVar[str] = "1bitmean"
    eps_inf: float
    eps_1: float
    m: int

    def __post_init__(self) -> None:
        eps_inf, eps_1 = check_epsilon(self.eps_inf), check_epsilon(self.eps_1)
        if eps_1 > eps_inf:
            raise ParameterError(f"eps_1 must be <= eps_inf, got {eps_1!r} > {eps_inf!r}")
        object.__setattr__(self, "eps_inf", eps_inf)
        object.__setattr__(self, "eps_1", eps_1)
        object.__setattr__(self, "m", check_int("m", self.m, 1, 2**53))
        check_bit_budget("eps_inf (the epsilon of the memoized bits)", eps_inf)
        _ = self.thresholds

    @property
    def epsilon(self) -> float:
        return self.eps_1

    @property
    def d(self) -> int:
        """Counter values ``[0, m]``: ``m + 1``."""
        return self.m + 1

    @property
    def thresholds(self) -> Tuple[int, int, int]:
        """``(t_top, t_bottom, t_flip)``: the memoized bit's probability of 1 at ``m`` and at
        0, and a report's probability of flipping it (0: the report is the memoized bit)."""
        return _one_bit_stages(self.eps_inf, self.eps_1)

    def _report_probabilities(self) -> Tuple[float, float]:
        return tuple(float(v) for v in _flipped(*self.thresholds))  # type: ignore[return-value]

    @property
    def effective_eps_inf(self) -> float:
        top, bottom, _ = self.thresholds
        return binary_epsilon(probability(top), probability(bottom))

    @property
    def effective_eps_1(self) -> float:
        return binary_epsilon(*_flipped(*self.thresholds))

    def variance(self, n: int, f: Any) -> Any:
        """``Var`` of the estimated mean fraction ``mean/m`` when every user's ``x/m`` is
        ``f``: ``pi (1 - pi)/(n (P1 - P0)^2)``; for unequal values this is an upper bound."""
        one, zero = self._report_probabilities()
        pi = zero + np.asarray(f, dtype=np.float64) * (one - zero)
        return pi * (1 - pi) / (n * (one - zero) ** 2)


@functools.lru_cache(maxsize=256)
def _one_bit_stages(eps_inf: float, eps_1: float) -> Tuple[int, int, int]:
    e = exp(eps_inf)
    top, bottom = threshold(e / (e + 1), up=False), threshold(1 / (e + 1), up=True)

    def spent(flip: int) -> float:
        return binary_epsilon(*_flipped(top, bottom, flip))
    flip = solve_threshold(spent, eps_1, 0, _TWO64 // 2) if spent(0) > eps_1 else 0
    return top, bottom, flip


def _flipped(top: int, bottom: int, flip: int) -> Tuple[Any, Any]:
    """``(P1, P0)``: a report's probability of 1 at the points ``m`` and 0, the memoized bit
    flipped with probability ``flip / 2^64``."""
    p, q, g = probability(top), probability(bottom), probability(flip)
    return p * (1 - g) + (1 - p) * g, q * (1 - g) + (1 - q) * g


@dataclasses.dataclass(eq=False)
class OneBitMeanReports(_base.Reports):
    """1BitMean reports: one bit per user (``uint8``, 0/1)."""

    protocol: ClassVar[str] = "1bitmean"
    column_types: ClassVar = {"bit": ("uint8", 1)}
    bit: np.ndarray

    def __post_init__(self) -> None:
        self.bit = check_array("bit", self.bit, np.uint8, 1, cast=True)


class OneBitMeanClient(MemoClient):
    """1BitMean client (see :class:`ldpfast.protocols._memo.MemoClient` for ``secrets``)."""

    def _draw(self, values: Any, secrets: Any, instantaneous: bool) -> OneBitMeanReports:
        p = self.params
        x = check_values(values, p.m + 1)
        keys = self._secrets(secrets, x.size)
        alpha = _core.memo_draws(keys, _ALPHA_PURPOSE, p.m, 1, self.threads)[:, 0]
        point = (x > alpha).astype(np.uint64)       # P(x > alpha) = x/m: alpha uniform on [0, m)
        top, bottom, flip = p.thresholds
        # one bit, "hot" (probability top) at the point m, cold at 0, memoized per point; a
        # report keeps it with probability 1 - flip / 2^64
        rows = _core.memo_unary_perturb(self._keys.key(), keys, 1 - point, 1, top, bottom,
                                        instantaneous and flip > 0, _TWO64 - flip if flip else 0, flip, self.threads)
        return OneBitMeanReports(bit=rows[:, 0])

    def perturb(self, values: Any, secrets: Any = None) -> OneBitMeanReports:
        """One bit per counter value in ``[0, m]``; ``secrets``: one per value."""
        return self._draw(values, secrets, True)

    def permanent(self, values: Any, secrets: Any = None) -> OneBitMeanReports:
        """The memoized bits of the rounded values (never sent)."""
        return self._draw(values, secrets, False)


class OneBitMeanServer(MemoServer, _base.Aggregator):
    """1BitMean aggregator: reports and ones. ``estimate()`` is the mean as a fraction of
    ``m`` (one value), :meth:`mean` in counter units."""

    protocol: ClassVar[str] = "1bitmean"
    params_type: ClassVar[type] = OneBitMeanParams
    reports_type: ClassVar[Optional[type]] = OneBitMeanReports
    params: OneBitMeanParams

    def __init__(self, params: OneBitMeanParams):
        super().__init__(params)
        self._st = _State(counts=np.zeros(2, dtype=np.uint64))   # zeros, ones

    @classmethod
    def _state_layout(cls, params: Any) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        return {"counts": ((2,), "uint64")}

    @property
    def n(self) -> int:
        return int(self._st["counts"].sum(dtype=np.uint64))

    def _validate(self, reports: OneBitMeanReports) -> None:
        if reports.bit.size and int(reports.bit.max()) > 1:
            raise ReportError(f"bit must be 0 or 1, got {int(reports.bit.max())}")

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        if _exact_sum(state["counts"]) >= 2**63:
            raise FormatError("stored counts sum to 2^63 or more (the report count would wrap)")

    def _ingest(self, reports: OneBitMeanReports) -> _base.Delta:
        ones = int(np.count_nonzero(reports.bit))
        return self._delta().add("counts", np.array([len(reports) - ones, ones], dtype=np.uint64))

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """``[mean / m]``: ``(ones/n - P0)/(P1 - P0)`` (candidates: None or ``[0]``);
        ``counts=True`` gives ``n mean / m``."""
        if candidates is not None and list(np.asarray(candidates).ravel()) != [0]:
            raise ParameterError("1BitMean estimates one value, the mean: candidates must be None or [0]")
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate the mean from zero reports")
        one, zero = self.params._report_probabilities()
        fraction = (int(self._st["counts"][1]) / n - zero) / (one - zero)
        return np.array([fraction * n if counts else fraction])

    def mean(self) -> float:
        """The estimated mean counter value."""
        return float(self.estimate()[0]) * self.params.m


# -- registration ------------------------------------------------------------------------------
def _dbitflip_plan(params: DBitFlipParams) -> Any:
    from ...audit import Plan, value_inputs

    def events(reports: DBitFlipReports) -> Tuple[np.ndarray, np.ndarray]:
        # the bit of bucket 0 is 1 and of bucket 1 is 0 (both sampled), and the reverse
        buckets, bits = reports.buckets, reports.bits.astype(bool)
        b0 = ((buckets == 0) & bits).any(axis=1)
        b1 = ((buckets == 1) & bits).any(axis=1)
        both = (buckets == 0).any(axis=1) & (buckets == 1).any(axis=1)
        return both & b0 & ~b1, both & b1 & ~b0
    return Plan(value_inputs(0, 1), events, ("bit of x0 = 1, of x1 = 0", "bit of x1 = 1, of x0 = 0"))


def _one_bit_plan(params: OneBitMeanParams) -> Any:
    from ...audit import Plan, value_inputs

    return Plan(value_inputs(params.m, 0), lambda r: (r.bit == 1, r.bit == 0), ("bit = 1", "bit = 0"))


def _dbitflip_simulations() -> Tuple[Any, ...]:
    from ...experiments import Algorithm

    return (Algorithm("dbitflip", "dBitFlip", "protocols.repeated.dbitflip",
                      lambda eps, data, gen: DBitFlipParams(epsilon=eps, d=data.d, sampled=min(data.d, 16)),
                      simulated_own_variance, simulated_own_l2,
                      "dBitFlip (Ding et al. 2017), 16 sampled buckets per user, memoized"),)


def _own_variance(server: Any, candidates: Any) -> Tuple[Any, str]:
    p, n = server.params, server.n
    return (lambda f: p.variance(n, f)), f"{PLUG_IN} (Params.variance)"


def _mean_variance(server: Any, candidates: Any) -> Tuple[Any, str]:
    p, n = server.params, server.n
    return ((lambda f: p.variance(n, f)),
            f"{PLUG_IN}, as if every user held the mean (an upper bound otherwise; Params.variance)")


_base.register_protocol(_base.Protocol(
    "dbitflip", DBitFlipParams, DBitFlipReports, DBitFlipServer, DBitFlipClient,
    extremes=edges(d=(2, 2**20), sampled=(1, 2**20)),
    example=lambda: (DBitFlipParams(epsilon=1.5, d=64, sampled=4), zipf_values(64)),
    wire_fields=lambda p: [WireField("buckets", bits_for(p.d), None, "uint32", (p.sampled,)),
                           WireField("bits", 1, None, "uint8", (p.sampled,))],
    variance=_own_variance, simulations=_dbitflip_simulations,
    # no instantaneous noise: a report spends what a memoized response does
    rounds=lambda eps_inf, eps_1, d: DBitFlipParams(epsilon=eps_1, d=d, sampled=min(d, 16)),
    audit=AuditHooks(lambda e, **kw: DBitFlipParams(**{"epsilon": e, "d": 2, "sampled": 2, **kw}), _dbitflip_plan,
                     lambda p: float(p.effective_epsilon), permanent_epsilon=lambda p: float(p.effective_epsilon))))

_base.register_protocol(_base.Protocol(
    "1bitmean", OneBitMeanParams, OneBitMeanReports, OneBitMeanServer, OneBitMeanClient,
    example=lambda: (OneBitMeanParams(eps_inf=3.0, eps_1=1.0, m=24), np.minimum(zipf_values(64), 24)),
    extremes=edges(eps_inf=(MIN_EPSILON, MAX_EPSILON), eps_1=(MIN_EPSILON, MAX_EPSILON), m=(1, 2**20)),
    wire_fields=lambda p: [WireField("bit", 1, None, "uint8")],
    variance=_mean_variance, default_candidates=lambda server: np.array([0]),
    audit=AuditHooks(lambda e, **kw: OneBitMeanParams(**{"eps_inf": 2 * e, "eps_1": e, "m": 8, **kw}),
                     _one_bit_plan, lambda p: float(p.effective_eps_1),
                     permanent_epsilon=lambda p: float(p.effective_eps_inf))))
