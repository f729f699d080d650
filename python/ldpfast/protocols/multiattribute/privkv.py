"""PrivKV (Ye, Hu, Meng, Zheng, S&P 2019), the key-value baseline PCKV is compared with:
each user samples one key ``j`` uniformly from the whole domain ``[0, d)`` (not from its set)
and reports ``j`` with a perturbed (holds-it, sign) pair.

The pair is ``<1, v*>`` when the user holds ``j`` with value ``v`` (``v*``: +1 with
probability ``(1 + v)/2``, else -1) and ``<0, 0>`` otherwise. The holds-it bit goes through
binary RR of ``eps1`` (``p1 = e^eps1/(e^eps1 + 1)``); a pair reported as ``<1, .>`` carries
binary RR of ``eps2`` applied to ``v*`` (a fair sign for a user who does not hold ``j``).
Reports: ``key`` (``j``) and ``sign`` in {-1, 0, 1} (0: ``<0, 0>``).

Privacy: PrivKV composes sequentially, ``eps = eps1 + eps2`` (``value_epsilon`` is ``eps2``,
default ``eps/2``). That is a valid bound; the exact loss is smaller,
``max(eps2, eps1 + log(2 e^eps2/(e^eps2 + 1)))`` (the correlation PCKV's analysis uses):
``true_epsilon`` of the budgets, ``effective_epsilon`` of the samplers' thresholds.

Estimators (:class:`~ldpfast.protocols.multiattribute._kv.KVServer` with ``l = d``): with
``U``, ``D`` the reports ``(k, +1)`` and ``(k, -1)`` among ``n``, ``q1 = 1 - p1``:
``fhat = (d (U + D)/n - q1)/(p1 - q1)`` and ``shat = d (U - D)/(n p1 (2 p2 - 1))``, both
unbiased (the count of users who sampled ``k`` replaced by its expectation ``n/d``), with the
closed forms of :class:`~ldpfast.protocols.multiattribute._kv.Rates` at ``a = p1 - q1 + q1/d``,
``b = q1/d``, gain ``p1 (2 p2 - 1)``.
"""

from __future__ import annotations

import dataclasses
import decimal
from fractions import Fraction
from typing import Any, ClassVar, List, Mapping, Optional, Tuple

import numpy as np

from ... import _budget, _core
from ..._base import AuditHooks, ClientBase, Params as _ParamsBase, Protocol, Reports as _ReportsBase, WireField
from ..._base import bits_for, register_protocol
from ..._delta import Delta
from ..._random import KeySource
from ..._validate import check_array, check_below, check_epsilon, check_int, check_real, rr_threshold
from ..._validate import uint64_column
from ...audit import Plan
from ...errors import ReportError
from ._kv import (MAX_KEYS, KVServer, PairsLike, Rates, as_pairs, composed_epsilon, frequency_model, ratings,
                  set_simulation)
from .._registration import edges

__all__ = ["PrivKVParams", "PrivKVReports", "PrivKVClient", "PrivKVServer"]

_TWO64 = 2**64


@dataclasses.dataclass(frozen=True)
class PrivKVParams(_ParamsBase):
    """PrivKV parameters: ``epsilon`` (``eps1 + eps2``), ``d`` (keys ``[0, d)``; the server
    holds ``2 d`` counters) and ``value_epsilon`` (``eps2`` in ``(0, epsilon)``; None:
    ``epsilon/2``). The key's bit gets ``eps1 = epsilon - eps2`` rounded down."""

    protocol: ClassVar[str] = "privkv"
    epsilon: float
    d: int
    value_epsilon: Optional[float] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "d", check_int("d", self.d, 1, MAX_KEYS))
        if self.value_epsilon is not None:
            object.__setattr__(self, "value_epsilon", check_real("value_epsilon", self.value_epsilon, 0.0,
                                                                 self.epsilon))
        _ = self.key_threshold, self.value_threshold  # refuses budgets the 64-bit samplers cannot represent

    @property
    def value_budget(self) -> float:
        return self.epsilon / 2 if self.value_epsilon is None else float(self.value_epsilon)

    @property
    def key_budget(self) -> float:
        """``eps1 = epsilon - eps2``, rounded down."""
        exact = Fraction(self.epsilon) - Fraction(self.value_budget)
        out = float(exact)
        return out if Fraction(out) <= exact else float(np.nextafter(out, 0.0))

    @property
    def key_threshold(self) -> int:
        return rr_threshold(self.key_budget, 2, "epsilon (key budget eps1)")

    @property
    def value_threshold(self) -> int:
        return rr_threshold(self.value_budget, 2, "value_epsilon")

    @property
    def rates(self) -> Rates:
        q1, p2 = self.key_threshold / _TWO64, 1.0 - self.value_threshold / _TWO64
        p1 = 1.0 - q1
        return Rates(p1 - q1 + q1 / self.d, q1 / self.d, p2, self.d, gain=p1 * (2 * p2 - 1))

    @property
    def true_epsilon(self) -> float:
        """The loss the reports really have, below the claimed ``epsilon``:
        ``max(eps2, eps1 + log(2 e^eps2/(e^eps2 + 1)))`` of the budgets, rounded up."""
        with decimal.localcontext() as ctx:
            ctx.prec = _budget.PRECISION
            e2 = decimal.Decimal(self.value_budget).exp()
            pair = decimal.Decimal(self.key_budget) + (2 * e2 / (e2 + 1)).ln()
        return _budget.effective(max(decimal.Decimal(self.value_budget), pair))

    @property
    def effective_epsilon(self) -> float:
        """``max(log(p2/(1-p2)), log(2 p1 p2/(1-p1)))`` of the samplers' thresholds (at least
        ``log(p1/(1-p1))``): below ``eps1 + eps2``."""
        t = self.key_threshold
        return composed_epsilon(self.value_threshold, (_TWO64 - t, t))


@dataclasses.dataclass(eq=False)
class PrivKVReports(_ReportsBase):
    """PrivKV reports: the sampled ``key`` in ``[0, d)`` and ``sign`` in {-1, 0, 1}."""

    protocol: ClassVar[str] = "privkv"
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"key": ("uint64", 1), "sign": ("int8", 1)}
    key: np.ndarray
    sign: np.ndarray

    def __post_init__(self) -> None:
        self.key = uint64_column(self.key, "key", ReportError)
        self.sign = check_array("sign", self.sign, np.int8, cast=True)


def _uniform_keys(source: KeySource, n: int, d: int, threads: int) -> np.ndarray:
    """``n`` uniform draws from ``[0, d)`` on the ChaCha20 stream: RR of the symbol 0 over
    ``[0, d]`` that always flips lands uniformly on ``[1, d]`` (kept with probability 2^-64:
    drawn again)."""
    out = np.zeros(n, dtype=np.uint64)
    todo = np.arange(n)
    while todo.size:
        draw = _core.randomized_response(source.key(), np.zeros(todo.size, dtype=np.uint64), d + 1, _TWO64 - 1,
                                         threads)
        out[todo] = draw - 1
        todo = todo[draw == 0]
    return out


class PrivKVClient(ClientBase):
    """PrivKV user side (see the module docstring). ``rng=None`` (default) draws keys from the
    OS; a seed is for simulation only. The discretization coin comes from the key source's
    generator: it is a preprocessing of the input, and the RR that follows is LDP for every
    outcome of it."""

    params: PrivKVParams

    def perturb(self, pairs: PairsLike) -> PrivKVReports:
        """One report per user (``pairs``: see :func:`~ldpfast.protocols.multiattribute._kv.as_pairs`)."""
        p = self.params
        offsets, keys, values = as_pairs(pairs, p.d, p.label_domain)
        n = offsets.size - 1
        sampled = _uniform_keys(self._keys, n, p.d, self.threads)
        users = np.repeat(np.arange(n), np.diff(offsets))
        match = keys == sampled[users]
        holds = np.zeros(n, dtype=np.uint64)
        holds[users[match]] = 1
        value = np.zeros(n)
        value[users[match]] = values[match]
        signs = (self._keys.generator().random(n) < (1.0 + value) / 2.0).astype(np.uint64)  # fair for non-holders
        reported = _core.randomized_response(self._keys.key(), holds, 2, p.key_threshold, self.threads)
        sign = _core.randomized_response(self._keys.key(), signs, 2, p.value_threshold, self.threads)
        return PrivKVReports(key=sampled, sign=np.where(reported == 1, 2 * sign.astype(np.int8) - 1, 0).astype(np.int8))


class PrivKVServer(KVServer):
    """PrivKV collector: per key, the reports ``(key, +1)`` and ``(key, -1)``
    (:class:`~ldpfast.protocols.multiattribute._kv.KVServer`; frequencies and totals are
    unbiased whatever the users' set sizes). Thread-safe (see :class:`ldpfast._base.Aggregator`)."""

    protocol: ClassVar[str] = "privkv"
    params_type: ClassVar[type] = PrivKVParams
    reports_type: ClassVar[type] = PrivKVReports

    def _validate(self, reports: PrivKVReports) -> None:
        check_below(reports.key, self.params.d, "key", "keys in", ReportError)
        bad = np.abs(reports.sign.astype(np.int16)) > 1
        if bad.any():
            at = int(np.argmax(bad))
            raise ReportError(f"sign must be -1, 0 or 1, got {int(reports.sign[at])} at index {at}")

    def _ingest(self, reports: PrivKVReports) -> Delta:
        d = self.params.d
        self._check_call(16 * d, lambda: f"counting a batch of {len(reports)} PrivKV reports")
        key = reports.key.astype(np.int64)
        up = np.bincount(key[reports.sign == 1], minlength=d)
        down = np.bincount(key[reports.sign == -1], minlength=d)
        return self._added(len(reports), up, down)


def _audit_plan(params: PrivKVParams) -> Plan:
    """A user holding every key with value +1 against one holding none: ``sign = +1`` has
    probability ``p1 p2`` against ``(1 - p1)/2``, ``sign = 0`` ``1 - p1`` against ``p1``."""
    def make(i: int, n: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        size = params.d if i == 0 else 0
        return (np.arange(n + 1, dtype=np.int64) * size, np.tile(np.arange(size, dtype=np.uint64), n),
                np.ones(n * size))

    def events(reports: PrivKVReports) -> Tuple[np.ndarray, np.ndarray]:
        return reports.sign == 1, reports.sign == 0
    return Plan(make, events, ("sign = +1", "sign = 0"))


def _wire(p: PrivKVParams) -> List[WireField]:
    return [WireField("key", bits_for(p.d)), WireField("sign", 2, (-1, 0, 1), "int8")]


def _example() -> Tuple[PrivKVParams, Any]:
    return PrivKVParams(epsilon=2.0, d=12), ratings(12, 3000, seed=6)


register_protocol(Protocol(
    "privkv", PrivKVParams, PrivKVReports, PrivKVServer, PrivKVClient, inputs="pairs", example=_example,
    extremes=edges(d=(1, 2**20)), wire_fields=_wire, variance=frequency_model,
    simulations=set_simulation("privkv", "PrivKV", "key-value PrivKV (one key sampled from the domain) on rated sets",
                               lambda e, sets: PrivKVParams(epsilon=e, d=sets.d)),
    audit=AuditHooks(lambda e, **kw: PrivKVParams(epsilon=e, d=2, **kw), _audit_plan, lambda p: p.effective_epsilon)))
