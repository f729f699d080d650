"""SVIM frequent items (Wang, Li, Jha 2018; R3 ``find_singleton``), the set baseline [PS]
(section 4) compares PrivSketch with on the top-k: three phases over disjoint user groups
(:func:`svim_groups`: G1/G2/G3 = 40%/10%/50%), each with its own
Params/Client/Reports/Server; the parameters of phases 2 and 3 carry what the previous
phase's server decided, so clients and server agree on it:

- ``svim-items`` (:class:`SVIMItemParams`): one sampled item per user (the dummy ``d``
  for an empty set, so every user reports), OLH over ``[0, d]``;
  :meth:`SVIMItemServer.length_params` keeps the top 2k as candidates C.
- ``svim-lengths`` (:class:`SVIMLengthParams`, carries C): ``|S ∩ C|`` with OLH;
  :meth:`SVIMLengthServer.padded_params` picks the length L.
- ``svim-padded`` (:class:`SVIMPaddedParams`, carries C and L): pad ``S ∩ C`` with
  distinct dummies to L and sample one slot, GRR with the amplified eps' or OLH(eps);
  :meth:`SVIMPaddedServer.top` returns the top k of C. ``reference=True`` reproduces R3's
  single dummy, which is only ``log(L(e^eps-1)+1)``-LDP (warns).

Each phase is eps-LDP for its users (every user belongs to one group and reports once),
except ``svim-padded`` with ``reference=True``. :func:`ldpfast.protocols.sets.svim.svim` runs the
three phases on a :class:`~ldpfast.datasets.SetData` (simulation). OLH here is the CMS+RR estimator with
``m = g`` and per-user pairwise-independent hashes over the prime field ([PAN] section
4.4), on the OCMS kernels, with OLH's ``g = round(e^eps) + 1`` (:func:`ldpfast.theory.olh_g`).
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from typing import Any, ClassVar, List, Tuple

import numpy as np

from ... import _core
from ..._base import AuditHooks, Params as _ParamsBase, Protocol, WireField, bits_for, register_protocol
from ..._random import RngLike
from ...errors import ParameterError, ReportError
from ..._validate import candidate_array, check_bool, check_epsilon, check_int, rr_threshold
from ...kernels.field import PRIME
from .._local_hashing import OLHReportColumns, check_field_size, olh_perturb
from ._sets import MAX_SET_DOMAIN, SetsLike, as_sets, intersect_candidates, warn_not_ldp
from ..._budget import PRECISION, amplified, effective, rr_loss
from ..._validate import rr_effective_epsilon
from ...audit import Plan, set_inputs, support_events
from ...estimates import PLUG_IN
from ...uncertainty import PlugIn
from ._svim import (SVIM_COVERAGE, SVIM_MAX_L, SVIM_SHARES, SVIMClientBase, SVIMOLHParams, check_coverage,
                    SVIMServerBase, check_candidates, svim_example, svim_g, uniform_below)
from ._svim_run import SvimResult, svim, svim_groups, svim_simulations
from .._registration import edges, olh_model, olh_plan, olh_wire, prime_field_of, rr_epsilon, theory

__all__ = [
    "SVIMItemParams", "SVIMItemReports", "SVIMItemClient", "SVIMItemServer",
    "SVIMLengthParams", "SVIMLengthReports", "SVIMLengthClient", "SVIMLengthServer",
    "SVIMPaddedParams", "SVIMPaddedReports", "SVIMPaddedClient", "SVIMPaddedServer",
    "SVIM_SHARES", "SVIM_COVERAGE", "SVIM_MAX_L", "svim", "svim_groups", "SvimResult",
]


@dataclasses.dataclass(frozen=True)
class SVIMItemParams(SVIMOLHParams):
    """SVIM phase 1: each G1 user reports one uniformly sampled item of its set with OLH
    over ``[0, d]``, a user with an empty set the dummy ``d`` (R3 lets such users send
    nothing, which reveals that their set is empty); the server keeps the top ``2k`` of
    ``[0, d)`` as candidates. eps-LDP: OLH with eps is eps-LDP whatever value it encodes."""

    protocol: ClassVar[str] = "svim-items"
    epsilon: float
    d: int
    k: int = 50
    g: int = 0
    field_size: int = PRIME

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "field_size", check_field_size(self.field_size))
        check_int("d", self.d, 1, min(self.field_size - 1, MAX_SET_DOMAIN))      # so the dummy d is a field element too
        check_int("k", self.k, 1)
        object.__setattr__(self, "g", svim_g(self.epsilon, self.g))
        _ = self.flip_threshold                 # refuses a budget the 64-bit sampler cannot represent

    @property
    def domain(self) -> int:
        return self.d


@dataclasses.dataclass(frozen=True)
class SVIMLengthParams(SVIMOLHParams):
    """SVIM phase 2: each G2 user reports ``min(|S ∩ C|, max_length)`` with OLH over
    ``[0, max_length]``. ``candidates`` (C, from phase 1, in rank order) fixes what clients
    intersect with; ``max_length`` defaults to ``|C|``, which never clips since
    ``|S ∩ C| <= |C|`` (as R3). ``coverage`` and ``max_L``: L is the smallest ``l >= 1``
    whose estimated cumulative share exceeds ``coverage``, capped at ``max_L`` (default 31:
    R3's ``find_percentile_set`` stops after l = 30 and then returns 31) and ``max_length``."""

    protocol: ClassVar[str] = "svim-lengths"
    epsilon: float
    d: int
    candidates: Tuple[int, ...]
    max_length: int = 0
    coverage: float = SVIM_COVERAGE
    max_L: int = SVIM_MAX_L
    g: int = 0
    field_size: int = PRIME

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "field_size", check_field_size(self.field_size))
        check_int("d", self.d, 1, min(self.field_size - 1, MAX_SET_DOMAIN))
        object.__setattr__(self, "candidates", check_candidates(self.candidates, self.d))
        object.__setattr__(self, "max_length",
                           check_int("max_length", self.max_length or len(self.candidates), 1))
        object.__setattr__(self, "coverage", check_coverage(self.coverage))
        check_int("max_L", self.max_L, 1)
        object.__setattr__(self, "g", svim_g(self.epsilon, self.g))
        _ = self.flip_threshold                 # refuses a budget the 64-bit sampler cannot represent

    @property
    def domain(self) -> int:
        return self.max_length + 1


@dataclasses.dataclass(frozen=True)
class SVIMPaddedParams(_ParamsBase):
    """SVIM phase 3: each G3 user pads ``S ∩ C`` to length ``L`` with ``L - |S ∩ C|``
    distinct dummies drawn at random from the ``L`` dummies ``|C| + j`` (``j < L``) and
    samples one of the ``max(L, |S ∩ C|)`` slots uniformly (items are reported by their
    position in ``candidates``), then reports it with GRR
    over ``|C| + L`` values and the amplified ``eps' = log(L(e^eps - 1) + 1)`` when
    ``|C| < L e^eps (4L - 1) + 1``, else with OLH(eps) (Wang, Li, Jha 2018). ``L`` comes
    from phase 2.

    Privacy (GRR branch): every value, item or dummy, is the padded sample with probability
    ``pi <= 1/L``, so ``P(z | S) = q + (p - q) pi`` lies in ``[q, q + (p - q)/L]`` and the
    ratio for two sets is at most ``1 + (e^eps' - 1)/L = e^eps``: eps-LDP. The OLH branch
    is eps-LDP for any sampled value.

    ``reference=True`` reproduces R3: a single dummy ``|C|`` (domain ``|C| + 1``). A user
    with ``|S ∩ C| = 0`` then reports the dummy's GRR with probability ``p`` and one with
    ``L`` candidates with probability ``q``, so the GRR branch is only
    ``eps' = log(L(e^eps - 1) + 1)``-LDP (:attr:`true_epsilon`); its client emits a
    :class:`~ldpfast.errors.PrivacyWarning`.
    """

    protocol: ClassVar[str] = "svim-padded"
    epsilon: float
    d: int
    candidates: Tuple[int, ...]
    L: int
    coverage: float = SVIM_COVERAGE
    g: int = 0
    field_size: int = PRIME
    reference: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "field_size", check_field_size(self.field_size))
        check_int("d", self.d, 1, min(self.field_size - 1, MAX_SET_DOMAIN))
        object.__setattr__(self, "candidates", check_candidates(self.candidates, self.d))
        check_int("L", self.L, 1, self.field_size - 1 - len(self.candidates))
        object.__setattr__(self, "coverage", check_coverage(self.coverage))
        object.__setattr__(self, "g", svim_g(self.epsilon, self.g))
        object.__setattr__(self, "reference", check_bool("reference", self.reference))
        _ = self.flip_threshold                 # refuses a budget the 64-bit sampler cannot represent
        warn_not_ldp(self, stacklevel=4)

    def privacy_warning(self) -> str:
        """Why these reports are not eps-LDP ("" unless ``reference=True`` with GRR)."""
        if not self.true_epsilon > self.epsilon:
            return ""
        return (f"SVIM phase 3 with reference=True (R3's single dummy) is NOT {self.epsilon:g}-LDP: a user with no "
                f"candidate reports the dummy far more often; the reports are only {self.true_epsilon:.6g}-LDP "
                "(log(L (e^eps - 1) + 1)). Use reference=False.")

    @property
    def dummies(self) -> int:
        """Number of dummy values: ``L`` (1 with ``reference=True``)."""
        return 1 if self.reference else self.L

    @property
    def domain(self) -> int:
        """Reported values: candidate positions ``[0, |C|)`` and the dummies ``|C| + j``."""
        return len(self.candidates) + self.dummies

    @property
    def uses_grr(self) -> bool:
        """GRR when ``|C| < L e^eps (4L - 1) + 1`` (the SVIM/PSFO switch), else OLH."""
        return len(self.candidates) < self.L * math.exp(self.epsilon) * (4 * self.L - 1) + 1

    @property
    def grr_epsilon(self) -> float:
        """The amplified budget ``eps' = log(L(e^eps - 1) + 1)`` of the GRR branch, rounded
        down (:func:`ldpfast._budget.amplified`: sampling one of the ``L`` padded values
        brings it back to at most ``epsilon``)."""
        return amplified(self.epsilon, self.L)

    @property
    def true_epsilon(self) -> float:
        """The epsilon the reports really satisfy: eps, except ``eps'`` for the GRR branch
        with ``reference=True``."""
        return self.grr_epsilon if self.reference and self.uses_grr else self.epsilon

    @property
    def flip_probability(self) -> float:
        """GRR branch: ``(m-1)/(e^eps' + m - 1)`` with ``m`` = :attr:`domain`; OLH branch:
        ``(g-1)/(e^eps + g - 1)``."""
        if self.uses_grr:
            return (self.domain - 1) / (math.exp(self.grr_epsilon) + self.domain - 1)
        return (self.g - 1) / (math.exp(self.epsilon) + self.g - 1)

    @property
    def flip_threshold(self) -> int:
        """The 64-bit threshold of that flip (:func:`ldpfast._validate.rr_threshold`)."""
        if self.uses_grr:
            return rr_threshold(self.grr_epsilon, self.domain, "epsilon' = log(L(e^eps-1)+1)")
        return rr_threshold(self.epsilon, self.g)


@dataclasses.dataclass
class SVIMItemReports(OLHReportColumns):
    """Phase-1 OLH reports ``(z, a0, a1)`` (one per user)."""

    protocol: ClassVar[str] = "svim-items"


@dataclasses.dataclass
class SVIMLengthReports(OLHReportColumns):
    """Phase-2 OLH reports ``(z, a0, a1)`` of the users' capped ``|S ∩ C|``."""

    protocol: ClassVar[str] = "svim-lengths"


@dataclasses.dataclass
class SVIMPaddedReports(OLHReportColumns):
    """Phase-3 reports. OLH branch: ``(z, a0, a1)``. GRR branch: ``z`` is the perturbed
    value in ``[0, |C| + dummies)`` and ``a0 = a1 = 0`` (no hash)."""

    protocol: ClassVar[str] = "svim-padded"


class SVIMItemClient(SVIMClientBase):
    """SVIM phase-1 user side: one uniformly sampled item of ``S`` (the dummy ``d`` when
    ``S`` is empty) reported with OLH, one report per user. ``rng``: None = OS entropy
    (real clients); seeds are for simulation only."""

    params_type: ClassVar[type] = SVIMItemParams
    params: SVIMItemParams

    def perturb(self, sets: SetsLike) -> SVIMItemReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.protocols.sets.privsketch.as_sets`)."""
        offsets, items = as_sets(sets, self.params.d)
        # Padding and sampling to length 1: a uniform item of a non-empty set, else d.
        picks = _core.privsketch_padding_sample(self._keys.key(), offsets, items, 1, self.params.d, self.threads)
        return SVIMItemReports(*olh_perturb(self.params, self._keys, picks, self.threads))


class SVIMLengthClient(SVIMClientBase):
    """SVIM phase-2 user side: ``min(|S ∩ C|, max_length)`` reported with OLH over
    ``[0, max_length]``. ``rng``: None = OS entropy; seeds are for simulation only."""

    params_type: ClassVar[type] = SVIMLengthParams
    params: SVIMLengthParams

    def perturb(self, sets: SetsLike) -> SVIMLengthReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.protocols.sets.privsketch.as_sets`)."""
        p = self.params
        offsets, _ = intersect_candidates(*as_sets(sets, p.d), p.candidates)
        lengths = np.minimum(np.diff(offsets), p.max_length)
        return SVIMLengthReports(*olh_perturb(p, self._keys, lengths, self.threads))


class SVIMPaddedClient(SVIMClientBase):
    """SVIM phase-3 user side: pad ``S ∩ C`` with distinct dummies to ``L``, sample one slot
    (see :class:`SVIMPaddedParams`), then GRR with eps' or OLH(eps). ``rng``: None = OS
    entropy; seeds are for simulation only. With ``reference=True`` (R3's single dummy) it
    emits :class:`~ldpfast.errors.PrivacyWarning` when the GRR branch is used."""

    params_type: ClassVar[type] = SVIMPaddedParams
    params: SVIMPaddedParams

    def __init__(self, params: SVIMPaddedParams, rng: RngLike = None, threads: int = 0):
        super().__init__(params, rng, threads)
        warn_not_ldp(params)

    def perturb(self, sets: SetsLike) -> SVIMPaddedReports:
        """Reports for a batch of users (``sets``: see :func:`ldpfast.protocols.sets.privsketch.as_sets`)."""
        p = self.params
        offsets, positions = intersect_candidates(*as_sets(sets, p.d), p.candidates)
        size = len(p.candidates)
        values = _core.privsketch_padding_sample(self._keys.key(), offsets, positions, p.L, size, self.threads)
        if p.dummies > 1:
            # Padding with L - |S ∩ C| distinct dummies drawn at random from the L dummies and
            # sampling a slot makes the dummy uniform among the L: each has probability <= 1/L.
            dummy = np.flatnonzero(values == size)
            values[dummy] += uniform_below(self._keys, dummy.size, p.dummies, self.threads)
        if not p.uses_grr:
            return SVIMPaddedReports(*olh_perturb(p, self._keys, values, self.threads))
        z = _core.randomized_response(self._keys.key(), values, p.domain, p.flip_threshold, self.threads)
        zeros = np.zeros(z.size, dtype=np.uint64)
        return SVIMPaddedReports(z=z, a0=zeros, a1=zeros.copy())


class SVIMItemServer(SVIMServerBase):
    """SVIM phase-1 collector. Decoding costs O(n d) hash evaluations (C++, threads)."""

    protocol: ClassVar[str] = "svim-items"
    params_type: ClassVar[type] = SVIMItemParams
    reports_type: ClassVar[type] = SVIMItemReports
    params: SVIMItemParams

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Unbiased estimates of the item-sampling frequencies ``P(sampled item = x)`` over
        all users, those with empty sets included (they sample the dummy ``d``)
        (``candidates``: default every item of ``[0, d)``; counts of users with
        ``counts=True``)."""
        self._check_query(candidates, 24, self.params.d, "an SVIM item query")
        freq = self._chat() / (1.0 if counts else self.n)
        return freq if candidates is None else freq[candidate_array(candidates, self.params.d)]

    def candidates(self) -> np.ndarray:
        """C: the ``2k`` items with the largest estimates, best first (ties by item id)."""
        return np.argsort(-self.estimate(), kind="stable")[: min(2 * self.params.k, self.params.d)]

    def length_params(self, max_length: int = 0, coverage: float = SVIM_COVERAGE,
                      max_L: int = SVIM_MAX_L) -> SVIMLengthParams:
        """Phase-2 parameters carrying this phase's candidates (other arguments: see
        :class:`SVIMLengthParams`)."""
        p = self.params
        return SVIMLengthParams(epsilon=p.epsilon, d=p.d, candidates=tuple(self.candidates().tolist()),
                                max_length=max_length, coverage=coverage, max_L=max_L, field_size=p.field_size)


class SVIMLengthServer(SVIMServerBase):
    """SVIM phase-2 collector."""

    protocol: ClassVar[str] = "svim-lengths"
    params_type: ClassVar[type] = SVIMLengthParams
    reports_type: ClassVar[type] = SVIMLengthReports
    params: SVIMLengthParams

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Unbiased estimates of the length histogram: the share of reporting users with
        capped ``|S ∩ C| = l`` for the lengths ``candidates`` (default ``l = 0 ..
        max_length``); numbers of users with ``counts=True``."""
        self._check_query(candidates, 24, self.params.max_length + 1, "an SVIM length query")
        hist = self._chat() / (1.0 if counts else self.n)
        return hist if candidates is None else hist[candidate_array(candidates, self.params.max_length + 1)]

    def length(self) -> int:
        """L: the smallest ``l >= 1`` whose cumulative share of the estimated histogram
        (raw, not clipped at 0, as R3) exceeds ``coverage``, capped at
        ``min(max_L, max_length)`` (also the answer when no l qualifies)."""
        p = self.params
        hist = self.estimate()
        cap = min(p.max_L, p.max_length)
        total = hist.sum()
        if not total > 0:
            return cap
        above = np.flatnonzero(np.cumsum(hist)[1:] / total > p.coverage)
        return min(int(above[0]) + 1, cap) if above.size else cap

    def padded_params(self, reference: bool = False) -> SVIMPaddedParams:
        """Phase-3 parameters carrying C and this phase's L (``reference``: see
        :class:`SVIMPaddedParams`)."""
        p = self.params
        return SVIMPaddedParams(epsilon=p.epsilon, d=p.d, candidates=p.candidates, L=self.length(),
                                coverage=p.coverage, field_size=p.field_size, reference=reference)


class SVIMPaddedServer(SVIMServerBase):
    """SVIM phase-3 collector (GRR or OLH as the parameters say)."""

    protocol: ClassVar[str] = "svim-padded"
    params_type: ClassVar[type] = SVIMPaddedParams
    reports_type: ClassVar[type] = SVIMPaddedReports
    params: SVIMPaddedParams

    def _uses_olh(self) -> bool:
        return not self.params.uses_grr

    def sampling_frequencies(self) -> np.ndarray:
        """Unbiased estimates of ``P(padded sample = C[i])`` over the reporting users."""
        p = self.params
        if p.uses_grr:
            if self.n == 0:
                raise ReportError("estimate needs at least one report (n = 0)")
            e = math.exp(p.grr_epsilon)
            keep, other = e / (e + p.domain - 1), 1.0 / (e + p.domain - 1)
            chat = (self._counts - self.n * other) / (keep - other)
        else:
            chat = self._chat()
        return chat[:len(p.candidates)] / self.n

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Item frequencies ``fhat = L chat3 / (coverage n3)`` (R3 leaves out L) of
        ``candidates``, items of C (default all of C, in ``params.candidates`` order);
        ``n3 fhat`` with ``counts=True``.

        Raises:
            ParameterError: a candidate is not in C.
        """
        self._check_query(candidates, 24, len(self.params.candidates), "an SVIM query")
        freq = self.params.L * self.sampling_frequencies() / self.params.coverage
        if candidates is not None:
            freq = freq[self.candidate_positions(candidates)]
        return freq * self.n if counts else freq

    def candidate_positions(self, items: Any) -> np.ndarray:
        """Positions in ``params.candidates`` of ``items`` (each must be in C)."""
        items = candidate_array(items, self.params.d)
        lookup = {int(c): i for i, c in enumerate(self.params.candidates)}
        missing = [int(x) for x in items if int(x) not in lookup]
        if missing:
            raise ParameterError(f"candidates must be items of C (params.candidates), {missing[0]} is not")
        return np.array([lookup[int(x)] for x in items], dtype=np.int64)

    def top(self, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """The ``k`` candidates with the largest estimates, best first (ties by position in
        C), and their estimates."""
        k = check_int("k", k, 1)
        freq = self.estimate()
        best = np.argsort(-freq, kind="stable")[:k]
        return np.asarray(self.params.candidates, dtype=np.int64)[best], freq[best]


def _padded_wire(p: SVIMPaddedParams) -> List[WireField]:
    # phase 3 is OLH, or GRR on |C| + 1 values (then only z travels: 0-bit hash fields)
    if p.uses_grr:
        return [WireField("z", bits_for(p.domain)), WireField("a0", 0), WireField("a1", 0)]
    return olh_wire(p)


def _padded_variance(server: SVIMPaddedServer, candidates: np.ndarray) -> PlugIn:
    p, n = server.params, server.n
    scale = p.L / p.coverage
    e = math.exp(p.grr_epsilon if p.uses_grr else p.epsilon)
    keep, other = (e / (e + p.domain - 1), 1 / (e + p.domain - 1)) if p.uses_grr else (e / (e + p.g - 1), 1 / p.g)
    return PlugIn(lambda f: scale**2 * theory().sampled_report_variance(keep, other, n, np.asarray(f) / scale),
                  len(candidates), f"{PLUG_IN} (theory.sampled_report_variance of the padded sample's GRR/OLH, "
                  "scaled by (L/coverage)^2)",
                  "(L/coverage) times the share of users whose padded sample is x: f/coverage when no |S & C| "
                  "exceeds L (R3's estimator)")


def _padded_epsilon(params: SVIMPaddedParams) -> float:
    if not params.uses_grr:
        return rr_effective_epsilon(params.flip_threshold, params.g)
    grr_loss = rr_loss(params.flip_threshold, params.domain)
    if params.reference:           # the single dummy: no amplification (class docstring)
        return effective(grr_loss)
    with decimal.localcontext() as ctx:
        ctx.prec = PRECISION
        return effective((1 + (grr_loss.exp() - 1) / params.L).ln())


def _items_plan(params: SVIMItemParams) -> Plan:
    return olh_plan(prime_field_of(params), params.g, [params.d], [0], set_inputs([], [0]),
                    ("H(dummy) = z != H(0)", "H(0) = z != H(dummy)"))


def _lengths_plan(params: SVIMLengthParams) -> Plan:
    return olh_plan(prime_field_of(params), params.g, [0], [1], set_inputs([], [params.candidates[0]]),
                    ("H(length 0) = z != H(1)", "H(length 1) = z != H(0)"))


def _padded_plan(params: SVIMPaddedParams) -> Plan:
    size = len(params.candidates)
    dummies, items = list(range(size, params.domain)), list(range(min(params.L, size)))
    inputs = set_inputs([], [params.candidates[i] for i in items])
    describe = ("z is a dummy's (empty set)", f"z is a candidate's ({len(items)} candidates)")
    if not params.uses_grr:
        return olh_plan(prime_field_of(params), params.g, dummies, items, inputs, describe)

    def support(reports: SVIMPaddedReports, w: List[int]) -> np.ndarray:
        return np.isin(reports.z, np.asarray(w, dtype=np.uint64))
    return Plan(inputs, support_events(support, dummies, items), describe)


register_protocol(Protocol(
    "svim-items", SVIMItemParams, SVIMItemReports, SVIMItemServer, SVIMItemClient,
    example=svim_example(SVIMItemParams, k=10), inputs="sets", wire_fields=olh_wire,
    variance=olh_model("the share of users whose sampled item is x (1/|S| for each user holding x, empty sets "
                        "sample the dummy d)", sampled=True),
    simulations=svim_simulations, extremes=edges(d=(1, 2**20), k=(1, 2**20)),
    audit=AuditHooks(lambda e, **kw: SVIMItemParams(epsilon=e, d=64, **kw), _items_plan, rr_epsilon("g"))))
register_protocol(Protocol(
    "svim-lengths", SVIMLengthParams, SVIMLengthReports, SVIMLengthServer, SVIMLengthClient,
    example=svim_example(SVIMLengthParams, candidates=tuple(range(0, 60, 5))), inputs="sets", wire_fields=olh_wire,
    extremes=edges(d=(1, 2**64), coverage=(0.0, 1.0), max_L=(1, 2**20), max_length=(1, 2**20)),
    variance=olh_model("the share of users with min(|S & C|, max_length) = l", sampled=False),
    default_candidates=lambda server: np.arange(server.params.max_length + 1, dtype=np.int64),
    audit=AuditHooks(lambda e, **kw: SVIMLengthParams(epsilon=e, d=64, candidates=tuple(range(8)), **kw),
                     _lengths_plan, rr_epsilon("g"))))
register_protocol(Protocol(
    "svim-padded", SVIMPaddedParams, SVIMPaddedReports, SVIMPaddedServer, SVIMPaddedClient,
    example=svim_example(SVIMPaddedParams, candidates=tuple(range(0, 60, 5)), L=3), inputs="sets",
    extremes=edges(d=(1, 2**64), coverage=(0.0, 1.0), L=(1, 2**20)),
    wire_fields=_padded_wire, variance=_padded_variance,
    default_candidates=lambda server: np.asarray(server.params.candidates, dtype=np.int64),
    audit=AuditHooks(lambda e, **kw: SVIMPaddedParams(epsilon=e, d=1000, candidates=tuple(range(100, 200)), L=5,
                                                      **kw), _padded_plan, _padded_epsilon)))
