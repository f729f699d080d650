"""Baseline variants of [PAN]'s Hadamard comparison algorithms, as their original
references lay them out (the defaults in :mod:`ldpfast.protocols.frequency.hadamard` follow [PAN]'s reference
code instead).

* ``cmshe-apple``: Apple's Hadamard Count-Mean Sketch (HCMS) as in the pure-LDP library's
  ``CMSClient``/``CMSServer``: the Hadamard matrix has size ``m`` (a power of two) and the
  user's hashed value ``h_j(x)`` is its column, column 0 included. [PAN]'s code uses size
  ``2^ceil(log2(m+1))`` and column ``h_j(x) + 1``, one more bit for the row. Apple's
  estimator ``m/(m-1) ((1/k) sum_j M[j, h_j(x)] - n/m)`` with ``M = k c_eps H z`` is the
  CMS estimator of :class:`ldpfast.protocols.frequency.hadamard.CMSHEServer` written in counts, so both have
  the variance :func:`ldpfast.theory.cmshe_variance` (the decoded bit has square
  ``c_eps^2`` whatever the column).
* ``rhr-original``: the Recursive Hadamard Response of Chen, Kairouz and Ozgur (2020) as in
  their code (``hadamard_quantize.py``): ``D = 2^ceil(log2 d)``,
  ``k = min(comm, ceil(eps log2 e), ceil(log2 d) + 1)``, ``B = D / 2^(k-1)``. A user with
  Hadamard row ``j in [0, B)`` sends, by ``2^k``-ary randomized response, the location
  ``x // B`` and the sign ``H_B[j, x mod B]`` (the entry ``H_D[j, x]``, as ``j < B``). The
  estimate is ``fhat(x) = (c_k/n) sum_i H_B[j_i, x mod B] (1[z_i = 2 (x//B)] -
  1[z_i = 2 (x//B) + 1])`` with ``c_k = (e + 2^k - 1)/(e - 1)``, computed for the whole
  dictionary with one FWHT of length ``B`` per location. This is the mirror image of
  [PAN]'s RHR, whose location is ``x mod base``.

  The original assigns rows deterministically, ``j = user index mod B``; then an adversary
  who knows the assignment can bias any estimate arbitrarily ([PAN] Thm 5.1; the
  estimate is unbiased only for values drawn i.i.d.). Here the client draws ``j``
  uniformly unless rows are passed (:meth:`RHROriginalClient.deterministic_rows` gives the
  original's), which makes the estimate unbiased for every data set, with variance
  :func:`ldpfast.theory.rhr_original_variance`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Mapping, Tuple

import numpy as np

from ... import _core
from . import hadamard as _h
from .._hadamard_layout import (Layout, _parity_sign, group_sum, hash_coefficients, make_layout, pow2_at_least,
                               prime_field)
from ...theory.hadamard import c_eps
from ..._aggregator import _exact_sum
from ..._base import Aggregator, ClientBase, Delta, Protocol, WireField, register_protocol
from ..._base import Params as _ParamsBase, Reports as _ReportsBase
from ..._delta import _State
from ..._registry import VarianceFn
from ..._validate import (as_values, check_below, check_epsilon, check_int, check_threads, check_values,
                         probability_threshold, rr_threshold, uint64_column)
from ...errors import FormatError, ParameterError, ReportError
from ...theory import pan_baselines as _pt
from ...theory._types import Real, RealLike
from ..._base import AuditHooks
from ...audit import Plan, support_events, value_inputs
from ...estimates import PLUG_IN
from .._registration import (edges, binary_epsilon, cmshe_variance, draw, layout_plan, parity_sign, rr_epsilon,
                            simulated_cmshe_variance)

if TYPE_CHECKING:
    from ...datasets import ValueData
    from ...experiments import Algorithm

__all__ = ["AppleCMSHEParams", "AppleCMSHEReports", "AppleCMSHEClient", "AppleCMSHEServer",
           "RHROriginalParams", "RHROriginalReports", "RHROriginalClient", "RHROriginalServer"]


# == Apple's HCMS layout ================================================================
@dataclasses.dataclass(frozen=True)
class AppleCMSHEParams(_h.CMSHEParams):
    """Apple's HCMS: as :class:`ldpfast.protocols.frequency.hadamard.CMSHEParams` (``k`` functions drawn once
    from ``hash_seed``, each user picks one uniformly or is assigned one), but ``m`` must be
    a power of two, the Hadamard size is ``m`` and the column is ``h_j(x)``."""

    protocol: ClassVar[str] = "cmshe-apple"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.m & (self.m - 1):
            raise ParameterError(f"m must be a power of two for Apple's HCMS, got {self.m}")

    @property
    def hadamard_size(self) -> int:
        return self.m

    def _build_layout(self) -> Layout:
        coef = hash_coefficients(self.hash_seed, self.k, _h.PRIME)
        groups = [{"a0": int(coef[j, 0]), "a1": int(coef[j, 1]), "hash_modulus": self.m, "col_offset": 0,
                   "rows": self.m} for j in range(self.k)]
        return make_layout(groups, field=prime_field())


@dataclasses.dataclass
class AppleCMSHEReports(_h.CMSHEReports):
    """Apple HCMS reports: hash index ``groups``, row ``rows`` and bit ``bits``."""

    protocol: ClassVar[str] = "cmshe-apple"

    @classmethod
    def wire_fields(cls, params: Any) -> List[WireField]:
        """The hash index, the row (``log2 m`` bits, one fewer than [PAN]'s layout) and one bit."""
        from ..._base import bits_for

        return [WireField("groups", bits_for(params.k), dtype="uint32"),
                WireField("rows", bits_for(params.m), dtype="uint32"), WireField("bits", 1, (-1, 1), "int8")]


class AppleCMSHEClient(_h.CMSHEClient):
    """Apple HCMS client (see :class:`ldpfast.protocols.frequency.hadamard.CMSHEClient` for ``rng`` and the
    optional server-assigned ``groups``/``rows``)."""

    params_type: ClassVar[type] = AppleCMSHEParams
    reports_type: ClassVar[type] = AppleCMSHEReports
    params: AppleCMSHEParams

    def perturb(self, values: Any, groups: Any = None, rows: Any = None) -> AppleCMSHEReports:
        x = as_values(values, self.params.d)
        g, r, b = self._perturb_groups(x, groups, rows)
        return AppleCMSHEReports(groups=g, rows=r, bits=b)


class AppleCMSHEServer(_h.CMSHEServer):
    """Apple HCMS server: ``fhat(x) = m/(n(m-1)) sum_j c_eps (H z_j)[h_j(x)] - 1/(m-1)``."""

    protocol = "cmshe-apple"
    params_type: ClassVar[type] = AppleCMSHEParams
    reports_type: ClassVar[type] = AppleCMSHEReports
    params: AppleCMSHEParams

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Estimated fractions (counts with ``counts=True``) of ``candidates`` (``None``:
        all of ``[0, d)``), float64."""
        self._require_reports()
        p = self.params
        self._check_query(candidates, 32, p.d, "a CMS+HE (Apple) query", extra=self._decode_nbytes())
        xs = np.arange(p.d, dtype=np.uint64) if candidates is None else as_values(candidates, p.d, "candidates")
        total = group_sum(p.layout(), self.decoded(), xs, 0, self.threads) * c_eps(p.epsilon)
        est = p.m / ((p.m - 1.0) * self.n) * total - 1.0 / (p.m - 1.0)
        return est * self.n if counts else est


# == the original RHR layout ==============================================================
#: Largest number of server counters ``B 2^k`` (``B 2^k = 2 D``).
MAX_COUNTERS = 1 << 31


@dataclasses.dataclass(frozen=True)
class RHROriginalParams(_ParamsBase):
    """The original RHR layout (see the module docstring).

    Attributes:
        epsilon: privacy parameter, in [2^-20, log(2^k - 1) + 22.18] (``2^k``-ary randomized
            response: ``_validate.rr_threshold``).
        d: dictionary size, ``2 <= d <= 2^30``.
        comm: bits per report besides the row (the original's ``comm``), ``>= 1``; ``0``
            (default) means no limit, i.e. ``k = min(ceil(eps log2 e), ceil(log2 d) + 1)``.
    """

    protocol: ClassVar[str] = "rhr-original"

    epsilon: float
    d: int
    comm: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "d", check_int("d", self.d, 2, 2**30))
        object.__setattr__(self, "comm", check_int("comm", self.comm, 0, 64))
        rr_threshold(self.epsilon, self.symbols)  # the sampler's range for 2^k symbols

    @property
    def D(self) -> int:
        """``2^ceil(log2 d)``."""
        return pow2_at_least(self.d)

    @property
    def k(self) -> int:
        """Bits of the randomized-response symbol: ``min(comm, ceil(eps log2 e), ceil(log2 d)+1)``."""
        limits = [math.ceil(self.epsilon * math.log2(math.e)), self.D.bit_length()]
        if self.comm:
            limits.append(self.comm)
        return max(1, min(limits))

    @property
    def B(self) -> int:
        """Number of Hadamard rows (user groups): ``D / 2^(k-1)``."""
        return self.D >> (self.k - 1)

    @property
    def symbols(self) -> int:
        """``2^k`` randomized-response symbols: location ``x // B`` and one sign bit."""
        return 1 << self.k

    @property
    def flip_probability(self) -> float:
        """``(2^k - 1)/(e + 2^k - 1)``, computed directly."""
        return (self.symbols - 1) / (math.expm1(self.epsilon) + self.symbols)

    @property
    def flip_threshold(self) -> int:
        """Its 64-bit threshold (:func:`ldpfast._validate.rr_threshold`: effective epsilon <= epsilon)."""
        return rr_threshold(self.epsilon, self.symbols)

    @property
    def communication_bits(self) -> int:
        """``k`` bits of symbol plus ``log2 B`` bits of row (0 when the row is implied by
        the user's index, as in the original)."""
        return self.k + (self.B - 1).bit_length()

    def variance(self, n: float = 1, f: RealLike = 0.0, location_fraction: RealLike = 1.0) -> Real:
        """Closed-form variance (:func:`ldpfast.theory.rhr_original_variance`);
        ``location_fraction``: share of users whose value has the location ``x // B``."""
        return _pt.rhr_original_variance(self.epsilon, self.k, n, f, location_fraction)


@dataclasses.dataclass(eq=False)
class RHROriginalReports(_ReportsBase):
    """A batch of reports: the Hadamard row ``rows`` in ``[0, B)`` and the symbol ``z`` in
    ``[0, 2^k)`` (both uint64)."""

    protocol: ClassVar[str] = "rhr-original"
    column_types: ClassVar = {"rows": ("uint64", 1), "z": ("uint64", 1)}

    rows: np.ndarray
    z: np.ndarray

    def __post_init__(self) -> None:
        self.rows = uint64_column(self.rows, "rows", ReportError)
        self.z = uint64_column(self.z, "z", ReportError)
        self._check_lengths()

    @classmethod
    def wire_fields(cls, params: Any) -> List[WireField]:
        """The row (``log2 B`` bits; implied by the user's index in the original) and the
        ``k``-bit symbol."""
        from ..._base import bits_for

        return [WireField("rows", bits_for(params.B)), WireField("z", params.k)]

    def validate(self, params: RHROriginalParams) -> None:
        self._check_lengths()
        check_below(self.rows, params.B, "rows", "Hadamard rows in", ReportError)
        check_below(self.z, params.symbols, "z", "symbols in", ReportError)


def _parity(values: np.ndarray) -> np.ndarray:
    """popcount(v) mod 2 (uint64) for a uint64 array."""
    return ((1 - _parity_sign(values)) // 2).astype(np.uint64)


class RHROriginalClient(ClientBase):
    """Original-RHR client. ``rng=None`` (default) draws keys from the OS; a seed is for
    simulation only."""

    @staticmethod
    def deterministic_rows(params: RHROriginalParams, n: int, start: int = 0) -> np.ndarray:
        """The original's assignment ``j = user index mod B`` for users ``start .. start+n-1``.
        Not safe against adversarial data ([PAN] Thm 5.1): prefer the default random rows."""
        n = check_int("n", n, 0)
        return (np.arange(check_int("start", start, 0), start + n, dtype=np.uint64) % np.uint64(params.B))

    params: RHROriginalParams

    def perturb(self, values: Any, rows: Any = None) -> RHROriginalReports:
        """One report per value (integers in ``[0, d)``). ``rows``: the users' Hadamard rows
        in ``[0, B)``; ``None`` draws them uniformly."""
        p = self.params
        x = check_values(values, p.d)
        if rows is None:
            # Uniform on [0, B): randomized response of 0 that moves to each other row
            # with probability 1/B.
            zeros = np.zeros(x.size, dtype=np.uint64)
            j = _core.randomized_response(self._keys.key(), zeros, p.B, probability_threshold((p.B - 1) / p.B),
                                          self.threads) if p.B > 1 else zeros
        else:
            j = uint64_column(rows, "rows", ParameterError)
            if j.size != x.size:
                raise ParameterError(f"rows must have one entry per value ({x.size}), got {j.size}")
            check_below(j, p.B, "rows", "Hadamard rows in", ParameterError)
        block = np.uint64(p.B)
        y = np.uint64(2) * (x // block) + _parity(j & (x % block))
        z = _core.randomized_response(self._keys.key(), y, p.symbols, p.flip_threshold, self.threads)
        return RHROriginalReports(rows=j.copy(), z=z)


class RHROriginalServer(Aggregator):
    """Original-RHR aggregator: counts of (row, symbol) pairs (``B x 2^k`` uint64)."""

    protocol: ClassVar[str] = "rhr-original"
    params_type: ClassVar[type] = RHROriginalParams
    reports_type: ClassVar[type] = RHROriginalReports
    params: RHROriginalParams

    def __init__(self, params: RHROriginalParams, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        self._st = _State(counts=np.zeros(params.B * params.symbols, dtype=np.uint64), n=np.zeros(1, dtype=np.uint64))

    @classmethod
    def _state_layout(cls, params: Any) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        if params.B * params.symbols > MAX_COUNTERS:
            raise ParameterError(f"B * 2^k = {params.B * params.symbols} counters exceed {MAX_COUNTERS}")
        return {"counts": ((params.B * params.symbols,), "uint64"), "n": ((1,), "uint64")}

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    # -- aggregation (the template is Aggregator.update / merge) -------------------------
    def _validate(self, reports: RHROriginalReports) -> None:
        reports.validate(self.params)

    def _ingest(self, reports: RHROriginalReports) -> Delta:
        cells = np.multiply(reports.rows, self.params.symbols, dtype=np.uint64) + reports.z
        return self._delta().add_counts("counts", cells).add("n", [len(reports)])

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Unbiased fractions (with random rows; counts with ``counts=True``) for
        ``candidates`` (default all of ``[0, d)``)."""
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        p = self.params
        self._check_call(24 * p.B * p.symbols, f"an original-RHR query (B * 2^k = {p.B * p.symbols} counters)")
        table = self._st["counts"].reshape(p.B, p.symbols).astype(np.int64)
        diff = np.ascontiguousarray((table[:, 0::2] - table[:, 1::2]).T)  # (locations, B)
        if p.B > 1:
            _core.fwht(diff, self.threads)                  # sum_j H_B[x mod B, j] diff[loc, j]
        scale = (math.expm1(p.epsilon) + p.symbols) / math.expm1(p.epsilon) / n
        full = diff.reshape(-1)[:p.d] * (scale * n if counts else scale)  # index loc * B + x mod B = x
        if candidates is None:
            return full
        xs = check_values(candidates, p.d, "candidates", "values in")
        selected: np.ndarray = full[xs]
        return selected

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        n = int(state["n"][0])
        if n >= 2**63:
            raise FormatError(f"stored report count {n} is out of range")
        # each report adds one to one (row, symbol) counter
        if _exact_sum(state["counts"]) != n:
            raise FormatError("stored counts do not sum to the number of reports")

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State(counts=np.array(state["counts"], dtype=np.uint64),
                          n=np.array(state["n"], dtype=np.uint64).reshape(1))


def _apple_example() -> Tuple[AppleCMSHEParams, np.ndarray]:
    rng = np.random.default_rng(1)
    return AppleCMSHEParams(epsilon=2.0, d=300, k=8, m=32, hash_seed=7), np.minimum(rng.zipf(1.3, size=3000) - 1, 299)


def _rhr_example() -> Tuple[RHROriginalParams, np.ndarray]:
    rng = np.random.default_rng(1)
    return RHROriginalParams(epsilon=2.0, d=300), np.minimum(rng.zipf(1.3, size=3000) - 1, 299)


def _rhr_original_variance(server: RHROriginalServer, candidates: Any) -> Tuple[VarianceFn, str]:
    p, n = server.params, server.n
    if p.d > 2**24:
        return ((lambda f: p.variance(n, f, location_fraction=1.0)),
                f"{PLUG_IN} (theory.rhr_original_variance with every user in the candidate's location block: "
                "an upper bound)")
    # the raw estimates of a location block sum to an unbiased estimate of its share, which
    # holds the candidate's own share: plugged in once, so the variance stays affine in f
    estimates = server.estimate()
    per_block = np.bincount(np.arange(p.d) // p.B, weights=estimates)
    rows = np.asarray(candidates).astype(np.int64)
    share = np.clip(np.maximum(per_block[rows // p.B], estimates[rows]), 0.0, 1.0)
    return ((lambda f: p.variance(n, f, location_fraction=share)),
            f"{PLUG_IN} (theory.rhr_original_variance; the location block's share is plugged in from the estimates)")


def _rhr_original_plan(params: RHROriginalParams) -> Plan:
    block = np.uint64(params.B)

    def support(reports: RHROriginalReports, w: Any) -> np.ndarray:
        x = np.uint64(w[0])
        sign = (1 - parity_sign(reports.rows & (x % block))) // 2
        supports: np.ndarray = reports.z.astype(np.int64) == 2 * int(x // block) + sign.astype(np.int64)
        return supports
    return Plan(value_inputs(0, 1), support_events(support, [0], [1]), ("z = y(x0) != y(x1)", "z = y(x1) != y(x0)"))


def _apple_simulations() -> Tuple[Algorithm]:
    from ...experiments import Algorithm

    return (Algorithm("cms-he-apple", "CMS+HE (Apple layout)", "protocols.frequency.hadamard_variants",
                      lambda eps, data, gen: AppleCMSHEParams(epsilon=eps, d=data.d, hash_seed=draw(gen)),
                      simulated_cmshe_variance, None,
                      "Apple's HCMS: Hadamard size m = 1024, column h_j(x) (pure-LDP layout)"),)


def _rhr_original_simulations() -> Tuple[Algorithm]:
    from ...experiments import Algorithm

    def variance(params: Any, data: ValueData, f: np.ndarray) -> np.ndarray:
        locations = np.bincount(data.values // params.B, minlength=params.D // params.B) / data.n
        variance: np.ndarray = params.variance(data.n, f, location_fraction=locations[data.candidates // params.B])
        return variance
    return (Algorithm("rhr-original", "RHR (original)", "protocols.frequency.hadamard_variants",
                      lambda eps, data, gen: RHROriginalParams(epsilon=eps, d=data.d), variance, None,
                      "Recursive Hadamard Response, Chen et al.'s layout (location x // B), random rows"),)


register_protocol(Protocol(
    "cmshe-apple", AppleCMSHEParams, AppleCMSHEReports, AppleCMSHEServer, AppleCMSHEClient, example=_apple_example,
    extremes=edges(d=(2, 2**64)),
    variance=cmshe_variance, simulations=_apple_simulations,
    audit=AuditHooks(lambda e, **kw: AppleCMSHEParams(e, 16, k=2, m=4, hash_seed=1, **kw), layout_plan,
                     binary_epsilon)))
register_protocol(Protocol(
    "rhr-original", RHROriginalParams, RHROriginalReports, RHROriginalServer, RHROriginalClient,
    example=_rhr_example, variance=_rhr_original_variance, simulations=_rhr_original_simulations,
    extremes=edges(d=(2, 2**20)),
    audit=AuditHooks(lambda e, **kw: RHROriginalParams(epsilon=e, d=16, **kw), _rhr_original_plan,
                     rr_epsilon("symbols"))))
