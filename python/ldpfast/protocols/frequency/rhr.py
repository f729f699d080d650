"""Recursive Hadamard Response (RHR), the comparison algorithm of [PAN] section 6 in the
layout of [PAN]'s reference code R1 (``RecursiveHadamardResponse``). The original layout
of the RHR paper is
:mod:`ldpfast.protocols.frequency.hadamard_variants`.

A user holding ``x`` reports a Hadamard row ``r`` and one of ``2^b`` symbols ``z``: randomized
response over the symbols applied to ``y = 2 (x mod base) + H01[r, x // base + 1]``
(``b = ceil(eps log2 e)``, ``base = 2^(b-1)``). The server keeps one integer vector per residue
block ``x mod base`` and decodes them with one 2-D FWHT::

    params = lf.protocols.frequency.rhr.RHRParams(epsilon=2.0, d=2**16)
    reports = lf.protocols.frequency.rhr.RHRClient(params, rng=None).perturb(values)
    freq = lf.protocols.frequency.rhr.RHRServer(params).update(reports).estimate()
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from numpy.typing import ArrayLike

from ... import _core
from ..._base import Aggregator, AuditHooks, ClientBase, ComparisonRow, Protocol
from ..._base import Params as _ParamsBase, Reports as _ReportsBase
from ..._base import register_protocol
from ..._delta import _State
from ..._validate import as_values, check_array, check_epsilon, check_threads, optional_index_array, rr_threshold
from ...audit import Plan, support_events, value_inputs
from ...errors import FormatError, ParameterError, ReportError
from ...estimates import PLUG_IN
from ..._base import WireField, bits_for
from .._hadamard_layout import _check_d
from ..._validate import MIN_EPSILON
from .._registration import edges, counter_cost, parity_sign, rr_epsilon, theory, zipf_values

if TYPE_CHECKING:
    from ...datasets import ValueData
    from ...experiments import Algorithm

__all__ = ["RHRParams", "RHRClient", "RHRReports", "RHRServer"]


@dataclasses.dataclass(frozen=True)
class RHRParams(_ParamsBase):
    """Recursive Hadamard Response as in [PAN]'s reference code R1
    (``RecursiveHadamardResponse``): ``b = ceil(eps log2 e)``,
    ``base = 2^(b-1)``, ``Hsize`` = the smallest power of two above the largest column
    ``(d-1) // base + 1``, RR over ``2^b`` symbols of
    ``y = 2 (x mod base) + H01[r, x // base + 1]``.

    Args:
        epsilon: privacy parameter, in (0, 21] (so that ``2^b`` symbols fit in uint32).
        d: domain size, ``2 <= d <= 2^28``.
    """

    protocol: ClassVar[str] = "rhr"
    epsilon: float
    d: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        if self.epsilon > 21.0:
            raise ParameterError(f"epsilon must be <= 21 for RHR (2^b symbols in uint32), got {self.epsilon}")
        object.__setattr__(self, "d", _check_d(self.d, 2**28))
        _ = self.flip_threshold                 # refuses a budget the 64-bit sampler cannot represent

    @property
    def b(self) -> int:
        return max(1, math.ceil(self.epsilon * math.log2(math.e)))

    @property
    def base(self) -> int:
        return 1 << (self.b - 1)

    @property
    def symbols(self) -> int:
        return 1 << self.b

    @property
    def hadamard_size(self) -> int:
        """The smallest power of two above the largest column ``(d-1) // base + 1``. This is
        R1's ``2^ceil(log2(d // base + 1))`` except where R1's size equals the largest
        column (``d // base + 1`` a power of two, ``base`` not dividing ``d``), which would
        leave that column out of range."""
        return 1 << ((self.d - 1) // self.base + 1).bit_length()

    @property
    def flip_probability(self) -> float:
        """RR over ``2^b`` symbols: ``(m-1)/(e + m - 1)``."""
        return (self.symbols - 1.0) / (math.expm1(self.epsilon) + self.symbols)

    @property
    def flip_threshold(self) -> int:
        """Its 64-bit threshold (:func:`ldpfast._validate.rr_threshold`: effective epsilon <= epsilon)."""
        return rr_threshold(self.epsilon, self.symbols)


@dataclasses.dataclass
class RHRReports(_ReportsBase):
    """RHR reports: the RR symbol ``z`` in ``[0, 2^b)`` (uint32) and the row ``rows``."""

    protocol: ClassVar[str] = "rhr"
    z: np.ndarray
    rows: np.ndarray

    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"z": ("uint32", 1), "rows": ("uint32", 1)}

    def __post_init__(self) -> None:
        self.z = check_array("z", self.z, np.uint32)
        self.rows = check_array("rows", self.rows, np.uint32)
        self._check_lengths()


class RHRClient(ClientBase):
    """RHR client (R1 layout). ``rng``: see :class:`ldpfast.protocols.frequency.hadamard.HRRClient`."""

    params: RHRParams

    def perturb(self, values: Any, rows: Any = None) -> RHRReports:
        """Privatize ``values`` in ``[0, d)``; ``rows`` optionally server-assigned."""
        p = self.params
        x = as_values(values, p.d)
        rows = optional_index_array("rows", rows, len(x))
        try:
            z, r = _core.rhr_perturb(self._keys.key(), x, p.b - 1, p.hadamard_size,
                                     p.flip_threshold, rows, self.threads)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
        return RHRReports(z=z, rows=r)


class RHRServer(Aggregator):
    """RHR server. The query ``fhat(x) = (1/n) sum_i (Q[z_i, h_i(x)] - Q[z_i, h_i(x) XOR 1])``
    equals ``C/n * sum_{i: z_i >> 1 = x mod base} sigma_i H[r_i, x // base + 1]`` with
    ``C = (e + 2^b - 1)/(e - 1)`` and ``sigma_i = +1`` if ``z_i`` is odd else ``-1``, so the
    state is one integer vector per residue block and decoding is a 2-D FWHT."""

    protocol = "rhr"
    params_type = RHRParams
    reports_type = RHRReports
    _ingest_validates = True  # hadamard_update checks every report before adding any
    params: RHRParams

    def __init__(self, params: RHRParams, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        self._st = _State(z=np.zeros(params.base * params.hadamard_size, dtype=np.int64),
                          n=np.zeros(1, dtype=np.int64))

    @classmethod
    def _state_layout(cls, params: Any) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        return {"z": ((params.base * params.hadamard_size,), "int64"), "n": ((1,), "int64")}

    @property
    def _z(self) -> np.ndarray:
        z: np.ndarray = self._st["z"]
        return z

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State(z=np.array(state["z"], dtype=np.int64), n=np.array(state["n"], dtype=np.int64))

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        n, z = int(state["n"][0]), state["z"]
        # each report adds +-1 to one cell
        if n < 0 or float(np.abs(z.astype(np.float64)).sum()) > n or int(z.sum()) % 2 != n % 2:
            raise FormatError(f"stored aggregation vector does not fit the stored report count n = {n}")

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    def _validate(self, reports: RHRReports) -> None:
        """``z < 2^b`` and ``rows < Hsize``."""
        p = self.params
        bad = (reports.z >= p.symbols) | (reports.rows >= p.hadamard_size)
        if bad.any():
            i = int(np.argmax(bad))
            if int(reports.z[i]) >= p.symbols:
                raise ReportError(f"report {i}: z = {int(reports.z[i])} is out of range [0, {p.symbols})")
            raise ReportError(f"report {i}: row {int(reports.rows[i])} is out of range [0, {p.hadamard_size})")

    def _ingest(self, reports: RHRReports) -> None:
        p = self.params
        n = len(reports)
        self._check_call(_core.hadamard_update_scratch_bytes(n, self._st["z"].size, p.base, self.threads) + 5 * n,
                         f"adding a batch of {n} RHR reports")
        blocks = reports.z >> np.uint32(1)
        bits = np.where(reports.z & np.uint32(1), 1, -1).astype(np.int8)
        group_rows = np.full(p.base, p.hadamard_size, dtype=np.uint64)
        cell_base = np.arange(p.base, dtype=np.uint64) * np.uint64(p.hadamard_size)
        st = self._st
        st.changed()
        # in place, all or nothing (the kernel takes back what it added when it fails)
        bad = _core.hadamard_update(blocks, reports.rows, bits, group_rows, cell_base, st["z"], self.threads,
                                    count=st["n"])
        if bad < n:
            self._validate(reports)  # names the first bad report
            raise ReportError(f"report {bad} does not fit the parameters")

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (``None``:
        all of ``[0, d)``), float64."""
        if self.n == 0:
            raise ReportError("no reports have been aggregated yet")
        p = self.params
        st = self._st
        decoded: Optional[np.ndarray] = getattr(st, "decoded", None)
        self._check_query(candidates, 40, p.d, "an RHR query", extra=0 if decoded is not None else st["z"].nbytes)
        if decoded is None:
            decoded = st["z"].copy().reshape(p.base, p.hadamard_size)
            if p.hadamard_size >= 2:
                _core.fwht(decoded, self.threads)
            st.__dict__["decoded"] = decoded  # a cache attribute of the state, dropped by st.changed()
        if candidates is None:
            xs = np.arange(p.d, dtype=np.uint64)
        else:
            xs = as_values(candidates, p.d, "candidates")
        em1 = math.expm1(p.epsilon)
        scale = (em1 + p.symbols) / em1 / (1.0 if counts else self.n)
        low = (xs & np.uint64(p.base - 1)).astype(np.int64)
        high = (xs >> np.uint64(p.b - 1)).astype(np.int64) + 1
        return decoded[low, high] * scale


def _rhr_variance(server: RHRServer, candidates: ArrayLike) -> Tuple[Callable[[Any], Any], str]:
    p, n = server.params, server.n
    if p.d > 2**24:
        return ((lambda f: theory().rhr_variance(p.epsilon, n, f, residue_fraction=1.0)),
                f"{PLUG_IN} (theory.rhr_variance with every user in the candidate's residue class: an upper bound)")
    # the raw estimates of a residue class sum to an unbiased estimate of its share, which
    # holds the candidate's own share: plugged in once, so the variance stays affine in f
    estimates = server.estimate()
    per_class = np.bincount(np.arange(p.d) % p.base, weights=estimates, minlength=p.base)
    rows = np.asarray(candidates).astype(np.int64)
    share = np.clip(np.maximum(per_class[rows % p.base], estimates[rows]), 0.0, 1.0)
    return ((lambda f: theory().rhr_variance(p.epsilon, n, f, residue_fraction=share)),
            f"{PLUG_IN} (theory.rhr_variance; the residue-class share is plugged in from the estimates)")


def _rhr_plan(params: RHRParams) -> Plan:
    low = params.b - 1

    def support(reports: RHRReports, w: Sequence[int]) -> np.ndarray:
        x = np.uint64(w[0])
        h01 = parity_sign(reports.rows.astype(np.uint64) & ((x >> np.uint64(low)) + np.uint64(1))) > 0
        y = 2 * (int(x) & ((1 << low) - 1)) + h01.astype(np.int64)
        matches: np.ndarray = reports.z.astype(np.int64) == y
        return matches
    return Plan(value_inputs(0, 1), support_events(support, [0], [1]), ("z = y(x0) != y(x1)", "z = y(x1) != y(x0)"))


def _simulations() -> Tuple[Algorithm]:
    from ...experiments import Algorithm

    return (Algorithm("rhr", "RHR", "protocols.frequency.rhr", lambda eps, data, gen: RHRParams(epsilon=eps, d=data.d),
                      _rhr_simulated_variance, None, "Recursive Hadamard Response, R1's layout (PAN section 6)"),)


def _rhr_compare(epsilon: float, d: int, n: int, f_star: float, **_: Any) -> List[ComparisonRow]:
    if epsilon > 21 or d > 2**28:
        return []
    e = math.exp(epsilon)
    b, base, sym, rsize = theory().rhr_parameters(epsilon, d)
    c2 = ((e - 1 + sym) / (e - 1)) ** 2
    # sum over the dictionary of the share of users in x's residue class is at most
    # ceil(d / base) (all users in the largest class): the worst-case l2.
    share_sum = -(-d // base)
    l2 = (c2 * (share_sum * (e + 1) + 2 * (d - share_sum)) / (e - 1 + sym) - 1) / n
    # report bits: log2 of the Hadamard size (a power of two) for the row, b for the symbol
    return [ComparisonRow("RHR", sym, (rsize - 1).bit_length() + b,
                          lambda f: theory().rhr_variance(epsilon, n, f, residue_fraction=1.0), l2,
                          f"b = {b}, {base} residue blocks; MSE for values sharing their residue with all users "
                          "(PAN 6.1's adversarial data)",
                          **counter_cost(base * rsize, base * rsize * ((rsize - 1).bit_length())),
                          build=lambda: RHRParams(epsilon=epsilon, d=d))]


def _rhr_simulated_variance(params: Any, data: ValueData, f: np.ndarray) -> np.ndarray:
    residues = np.bincount(data.values % params.base, minlength=params.base) / data.n
    share = residues[data.candidates % params.base]  # users sharing x mod base (x included)
    return np.asarray(theory().rhr_variance(params.epsilon, data.n, f, residue_fraction=share))


register_protocol(Protocol(
    "rhr", RHRParams, RHRReports, RHRServer, RHRClient,
    example=lambda: (RHRParams(epsilon=2.0, d=300), zipf_values(300)),
    # the state holds 2^b counters per column (b = ceil(eps log2 e)): 16 GiB at eps = 21, which
    # the memory budget refuses; the check stops at eps = 14 (2^21 counters)
    extremes=edges(epsilon=(MIN_EPSILON, 14.0), d=(2, 2**20)),
    # RHR: b-bit symbol and the row.
    wire_fields=lambda p: [WireField("z", p.b, dtype="uint32"),
                           WireField("rows", bits_for(p.hadamard_size), dtype="uint32")],
    variance=_rhr_variance, compare=_rhr_compare,
    simulations=_simulations,
    audit=AuditHooks(lambda e, **kw: RHRParams(e, 16, **kw), _rhr_plan, rr_epsilon("symbols"))))
