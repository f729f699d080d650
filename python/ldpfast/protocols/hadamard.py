"""Hadamard-family frequency oracles: HRR ([WW] Fact 2.1 / App. 7.1) and the
comparison algorithms of [PAN] section 6: HE, CMS+HE and RHR (OLH, the fourth, is local
hashing: :mod:`ldpfast.olh`, re-exported here).

Protocols (each with ``Params``, ``Client``, ``Reports``, ``Server``; HRR's are also
exported as ``Params``/``Client``/``Reports``/``Server``)::

    params = lf.hadamard.HRRParams(epsilon=1.0, d=2**20)
    reports = lf.hadamard.HRRClient(params, rng=None).perturb(values)   # 1 bit + row per user
    server = lf.hadamard.HRRServer(params).update(reports)
    freq = server.estimate()               # fractions; estimate(counts=True) for counts

HRR, HE, CMS+HE (and HadaOracle/HadaHeavy) are sets of HRR instances run by the group-layout
engine of ``ldpfast.protocols._hadamard_layout``: a user in group ``g`` holding ``x``
computes ``y = hash_g(x >> shift_g) mod m_g`` (or ``y = x >> shift_g``), draws (or is
assigned) a Hadamard row ``r`` and reports ``b = H[r, y + col_offset_g] * s`` where
``s = -1`` with probability ``1/(e^eps + 1)``. The server keeps integer vectors
``z_g[r] += b`` (C++, multithreaded) and decodes each with one exact (integer) FWHT.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Dict, Tuple

import numpy as np

from .. import _core
from .._base import Aggregator, ClientBase, Params, Protocol, Reports, _State, register_protocol
from .._memory import check_allocation
from .._validate import (as_values, check_array, check_binary_epsilon, check_epsilon, check_int, check_threads,
                         optional_index_array, rr_threshold)
from .._validate import probability_threshold  # noqa: F401  (re-exported)
from ..errors import FormatError, ParameterError, ReportError
from ..kernels.field import PRIME  # noqa: F401  (re-exported)
from ..theory.hadamard import c_eps
# The layout engine and OLH moved to their own modules; their names stay importable here.
from ._hadamard_layout import (GF64_POLY_LOW, BitReports, GroupBitReports, Layout,  # noqa: F401
                               LayoutClient, LayoutServer, binary_flip_threshold, cached_layout,
                               gf64_field, group_sum, hash_coefficients, make_layout, pow2_at_least,
                               prime_field, _check_d, _random_seed)
from .olh import OLHClient, OLHParams, OLHReports, OLHServer  # noqa: F401
from .._base import AuditHooks, ComparisonRow
from ..audit import Plan, support_events, value_inputs
from ..estimates import PLUG_IN
from ..wire import WireField, bits_for
from ._registration import (binary_epsilon, cmshe_variance, draw, layout_plan, parity_sign, row_bit_wire, rr_epsilon,
                            simulated_cmshe_variance, theory, zipf_values)

__all__ = [
    "Params", "Client", "Reports", "Server",
    "HRRParams", "HRRClient", "HRRReports", "HRRServer",
    "HEParams", "HEClient", "HEReports", "HEServer",
    "CMSHEParams", "CMSHEClient", "CMSHEReports", "CMSHEServer",
    "RHRParams", "RHRClient", "RHRReports", "RHRServer",
    "OLHParams", "OLHClient", "OLHReports", "OLHServer",
    "BitReports", "GroupBitReports", "PRIME",
]


# == HRR ==============================================================================
@dataclasses.dataclass(frozen=True)
class HRRParams(Params):
    """Hadamard Randomized Response ([WW] Fact 2.1 / App. 7.1).

    Args:
        epsilon: privacy parameter, in [2^-20, 22.18] (binary RR: ``_validate.rr_threshold``).
        d: domain size, values in ``[0, d)``, ``2 <= d <= 2^30``. The Hadamard size is
            ``D = 2^ceil(log2 d)`` and value ``x`` is column ``x`` (no offset: the
            estimator is unbiased for every column, including 0).
    Raises:
        ParameterError: on an invalid value.
    """

    protocol: ClassVar[str] = "hrr"
    epsilon: float
    d: int

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_binary_epsilon(self.epsilon))
        object.__setattr__(self, "d", _check_d(self.d, 2**30))

    @property
    def hadamard_size(self) -> int:
        return pow2_at_least(self.d)

    def layout(self) -> Layout:
        return cached_layout(self)

    def _layout_size(self) -> Tuple[int, int]:
        """(cells, groups) of the server state."""
        return self.hadamard_size, 1

    def _build_layout(self) -> Layout:
        return make_layout([{"rows": self.hadamard_size}])


@dataclasses.dataclass
class HRRReports(BitReports):
    """HRR reports: Hadamard row ``rows`` (uint32) and bit ``bits`` (int8, +-1)."""

    protocol: ClassVar[str] = "hrr"


class HRRClient(LayoutClient):
    """HRR client ([WW] Algorithm 2): ``b = H[r, x] * s``, ``s = -1`` with probability
    ``1/(e^eps + 1)``.

    Args:
        params: :class:`HRRParams`.
        rng: ``None`` (default) draws each batch's key from OS entropy, the only setting
            for real users; an int / SeedSequence / Generator makes a reproducible
            **simulation only** (anyone with the seed can undo the perturbation).
        threads: client-side threads for batches (0 = default).
    """

    params_type = HRRParams
    reports_type = HRRReports

    def perturb(self, values: Any, rows: Any = None) -> HRRReports:
        """Privatize ``values`` (integers in ``[0, d)``). ``rows``: server-assigned rows
        (:meth:`HRRServer.assign_rows`); ``None`` lets the client draw ``r ~ U[0, D)``
        (it is then part of the report). Returns :class:`HRRReports`."""
        x = as_values(values, self.params.d)
        _, rows_out, bits = self._perturb(x, None, rows)
        return HRRReports(rows=rows_out, bits=bits)


class HRRServer(LayoutServer):
    """HRR server ([WW] Algorithm 3): ``z[r_i] += b_i`` (C++, threaded, GIL released),
    then ``chat = c_eps H z`` with one FWHT. Unbiased with
    ``Var(chat(x)) = n c_eps^2 - c(x)`` (counts).

    Args:
        params: :class:`HRRParams`.
        threads: server threads (0 = default; results do not depend on it).
    """

    protocol = "hrr"
    params_type = HRRParams
    reports_type = HRRReports

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated frequencies (fractions; counts with ``counts=True``) of
        ``candidates`` (``None``: every value in ``[0, d)``), float64. Raw (unclipped)
        unbiased estimates.

        Raises:
            ReportError: no reports aggregated yet.
        """
        self._require_reports()
        decoded = self.decoded()
        scale = c_eps(self.params.epsilon) / (1.0 if counts else self.n)
        if candidates is None:
            return decoded[:self.params.d] * scale
        return decoded[as_values(candidates, self.params.d, "candidates")] * scale


# == HE ===============================================================================
@dataclasses.dataclass(frozen=True)
class HEParams(Params):
    """Hadamard Encoding ([PAN] section 6, R1 ``HadamardSketch``): CMS+RR with
    ``m = 2``. ``Hsize = 2^ceil(log2(d+1))``, value ``x`` is column ``x + 1`` (skipping the
    all-ones column 0; row 0 stays allowed).

    Args:
        epsilon: privacy parameter, in [2^-20, 22.18] (binary RR: ``_validate.rr_threshold``).
        d: domain size, ``2 <= d < 2^30``.
    """

    protocol: ClassVar[str] = "he"
    epsilon: float
    d: int

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_binary_epsilon(self.epsilon))
        object.__setattr__(self, "d", _check_d(self.d, 2**30 - 1))

    @property
    def hadamard_size(self) -> int:
        return 1 << self.d.bit_length()

    def layout(self) -> Layout:
        return cached_layout(self)

    def _layout_size(self) -> Tuple[int, int]:
        """(cells, groups) of the server state."""
        return self.hadamard_size, 1

    def _build_layout(self) -> Layout:
        return make_layout([{"rows": self.hadamard_size, "col_offset": 1}])


@dataclasses.dataclass
class HEReports(BitReports):
    """HE reports: row ``rows`` (uint32) and bit ``bits`` (int8, +-1)."""

    protocol: ClassVar[str] = "he"


class HEClient(LayoutClient):
    """HE client: ``RR_2(H01[r, x + 1])`` in +-1 form, with the row ``r`` drawn by the
    client (or assigned). ``rng``: see :class:`HRRClient`."""

    params_type = HEParams
    reports_type = HEReports

    def perturb(self, values: Any, rows: Any = None) -> HEReports:
        """Privatize ``values`` in ``[0, d)``; returns :class:`HEReports`."""
        x = as_values(values, self.params.d)
        _, rows_out, bits = self._perturb(x, None, rows)
        return HEReports(rows=rows_out, bits=bits)


class HEServer(LayoutServer):
    """HE server: ``fhat(x) = (1/n) sum_i c_eps b_i H[r_i, x+1]`` for all ``x`` with one
    FWHT (equal to the CMS estimator with ``m = 2``). Variance ``(c_eps^2 - f)/n``."""

    protocol = "he"
    params_type = HEParams
    reports_type = HEReports

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (``None``:
        all of ``[0, d)``), float64."""
        self._require_reports()
        decoded = self.decoded()
        scale = c_eps(self.params.epsilon) / (1.0 if counts else self.n)
        if candidates is None:
            return decoded[1:self.params.d + 1] * scale
        return decoded[as_values(candidates, self.params.d, "candidates") + np.uint64(1)] * scale


# == CMS+HE ===========================================================================
@dataclasses.dataclass(frozen=True)
class CMSHEParams(Params):
    """Apple's Count-Mean Sketch with Hadamard encoding ([PAN] section 6, R1
    ``CountMeanSketchHadamardEncoding.apple_cms``).

    ``k`` hash functions ``((a0 + a1 x) mod PRIME) mod m`` (PRIME = 2^64 - 59, ``a0, a1``
    uniform on the field) are drawn once per run from ``hash_seed``; each user picks one
    uniformly and runs HE on ``[m]`` (``Hsize = 2^ceil(log2(m+1))``, column ``y + 1``).

    Args:
        epsilon: privacy parameter, in [2^-20, 22.18] (binary RR: ``_validate.rr_threshold``).
        d: domain size, ``2 <= d <= PRIME``.
        k: number of hash functions (default 2048, Apple's value).
        m: hash range (default 1024, Apple's value), ``2 <= m < 2^30``.
        hash_seed: seed of the public hash family (default: fresh from OS entropy).
    """

    protocol: ClassVar[str] = "cmshe"
    epsilon: float
    d: int
    k: int = 2048
    m: int = 1024
    hash_seed: int = dataclasses.field(default_factory=_random_seed)

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_binary_epsilon(self.epsilon))
        object.__setattr__(self, "d", _check_d(self.d, PRIME))
        object.__setattr__(self, "k", check_int("k", self.k, 1, 2**20))
        object.__setattr__(self, "m", check_int("m", self.m, 2, 2**30 - 1))
        object.__setattr__(self, "hash_seed", check_int("hash_seed", self.hash_seed, 0, 2**64 - 1))
        if self.k * pow2_at_least(self.m + 1) > 2**31:
            raise ParameterError(f"k * Hsize must be <= 2^31 cells, got k={self.k}, m={self.m}")

    @property
    def hadamard_size(self) -> int:
        return pow2_at_least(self.m + 1)

    def layout(self) -> Layout:
        return cached_layout(self)

    def _layout_size(self) -> Tuple[int, int]:
        """(cells, groups) of the server state."""
        return self.k * self.hadamard_size, self.k

    def _build_layout(self) -> Layout:
        coef = hash_coefficients(self.hash_seed, self.k, PRIME)
        groups = [{"a0": int(coef[j, 0]), "a1": int(coef[j, 1]), "hash_modulus": self.m, "col_offset": 1,
                   "rows": self.hadamard_size} for j in range(self.k)]
        return make_layout(groups, field=prime_field())


@dataclasses.dataclass
class CMSHEReports(GroupBitReports):
    """CMS+HE reports: hash index ``groups`` (uint32), row ``rows`` (uint32), bit ``bits``."""

    protocol: ClassVar[str] = "cmshe"


class CMSHEClient(LayoutClient):
    """CMS+HE client: picks ``j ~ U[k]`` (unless assigned), ``y = h_j(x)``, reports
    ``RR_2(H01[r, y + 1])`` in +-1 form with ``r ~ U[0, Hsize)``. ``rng``: see
    :class:`HRRClient`."""

    params_type = CMSHEParams
    reports_type = CMSHEReports

    def perturb(self, values: Any, groups: Any = None, rows: Any = None) -> CMSHEReports:
        """Privatize ``values`` in ``[0, d)``; ``groups``/``rows`` optionally assigned by
        the server (:meth:`CMSHEServer.assign`). Returns :class:`CMSHEReports`."""
        x = as_values(values, self.params.d)
        g, r, b = self._perturb(x, groups, rows)
        return CMSHEReports(groups=g, rows=r, bits=b)


class CMSHEServer(LayoutServer):
    """CMS+HE server: ``z_j[r] += b`` per hash function, one 2-D FWHT, then the CMS
    estimator with ``m`` ([PAN] Eq. 2):
    ``fhat(x) = m/(n(m-1)) sum_j c_eps (H z_j)[h_j(x) + 1] - 1/(m-1)``."""

    protocol = "cmshe"
    params_type = CMSHEParams
    reports_type = CMSHEReports

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (``None``:
        all of ``[0, d)``, which costs ``k d`` hash evaluations), float64."""
        self._require_reports()
        p = self.params
        if candidates is None:
            check_allocation(16 * p.d, f"a whole-domain CMS+HE query (d={p.d})")
            xs = np.arange(p.d, dtype=np.uint64)
        else:
            xs = as_values(candidates, p.d, "candidates")
        total = group_sum(p.layout(), self.decoded(), xs, 1, self.threads) * c_eps(p.epsilon)
        est = p.m / ((p.m - 1.0) * self.n) * total - 1.0 / (p.m - 1.0)
        return est * self.n if counts else est


# == RHR ==============================================================================
@dataclasses.dataclass(frozen=True)
class RHRParams(Params):
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

    def __post_init__(self):
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
class RHRReports(Reports):
    """RHR reports: the RR symbol ``z`` in ``[0, 2^b)`` (uint32) and the row ``rows``."""

    protocol: ClassVar[str] = "rhr"
    z: np.ndarray
    rows: np.ndarray

    column_types: ClassVar = {"z": ("uint32", 1), "rows": ("uint32", 1)}

    def __post_init__(self):
        self.z = check_array("z", self.z, np.uint32)
        self.rows = check_array("rows", self.rows, np.uint32)
        self._check_lengths()


class RHRClient(ClientBase):
    """RHR client (R1 layout). ``rng``: see :class:`HRRClient`."""

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

    def __init__(self, params: RHRParams, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        self._st = _State(z=np.zeros(params.base * params.hadamard_size, dtype=np.int64),
                          n=np.zeros(1, dtype=np.int64))

    @classmethod
    def _state_layout(cls, params: RHRParams):
        return {"z": ((params.base * params.hadamard_size,), "int64"), "n": ((1,), "int64")}

    @property
    def _z(self) -> np.ndarray:
        return self._st["z"]

    def _set_state(self, state: Dict[str, np.ndarray]) -> None:
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

    def _ingest(self, reports: RHRReports) -> Dict[str, np.ndarray]:
        p = self.params
        blocks = reports.z >> np.uint32(1)
        bits = np.where(reports.z & np.uint32(1), 1, -1).astype(np.int8)
        group_rows = np.full(p.base, p.hadamard_size, dtype=np.uint64)
        cell_base = np.arange(p.base, dtype=np.uint64) * np.uint64(p.hadamard_size)
        z = self._st["z"].copy()
        bad = _core.hadamard_update(blocks, reports.rows, bits, group_rows, cell_base, z, self.threads)
        if bad < len(reports):
            self._validate(reports)  # names the first bad report
            raise ReportError(f"report {bad} does not fit the parameters")
        return {"z": z, "n": self._st["n"] + len(reports)}

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (``None``:
        all of ``[0, d)``), float64."""
        if self.n == 0:
            raise ReportError("no reports have been aggregated yet")
        p = self.params
        st = self._st
        decoded = getattr(st, "decoded", None)
        if decoded is None:
            decoded = st["z"].copy().reshape(p.base, p.hadamard_size)
            if p.hadamard_size >= 2:
                _core.fwht(decoded, self.threads)
            st.decoded = decoded
        if candidates is None:
            check_allocation(32 * p.d, f"a whole-domain RHR query (d={p.d})")
            xs = np.arange(p.d, dtype=np.uint64)
        else:
            xs = as_values(candidates, p.d, "candidates")
        em1 = math.expm1(p.epsilon)
        scale = (em1 + p.symbols) / em1 / (1.0 if counts else self.n)
        low = (xs & np.uint64(p.base - 1)).astype(np.int64)
        high = (xs >> np.uint64(p.b - 1)).astype(np.int64) + 1
        return decoded[low, high] * scale


# == registry and short names ==========================================================
Params = HRRParams
Client = HRRClient
Reports = HRRReports
Server = HRRServer


def _hrr_variance(server, candidates):
    p, n = server.params, server.n
    return (lambda f: theory().hrr_variance(p.epsilon, n, f)), f"{PLUG_IN} (theory.hrr_variance)"


def _rhr_variance(server, candidates):
    p, n = server.params, server.n
    if p.d > 2**24:
        return ((lambda f: theory().rhr_variance(p.epsilon, n, f, residue_fraction=1.0)),
                f"{PLUG_IN} (theory.rhr_variance with every user in the candidate's residue class: an upper bound)")
    # the raw estimates of a residue class sum to an unbiased estimate of its share
    per_class = np.bincount(np.arange(p.d) % p.base, weights=server.estimate(), minlength=p.base)
    share = np.clip(per_class[candidates.astype(np.int64) % p.base], 0.0, 1.0)
    return ((lambda f: theory().rhr_variance(p.epsilon, n, f, residue_fraction=np.maximum(share, f))),
            f"{PLUG_IN} (theory.rhr_variance; the residue-class share is plugged in from the estimates)")


def _rhr_plan(params):
    low = params.b - 1

    def support(reports, w):
        x = np.uint64(w[0])
        h01 = parity_sign(reports.rows.astype(np.uint64) & ((x >> np.uint64(low)) + np.uint64(1))) > 0
        y = 2 * (int(x) & ((1 << low) - 1)) + h01.astype(np.int64)
        return reports.z.astype(np.int64) == y
    return Plan(value_inputs(0, 1), support_events(support, [0], [1]), ("z = y(x0) != y(x1)", "z = y(x1) != y(x0)"))


def _ceil_log2(x: int) -> int:
    return max(0, (int(x) - 1).bit_length())


def _he_compare(epsilon, d, n, f_star, **_):
    from ..theory import ocms as to

    hsize = 1 << d.bit_length()  # 2^ceil(log2(d+1))
    return [ComparisonRow("HE", 2, _ceil_log2(hsize) + 1, lambda f: theory().hadamard.he_variance(epsilon, n, f),
                          to.ocms_l2(epsilon, d, n, 2), f"Hadamard row ({_ceil_log2(hsize)} bits) + 1 bit")]


def _cmshe_compare(epsilon, d, n, f_star, **_):
    m, k = 1024, 2048

    def var(f):
        return theory().cmshe_variance(epsilon, n, f, m=m)
    return [ComparisonRow("CMS+HE", m, _ceil_log2(k) + _ceil_log2(1 << m.bit_length()) + 1, var,
                          (d - 1) * var(0.0) + var(1.0),
                          "k = 2048 functions, m = 1024 (+ the fixed family's bias, PAN Thm 3.10)")]


def _rhr_compare(epsilon, d, n, f_star, **_):
    if epsilon > 21 or d > 2**28:
        return []
    e = math.exp(epsilon)
    b, base, sym, rsize = theory().rhr_parameters(epsilon, d)
    c2 = ((e - 1 + sym) / (e - 1)) ** 2
    # sum over the dictionary of the share of users in x's residue class is at most
    # ceil(d / base) (all users in the largest class): the worst-case l2.
    share_sum = -(-d // base)
    l2 = (c2 * (share_sum * (e + 1) + 2 * (d - share_sum)) / (e - 1 + sym) - 1) / n
    return [ComparisonRow("RHR", sym, _ceil_log2(rsize) + b,
                          lambda f: theory().rhr_variance(epsilon, n, f, residue_fraction=1.0), l2,
                          f"b = {b}, {base} residue blocks; MSE for values sharing their residue with all users "
                          "(PAN 6.1's adversarial data)")]


def _hrr_compare(epsilon, d, n, f_star, **_):
    if d > 2**30:
        return []
    hd = 1 << _ceil_log2(d)
    return [ComparisonRow("HRR", hd, _ceil_log2(hd) + 1, lambda f: theory().hrr_variance(epsilon, n, f),
                          (d * theory().c_eps(epsilon) ** 2 - 1) / n, "Hadamard row + 1 bit (WW Fact 2.1)")]


def _simulation(name, label, params_type, summary, variance, l2=None, hashed=False):
    """The protocol's ``Algorithm``; ``hashed``: a hash family redrawn every run."""
    def entries():
        from ..experiments import Algorithm

        def make(eps, data, gen):
            return params_type(epsilon=eps, d=data.d, **({"hash_seed": draw(gen)} if hashed else {}))
        return (Algorithm(name, label, "protocols.hadamard", make, variance, l2, summary),)
    return entries


def _rhr_simulated_variance(params, data, f):
    residues = np.bincount(data.values % params.base, minlength=params.base) / data.n
    share = residues[data.candidates % params.base]  # users sharing x mod base (x included)
    return theory().rhr_variance(params.epsilon, data.n, f, residue_fraction=share)


def _example(params_type, **kw):
    return lambda: (params_type(**kw), zipf_values(300))


register_protocol(Protocol(
    "hrr", HRRParams, HRRReports, HRRServer, HRRClient, example=_example(HRRParams, epsilon=1.0, d=300),
    wire_fields=row_bit_wire, variance=_hrr_variance, compare=_hrr_compare,
    simulations=_simulation("hrr", "HRR", HRRParams, "Hadamard randomized response (WW Fact 2.1)",
                            lambda params, data, f: theory().hrr_variance(params.epsilon, data.n, f)),
    audit=AuditHooks(lambda e, **kw: HRRParams(e, 4, **kw), layout_plan, binary_epsilon)))
register_protocol(Protocol(
    "he", HEParams, HEReports, HEServer, HEClient, example=_example(HEParams, epsilon=1.0, d=300),
    wire_fields=row_bit_wire, variance=_hrr_variance, compare=_he_compare,
    simulations=_simulation("he", "HE", HEParams, "Hadamard Encoding = CMS+RR with m = 2 (PAN section 6, R1)",
                            lambda params, data, f: theory().he_variance(params.epsilon, data.n, f),
                            lambda params, n, size: theory().ocms_l2(params.epsilon, size, n, 2)),
    audit=AuditHooks(lambda e, **kw: HEParams(e, 4, **kw), layout_plan, binary_epsilon)))
register_protocol(Protocol(
    "cmshe", CMSHEParams, CMSHEReports, CMSHEServer, CMSHEClient,
    example=_example(CMSHEParams, epsilon=2.0, d=300, k=8, m=32, hash_seed=7),
    # Apple CMS+HE: the hash index, the row and one bit.
    wire_fields=lambda p: [WireField("groups", bits_for(p.k), dtype="uint32"), *row_bit_wire(p)],
    variance=cmshe_variance, compare=_cmshe_compare,
    simulations=_simulation("cms-he", "CMS+HE", CMSHEParams,
                            "Apple's CMS with HE, k = 2048, m = 1024, family redrawn per run (PAN section 6)",
                            simulated_cmshe_variance, hashed=True),
    audit=AuditHooks(lambda e, **kw: CMSHEParams(e, 16, k=2, m=4, hash_seed=1, **kw), layout_plan, binary_epsilon)))
register_protocol(Protocol(
    "rhr", RHRParams, RHRReports, RHRServer, RHRClient, example=_example(RHRParams, epsilon=2.0, d=300),
    # RHR: b-bit symbol and the row.
    wire_fields=lambda p: [WireField("z", p.b, dtype="uint32"),
                           WireField("rows", bits_for(p.hadamard_size), dtype="uint32")],
    variance=_rhr_variance, compare=_rhr_compare,
    simulations=_simulation("rhr", "RHR", RHRParams, "Recursive Hadamard Response, R1's layout (PAN section 6)",
                            _rhr_simulated_variance),
    audit=AuditHooks(lambda e, **kw: RHRParams(e, 16, **kw), _rhr_plan, rr_epsilon("symbols"))))
