"""Hadamard-family frequency oracles: HRR ([WW] Fact 2.1 / App. 7.1) and the
comparison algorithms of [PAN] section 6: HE and CMS+HE (RHR has its own module,
:mod:`ldpfast.protocols.frequency.rhr`; OLH is local hashing, :mod:`ldpfast.protocols.frequency.olh`).

Protocols (each with ``Params``, ``Client``, ``Reports``, ``Server``; HRR's are also
exported as ``Params``/``Client``/``Reports``/``Server``)::

    from ldpfast.protocols.frequency import hadamard
    params = hadamard.HRRParams(epsilon=1.0, d=2**20)
    reports = hadamard.HRRClient(params, rng=None).perturb(values)   # 1 bit + row per user
    server = hadamard.HRRServer(params).update(reports)
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
from typing import TYPE_CHECKING, Any, Callable, ClassVar, List, Optional, Tuple

import numpy as np

from ..._base import Params as _ParamsBase, Protocol, register_protocol
from ..._validate import as_values, check_binary_epsilon, check_int
from ...errors import ParameterError
from ...kernels.field import PRIME  # noqa: F401  (re-exported)
from ...theory import hadamard as _th
from ...theory.hadamard import c_eps
from .._hadamard_layout import (BitReports, GroupBitReports, Layout, LayoutClient, LayoutServer, cached_layout,
                               group_sum, hash_coefficients, make_layout, pow2_at_least, prime_field, _check_d,
                               _random_seed, layout_channel)
from ..._base import AuditHooks, ComparisonRow
from ...estimates import PLUG_IN
from ..._base import WireField, bits_for
from ..._registry import VarianceFn
from .._aliases import deprecated_names
from .._registration import (edges, binary_epsilon, cmshe_variance, counter_cost, draw, layout_plan, row_bit_wire,
                            simulated_cmshe_variance, theory, zipf_values)

if TYPE_CHECKING:
    from ...datasets import ValueData
    from ...experiments import Algorithm

__all__ = [
    "HRRParams", "HRRClient", "HRRReports", "HRRServer",
    "HEParams", "HEClient", "HEReports", "HEServer",
    "CMSHEParams", "CMSHEClient", "CMSHEReports", "CMSHEServer",
    "BitReports", "GroupBitReports", "PRIME",
]


# == HRR ==============================================================================
@dataclasses.dataclass(frozen=True)
class HRRParams(_ParamsBase):
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

    def __post_init__(self) -> None:
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

    params_type: ClassVar[type] = HRRParams
    reports_type: ClassVar[type] = HRRReports
    params: HRRParams

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
    params_type: ClassVar[type] = HRRParams
    reports_type: ClassVar[type] = HRRReports
    params: HRRParams

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated frequencies (fractions; counts with ``counts=True``) of
        ``candidates`` (``None``: every value in ``[0, d)``), float64. Raw (unclipped)
        unbiased estimates.

        Raises:
            ReportError: no reports aggregated yet.
        """
        self._require_reports()
        self._check_query(candidates, 24, self.params.d, "an HRR query", extra=self._decode_nbytes())
        decoded = self.decoded()
        scale = c_eps(self.params.epsilon) / (1.0 if counts else self.n)
        if candidates is None:
            return decoded[:self.params.d] * scale
        selected: np.ndarray = decoded[as_values(candidates, self.params.d, "candidates")]
        return selected * scale


# == HE ===============================================================================
@dataclasses.dataclass(frozen=True)
class HEParams(_ParamsBase):
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

    def __post_init__(self) -> None:
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

    params_type: ClassVar[type] = HEParams
    reports_type: ClassVar[type] = HEReports
    params: HEParams

    def perturb(self, values: Any, rows: Any = None) -> HEReports:
        """Privatize ``values`` in ``[0, d)``; returns :class:`HEReports`."""
        x = as_values(values, self.params.d)
        _, rows_out, bits = self._perturb(x, None, rows)
        return HEReports(rows=rows_out, bits=bits)


class HEServer(LayoutServer):
    """HE server: ``fhat(x) = (1/n) sum_i c_eps b_i H[r_i, x+1]`` for all ``x`` with one
    FWHT (equal to the CMS estimator with ``m = 2``). Variance ``(c_eps^2 - f)/n``."""

    protocol = "he"
    params_type: ClassVar[type] = HEParams
    reports_type: ClassVar[type] = HEReports
    params: HEParams

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (``None``:
        all of ``[0, d)``), float64."""
        self._require_reports()
        self._check_query(candidates, 32, self.params.d, "an HE query", extra=self._decode_nbytes())
        decoded = self.decoded()
        scale = c_eps(self.params.epsilon) / (1.0 if counts else self.n)
        if candidates is None:
            return decoded[1:self.params.d + 1] * scale
        return decoded[as_values(candidates, self.params.d, "candidates") + np.uint64(1)] * scale


# == CMS+HE ===========================================================================
@dataclasses.dataclass(frozen=True)
class CMSHEParams(_ParamsBase):
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

    def __post_init__(self) -> None:
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

    params_type: ClassVar[type] = CMSHEParams
    reports_type: ClassVar[type] = CMSHEReports
    params: CMSHEParams

    def perturb(self, values: Any, groups: Any = None, rows: Any = None) -> CMSHEReports:
        """Privatize ``values`` in ``[0, d)``; ``groups``/``rows`` optionally assigned by
        the server (:meth:`CMSHEServer.assign`). Returns :class:`CMSHEReports`."""
        x = as_values(values, self.params.d)
        g, r, b = self._perturb_groups(x, groups, rows)
        return CMSHEReports(groups=g, rows=r, bits=b)


class CMSHEServer(LayoutServer):
    """CMS+HE server: ``z_j[r] += b`` per hash function, one 2-D FWHT, then the CMS
    estimator with ``m`` ([PAN] Eq. 2):
    ``fhat(x) = m/(n(m-1)) sum_j c_eps (H z_j)[h_j(x) + 1] - 1/(m-1)``."""

    protocol = "cmshe"
    params_type: ClassVar[type] = CMSHEParams
    reports_type: ClassVar[type] = CMSHEReports
    params: CMSHEParams

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (``None``:
        all of ``[0, d)``, which costs ``k d`` hash evaluations), float64."""
        self._require_reports()
        p = self.params
        self._check_query(candidates, 32, p.d, "a CMS+HE query", extra=self._decode_nbytes())
        if candidates is None:
            xs = np.arange(p.d, dtype=np.uint64)
        else:
            xs = as_values(candidates, p.d, "candidates")
        total = group_sum(p.layout(), self.decoded(), xs, 1, self.threads) * c_eps(p.epsilon)
        est = p.m / ((p.m - 1.0) * self.n) * total - 1.0 / (p.m - 1.0)
        return est * self.n if counts else est



# == registry and short names ==========================================================
def _hrr_variance(server: LayoutServer, candidates: Any) -> Tuple[VarianceFn, str]:
    p, n = server.params, server.n
    return (lambda f: theory().hrr_variance(p.epsilon, n, f)), f"{PLUG_IN} (theory.hrr_variance)"


def _ceil_log2(x: int) -> int:
    return max(0, (int(x) - 1).bit_length())


def _he_compare(epsilon: float, d: int, n: float, f_star: Any, **_: Any) -> List[ComparisonRow]:
    from ...theory import ocms as to

    hsize = 1 << d.bit_length()  # 2^ceil(log2(d+1))
    return [ComparisonRow("HE", 2, _ceil_log2(hsize) + 1, lambda f: theory().hadamard.he_variance(epsilon, n, f),
                          float(to.ocms_l2(epsilon, d, n, 2)), f"Hadamard row ({_ceil_log2(hsize)} bits) + 1 bit",
                          **counter_cost(hsize, hsize * _ceil_log2(hsize)),
                          build=lambda: HEParams(epsilon=epsilon, d=d))]


def _cmshe_compare(epsilon: float, d: int, n: float, f_star: Any, **_: Any) -> List[ComparisonRow]:
    m, k = 1024, 2048

    def var(f: float) -> float:
        return _th.cmshe_variance(epsilon, n, f, m=m)
    return [ComparisonRow("CMS+HE", m, _ceil_log2(k) + _ceil_log2(1 << m.bit_length()) + 1, var,
                          (d - 1) * var(0.0) + var(1.0),
                          "k = 2048 functions, m = 1024 (+ the fixed family's bias, PAN Thm 3.10)",
                          server_ops=lambda n_, q: n_ + k * m * _ceil_log2(m) + q * k,
                          state_bytes=lambda n_, q: 8.0 * k * m,
                          build=lambda: CMSHEParams(epsilon=epsilon, d=d, k=k, m=m))]


def _hrr_compare(epsilon: float, d: int, n: float, f_star: Any, **_: Any) -> List[ComparisonRow]:
    if d > 2**30:
        return []
    hd = 1 << _ceil_log2(d)
    return [ComparisonRow("HRR", hd, _ceil_log2(hd) + 1, lambda f: theory().hrr_variance(epsilon, n, f),
                          (d * theory().c_eps(epsilon) ** 2 - 1) / n, "Hadamard row + 1 bit (WW Fact 2.1)",
                          **counter_cost(hd, hd * _ceil_log2(hd)), build=lambda: HRRParams(epsilon=epsilon, d=d))]


def _simulation(name: str, label: str, params_type: Callable[..., _ParamsBase], summary: str,
                variance: Callable[[Any, ValueData, np.ndarray], np.ndarray],
                l2: Optional[Callable[[Any, int, int], float]] = None,
                hashed: bool = False) -> Callable[[], Tuple[Algorithm]]:
    """The protocol's ``Algorithm``; ``hashed``: a hash family redrawn every run."""
    def entries() -> Tuple[Algorithm]:
        from ...experiments import Algorithm

        def make(eps: float, data: ValueData, gen: np.random.Generator) -> _ParamsBase:
            return params_type(epsilon=eps, d=data.d, **({"hash_seed": draw(gen)} if hashed else {}))
        return (Algorithm(name, label, "protocols.frequency.hadamard", make, variance, l2, summary),)
    return entries


def _example(params_type: Callable[..., _ParamsBase], **kw: Any) -> Callable[[], Tuple[_ParamsBase, np.ndarray]]:
    return lambda: (params_type(**kw), zipf_values(300))


register_protocol(Protocol(
    "hrr", HRRParams, HRRReports, HRRServer, HRRClient, example=_example(HRRParams, epsilon=1.0, d=300),
    extremes=edges(d=(2, 2**20)),
    wire_fields=row_bit_wire, variance=_hrr_variance, compare=_hrr_compare, channel=layout_channel,
    simulations=_simulation("hrr", "HRR", HRRParams, "Hadamard randomized response (WW Fact 2.1)",
                            lambda params, data, f: theory().hrr_variance(params.epsilon, data.n, f)),
    audit=AuditHooks(lambda e, **kw: HRRParams(e, 4, **kw), layout_plan, binary_epsilon)))
register_protocol(Protocol(
    "he", HEParams, HEReports, HEServer, HEClient, example=_example(HEParams, epsilon=1.0, d=300),
    extremes=edges(d=(2, 2**20)),
    wire_fields=row_bit_wire, variance=_hrr_variance, compare=_he_compare, channel=layout_channel,
    simulations=_simulation("he", "HE", HEParams, "Hadamard Encoding = CMS+RR with m = 2 (PAN section 6, R1)",
                            lambda params, data, f: theory().he_variance(params.epsilon, data.n, f),
                            lambda params, n, size: theory().ocms_l2(params.epsilon, size, n, 2)),
    audit=AuditHooks(lambda e, **kw: HEParams(e, 4, **kw), layout_plan, binary_epsilon)))
register_protocol(Protocol(
    "cmshe", CMSHEParams, CMSHEReports, CMSHEServer, CMSHEClient,
    extremes=edges(d=(2, 2**64)), example=_example(CMSHEParams, epsilon=2.0, d=300, k=8, m=32, hash_seed=7),
    # Apple CMS+HE: the hash index, the row and one bit.
    wire_fields=lambda p: [WireField("groups", bits_for(p.k), dtype="uint32"), *row_bit_wire(p)],
    variance=cmshe_variance, compare=_cmshe_compare, channel=layout_channel,
    simulations=_simulation("cms-he", "CMS+HE", CMSHEParams,
                            "Apple's CMS with HE, k = 2048, m = 1024, family redrawn per run (PAN section 6)",
                            simulated_cmshe_variance, hashed=True),
    audit=AuditHooks(lambda e, **kw: CMSHEParams(e, 16, k=2, m=4, hash_seed=1, **kw), layout_plan, binary_epsilon)))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "hrr", {"Params": HRRParams, "Client": HRRClient,
                                                      "Server": HRRServer, "Reports": HRRReports})
