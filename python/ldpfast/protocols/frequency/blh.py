"""BLH: Binary Local Hashing (Bassily and Smith 2015, in the local-hashing framework of Wang,
Blocki, Li, Jha, USENIX Security 2017): local hashing with a hash range of two. Each user
hashes its value with its own pairwise-independent hash ``h(x) = ((a0 + a1 x) mod PRIME) mod 2``
and reports the bit through binary randomized response (kept with ``p = e^eps/(e^eps + 1)``)
with the hash. It is OLH (:mod:`ldpfast.protocols.frequency.olh`) with ``g = 2``, so client and server
run on the same C++ kernels; its variance ``(e^eps + 1)^2 / (n (e^eps - 1)^2)`` at ``f = 0``
is OLH's for eps below about 1 and grows as ``e^eps`` above it, which is why OLH picks
``g = round(e^eps) + 1``::

    from ldpfast.protocols.frequency import blh

    params = blh.BLHParams(epsilon=1.0, d=1000)
    server = blh.BLHServer(params).update(blh.BLHClient(params).perturb(values))
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence, Tuple

import numpy as np

from ... import _core
from ..._base import AuditHooks, ComparisonRow, Params as _ParamsBase, Protocol, Reports as _ReportsBase
from ..._base import register_protocol
from ..._validate import check_array, check_epsilon, rr_threshold
from ...audit import value_inputs
from ...kernels.field import PRIME
from ..._base import WireField
from .._hadamard_layout import _check_d
from .._local_hashing import match_channel
from .._aliases import deprecated_names
from .._registration import edges, olh_plan, olh_variance, per_user_hash_cost, rr_epsilon, theory, zipf_values
from .olh import OLHClient, OLHServer

__all__ = ["BLHParams", "BLHReports", "BLHClient", "BLHServer"]

PROTOCOL_ID = "blh"


@dataclasses.dataclass(frozen=True)
class BLHParams(_ParamsBase):
    """Binary Local Hashing: OLH with hash range ``g = 2``.

    Args:
        epsilon: privacy parameter, in [2^-20, 22.18] (the binary flip's 64-bit threshold,
            ``_validate.rr_threshold``).
        d: domain size, ``2 <= d <= PRIME - 1`` (the hash field ``F_(2^64 - 59)``, of the server's
            OCMS field, which holds ``d + 1`` elements).
    """

    protocol: ClassVar[str] = PROTOCOL_ID
    epsilon: float
    d: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "d", _check_d(self.d, PRIME - 1))
        _ = self.flip_threshold                 # refuses a budget the 64-bit sampler cannot represent

    @property
    def g(self) -> int:
        """The hash range: 2."""
        return 2

    @property
    def flip_probability(self) -> float:
        """``1 / (e^eps + 1)``."""
        return 1.0 / (math.expm1(self.epsilon) + 2.0)

    @property
    def flip_threshold(self) -> int:
        """The binary flip's 64-bit threshold (effective epsilon <= epsilon)."""
        return rr_threshold(self.epsilon, 2)

    def variance(self, n: int, f: Any = 0.0) -> Any:
        """``Var(fhat)`` at true frequency ``f`` over ``n`` reports
        (:func:`ldpfast.theory.olh_variance` with ``g = 2``)."""
        return theory().olh_variance(self.epsilon, n, f, g=2)


@dataclasses.dataclass
class BLHReports(_ReportsBase):
    """BLH reports: the randomized hash bit ``z`` (0/1) and the user's hash ``(a0, a1)``
    (all uint64)."""

    protocol: ClassVar[str] = PROTOCOL_ID
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"z": ("uint64", 1), "a0": ("uint64", 1),
                                                              "a1": ("uint64", 1)}
    z: np.ndarray
    a0: np.ndarray
    a1: np.ndarray

    def __post_init__(self) -> None:
        self.z = check_array("z", self.z, np.uint64)
        self.a0 = check_array("a0", self.a0, np.uint64)
        self.a1 = check_array("a1", self.a1, np.uint64)
        self._check_lengths()


class BLHClient(OLHClient):
    """BLH client: ``(RR_2(h(x)), a0, a1)`` with ``a0, a1`` uniform on ``F_PRIME`` (C++ OCMS
    kernel). ``rng=None`` (default) keys each batch from OS entropy; a seed is for simulation only."""

    def perturb(self, values: Any) -> BLHReports:  # type: ignore[override]
        """Privatize ``values`` in ``[0, d)``; returns :class:`BLHReports`."""
        olh = super().perturb(values)
        return BLHReports(z=olh.z, a0=olh.a0, a1=olh.a1)


class BLHServer(OLHServer):
    """BLH server: the OLH estimator ``fhat(x) = (C(x)/n - 1/2)/(p - 1/2)`` with
    ``C(x) = #{i : h_i(x) = z_i}`` over the kept reports (canonical order, exact merge)."""

    protocol: ClassVar[str] = PROTOCOL_ID
    params_type: ClassVar[type] = BLHParams
    reports_type: ClassVar[type] = BLHReports


def _compare(epsilon: float, d: int, n: int, f_star: float, **_: Any) -> Sequence[ComparisonRow]:
    to = theory()
    return [ComparisonRow("BLH", 2, 129, lambda f: to.olh_variance(epsilon, n, f, g=2), to.ocms_l2(epsilon, d, n, 2),
                          "local hashing into one bit; OLH's g = round(e^eps)+1 is better above eps ~ 1",
                          **per_user_hash_cost(), build=lambda: BLHParams(epsilon=epsilon, d=d))]


def _simulations() -> Tuple[Any, ...]:
    from ...experiments import Algorithm

    def variance(params: Any, data: Any, f: Any) -> Any:
        return params.variance(data.n, f)

    def l2(params: Any, n: int, size: int) -> float:
        return float(theory().ocms_l2(params.epsilon, size, n, 2))

    return (Algorithm("blh", "BLH", "protocols.frequency.blh", lambda eps, data, gen: BLHParams(epsilon=eps, d=data.d),
                      variance, l2,
                      "Binary Local Hashing: OLH with g = 2 (pairwise hash, one bit)"),)


def _channel(server: Any, candidates: Any, likelihood: str = "composite") -> Any:
    """OLH's hash-match channel with ``g = 2`` (IBU/MLE, :mod:`ldpfast.estimation`)."""
    return match_channel(server._reports, candidates, server.params.epsilon, 2, 2.0, likelihood)


register_protocol(Protocol(
    PROTOCOL_ID, BLHParams, BLHReports, BLHServer, BLHClient,
    extremes=edges(d=(2, 2**64 - 1)), example=lambda: (BLHParams(epsilon=1.0, d=300), zipf_values(300, n=1500)),
    wire_fields=lambda p: [WireField("z", 1), WireField("a0", 64), WireField("a1", 64)],
    variance=olh_variance, compare=_compare, simulations=_simulations,
    channel=_channel,
    audit=AuditHooks(lambda e, **kw: BLHParams(e, 16, **kw),
                     lambda p: olh_plan(_core.Field.prime(PRIME), 2, [0], [1], value_inputs(0, 1),
                                        ("H(x0) = z != H(x1)", "H(x1) = z != H(x0)")),
                     rr_epsilon("g"))))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "blh", {"Params": BLHParams, "Client": BLHClient,
                                                      "Server": BLHServer, "Reports": BLHReports})
