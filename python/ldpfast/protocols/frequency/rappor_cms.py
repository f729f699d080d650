"""The Count-Mean Sketch with RAPPOR perturbation (sRP / aRP), [PAN] Appendix G.

[PAN] (M. Pan, CSF 2025) compares its CMS + randomized response with the same sketch
perturbed by symmetric or asymmetric RAPPOR and shows that RR is preferable: RAPPOR needs
``m -> inf`` (an ``m``-bit report) to reach its best error, which is never better than
OCMS+RR's. This module implements those variants so the comparison can be measured.

Protocol (one report per user, eps-LDP):

1. CMSRAPPORClient: draw a hash function ``h(x) = ((a0 + a1 x) in F) mod m`` uniformly from the
   finite-field family (a fresh one per user, as in OCMS+RR), one-hot encode ``h(x)`` in
   ``m`` bits and perturb every bit: ``variant="symmetric"`` flips each bit with
   probability ``1/(1+e^(eps/2))``; ``variant="asymmetric"`` reports a true 1 as 1 with
   probability 1/2 and a true 0 as 1 with probability ``1/(e^eps+1)``. The report is
   ``(a0, a1, bits)``. The two one-hot vectors of two inputs differ in two bits, so both
   variants are eps-LDP (the hash is independent of the input).
2. CMSRAPPORServer: for a candidate ``x``, ``S(x) = sum_i bits_i[h_i(x)]``. The decoded bits
   ``(b - q)/(p - q)`` average to ``f(x) + (1 - f(x)) cbar`` where ``cbar`` is the exact
   collision probability of the family ([PAN] Lemma 3.2), so
   ``fhat(x) = ((S/n - q)/(p - q) - cbar)/(1 - cbar)`` is unbiased (this is [PAN]'s ``m'``
   estimator with ``m' = 1/cbar``). Its variance is
   :func:`ldpfast.theory.cms_rappor_variance`.

The server streams every batch into per-candidate sums (integral, merged by addition);
``S(x)`` is summed by one OCMS hash per (report, candidate) that reads the report's bit at
``h_i(x)`` (``_core.ocms_lookup_list``; ``ocms_lookup_range`` walks the hash along a run of
candidates such as the default dictionary).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ... import _base, _core
from ..._delta import _State
from ..._memory import _length, check_allocation
from ..._validate import (check_below, check_epsilon, check_int, check_threads, check_values, rr_threshold,
                         uint64_column)
from ...errors import FormatError, IncompatibleError, ParameterError, ReportError
from ...kernels import field as _field
from .._local_hashing import finite_field_size
from ...theory import pan_baselines as _pt
from ...theory._types import Real, RealLike
from ..._base import AuditHooks, ComparisonRow
from ..._validate import rr_effective_epsilon
from ...audit import Plan, value_inputs
from ...kernels.field import core_field
from .._aliases import deprecated_names
from .._registration import edges, own_variance, simulated_own_l2, simulated_own_variance, tracked_candidates

if TYPE_CHECKING:
    from ...datasets import ValueData
    from ...experiments import Algorithm

__all__ = ["CMSRAPPORParams", "CMSRAPPORReports", "CMSRAPPORClient", "CMSRAPPORServer", "MAX_M",
           "MAX_DEFAULT_CANDIDATES"]

#: Largest hash range: every report carries ``m`` bits.
MAX_M = 1 << 16
#: Largest ``d`` for which a server counts the whole dictionary by default.
MAX_DEFAULT_CANDIDATES = 1 << 16
#: Bits sampled per step by the client.
_CHUNK_BITS = 1 << 22
#: Peak bytes per candidate of building a server: the converted candidates (8) beside a
#: sorted copy and its comparison (9), then beside the kept copy and the sums (16); the
#: process's peak memory grew by 17 bytes per candidate (2^24 int64 candidates; 9 for uint64,
#: whose conversion is free; the sums' zero pages count once written), 32 with margin.
_BUILD_BYTES = 32


@dataclasses.dataclass(frozen=True)
class CMSRAPPORParams(_base.Params):
    """CMS + RAPPOR parameters.

    Attributes:
        epsilon: privacy parameter in [2^-20, 22.18] for aRP (one binary RR at eps), in
            [2^-20, 44.36] for sRP (binary RR at eps/2 per bit; ``_validate.rr_threshold``).
        d: dictionary size; values are integers in ``[0, d)``.
        m: hash range = report length in bits, ``2 <= m <= 65536``.
        variant: ``"symmetric"`` (sRP) or ``"asymmetric"`` (aRP).
        field_size: an odd prime ``>= max(d+1, m+1)``; ``0`` (default) picks
            :func:`ldpfast.protocols.frequency.ocms.finite_field_size` (the paper's ``2^64 - 59``).
    """

    protocol: ClassVar[str] = "cms-rappor"

    epsilon: float
    d: int
    m: int
    variant: str = "symmetric"
    field_size: int = 0

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        d = check_int("d", self.d, 1)
        m = check_int("m", self.m, 2)
        if m > MAX_M:
            raise ParameterError(f"m must be in [2, {MAX_M}], got {m}")
        _pt._variant(self.variant)
        size = check_int("field_size", self.field_size, 0) or finite_field_size(d, m)
        if size >= 2**64 or size % 2 == 0 or not _field.is_prime(size):
            raise ParameterError(f"field_size must be an odd prime < 2^64, got {size}")
        if size < max(d + 1, m + 1):
            raise ParameterError(f"field_size must be >= max(d+1, m+1) = {max(d + 1, m + 1)}, got {size}")
        for name, value in (("epsilon", eps), ("d", d), ("m", m), ("field_size", size)):
            object.__setattr__(self, name, value)
        _ = self.zero_threshold  # the binary sampler's range: raises ParameterError naming epsilon

    @classmethod
    def optimal(cls, epsilon: float, d: int, variant: str = "symmetric", tau: float = 0.01) -> "CMSRAPPORParams":
        """``m`` = the smallest hash range within ``1 + tau`` of RAPPOR's ``m -> inf``
        error (:func:`ldpfast.theory.cms_rappor_optimal_m`)."""
        return cls(epsilon=epsilon, d=d, m=_pt.cms_rappor_optimal_m(epsilon, variant, tau), variant=variant)

    @property
    def bit_probabilities(self) -> Tuple[float, float]:
        """``(p, q)``: probability of a reported 1 for a true 1 / a true 0."""
        return _pt.rappor_bit_probabilities(self.epsilon, self.variant)

    @property
    def zero_threshold(self) -> int:
        """64-bit threshold of a reported 1 for a true 0 (:func:`ldpfast._validate.rr_threshold`
        of binary RR with budget ``eps/2`` (sRP) or ``eps`` (aRP): the effective epsilon is at
        most ``epsilon``)."""
        if self.variant == "symmetric":
            return rr_threshold(self.epsilon / 2, 2, name="epsilon/2 (sRP's per-bit budget)")
        return rr_threshold(self.epsilon, 2)

    @property
    def one_threshold(self) -> int:
        """64-bit threshold of a reported 1 for a true 1: ``2^64`` minus the flip threshold
        (sRP) or exactly ``2^63`` (aRP's 1/2)."""
        return 2**64 - self.zero_threshold if self.variant == "symmetric" else 2**63

    @property
    def collision_probability(self) -> float:
        """``cbar`` of the family ([PAN] Lemma 3.2)."""
        return float(_field.collision_probability(self.field_size, self.m))

    @property
    def communication_bits(self) -> int:
        """Bits per report: ``m + 2 ceil(log2 field_size)``."""
        return self.m + 2 * _field.ceil_log2(self.field_size)

    def variance(self, n: float = 1, f: RealLike = 0.0) -> Real:
        """The closed-form variance of an estimate (:func:`ldpfast.theory.cms_rappor_variance`)."""
        return _pt.cms_rappor_variance(self.epsilon, self.variant, self.collision_probability, n, f)


@dataclasses.dataclass(eq=False)
class CMSRAPPORReports(_base.Reports):
    """A batch of reports: the hash function ``(a0, a1)`` and the ``m`` perturbed bits
    (a ``(n, m)`` uint8 array of 0/1)."""

    protocol: ClassVar[str] = "cms-rappor"
    column_types: ClassVar = {"a0": ("uint64", 1), "a1": ("uint64", 1), "bits": ("uint8", 2)}

    a0: np.ndarray
    a1: np.ndarray
    bits: np.ndarray

    def __post_init__(self) -> None:
        self.a0 = uint64_column(self.a0, "a0", ReportError)
        self.a1 = uint64_column(self.a1, "a1", ReportError)
        bits = np.asarray(self.bits)
        if bits.ndim != 2 or bits.dtype.kind not in "biu":
            raise ReportError(f"bits must be a 2-D integer array (reports x m), got {bits.dtype} {bits.shape}")
        self.bits = np.ascontiguousarray(bits, dtype=np.uint8) if bits.dtype != np.uint8 else bits
        self._check_lengths()

    @classmethod
    def wire_fields(cls, params: Any) -> List[_base.WireField]:
        """The hash function ``(a0, a1)`` (``ceil(log2 field_size)`` bits each) and the ``m``
        perturbed bits."""
        from ..._base import WireField, bits_for

        return [WireField("a0", bits_for(params.field_size)), WireField("a1", bits_for(params.field_size)),
                WireField("bits", 1, dtype="uint8", shape=(params.m,))]

    def validate(self, params: CMSRAPPORParams) -> None:
        """Raise ReportError unless the batch fits ``params``."""
        self._check_lengths()
        check_below(self.a0, params.field_size, "a0", "field elements in", ReportError)
        check_below(self.a1, params.field_size, "a1", "field elements in", ReportError)
        if self.bits.ndim != 2 or self.bits.shape[1] != params.m:
            raise ReportError(f"bits must have m = {params.m} columns, got shape {self.bits.shape}")
        if self.bits.size and int(self.bits.max()) > 1:
            row = int(np.argmax((self.bits > 1).any(axis=1)))
            raise ReportError(f"bits must be 0 or 1, got {int(self.bits[row].max())} in report {row}")


def _bernoulli(key: bytes, count: int, threshold: int, threads: int) -> np.ndarray:
    """``count`` independent Bernoulli(threshold / 2^64) draws (uint8) from ChaCha20 keyed by
    ``key``: binary randomized response of 0 with that flip threshold."""
    zeros = np.zeros(count, dtype=np.uint64)
    return _core.randomized_response(key, zeros, 2, min(threshold, 2**64 - 1), threads).astype(np.uint8)


class CMSRAPPORClient(_base.ClientBase):
    """CMS + RAPPOR client. ``rng=None`` (default) draws keys from the OS; a seed is for
    simulation only (anyone who knows it can undo the perturbation)."""

    params: CMSRAPPORParams

    def perturb(self, values: Any) -> CMSRAPPORReports:
        """One report per value (integers in ``[0, d)``)."""
        p = self.params
        x = check_values(values, p.d)
        # OCMS's client with flip probability 0 draws (a0, a1) uniformly and returns h(x).
        y, a0, a1 = _core.ocms_perturb(_field.core_field(p.field_size), self._keys.key(), x, p.m, 0, self.threads)
        bits = np.empty((x.size, p.m), dtype=np.uint8)
        chunk = max(1, _CHUNK_BITS // p.m)  # bounds the 16 bytes per bit the sampler uses
        for start in range(0, x.size, chunk):
            stop = min(x.size, start + chunk)
            bits[start:stop] = _bernoulli(self._keys.key(), (stop - start) * p.m, p.zero_threshold,
                                          self.threads).reshape(stop - start, p.m)
        # a true 1 is reported as 1 unless it flips (threshold 2^64 - one_threshold)
        flips = _bernoulli(self._keys.key(), x.size, 2**64 - p.one_threshold, self.threads)
        bits[np.arange(x.size), y.astype(np.intp)] = 1 - flips
        return CMSRAPPORReports(a0=a0, a1=a1, bits=bits)


class CMSRAPPORServer(_base.Aggregator):
    """CMS + RAPPOR aggregator: per-candidate sums ``S(x)`` and the report count.

    Args:
        params: the protocol parameters.
        candidates: distinct values in ``[0, d)`` to count (part of the state: only servers
            with equal candidates merge); ``None`` = the whole dictionary (``d <= 65536``).
        threads: threads for counting (0 = default); results do not depend on it.
    """

    protocol: ClassVar[str] = "cms-rappor"
    params_type: ClassVar[type] = CMSRAPPORParams
    reports_type: ClassVar[type] = CMSRAPPORReports
    params: CMSRAPPORParams

    def __init__(self, params: CMSRAPPORParams, candidates: Any = None, threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        if candidates is None:
            if params.d > MAX_DEFAULT_CANDIDATES:
                raise ParameterError(f"d = {params.d} > {MAX_DEFAULT_CANDIDATES}: pass the candidates to count")
        count = params.d if candidates is None else _length(candidates)
        check_allocation(_BUILD_BYTES * count, f"a 'cms-rappor' server counting {count} candidates")
        if candidates is None:
            xs = np.arange(params.d, dtype=np.uint64)
        else:
            xs = self._checked_candidates(candidates)
        self._set_candidates(xs)
        self._st = _State(sums=np.zeros(xs.size, dtype=np.uint64), n=np.zeros(1, dtype=np.uint64))

    def _set_candidates(self, xs: np.ndarray) -> None:
        """Keep ``xs`` (read-only) and, once, whether it is the run ``x0, x0 + 1, ...``
        (``_run_start``: ``x0``, else None; the default dictionary is one), which batches
        then sum with ``ocms_lookup_range``. Distinct ascending values spanning
        ``size - 1`` are a run."""
        xs.flags.writeable = False
        self._candidates = xs
        run = xs.size > 0 and int(xs[-1]) - int(xs[0]) == xs.size - 1 and bool(np.all(xs[1:] > xs[:-1]))
        self._run_start: Optional[int] = int(xs[0]) if run else None

    @property
    def _sums(self) -> np.ndarray:
        sums: np.ndarray = self._st["sums"]
        return sums

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    _n = n

    @property
    def candidates(self) -> np.ndarray:
        return self._candidates.copy()

    def _checked_candidates(self, candidates: Any) -> np.ndarray:
        xs = check_values(candidates, self.params.d, "candidates", "values in")
        ordered = np.sort(xs)   # in place on a copy; np.unique's hash table takes 51 bytes per value
        if np.any(ordered[1:] == ordered[:-1]):
            raise ParameterError("candidates must be distinct")
        del ordered
        return xs.copy()

    def _state_nbytes(self) -> int:
        return super()._state_nbytes() + int(self._candidates.nbytes)   # the candidates are state, kept beside _st

    # -- aggregation (the template is Aggregator.update / merge) -------------------------
    def _validate(self, reports: CMSRAPPORReports) -> None:
        reports.validate(self.params)

    def _ingest(self, reports: CMSRAPPORReports) -> _base.Delta:
        # one sum per candidate; the kernel reads the batch's columns in place (the
        # template's copy, C-contiguous)
        self._check_call(8 * self._sums.size,
                         f"matching a batch of {len(reports)} reports against {self._sums.size} candidates")
        sums = np.zeros_like(self._sums)
        if len(reports) and self._candidates.size:
            # S(x) = sum_i bits_i[h_i(x)]: one hash per (report, candidate); a run of
            # candidates walks the hash along x instead (no product per pair)
            field, start = _field.core_field(self.params.field_size), self._run_start
            if start is None:
                _core.ocms_lookup_list(field, reports.bits, reports.a0, reports.a1, self.params.m, self._candidates,
                                       sums, self.threads)
            else:
                _core.ocms_lookup_range(field, reports.bits, reports.a0, reports.a1, self.params.m, start, sums,
                                        self.threads)
        return self._delta().add_nonzero("sums", sums).add("n", [len(reports)])

    def merge(self, other: "CMSRAPPORServer") -> "CMSRAPPORServer":
        """Add ``other``'s sums (exact; ``other`` is unchanged). Parameters and candidates
        must be equal."""
        if type(other) is type(self) and other.params == self.params and other is not self:
            self._check_call(self._candidates.size, f"comparing the {self._candidates.size} candidates of two servers")
            if not np.array_equal(self._candidates, other._candidates):
                raise IncompatibleError("cannot merge servers that count different candidates")
        return super().merge(other)

    def estimate(self, candidates: Any = None, counts: bool = False, *, clip: bool = False) -> np.ndarray:
        """Unbiased frequency estimates for ``candidates`` (default: the counted ones);
        ``counts=True`` gives ``n fhat``; ``clip`` clips the fractions to ``[0, 1]``
        (post-processing, biased).

        Raises:
            ReportError: no reports; ParameterError: a candidate that is not counted.
        """
        # per queried candidate its uint64 copy, position, match, sum and three float arrays;
        # a list of candidates also sorts the counted ones (an order and a sorted copy)
        self._check_query(candidates, 64, self._sums.size, "a CMS-RAPPOR query",
                          extra=0 if candidates is None else 16 * self._sums.size)
        if self._n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        sums = self._sums if candidates is None else self._sums[self._positions(candidates)]
        p, q = self.params.bit_probabilities
        c = self.params.collision_probability
        decoded = (sums.astype(np.float64) / self._n - q) / (p - q)
        fhat: np.ndarray = (decoded - c) / (1 - c)
        fhat = np.clip(fhat, 0.0, 1.0) if clip else fhat
        return fhat * self._n if counts else fhat

    def _positions(self, candidates: Any) -> np.ndarray:
        xs = uint64_column(candidates, "candidates", ParameterError)
        order = np.argsort(self._candidates)
        ordered = self._candidates[order]
        pos = np.minimum(np.searchsorted(ordered, xs), max(ordered.size - 1, 0))
        if ordered.size == 0 or not np.array_equal(ordered[pos], xs):
            raise ParameterError("candidates must be among the values this server counts")
        positions: np.ndarray = order[pos]
        return positions

    def _state(self) -> Dict[str, np.ndarray]:
        return {"candidates": self._candidates, "sums": self._sums, "n": self._st["n"]}

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        if set(state) != {"candidates", "sums", "n"}:
            raise FormatError(f"stored state has unexpected arrays {sorted(state)}")
        for name in state:
            if state[name].dtype != np.uint64 or state[name].ndim != 1:
                raise FormatError(f"stored {name} must be a 1-D uint64 array")
        if state["n"].size != 1 or state["sums"].size != state["candidates"].size:
            raise FormatError("stored sums and candidates have inconsistent shapes")
        self._check_call(_BUILD_BYTES * state["candidates"].size,
                         f"loading a 'cms-rappor' server counting {state['candidates'].size} candidates")
        try:
            self._checked_candidates(state["candidates"])
        except ParameterError as exc:
            raise FormatError(f"stored candidates are invalid: {exc}") from None
        n = int(state["n"][0])
        if n >= 2**63:
            raise FormatError(f"stored report count {n} is out of range")
        # a candidate's hash hits at most one set bit of each report
        if state["sums"].size and int(state["sums"].max()) > n:
            raise FormatError("stored sums exceed the number of reports")

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._set_candidates(np.array(state["candidates"], dtype=np.uint64))
        self._st = _State(sums=np.array(state["sums"], dtype=np.uint64),
                                n=np.array(state["n"], dtype=np.uint64).reshape(1))

    def _repr_extra(self) -> str:
        return f"candidates={self._candidates.size}"


def _example() -> Tuple[CMSRAPPORParams, np.ndarray]:
    params = CMSRAPPORParams(epsilon=2.0, d=300, m=24, variant="asymmetric", field_size=_field.next_prime(301))
    rng = np.random.default_rng(1)
    return params, np.minimum(rng.zipf(1.3, size=3000) - 1, 299)


def _effective_epsilon(params: CMSRAPPORParams) -> float:
    # one-hot vectors of two inputs differ in two bits: sRP flips both at eps/2; aRP
    # keeps a 1 with probability exactly 1/2 and flips a 0 at eps
    once = rr_effective_epsilon(params.zero_threshold, 2)
    return 2 * once if params.variant == "symmetric" else once


def _audit_plan(params: CMSRAPPORParams) -> Plan:
    field = core_field(params.field_size)

    def events(reports: CMSRAPPORReports) -> Tuple[np.ndarray, np.ndarray]:
        n = len(reports.a0)
        h0, h1 = (_core.ocms_hash(field, reports.a0, reports.a1, np.full(n, v, dtype=np.uint64),
                                  params.m).astype(np.int64) for v in (0, 1))
        rows = np.arange(n)
        b0, b1 = reports.bits[rows, h0] == 1, reports.bits[rows, h1] == 1
        apart = h0 != h1
        return apart & b0 & ~b1, apart & b1 & ~b0
    return Plan(value_inputs(0, 1), events, ("bit h(x0) set, bit h(x1) clear", "bit h(x1) set, bit h(x0) clear"))


def _compare(epsilon: float, d: int, n: float, f_star: Any, **_: Any) -> List[ComparisonRow]:
    """One row per variant; none at an epsilon where no ``m <= 65536`` comes within 1% of the
    variant's ``m -> inf`` error (large epsilon: ``CMSRAPPORParams.optimal`` refuses), so the
    planners leave CMS+RAPPOR out there instead of failing."""
    rows = []
    for variant, name in (("symmetric", "CMS+sRP"), ("asymmetric", "CMS+aRP")):
        try:
            rows.append(_compare_row(epsilon, d, n, variant, name))
        except ParameterError:
            pass
    return rows


def _compare_row(epsilon: float, d: int, n: float, variant: str, name: str) -> ComparisonRow:
    from ...theory.ocms import affine_l2

    rp = CMSRAPPORParams.optimal(epsilon=epsilon, d=d, variant=variant)

    def variance(f: RealLike) -> Real:
        return rp.variance(n, f)
    return ComparisonRow(name, rp.m, rp.communication_bits, variance, affine_l2(variance, d),
                         "m-bit RAPPOR report, m within 1% of its m -> inf error (PAN App. G)",
                         server_ops=lambda n_, q: n_ * q, state_bytes=lambda n_, q: 8.0 * q, build=lambda: rp)


def _simulations() -> Tuple[Algorithm, ...]:
    from ...experiments import Algorithm

    def make(variant: str) -> Callable[[float, ValueData, np.random.Generator], CMSRAPPORParams]:
        return lambda eps, data, gen: CMSRAPPORParams.optimal(epsilon=eps, d=data.d, variant=variant, tau=0.1)
    return tuple(Algorithm(name, label, "protocols.frequency.rappor_cms", make(variant), simulated_own_variance,
                           simulated_own_l2, f"CMS with {variant} RAPPOR, m within 10% of its m -> inf error "
                           "(PAN App. G)", server_candidates=True)
                 for name, label, variant in (("cms-srp", "CMS+sRP", "symmetric"),
                                              ("cms-arp", "CMS+aRP", "asymmetric")))


_base.register_protocol(_base.Protocol(
    "cms-rappor", CMSRAPPORParams, CMSRAPPORReports, CMSRAPPORServer, CMSRAPPORClient,
    example=_example, variance=own_variance,
    extremes=edges(d=(1, 2**64)),
    default_candidates=tracked_candidates, compare=_compare, simulations=_simulations,
    audit=AuditHooks(lambda e, **kw: CMSRAPPORParams(epsilon=e, d=16, m=4, **kw), _audit_plan, _effective_epsilon)))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "cms-rappor", {"Params": CMSRAPPORParams, "Client": CMSRAPPORClient,
                                                      "Server": CMSRAPPORServer, "Reports": CMSRAPPORReports})
