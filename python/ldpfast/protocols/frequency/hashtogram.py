"""Hashtogram: the Count-Sketch frequency oracle of Bassily, Nissim, Stemmer and Thakurta
("Practical locally private heavy hitters", NeurIPS 2017 / JMLR 2020), a baseline of
[WW] Table 1.

The users are split into ``R`` groups. Group ``r`` has a public bucket hash
``h_r: [d] -> [T]`` and a public sign hash ``g_r: [d] -> {-1, +1}``; a user of group ``r``
holding ``x`` is (or draws) a uniform Hadamard row ``s in [0, T)`` and sends the bit
``g_r(x) H_T[s, h_r(x)]`` through binary randomized response (flipped with probability
``1/(e^eps + 1)``): one bit, eps-LDP. The server keeps ``z_r[s] += bit`` and estimates
``fhat_r(x) = R c_eps g_r(x) (H_T z_r)[h_r(x)] / n`` with ``c_eps = (e+1)/(e-1)``, and
combines the ``R`` groups by their median (Count-Sketch; ``combine="median"``, the
paper's) or their mean (``combine="mean"``).

Differences from [WW]'s HadaOracle (:mod:`ldpfast.protocols.frequency.hadaoracle`), the point of [WW]'s
comparison: the Count-Sketch sign (with it the colliding mass averages to zero instead
of adding ``n/m``) and a range ``T = Theta(sqrt n)`` instead of
``Theta(eps sqrt(n / log(1/beta)))``. Decoding uses one FWHT per group; the paper's server
evaluates the transform per query, which gives the same numbers more slowly.

With the mean, each user's term ``c_eps bit g(x) H[s, h(x)]`` has square ``c_eps^2`` and,
over the hash draw, mean ``1[x_i = x]``, so the estimate is unbiased with the variance of
HRR plus the hash family's collision term (:func:`ldpfast.theory.hashtogram_variance`).
Bassily et al.'s "FreqOracle" is the unhashed special case, i.e. Hadamard randomized
response (:class:`ldpfast.protocols.frequency.hadamard.HRRParams`; the paper's random matrix plays the role of
the Hadamard rows) answered without the FWHT.

Hashes (our choice, as for HadaOracle): the low bits of ``a1 x + a0`` in ``GF(2^64)``,
exactly pairwise independent into a power-of-two range, with coefficients derived from
``hash_seed``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ... import _core
from ..._aggregator import _exact_sum
from ..._base import Aggregator, ClientBase, Delta, Params as _ParamsBase, Protocol, WireField, register_protocol
from ..._delta import _State
from ..._validate import (as_values, check_below, check_binary_epsilon, check_choice, check_int, check_threads,
                         optional_index_array, probability_threshold)
from ...errors import FormatError, ParameterError, ReportError
from .._hadamard_layout import (GroupBitReports, _parity_sign, _random_seed, binary_flip_threshold, gf64_field,
                               hash_coefficients, pow2_at_least)
from ...theory import hadamard as _th
from ...theory import pan_baselines as _pt
from ...theory._types import Real, RealLike
from ..._base import AuditHooks
from ...estimates import PLUG_IN
from ...uncertainty import MedianOfGroups, PlugIn
from .._aliases import deprecated_names
from .._registration import edges, binary_epsilon, count_sketch_plan, draw, median_of_groups

if TYPE_CHECKING:
    from ...experiments import Algorithm

__all__ = ["HashtogramParams", "HashtogramReports", "HashtogramClient", "HashtogramServer", "COMBINERS"]

COMBINERS = ("median", "mean")
_GF64 = 2**64


@dataclasses.dataclass(frozen=True)
class HashtogramParams(_ParamsBase):
    """Hashtogram parameters.

    Attributes:
        epsilon: privacy parameter, in [2^-20, 22.18] (binary RR: ``_validate.rr_threshold``).
        d: dictionary size, ``2 <= d <= 2^64``.
        R: number of groups / hash pairs (odd for a well-defined median), ``1 <= R <= 4096``.
        T: bucket range, a power of two in ``[2, 2^24]``.
        combine: ``"median"`` (Count-Sketch, default) or ``"mean"`` (unbiased).
        hash_seed: seed of the public hash functions (default: fresh from OS entropy).
    """

    protocol: ClassVar[str] = "hashtogram"

    epsilon: float
    d: int
    R: int
    T: int
    combine: str = "median"
    hash_seed: int = dataclasses.field(default_factory=_random_seed)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_binary_epsilon(self.epsilon))
        object.__setattr__(self, "d", check_int("d", self.d, 2, 2**64))
        object.__setattr__(self, "R", check_int("R", self.R, 1, 4096))
        object.__setattr__(self, "T", check_int("T", self.T, 2, 2**24))
        if self.T & (self.T - 1):
            raise ParameterError(f"T must be a power of two, got {self.T}")
        check_choice("combine", self.combine, COMBINERS)
        object.__setattr__(self, "hash_seed", check_int("hash_seed", self.hash_seed, 0, 2**64 - 1))

    @classmethod
    def create(cls, epsilon: float, d: int, n: int, beta: float = 0.05, **kwargs: Any) -> "HashtogramParams":
        """Defaults (our choice): ``R`` = HadaOracle's ``k`` (smallest odd ``>= 2.5 ln(1/beta)``,
        so both oracles get the same number of repetitions) and ``T = 2^ceil(log2 sqrt n)``
        (Bassily et al.'s ``Theta(sqrt n)``), at most ``2^ceil(log2 d)``."""
        n = check_int("n", n, 1)
        d = check_int("d", d, 2, 2**64)
        R = kwargs.pop("R", _th.hadaoracle_k(beta))
        T = kwargs.pop("T", min(max(2, pow2_at_least(math.ceil(math.sqrt(n)))), pow2_at_least(d)))
        return cls(epsilon=epsilon, d=d, R=R, T=T, **kwargs)

    def coefficients(self) -> np.ndarray:
        """``(R, 4)`` uint64: ``a0, a1`` of each bucket hash, ``b0, b1`` of each sign hash."""
        return hash_coefficients(self.hash_seed, 2 * self.R, _GF64).reshape(self.R, 4)

    def hashes(self, groups: np.ndarray, x: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """``(h_r(x), g_r(x))`` for pairs ``(groups[i], x[i])``: buckets (uint64) and signs
        (int64, +-1)."""
        coef = self.coefficients()[np.asarray(groups, dtype=np.int64)]
        field = gf64_field()
        x = np.ascontiguousarray(x, dtype=np.uint64)
        bucket = _core.ocms_hash(field, np.ascontiguousarray(coef[:, 0]), np.ascontiguousarray(coef[:, 1]), x, self.T)
        low = _core.ocms_hash(field, np.ascontiguousarray(coef[:, 2]), np.ascontiguousarray(coef[:, 3]), x, 2)
        return bucket, 1 - 2 * low.astype(np.int64)

    @property
    def communication_bits(self) -> int:
        """One bit, plus ``log2 R + log2 T`` bits of group and row when the user draws them."""
        return 1 + (self.R - 1).bit_length() + (self.T - 1).bit_length()

    def variance(self, n: float = 1, f: RealLike = 0.0, sum_sq_other: RealLike = 0.0) -> Real:
        """Variance of the ``combine="mean"`` estimate (:func:`ldpfast.theory.hashtogram_variance`)."""
        return _pt.hashtogram_variance(self.epsilon, self.R, self.T, n, f, sum_sq_other)


@dataclasses.dataclass
class HashtogramReports(GroupBitReports):
    """Hashtogram reports: group ``groups`` (uint32), Hadamard row ``rows`` (uint32) and
    bit ``bits`` (int8, +-1)."""

    protocol: ClassVar[str] = "hashtogram"

    @classmethod
    def wire_fields(cls, params: Any) -> List[WireField]:
        """The group, the Hadamard row and one bit (only the bit when the server assigns
        group and row)."""
        from ..._base import bits_for

        return [WireField("groups", bits_for(params.R), dtype="uint32"),
                WireField("rows", bits_for(params.T), dtype="uint32"), WireField("bits", 1, (-1, 1), "int8")]


def _uniform(key: bytes, count: int, size: int, threads: int) -> np.ndarray:
    """``count`` uniform draws on ``[0, size)`` from ChaCha20: randomized response of 0
    that moves to each other symbol with probability ``1/size``."""
    zeros = np.zeros(count, dtype=np.uint64)
    if size == 1:
        return zeros
    return _core.randomized_response(key, zeros, size, probability_threshold((size - 1) / size), threads)


class HashtogramClient(ClientBase):
    """Hashtogram client. ``rng=None`` (default) draws keys from the OS; a seed is for
    simulation only. Groups and rows may be assigned by the server."""

    params: HashtogramParams

    def perturb(self, values: Any, groups: Any = None, rows: Any = None) -> HashtogramReports:
        """One report per value in ``[0, d)``; ``groups`` in ``[0, R)`` and ``rows`` in
        ``[0, T)`` are drawn uniformly unless given."""
        p = self.params
        x = as_values(values, p.d)
        n = x.size
        g = optional_index_array("groups", groups, n)
        r = optional_index_array("rows", rows, n)
        if g is None:
            g = _uniform(self._keys.key(), n, p.R, self.threads).astype(np.uint32)
        check_below(g, p.R, "groups", "in", ParameterError)
        if r is None:
            r = _uniform(self._keys.key(), n, p.T, self.threads).astype(np.uint32)
        check_below(r, p.T, "rows", "in", ParameterError)
        bucket, sign = p.hashes(g, x)
        truth = (sign * _parity_sign(r.astype(np.uint64) & bucket) < 0).astype(np.uint64)   # 1 encodes -1
        noisy = _core.randomized_response(self._keys.key(), truth, 2, binary_flip_threshold(p.epsilon), self.threads)
        return HashtogramReports(groups=g, rows=r, bits=(1 - 2 * noisy.astype(np.int64)).astype(np.int8))


class GroupedSignSketchServer(Aggregator):
    """Shared state of the Count-Sketch-style servers (Hashtogram, the original TreeHist):
    per group ``g`` a row ``z_g`` of ``T`` signed sums (each report adds its +-1 bit to one
    cell of its group's row), the report count and the group sizes. Subclasses set the
    number of groups (:meth:`_groups`) and answer queries from :meth:`decoded`."""

    params: Any  # the protocol's own HashtogramParams (T, and what _groups reads)

    def __init__(self, params: Any, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        groups = self._groups(params)
        self._st = _State(z=np.zeros(groups * params.T, dtype=np.int64), n=np.zeros(1, dtype=np.int64),
                          group_sizes=np.zeros(groups, dtype=np.int64))

    @classmethod
    def _groups(cls, params: Any) -> int:
        raise NotImplementedError

    @classmethod
    def _state_layout(cls, params: Any) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        groups = cls._groups(params)
        return {"z": ((groups * params.T,), "int64"), "n": ((1,), "int64"), "group_sizes": ((groups,), "int64")}

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    @property
    def group_sizes(self) -> np.ndarray:
        sizes: np.ndarray = self._st["group_sizes"].copy()
        return sizes

    # -- aggregation (the template is Aggregator.update / merge) -------------------------
    def _validate(self, reports: Any) -> None:
        p = self.params
        for name, arr, bound in (("groups", reports.groups, self._groups(p)), ("rows", reports.rows, p.T)):
            if arr.size and int(arr.max()) >= bound:
                bad = int(np.argmax(arr >= bound))
                raise ReportError(f"report {bad}: {name[:-1]} {int(arr[bad])} is out of range [0, {bound})")
        bits = reports.bits
        if bits.size and not np.all(np.abs(bits.astype(np.int16)) == 1):
            bad = int(np.argmax(np.abs(bits.astype(np.int16)) != 1))
            raise ReportError(f"report {bad}: bit must be -1 or +1, got {int(bits[bad])}")

    def _ingest(self, reports: Any) -> Delta:
        cells = reports.groups.astype(np.int64)
        cells *= self.params.T
        cells += reports.rows
        return (self._delta().add_counts("z", cells, reports.bits).add_counts("group_sizes", reports.groups)
                .add("n", [len(reports)]))

    def decoded(self) -> np.ndarray:
        """``H_T z_g`` for every group, ``(groups, T)`` int64 (exact; cached, read-only)."""
        st = self._st
        decoded: Optional[np.ndarray] = getattr(st, "decoded", None)
        if decoded is None:
            self._check_call(st["z"].nbytes, f"decoding the {st['z'].size} cells of {self.protocol!r}")
            decoded = st["z"].reshape(-1, self.params.T).copy()
            _core.fwht(decoded, self.threads)
            decoded.flags.writeable = False
            st.decoded = decoded  # type: ignore[attr-defined]  # a cache attribute (_State)
        return decoded

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        n, sizes, z = int(state["n"][0]), state["group_sizes"], state["z"]
        if n < 0 or np.any(sizes < 0) or _exact_sum(sizes) != n:
            raise FormatError("stored group sizes do not add up to the number of reports")
        # each report adds +-1 to one cell of its group's row
        rows = z.reshape(-1, self.params.T)
        if (np.any(np.abs(rows.astype(np.float64)).sum(axis=1) > sizes)
                or np.any((rows.sum(axis=1) - sizes) % 2)):
            raise FormatError("stored sums do not fit the stored group sizes")

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State(z=np.array(state["z"], dtype=np.int64), n=np.array(state["n"], dtype=np.int64),
                          group_sizes=np.array(state["group_sizes"], dtype=np.int64))


class HashtogramServer(GroupedSignSketchServer):
    """Hashtogram aggregator: ``z`` (``R x T`` int64), the report count and group sizes."""

    protocol: ClassVar[str] = "hashtogram"
    params_type: ClassVar[type] = HashtogramParams
    reports_type: ClassVar[type] = HashtogramReports
    params: HashtogramParams

    @classmethod
    def _groups(cls, params: HashtogramParams) -> int:
        return params.R

    def group_estimates(self, candidates: Any) -> np.ndarray:
        """``(R, len(candidates))`` fractions ``R c_eps g_r(x) (H z_r)[h_r(x)] / n``."""
        if self.n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        p = self.params
        xs = as_values(candidates, p.d, "candidates")
        groups = np.repeat(np.arange(p.R), xs.size)
        bucket, sign = p.hashes(groups, np.tile(xs, p.R))
        values: np.ndarray = self.decoded()[groups, bucket.astype(np.int64)] * sign
        return (p.R * _th.c_eps(p.epsilon) / self.n) * values.reshape(p.R, xs.size).astype(np.float64)

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Fractions (counts with ``counts=True``) for ``candidates`` (default all of
        ``[0, d)``, for ``d <= 2^24``): the median (or mean) of the group estimates."""
        if candidates is None:
            if self.params.d > 1 << 24:
                raise ParameterError("pass candidates: d > 2^24")
        self._check_query(candidates, 64 * self.params.R, self.params.d, f"a Hashtogram query (R={self.params.R})")
        if candidates is None:
            candidates = np.arange(self.params.d, dtype=np.uint64)
        per_group = self.group_estimates(candidates)
        est: np.ndarray = np.median(per_group, axis=0) if self.params.combine == "median" else per_group.mean(axis=0)
        return est * self.n if counts else est


def _example() -> Tuple[HashtogramParams, np.ndarray]:
    rng = np.random.default_rng(1)
    return HashtogramParams(epsilon=2.0, d=1000, R=5, T=32, hash_seed=3), np.minimum(rng.zipf(1.3, size=3000) - 1, 999)


def _simulations() -> Tuple[Algorithm]:
    from ...experiments import Algorithm

    return (Algorithm("hashtogram", "Hashtogram", "protocols.frequency.hashtogram",
                      lambda eps, data, gen: HashtogramParams.create(epsilon=eps, d=data.d, n=data.n, beta=0.05,
                                                           hash_seed=draw(gen)),
                      None, None, "Bassily et al.'s Count-Sketch oracle: R groups, T ~ sqrt(n), median (WW Table 1)"),)


def _variance(server: HashtogramServer, candidates: Any) -> Union[MedianOfGroups, PlugIn]:
    p = server.params
    if p.combine == "median":
        return median_of_groups(server, candidates, p.R, p.R, hashed=True, signed=True)
    # the mean: one +-c_eps/n term per user with mean its match (derived in median_of_groups)
    c2, n = _th.c_eps(p.epsilon) ** 2, server.n
    return PlugIn(lambda f: (c2 - np.asarray(f, dtype=np.float64)) / n, len(candidates),
                  f"{PLUG_IN} ((c_eps^2 - f)/n given the run's hashes)",
                  "f plus the signed collision mass of the run's hashes averaged over the R groups (zero on "
                  "average over the draw of the hashes, fixed once they are drawn)")


register_protocol(Protocol(
    "hashtogram", HashtogramParams, HashtogramReports, HashtogramServer, HashtogramClient,
    extremes=edges(d=(2, 2**64)), example=_example, variance=_variance,
    simulations=_simulations,
    audit=AuditHooks(lambda e, **kw: HashtogramParams(epsilon=e, d=64, R=3, T=8, hash_seed=1, **kw), count_sketch_plan,
                     binary_epsilon)))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "hashtogram", {"Params": HashtogramParams, "Client": HashtogramClient,
                                                      "Server": HashtogramServer, "Reports": HashtogramReports})
