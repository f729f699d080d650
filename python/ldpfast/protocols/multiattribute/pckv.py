"""PCKV-UE and PCKV-GRR (Gu, Li, Cheng, Xiong, Cao, USENIX Security 2020 [PCKV]): key-value
data, per-key frequency and mean value.

Each user holds a set of (key, value) pairs (keys of ``[0, d)``, values in ``[-1, 1]``;
:func:`~ldpfast.protocols.multiattribute._kv.as_pairs`). The client pads the set with
dummies to ``pad_len`` and samples one pair (the set protocols' padding-and-sampling
kernel), discretizes its value to a sign ``v*`` (+1 with probability ``(1 + v)/2``), and
perturbs key and sign together:

- ``pckv-ue``: a row ``y`` of ``d`` entries in {-1, 0, 1} (columns ``up``/``down``: the +1
  and -1 entries as bit rows). The sampled key's entry is nonzero with probability
  ``a = 1/2``, then ``v*`` with probability ``p = e^eps2/(e^eps2 + 1)`` and ``-v*``
  otherwise; every other entry is nonzero with probability ``b = 1/(e^eps1 + 1)``, with a
  uniform sign. (A dummy's own entry is not sent: dropping it is post-processing.)
- ``pckv-grr``: a pair (key, sign) over the keys ``[0, d]`` (``d``: the dummy): the sampled
  key with probability ``a = e^eps1/(e^eps1 + d)`` and its sign kept with probability ``p``,
  else a uniform other key with a uniform sign.

Privacy: both are ``max(eps2, eps1 + log(2 e^eps2/(e^eps2 + 1)))``-LDP for the whole set
([PCKV] Theorems 2 and 3: the correlated perturbation composes below ``eps1 + eps2``); the
parameters take the whole ``epsilon`` and the value's ``eps2`` and give the key
``eps1`` so that this bound is exactly ``epsilon`` (:class:`~ldpfast.protocols.multiattribute._kv.KVParams`).
One dummy key serves every padded slot: the padding's dummies are exchangeable for the real
keys' estimates and the bound holds for any distribution of the sampled pair.

Estimators (:class:`~ldpfast.protocols.multiattribute._kv.KVServer`): frequencies and value
totals are unbiased when no user holds more than ``pad_len`` pairs, with the closed-form
variances of :class:`~ldpfast.protocols.multiattribute._kv.Rates`; means are their ratio.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, List, Mapping, Tuple

import numpy as np

from ... import _core
from ..._base import AuditHooks, ClientBase, Protocol, Reports as _ReportsBase, WireField, bits_for, register_protocol
from ..._delta import Delta
from ..._memory import check_allocation
from ..._validate import check_array, check_below, rr_threshold, uint64_column
from ...audit import Plan
from ...errors import ReportError
from .._bitvec import bit_rows, first_padding_error, row_bytes
from .._registration import SIGN, edges
from ._kv import (KVParams, KVServer, PairsLike, Rates, as_pairs, composed_epsilon, frequency_model, padding_length,
                  ratings, sample_pairs, set_simulation)

__all__ = ["PCKVUEParams", "PCKVUEReports", "PCKVUEClient", "PCKVUEServer", "PCKVGRRParams", "PCKVGRRReports",
           "PCKVGRRClient", "PCKVGRRServer", "ratings"]

_TWO64 = 2**64
_HALF = 2**63


@dataclasses.dataclass(frozen=True)
class PCKVUEParams(KVParams):
    """PCKV-UE parameters (see :class:`~ldpfast.protocols.multiattribute._kv.KVParams`); the
    server holds ``2 d`` counters and a report is ``2 d`` bits."""

    protocol: ClassVar[str] = "pckv-ue"

    @property
    def key_threshold(self) -> int:
        """The 64-bit threshold of ``b`` (binary RR of ``eps1``, rounded so ``b`` is at least
        ``1/(e^eps1 + 1)``)."""
        return rr_threshold(self.key_budget, 2, "epsilon (key budget eps1)")

    @property
    def rates(self) -> Rates:
        return Rates(0.5, self.key_threshold / _TWO64, 1.0 - self.value_threshold / _TWO64, self.pad_len)

    @property
    def effective_epsilon(self) -> float:
        """``max(log(p/(1-p)), log(2p (1-b)/b))`` of the samplers' thresholds (``a = 1/2``)."""
        t = self.key_threshold
        return composed_epsilon(self.value_threshold, (_TWO64 - t, t))


@dataclasses.dataclass(frozen=True)
class PCKVGRRParams(KVParams):
    """PCKV-GRR parameters (see :class:`~ldpfast.protocols.multiattribute._kv.KVParams`); the
    server holds ``2 d`` counters and a report is ``ceil(log2(d + 1)) + 1`` bits."""

    protocol: ClassVar[str] = "pckv-grr"

    @property
    def key_threshold(self) -> int:
        """The 64-bit flip threshold of the key's RR over the ``d + 1`` keys (eps1)."""
        return rr_threshold(self.key_budget, self.d + 1, "epsilon (key budget eps1)")

    @property
    def rates(self) -> Rates:
        t = self.key_threshold
        return Rates(1.0 - t / _TWO64, t / _TWO64 / self.d, 1.0 - self.value_threshold / _TWO64, self.pad_len)

    @property
    def effective_epsilon(self) -> float:
        """``log(2 p a/b)`` of the samplers' thresholds (at least ``log(p/(1-p))``)."""
        t = self.key_threshold
        return composed_epsilon(self.value_threshold, ((_TWO64 - t) * self.d, t))


@dataclasses.dataclass(eq=False)
class PCKVUEReports(_ReportsBase):
    """PCKV-UE reports: ``up`` and ``down``, ``uint8[n, ceil(d/8)]`` bit rows (least significant
    bit first) of the +1 and -1 entries of ``y`` (never both set)."""

    protocol: ClassVar[str] = "pckv-ue"
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"up": ("uint8", 2), "down": ("uint8", 2)}
    up: np.ndarray
    down: np.ndarray

    def __post_init__(self) -> None:
        for name in ("up", "down"):
            arr = np.asarray(getattr(self, name))
            if arr.ndim != 2:
                raise ReportError(f"{name} must be a 2-D uint8 array (one bit row per report), got shape {arr.shape}")
            setattr(self, name, bit_rows(arr, 8 * arr.shape[1], name))


@dataclasses.dataclass(eq=False)
class PCKVGRRReports(_ReportsBase):
    """PCKV-GRR reports: ``key`` in ``[0, d]`` (``d``: the dummy) and its ``sign`` (-1 or 1)."""

    protocol: ClassVar[str] = "pckv-grr"
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"key": ("uint64", 1), "sign": ("int8", 1)}
    key: np.ndarray
    sign: np.ndarray

    def __post_init__(self) -> None:
        self.key = uint64_column(self.key, "key", ReportError)
        self.sign = check_array("sign", self.sign, np.int8, cast=True)


class PCKVUEClient(ClientBase):
    """PCKV-UE user side (see the module docstring). ``rng=None`` (default) draws keys from
    the OS; a seed is for simulation only."""

    params: PCKVUEParams

    def perturb(self, pairs: PairsLike) -> PCKVUEReports:
        """One report per user (``pairs``: see :func:`~ldpfast.protocols.multiattribute._kv.as_pairs`)."""
        p = self.params
        data = as_pairs(pairs, p.d, p.label_domain)
        n, width = data[0].size - 1, row_bytes(p.d)
        check_allocation(4 * n * width + 16 * n, f"{n} PCKV-UE reports of 2 x {p.d} bits")
        sampled, signs = sample_pairs(self._keys, data, p.pad_len, p.d, self.threads)
        nonzero = _core.unary_perturb(self._keys.key(), sampled, p.d, _HALF, p.key_threshold, self.threads)
        sign_rows = _core.bit_response(self._keys.key(), np.zeros((n, width), dtype=np.uint8), p.d, _HALF, _HALF,
                                       self.threads)
        kept = _core.randomized_response(self._keys.key(), signs, 2, p.value_threshold, self.threads)
        real = np.flatnonzero(sampled < p.d)
        byte, bit = (sampled[real] // 8).astype(np.int64), (sampled[real] % 8).astype(np.uint8)
        sign_rows[real, byte] = (sign_rows[real, byte] & ~(np.uint8(1) << bit)) | (kept[real].astype(np.uint8) << bit)
        return PCKVUEReports(up=nonzero & sign_rows, down=nonzero & ~sign_rows)


class PCKVGRRClient(ClientBase):
    """PCKV-GRR user side (see the module docstring). ``rng=None`` (default) draws keys from
    the OS; a seed is for simulation only."""

    params: PCKVGRRParams

    def perturb(self, pairs: PairsLike) -> PCKVGRRReports:
        """One report per user (``pairs``: see :func:`~ldpfast.protocols.multiattribute._kv.as_pairs`)."""
        p = self.params
        sampled, signs = sample_pairs(self._keys, as_pairs(pairs, p.d, p.label_domain), p.pad_len, p.d, self.threads)
        key = _core.randomized_response(self._keys.key(), sampled, p.d + 1, p.key_threshold, self.threads)
        kept = _core.randomized_response(self._keys.key(), signs, 2, p.value_threshold, self.threads)
        uniform = _core.randomized_response(self._keys.key(), np.zeros_like(signs), 2, _HALF, self.threads)
        sign = np.where(key == sampled, kept, uniform).astype(np.int8) * 2 - 1
        return PCKVGRRReports(key=key, sign=sign.astype(np.int8))


class PCKVUEServer(KVServer):
    """PCKV-UE collector (:class:`~ldpfast.protocols.multiattribute._kv.KVServer`): counts each
    column's +1 and -1 entries. Thread-safe (see :class:`ldpfast._base.Aggregator`)."""

    protocol: ClassVar[str] = "pckv-ue"
    params_type: ClassVar[type] = PCKVUEParams
    reports_type: ClassVar[type] = PCKVUEReports

    def _validate(self, reports: PCKVUEReports) -> None:
        d = self.params.d
        for name in ("up", "down"):
            rows = bit_rows(getattr(reports, name), d, name)
            bad = first_padding_error(rows, d)
            if bad is not None:
                raise ReportError(f"{name} bits beyond d={d} must be 0, got report {bad} with bits set there")
        both = np.any(reports.up & reports.down, axis=1)
        if both.any():
            raise ReportError(f"up and down must not both be set for one key, got report {int(np.argmax(both))}")

    def _ingest(self, reports: PCKVUEReports) -> Delta:
        d = self.params.d
        self._check_call(16 * (d + 1), lambda: f"counting a batch of {len(reports)} PCKV-UE reports")
        counts = [_core.bitvec_column_counts(getattr(reports, name), d, None, 1, self.threads)[0][0]
                  for name in ("up", "down")]
        return self._added(len(reports), counts[0], counts[1])


class PCKVGRRServer(KVServer):
    """PCKV-GRR collector (:class:`~ldpfast.protocols.multiattribute._kv.KVServer`): counts the
    reported (key, sign) pairs of the real keys. Thread-safe (see :class:`ldpfast._base.Aggregator`)."""

    protocol: ClassVar[str] = "pckv-grr"
    params_type: ClassVar[type] = PCKVGRRParams
    reports_type: ClassVar[type] = PCKVGRRReports

    def _validate(self, reports: PCKVGRRReports) -> None:
        check_below(reports.key, self.params.d + 1, "key", "keys in", ReportError)
        bad = (reports.sign != 1) & (reports.sign != -1)
        if bad.any():
            at = int(np.argmax(bad))
            raise ReportError(f"sign must be -1 or 1, got {int(reports.sign[at])} at index {at}")

    def _ingest(self, reports: PCKVGRRReports) -> Delta:
        d = self.params.d
        self._check_call(16 * (d + 1), lambda: f"counting a batch of {len(reports)} PCKV-GRR reports")
        key = reports.key.astype(np.int64)
        up = np.bincount(key[reports.sign == 1], minlength=d + 1)[:d]
        down = np.bincount(key[reports.sign == -1], minlength=d + 1)[:d]
        return self._added(len(reports), up, down)


def _pair_inputs(pairs: Tuple[Tuple[int, float], Tuple[int, float]]) -> Any:
    """``make`` of an audit plan: ``n`` users each holding the one pair ``pairs[i]``."""
    def make(i: int, n: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        key, value = pairs[i]
        return (np.arange(n + 1, dtype=np.int64), np.full(n, key, dtype=np.uint64), np.full(n, value))
    return make


#: The audit's neighbours: one pair each, key 0 with value +1 against key 1 with value -1
#: (pad_len 1: no sampling), whose reports differ by the whole composed ratio.
_AUDIT_PAIRS = ((0, 1.0), (1, -1.0))


def _ue_entry(reports: PCKVUEReports, key: int) -> np.ndarray:
    """``y_key`` (-1, 0 or 1) of each report, for a key of the first byte."""
    shift, one = np.uint8(key), np.uint8(1)
    up, down = reports.up[:, 0] >> shift & one, reports.down[:, 0] >> shift & one
    return np.asarray(up.astype(np.int8) - down.astype(np.int8))


def _ue_plan(params: PCKVUEParams) -> Plan:
    def events(reports: PCKVUEReports) -> Tuple[np.ndarray, np.ndarray]:
        y0, y1 = _ue_entry(reports, 0), _ue_entry(reports, 1)
        return (y0 == 1) & (y1 == 0), (y1 == -1) & (y0 == 0)
    return Plan(_pair_inputs(_AUDIT_PAIRS), events, ("y_0 = +1 and y_1 = 0", "y_1 = -1 and y_0 = 0"))


def _grr_plan(params: PCKVGRRParams) -> Plan:
    def events(reports: PCKVGRRReports) -> Tuple[np.ndarray, np.ndarray]:
        return (reports.key == 0) & (reports.sign == 1), (reports.key == 1) & (reports.sign == -1)
    return Plan(_pair_inputs(_AUDIT_PAIRS), events, ("report (0, +1)", "report (1, -1)"))


def _ue_wire(p: PCKVUEParams) -> List[WireField]:
    # d bits each, sent as whole bytes (the spare bits of the last byte are 0)
    return [WireField(name, 8, None, "uint8", (row_bytes(p.d),)) for name in ("up", "down")]


def _grr_wire(p: PCKVGRRParams) -> List[WireField]:
    return [WireField("key", bits_for(p.d + 1)), WireField("sign", 1, SIGN, "int8")]


register_protocol(Protocol(
    "pckv-ue", PCKVUEParams, PCKVUEReports, PCKVUEServer, PCKVUEClient, inputs="pairs",
    example=lambda: (PCKVUEParams(epsilon=2.0, d=44, pad_len=4), ratings(44, 1500, seed=3)),  # d % 8: padding bits
    extremes=edges(d=(1, 2**12), pad_len=(1, 2**32)), wire_fields=_ue_wire, variance=frequency_model,
    simulations=set_simulation("pckv-ue", "PCKV-UE", "PCKV-UE on rated sets, padding = P90 of the set sizes",
                               lambda e, sets: PCKVUEParams(epsilon=e, d=sets.d, pad_len=padding_length(sets))),
    audit=AuditHooks(lambda e, **kw: PCKVUEParams(epsilon=e, d=4, pad_len=1, **kw), _ue_plan,
                     lambda p: p.effective_epsilon)))

register_protocol(Protocol(
    "pckv-grr", PCKVGRRParams, PCKVGRRReports, PCKVGRRServer, PCKVGRRClient, inputs="pairs",
    example=lambda: (PCKVGRRParams(epsilon=2.0, d=12, pad_len=4), ratings(12, 1500, seed=4)),
    extremes=edges(d=(1, 2**20), pad_len=(1, 2**32)), wire_fields=_grr_wire, variance=frequency_model,
    simulations=set_simulation("pckv-grr", "PCKV-GRR", "PCKV-GRR on rated sets, padding = P90 of the set sizes",
                               lambda e, sets: PCKVGRRParams(epsilon=e, d=sets.d, pad_len=padding_length(sets))),
    audit=AuditHooks(lambda e, **kw: PCKVGRRParams(epsilon=e, d=4, pad_len=1, **kw), _grr_plan,
                     lambda p: p.effective_epsilon)))
