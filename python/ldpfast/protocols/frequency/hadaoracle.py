"""HadaOracle: the sketching framework of [WW] (Algorithm 1, Thm 3.1, Cor 3.2) with HRR
inside each user subset.

The users are split into ``k`` disjoint subsets (independent or permutation
partitioning); subset ``j`` hashes its values with its own pairwise-independent
``h_j: [d] -> [m]`` and runs HRR on ``[m]``. The server keeps ``k x m`` integer counts
(mergeable), decodes all subsets with one batched FWHT and answers a query with the
median over ``j`` of ``k * chat_j(h_j(x))`` in ``O(k)``::

    params = lf.protocols.frequency.hadaoracle.HadaOracleParams.create(epsilon=1.0, d=2**32, n=10**6, beta=0.01)
    reports = lf.protocols.frequency.hadaoracle.HadaOracleClient(params, rng=None).perturb(values)
    server = lf.protocols.frequency.hadaoracle.HadaOracleServer(params).update(reports)
    server.estimate(np.array([3, 17]), counts=True)

Hash family (our choice; [WW] only needs pairwise independence): ``h_j(x)`` = the low ``log2
m`` bits of ``a1 * x XOR a0`` in GF(2^64) (``z^64 + z^4 + z^3 + z + 1``), exactly pairwise
independent for a power-of-two ``m``; ``(a0, a1)`` of every subset derive from ``hash_seed``
(public, part of the parameters). When ``m >= 2^ceil(log2 d)`` no hashing is done (HRR on
``[d]`` in every subset).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar, Optional, Tuple

import numpy as np

from ..._base import Protocol, register_protocol
from ...errors import ParameterError
from ..._base import Params as _ParamsBase
from ..._validate import as_values, check_binary_epsilon, check_bool, check_choice, check_epsilon, check_int
from .._hadamard_layout import (GroupBitReports, Layout, LayoutClient, LayoutServer, _parity_sign, _random_seed,
                               cached_layout, gf64_field, hash_coefficients, make_layout, pow2_at_least)
from ...theory import hadamard as _theory
from ...theory.hadamard import c_eps
from ...uncertainty import MedianOfGroups
from ..._base import AuditHooks
from ..._base import WireField, bits_for
from .._aliases import deprecated_names
from .._registration import edges, SIGN, binary_epsilon, draw, layout_plan, median_of_groups, zipf_values

if TYPE_CHECKING:
    from ...experiments import Algorithm

__all__ = ["HadaOracleParams", "HadaOracleClient", "HadaOracleReports", "HadaOracleServer", "PARTITIONS", "SCALINGS",
           "QUERY_METHODS", "median_estimates"]

PARTITIONS = ("independent", "permutation")
SCALINGS = ("k", "subset")
MAX_WHOLE_DOMAIN = 1 << 24


@dataclasses.dataclass(frozen=True)
class HadaOracleParams(_ParamsBase):
    """HadaOracle parameters ([WW] Alg. 1). Use :meth:`create` for the defaults.

    Args:
        epsilon: privacy parameter, in [2^-20, 22.18] (binary RR: ``_validate.rr_threshold``).
        d: domain size, ``2 <= d <= 2^64``.
        k: number of subsets / hash functions, odd so the median is a single value.
        m: hash range, a power of two in ``[2, 2^30]``.
        partition: ``"independent"`` (each user draws its subset; default) or
            ``"permutation"`` (a random permutation cut into ``k`` blocks; the server
            assigns subsets with :meth:`HadaOracleServer.assign`).
        scaling: ``"k"`` (default, the paper's error decomposition) scales subset
            estimates by ``k``; ``"subset"`` by ``n/|U_j|`` (an alternative of
            ours for independent partitioning).
        collision_correction: if True, each subset estimate ``E_j`` is replaced by
            ``(m E_j - n)/(m - 1)``, removing the expected collision mass ``(n - c)/m``
            (off by default: [WW] uses the plain Count-Median sketch). Median bias: the
            colliding mass ``sum_{x' != x} c(x') 1{h_j(x') = h_j(x)}`` is >= 0, so without
            the correction every subset, hence the median, is biased up: by about the
            light mass ``(n - c - sum_{heavy x'} c(x'))/m``, at most ``(n - c)/m``. It is
            also right-skewed (a heavy ``x'`` collides in a share ``1/m`` of the subsets
            only, which the median ignores), so the median of the *corrected* subsets is
            biased down by about ``sum_{heavy x'} c(x')/m``: the correction makes each
            subset unbiased, not the median. Measured (n = 20,000, 20% on one value,
            eps = 2, k = 13, m = 32, 300 runs): +537 +- 14 counts uncorrected (light mass/m
            = 500), -121 +- 14 corrected (heavy mass/m = 125).
        hash_seed: seed of the public hash functions (default: fresh from OS entropy).
    """

    protocol: ClassVar[str] = "hadaoracle"
    epsilon: float
    d: int
    k: int
    m: int
    partition: str = "independent"
    scaling: str = "k"
    collision_correction: bool = False
    hash_seed: int = dataclasses.field(default_factory=_random_seed)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_binary_epsilon(self.epsilon))
        object.__setattr__(self, "d", check_int("d", self.d, 2, 2**64))
        object.__setattr__(self, "k", check_int("k", self.k, 1, 2**16))
        if self.k % 2 == 0:
            raise ParameterError(f"k must be odd (the median of an even count is ambiguous), got {self.k}")
        m = check_int("m", self.m, 2, 2**30)
        if m & (m - 1):
            raise ParameterError(f"m must be a power of two, got {m}")
        object.__setattr__(self, "m", min(m, pow2_at_least(self.d)))
        check_choice("partition", self.partition, PARTITIONS)
        check_choice("scaling", self.scaling, SCALINGS)
        object.__setattr__(self, "collision_correction", check_bool("collision_correction", self.collision_correction))
        object.__setattr__(self, "hash_seed", check_int("hash_seed", self.hash_seed, 0, 2**64 - 1))
        if self.k * self.m > 2**31:
            raise ParameterError(f"k * m must be <= 2^31 cells, got k={self.k}, m={self.m}")

    @classmethod
    def create(cls, epsilon: float, d: int, n: int, beta: float = 0.05, k: Optional[int] = None,
               m: Optional[int] = None, **kwargs: Any) -> "HadaOracleParams":
        """Parameters with our default constants ([WW] fixes them only up to constant
        factors) for ``n`` users and failure probability ``beta``: ``k`` = smallest odd
        integer ``>= 2.5 log(1/beta)``, ``m = 2^ceil(log2(sqrt(n/k)/c_eps))`` clamped to
        ``[2, 2^ceil(log2 d)]`` (see :func:`ldpfast.theory.hadaoracle_defaults`).
        ``k``/``m`` override them; other keyword arguments go to the constructor."""
        check_epsilon(epsilon)
        check_int("n", n, 1)
        k_def, _, m_def = _theory.hadaoracle_defaults(epsilon, n, beta, d)
        return cls(epsilon=epsilon, d=d, k=k_def if k is None else k, m=m_def if m is None else m, **kwargs)

    @property
    def hashed(self) -> bool:
        """False when ``m`` covers the domain and subsets run HRR on ``[d]`` directly."""
        return self.m < pow2_at_least(self.d)

    def layout(self) -> Layout:
        return cached_layout(self)

    def _layout_size(self) -> Tuple[int, int]:
        """(cells, groups) of the server state."""
        return self.k * self.m, self.k

    def _build_layout(self) -> Layout:
        coef = hash_coefficients(self.hash_seed, self.k, 2**64)
        modulus = self.m if self.hashed else 0
        groups = [{"a0": int(coef[j, 0]), "a1": int(coef[j, 1]), "hash_modulus": modulus, "rows": self.m}
                  for j in range(self.k)]
        return make_layout(groups, field=gf64_field())


@dataclasses.dataclass
class HadaOracleReports(GroupBitReports):
    """HadaOracle reports: subset ``groups`` (uint32), Hadamard row ``rows`` (uint32),
    bit ``bits`` (int8, +-1). With server-assigned subsets and rows only the bit is
    private information; the other columns are what the server sent."""

    protocol: ClassVar[str] = "hadaoracle"


class HadaOracleClient(LayoutClient):
    """HadaOracle client: in subset ``j``, ``y = h_j(x)`` and HRR on ``[m]``: one bit.

    Args:
        params: :class:`HadaOracleParams`.
        rng: ``None`` (default) draws each batch's key from OS entropy, the only setting
            for real users; an int / SeedSequence / Generator makes a reproducible
            **simulation only**.
        threads: client-side threads for batches.
    """

    params_type: ClassVar[type] = HadaOracleParams
    reports_type: ClassVar[type] = HadaOracleReports

    def perturb(self, values: Any, groups: Any = None, rows: Any = None) -> HadaOracleReports:
        """Privatize ``values`` (integers in ``[0, d)``). ``groups``/``rows``: assigned by
        the server (:meth:`HadaOracleServer.assign`); required for permutation partitioning, else
        the client draws ``j ~ U[k]`` and ``r ~ U[0, m)``.

        Raises:
            ParameterError: bad values, or permutation partitioning without groups.
        """
        if self.params.partition == "permutation" and groups is None:
            raise ParameterError("groups must be given for permutation partitioning "
                                 "(use HadaOracleServer.assign(n, partition='permutation'))")
        x = as_values(values, self.params.d)
        g, r, b = self._perturb_groups(x, groups, rows)
        reports: HadaOracleReports = self.reports_type(groups=g, rows=r, bits=b)
        return reports


QUERY_METHODS = ("fwht", "direct")


def _direct_transform(z: np.ndarray, base: np.ndarray, width: int, y: np.ndarray) -> np.ndarray:
    """``(H z_g)[y] = sum_r z_g[r] H[r, y]`` for each query without a transform, in
    ``O(width)`` per query ([WW] Remark 7.1: the HRR server that omits the FWHT)."""
    out = np.empty(len(y), dtype=np.float64)
    r = np.arange(width, dtype=np.uint64)
    step = max(1, (1 << 22) // width)
    for lo in range(0, len(y), step):
        yy = y[lo:lo + step].astype(np.uint64)
        cells = z[base[lo:lo + step, None] + r[None, :].astype(np.int64)]
        out[lo:lo + step] = np.einsum("qr,qr->q", cells, _parity_sign(r[None, :] & yy[:, None]))
    return out


def median_estimates(server: LayoutServer, group_ids: np.ndarray, xs: np.ndarray, scales: np.ndarray,
                     collision_m: Optional[int], method: str = "fwht", chunk: int = 4096) -> np.ndarray:
    """Median over ``group_ids`` of ``scales[j] * c_eps * (H z_j)[y_j(x)]`` for each ``x``
    (optionally collision-corrected with range ``collision_m``), float64 counts.
    ``method="fwht"`` reads the batched transform (``O(k)`` per query); ``"direct"``
    evaluates each ``(H z_j)[y]`` from the integer state (``O(k m)`` per query, the
    no-FWHT oracle of TreeHist; identical values). All groups must share one width."""
    check_choice("method", method, QUERY_METHODS)
    layout = server.params.layout()
    base = layout.cell_base.astype(np.int64)
    c = c_eps(server.params.epsilon)
    kk = len(group_ids)
    out = np.empty(len(xs), dtype=np.float64)
    n = server.n
    if method == "fwht":
        source = server.decoded()
    else:
        source = server._z
        width = int(layout.rows[group_ids[0]])
    for lo in range(0, len(xs), chunk):
        part = xs[lo:lo + chunk]
        g = np.repeat(group_ids.astype(np.int64), len(part))
        y = layout.group_hashes(g, np.tile(part, kk)).astype(np.int64)
        if method == "fwht":
            raw = source[base[g] + y]
        else:
            raw = _direct_transform(source, base[g], width, y)
        vals = raw.reshape(kk, len(part)) * (c * scales[:, None])
        if collision_m is not None:
            vals = (collision_m * vals - n) / (collision_m - 1.0)
        out[lo:lo + len(part)] = np.nanmedian(vals, axis=0) if np.isnan(scales).any() else np.median(vals, axis=0)
    return out


class HadaOracleServer(LayoutServer):
    """HadaOracle server: ``k x m`` integer counts (C++ accumulation, mergeable), one
    batched FWHT, median query in ``O(k)`` ([WW] Alg. 1).

    Args:
        params: :class:`HadaOracleParams`.
        threads: server threads (0 = default; results do not depend on it).
    """

    protocol = "hadaoracle"
    params_type: ClassVar[type] = HadaOracleParams
    reports_type: ClassVar[type] = HadaOracleReports
    params: HadaOracleParams

    def _scales(self) -> np.ndarray:
        p = self.params
        if p.scaling == "k":
            return np.full(p.k, float(p.k))
        sizes = self._group_sizes.astype(np.float64)
        with np.errstate(divide="ignore"):
            return np.where(sizes > 0, self.n / np.maximum(sizes, 1), np.nan)

    def group_estimates(self, candidates: Any) -> np.ndarray:
        """Per-subset count estimates ``scale_j * c_eps * (H z_j)[h_j(x)]``, shape
        ``(k, len(candidates))`` (each unbiased for ``k``-scaled hashed counts; used by
        the median)."""
        self._require_reports()
        p = self.params
        xs = as_values(candidates, p.d, "candidates")
        layout = p.layout()
        g = np.repeat(np.arange(p.k, dtype=np.int64), len(xs))
        y = layout.group_hashes(g, np.tile(xs, p.k)).astype(np.int64)
        vals: np.ndarray = self.decoded()[layout.cell_base.astype(np.int64)[g] + y].reshape(p.k, len(xs))
        return vals * (c_eps(p.epsilon) * self._scales()[:, None])

    def estimate(self, candidates: Any = None, counts: bool = False, method: str = "fwht") -> np.ndarray:
        """Median estimates of ``candidates`` (``None``: all of ``[0, d)``, allowed for
        ``d <= 2^24``), float64 fractions (counts with ``counts=True``). ``method``:
        ``"fwht"`` (default, ``O(k)`` per query after one batched FWHT) or ``"direct"``
        (no transform, ``O(k m)`` per query; same values).

        Raises:
            ReportError: no reports yet. ParameterError: whole-domain query of a huge domain.
        """
        self._require_reports()
        p = self.params
        if candidates is None and p.d > MAX_WHOLE_DOMAIN:
            raise ParameterError(f"candidates must be given when d > 2^24, got d={p.d}")
        # per candidate and group: its hash, cell and estimate; the median's copy
        self._check_query(candidates, 24 * p.k + 24, p.d, "a HadaOracle query", extra=self._decode_nbytes())
        if candidates is None:
            xs = np.arange(p.d, dtype=np.uint64)
        else:
            xs = as_values(candidates, p.d, "candidates")
        est = median_estimates(self, np.arange(p.k), xs, self._scales(),
                               p.m if p.collision_correction and p.hashed else None, method)
        return est if counts else est / self.n


def _variance(server: HadaOracleServer, candidates: Any) -> MedianOfGroups:
    p = server.params
    corrected = p.collision_correction and p.hashed
    return median_of_groups(server, candidates, p.k, p.k, p.hashed, signed=False,
                            correction=(p.m / (p.m - 1.0)) ** 2 if corrected else 1.0)


def _simulations() -> Tuple[Algorithm]:
    from ...experiments import Algorithm

    return (Algorithm("hadaoracle", "HadaOracle", "protocols.frequency.hadaoracle",
                      lambda eps, data, gen: HadaOracleParams.create(epsilon=eps, d=data.d, n=data.n, beta=0.05,
                                                           hash_seed=draw(gen)),
                      None, None, "WW sketch: k subsets x HRR on [m], median query (beta = 0.05 defaults)"),)


register_protocol(Protocol(
    "hadaoracle", HadaOracleParams, HadaOracleReports, HadaOracleServer, HadaOracleClient,
    extremes=edges(d=(2, 2**64), k=(1, 2**10)),
    example=lambda: (HadaOracleParams.create(epsilon=2.0, d=1000, n=4000, hash_seed=3), zipf_values(1000)),
    # [WW] Alg. 1: the subset j, the Hadamard row r and one bit (only the bit when the server assigns j, r).
    wire_fields=lambda p: [WireField("groups", bits_for(p.k), dtype="uint32"),
                           WireField("rows", bits_for(p.m), dtype="uint32"), WireField("bits", 1, SIGN, "int8")],
    simulations=_simulations, variance=_variance,
    audit=AuditHooks(lambda e, **kw: HadaOracleParams.create(e, 64, 1000, hash_seed=1, **kw), layout_plan,
                     binary_epsilon)))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "hadaoracle", {"Params": HadaOracleParams, "Client": HadaOracleClient,
                                                      "Server": HadaOracleServer, "Reports": HadaOracleReports})
