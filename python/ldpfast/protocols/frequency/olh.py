"""OLH: Optimal Local Hashing (Wang, Blocki, Li, Jha, USENIX Security 2017), local hashing
beside :mod:`ldpfast.protocols.frequency.grr` and :mod:`ldpfast.protocols.frequency.ocms`: each user
hashes its value with its own pairwise-independent hash into ``[g]``, ``g = round(e^eps) + 1``,
and reports the hash with k-ary randomized response over ``[g]``. With the hash of [PAN] this is exactly OCMS+RR with
``m = g``, so the client and the report-keeping server run on the OCMS kernels ([PAN]
section 6 compares it with the Hadamard protocols).

    from ldpfast.protocols.frequency import olh
    params = olh.OLHParams(epsilon=1.0, d=1000)      # g = round(e^1) + 1 = 4
    server = olh.OLHServer(params).update(olh.OLHClient(params).perturb(values))
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ... import _core
from ..._base import Aggregator, ClientBase, Delta, Protocol, register_protocol
from ..._base import Params as _ParamsBase, Reports as _ReportsBase
from ..._delta import _State
from ..._validate import as_values, check_array, check_epsilon, check_int, check_threads, rr_threshold
from ...errors import FormatError, ReportError
from ...kernels.field import PRIME
from .._hadamard_layout import _check_d, prime_field
from .._local_hashing import debias_matches, default_g, match_channel
from ..._base import AuditHooks, ComparisonRow
from ...audit import value_inputs
from ..._base import WireField, bits_for
from .._registration import edges, olh_plan, olh_variance, per_user_hash_cost, rr_epsilon, theory, zipf_values

if TYPE_CHECKING:
    from ...datasets import ValueData
    from ...experiments import Algorithm
    from . import ocms

__all__ = ["OLHParams", "OLHClient", "OLHReports", "OLHServer"]


@dataclasses.dataclass(frozen=True)
class OLHParams(_ParamsBase):
    """Optimal Local Hashing (Wang et al. 2017) with the pairwise-independent
    hash of [PAN] (``((a0 + a1 x) mod PRIME) mod g``, ``a0, a1`` drawn per user) instead
    of a fully random one: OLH is then exactly CMS+RR with ``m = g``.

    Args:
        epsilon: privacy parameter, in [2^-20, log(g-1) + 22.18] (``_validate.rr_threshold``).
        d: domain size, ``2 <= d <= PRIME - 1`` (the server's OCMS field holds ``d + 1`` elements).
        g: hash range; default ``round(e^eps) + 1``, exact ``.5`` ties upward
            (:func:`ldpfast.theory.olh_g`).
    """

    protocol: ClassVar[str] = "olh"
    epsilon: float
    d: int
    g: Optional[int] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "d", _check_d(self.d, PRIME - 1))
        g = default_g(self.epsilon) if self.g is None else self.g
        object.__setattr__(self, "g", check_int("g", g, 2, 2**62))
        _ = self.flip_threshold                 # refuses a budget the 64-bit sampler cannot represent

    @property
    def _g(self) -> int:
        """``g`` as set by ``__post_init__`` (None only as a constructor argument)."""
        assert self.g is not None
        return self.g

    @property
    def flip_probability(self) -> float:
        """GRR over ``g`` symbols: ``(g-1)/(e + g - 1)``."""
        return (self._g - 1.0) / (math.expm1(self.epsilon) + self._g)

    @property
    def flip_threshold(self) -> int:
        """Its 64-bit threshold (:func:`ldpfast._validate.rr_threshold`: effective epsilon <= epsilon)."""
        return rr_threshold(self.epsilon, self._g)


@dataclasses.dataclass
class OLHReports(_ReportsBase):
    """OLH reports: perturbed hash ``z`` in ``[0, g)`` and the user's hash ``(a0, a1)``
    (all uint64)."""

    protocol: ClassVar[str] = "olh"
    z: np.ndarray
    a0: np.ndarray
    a1: np.ndarray

    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {
        "z": ("uint64", 1), "a0": ("uint64", 1), "a1": ("uint64", 1)}

    def __post_init__(self) -> None:
        self.z = check_array("z", self.z, np.uint64)
        self.a0 = check_array("a0", self.a0, np.uint64)
        self.a1 = check_array("a1", self.a1, np.uint64)
        self._check_lengths()


class OLHClient(ClientBase):
    """OLH client: ``(GRR_g(h(x)), a0, a1)`` with ``a0, a1`` uniform on ``F_PRIME``
    (C++ OCMS kernel). ``rng``: ``None`` (default) draws each batch's key from OS entropy, the only
    setting for real users; a seed makes a reproducible **simulation only**."""

    # OLHParams, or BLHParams (BLHClient reuses this client): both have d, g, flip_threshold
    params: Any

    def perturb(self, values: Any) -> OLHReports:
        """Privatize ``values`` in ``[0, d)``; returns :class:`OLHReports`."""
        p = self.params
        x = as_values(values, p.d)
        z, a0, a1 = _core.ocms_perturb(prime_field(), self._keys.key(), x, p.g,
                                       p.flip_threshold, self.threads)
        return OLHReports(z=z, a0=a0, a1=a1)


class OLHServer(Aggregator):
    """OLH server: keeps the reports (each has its own hash, so there is no shared
    sketch) and answers ``fhat(x) = (C(x)/n - 1/g)/(p - 1/g)`` with
    ``C(x) = #{i: h_i(x) = z_i}`` and ``p = e/(e + g - 1)`` (equal to the CMS estimator
    with ``m = g``). The reports are held by an OCMS report-keeping server with
    ``m = g``, so state and bytes are canonical and merge is exact and order-free."""

    protocol: ClassVar[str] = "olh"
    params_type: ClassVar[type] = OLHParams
    reports_type: ClassVar[type] = OLHReports
    # OLHParams, BLHParams or longitudinal's LOLHParams (BLHServer and LOLHServer reuse
    # this server): not one class below the base Params
    params: Any

    def __init__(self, params: OLHParams, threads: int = 0):
        super().__init__(params)
        from . import ocms

        # m = g, read as self.params.g: blh and LOLHServer pass their own params, with g but not _g
        self._reports = ocms.OCMSServer(ocms.OCMSParams(epsilon=params.epsilon, d=params.d, m=self.params.g,
                                                use_m_prime=False), threads=check_threads(threads))
        self._reports._lock = self._lock  # one lock for the pair

    @property
    def _st(self) -> _State:  # the state is the inner server's
        return self._reports._st

    @_st.setter
    def _st(self, state: _State) -> None:
        self._reports._st = state

    def _state(self) -> Dict[str, np.ndarray]:
        return self._reports._state()

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._reports._set_state(state)

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        if set(state) != {"z", "a0", "a1"}:
            raise FormatError(f"stored state must hold the OLH report columns z, a0, a1, got {sorted(state)}")
        self._reports._check_state(state)

    def _keeps_batch(self) -> bool:
        return True  # the inner OCMS server keeps the reports

    def _validate(self, reports: OLHReports) -> None:
        """``z < g`` and ``a0, a1 < PRIME``."""
        self._reports._validate(self._as_ocms(reports))

    def _ingest(self, reports: OLHReports) -> Delta:
        return self._reports._ingest(self._as_ocms(reports))

    def _merged(self, theirs: Mapping[str, Any]) -> Union[Delta, Mapping[str, Any]]:
        return self._reports._merged(theirs)

    @staticmethod
    def _as_ocms(reports: OLHReports) -> ocms.OCMSReports:
        from . import ocms

        return ocms.OCMSReports(z=reports.z, a0=reports.a0, a1=reports.a1)

    @property
    def n(self) -> int:
        return self._reports.n

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (``None``:
        all of ``[0, d)``), float64. Costs one hash evaluation per report and candidate
        (``n d`` for the whole domain); long queries draw a progress line on a terminal's
        stderr (:func:`ldpfast.set_progress`). Pass the candidates you need, or see
        OCMS's ``fast_query`` parameters (the same local hashing, solved instead of scanned)."""
        if self.n == 0:
            raise ReportError("no reports have been aggregated yet")
        p = self.params
        xs = None if candidates is None else as_values(candidates, p.d, "candidates")
        est = debias_matches(self._reports.match_counts(xs), self.n, p.epsilon, p.g)
        return est * self.n if counts else est


def _olh_compare(epsilon: float, d: int, n: int, f_star: float, **_: Any) -> List[ComparisonRow]:
    from ...theory import ocms as to

    g = theory().olh_g(epsilon)
    return [ComparisonRow("OLH", g, 128 + bits_for(g), lambda f: to.ocms_variance(epsilon, g, n, f),
                          float(to.ocms_l2(epsilon, d, n, g)),
                          "pairwise hash (a0, a1) in F_(2^64-59); a fully random hash would cost d log2(g) bits",
                          **per_user_hash_cost(), build=lambda: OLHParams(epsilon=epsilon, d=d, g=g))]


def _olh_channel(server: OLHServer, candidates: Any, likelihood: str = "composite") -> Any:
    p = server.params
    return match_channel(server._reports, candidates, p.epsilon, p.g, float(p.g), likelihood)


def _olh_simulations() -> Tuple[Algorithm]:
    from ...experiments import Algorithm
    from ...theory import ocms as to

    def variance(params: Any, data: ValueData, f: np.ndarray) -> np.ndarray:
        return np.asarray(to.ocms_variance(params.epsilon, params.g, data.n, f))  # m = g

    def l2(params: Any, n: int, size: int) -> float:
        return float(to.ocms_l2(params.epsilon, size, n, params.g))
    return (Algorithm("olh", "OLH", "protocols.frequency.olh", lambda eps, data, gen: OLHParams(epsilon=eps, d=data.d),
                      variance, l2,
                      "Optimal Local Hashing, g = round(e^eps)+1, pairwise hash"),)


register_protocol(Protocol(
    "olh", OLHParams, OLHReports, OLHServer, OLHClient,
    extremes=edges(d=(2, 2**64), g=(2, 2**62)),
    example=lambda: (OLHParams(epsilon=1.0, d=300), zipf_values(300, n=1500)),
    # OLH with the [PAN] hash over F_PRIME: ceil(log2 g) + 2 * 64.
    wire_fields=lambda p: [WireField("z", bits_for(p.g)), WireField("a0", 64), WireField("a1", 64)],
    variance=olh_variance, compare=_olh_compare, simulations=_olh_simulations,
    channel=_olh_channel,
    audit=AuditHooks(lambda e, **kw: OLHParams(e, 16, **kw),
                     lambda p: olh_plan(prime_field(), p.g, [0], [1], value_inputs(0, 1),
                                        ("H(x0) = z != H(x1)", "H(x1) = z != H(x0)")),
                     rr_epsilon("g"))))
