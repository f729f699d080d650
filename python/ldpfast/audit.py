"""Empirical privacy audit: a statistical lower bound on the epsilon a client really spends.

For a protocol configuration (its ``Params``) the audit draws ``reports`` reports from the
protocol's own client for each of two neighbouring inputs ``x0`` and ``x1``, chosen to be the
most distinguishing ones for the mechanism (e.g. two values for GRR, an empty set against a
full padded set for padding-and-sampling, an empty set against one item for sketches),
and counts a fixed distinguishing event in each sample. The events are chosen *before*
sampling, per protocol, as "the report supports ``x0`` and not ``x1``" (and the reverse),
read from the report exactly as a collector would (hash matches, Hadamard signs, sketch
bits, the ordering matrix), so no sample is spent on choosing them.

If a mechanism is eps-LDP, every event ``E`` has ``P(E | x0) <= e^eps P(E | x1)``. The
audit returns ``eps_lb = max over the two events of log(lo_a / hi_b)`` where ``lo_a`` is the
one-sided Clopper-Pearson lower bound of ``P(E | x_a)`` and ``hi_b`` the upper bound of
``P(E | x_b)``, each at level ``alpha/4`` (two bounds per event, two events: a union bound),
so ``eps_lb`` is below the true privacy loss with probability at least ``1 - alpha``
(default confidence 99%). A result ``eps_lb > epsilon`` is evidence, at that confidence,
that the mechanism is not epsilon-LDP.

Only a lower bound: a mechanism can pass (``eps_lb <= epsilon``) and still leak through an
event the audit does not test. :func:`effective_epsilon` gives the exact epsilon implied by
the integer flip thresholds the samplers use.

Randomness: ``rng=None`` draws fresh OS entropy; a seed makes the audit reproducible.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from typing import Callable, Tuple

import numpy as np

from . import _core
from ._base import protocols
from ._random import KeySource, RngLike
from ._validate import check_int, rr_effective_epsilon, rr_threshold
from .kernels.field import core_field
from .errors import ParameterError

__all__ = ["AuditResult", "audit", "audit_protocol", "default_params", "effective_epsilon", "clopper_pearson",
           "CONFIDENCE", "DEFAULT_REPORTS", "AUDITED"]

#: Default confidence of :func:`audit` (probability that ``eps_lb`` is a true lower bound).
CONFIDENCE = 0.99
#: Default reports per input.
DEFAULT_REPORTS = 1_000_000
_CHUNK = 1 << 17
#: The protocols :func:`default_params` (and the CLI's ``all``) cover: every one ldpfast registers.
AUDITED = ("ocms", "grr", "hrr", "he", "cmshe", "rhr", "olh", "hadaoracle", "hadaheavy", "privsketch",
           "privsketch-nosmp", "privsketch-ldp", "multi-pcms-mean", "multi-pcms-min", "ps-olh", "svim-items",
           "svim-lengths", "svim-padded", "cms-rappor", "ss", "cmshe-apple", "rhr-original", "hashtogram",
           "treehist-cs", "npcms")


# -- Clopper-Pearson ---------------------------------------------------------------------------
def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta ``I_x(a, b)`` by its continued fraction (modified Lentz),
    on the side of ``x`` where it converges fast."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    log_front = a * math.log(x) + b * math.log1p(-x) - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 100000):
        # even step d_{2m}, then odd step d_{2m+1} of the continued fraction
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) * f / a


def _beta_quantile(q: float, a: float, b: float) -> float:
    """``x`` with ``I_x(a, b) = q`` (bisection: I is increasing in x; 200 halvings reach
    the double resolution)."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if _betainc(a, b, mid) < q:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def clopper_pearson(hits: int, n: int, alpha: float) -> Tuple[float, float]:
    """One-sided Clopper-Pearson bounds ``(lo, hi)`` of a binomial probability from ``hits``
    successes in ``n`` trials: ``P(p < lo) <= alpha`` and ``P(p > hi) <= alpha``."""
    hits, n = int(hits), int(n)
    if not 0 <= hits <= n or n < 1:
        raise ParameterError(f"hits must be in [0, n] with n >= 1, got hits={hits}, n={n}")
    if not 0.0 < alpha < 1.0:
        raise ParameterError(f"alpha must be in (0, 1), got {alpha!r}")
    lo = 0.0 if hits == 0 else _beta_quantile(alpha, hits, n - hits + 1)
    hi = 1.0 if hits == n else _beta_quantile(1.0 - alpha, hits + 1, n - hits)
    return lo, hi


# -- effective epsilon from the integer thresholds ------------------------------------------------
def effective_epsilon(params) -> float:
    """The epsilon a client with these parameters really satisfies, computed from the integer
    flip thresholds its samplers use (:func:`ldpfast._validate.rr_effective_epsilon`) and the
    mechanism's composition: one RR over ``m`` symbols (GRR, OCMS, OLH, RHR, PS-OLH, SVIM),
    one binary flip (Hadamard protocols, PrivSketch's sampled bit), ``M`` or ``K M`` flipped
    bits (Multi-PCMS-Mean / -Min, PrivSketch-noSmp), and SVIM phase 3's GRR through the
    padding amplification ``log(1 + (e^g - 1)/L)`` with ``g`` its GRR's effective epsilon
    (R3's single dummy: ``g`` itself; see ``privsketch.SVIMPaddedParams``).
    For PrivSketch and PrivSketch-noSmp this is only the randomized-response part: their
    ordering matrix is not LDP at all."""
    pid = params.protocol
    if pid == "grr":
        return rr_effective_epsilon(params.flip_threshold, params.d)
    if pid == "ocms":
        return rr_effective_epsilon(params.flip_threshold, params.m)
    if pid == "rhr":
        return rr_effective_epsilon(params.flip_threshold, params.symbols)
    if pid in ("olh", "ps-olh", "svim-items", "svim-lengths"):
        return rr_effective_epsilon(params.flip_threshold, params.g)
    if pid == "svim-padded":
        if not params.uses_grr:
            return rr_effective_epsilon(params.flip_threshold, params.g)
        grr_eps = rr_effective_epsilon(params.flip_threshold, params.domain)
        if params.reference:           # the single dummy: no amplification (class docstring)
            return grr_eps
        return math.log1p(math.expm1(grr_eps) / params.L)
    if pid in ("hrr", "he", "cmshe", "hadaoracle", "hadaheavy", "cmshe-apple", "hashtogram", "treehist-cs"):
        from .hadamard import binary_flip_threshold
        return rr_effective_epsilon(binary_flip_threshold(params.epsilon), 2)
    if pid == "rhr-original":
        return rr_effective_epsilon(params.flip_threshold, params.symbols)
    if pid == "cms-rappor":
        # one-hot vectors of two inputs differ in two bits: sRP flips both at eps/2; aRP
        # keeps a 1 with probability exactly 1/2 and flips a 0 at eps
        once = rr_effective_epsilon(params.zero_threshold, 2)
        return 2 * once if params.variant == "symmetric" else once
    if pid == "ss":
        # P(include) (d-k) / (P(exclude) k), from the integer threshold
        t = params.exclude_threshold
        return _log_ratio((2**64 - t) * (params.d - params.k), t * params.k)
    if pid == "npcms":
        # L slots, each a one-hot vector whose two differing entries flip independently
        return 2 * params.L * rr_effective_epsilon(rr_threshold(params.epsilon / (2 * params.L), 2), 2)
    if pid in ("privsketch", "privsketch-ldp", "privsketch-nosmp", "multi-pcms-mean", "multi-pcms-min"):
        bits = {"1": 1, "M": params.M, "K*M": params.K * params.M}[params.bit_divisor]
        return bits * rr_effective_epsilon(params.flip_threshold, 2)
    raise ParameterError(f"no effective-epsilon rule for protocol {pid!r}")


def _log_ratio(numerator: int, denominator: int) -> float:
    """``log(numerator/denominator)`` of integers, to 80 digits then rounded once."""
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        return float((decimal.Decimal(numerator) / decimal.Decimal(denominator)).ln())


# -- per-protocol plans: inputs and events ------------------------------------------------------
@dataclasses.dataclass
class _Plan:
    """Two client inputs (``make(i, n)`` builds n copies of input i), and ``events(reports)``
    returning boolean arrays ``(favours x0, favours x1)``; ``describe`` names the events."""

    make: Callable[[int, int], object]
    events: Callable[[object], Tuple[np.ndarray, np.ndarray]]
    describe: Tuple[str, str]


def _values(x0: int, x1: int):
    return lambda i, n: np.full(n, (x0, x1)[i], dtype=np.uint64)


def _sets(s0, s1):
    def make(i, n):
        s = np.asarray((s0, s1)[i], dtype=np.uint64)
        return np.arange(n + 1, dtype=np.int64) * s.size, np.tile(s, n)
    return make


def _support_events(support, w0, w1):
    def events(reports):
        s0, s1 = support(reports, w0), support(reports, w1)
        return s0 & ~s1, s1 & ~s0
    return events


def _hash_support(field, m):
    """Report ``(z, a0, a1)`` supports one of the values ``w`` if the user's hash of it is z."""
    def support(reports, w):
        hit = np.zeros(len(reports.z), dtype=bool)
        for v in w:
            x = np.full(len(reports.z), v, dtype=np.uint64)
            hit |= _core.ocms_hash(field, reports.a0, reports.a1, x, m) == reports.z
        return hit
    return support


def _layout_support(params):
    """Report ``(group, row, bit)`` supports value w if bit is w's Hadamard sign there."""
    from .hadaoracle import _parity_sign
    layout = params.layout()

    def support(reports, w):
        n = len(reports.bits)
        groups = np.zeros(n, dtype=np.int64) if reports.groups is None else reports.groups.astype(np.int64)
        y = layout.group_hashes(groups, np.full(n, w[0], dtype=np.uint64))
        col = y + layout.table[groups, 3]
        return _parity_sign(reports.rows.astype(np.uint64) & col) == reports.bits
    return support


def _rhr_support(params):
    from .hadaoracle import _parity_sign
    low = params.b - 1

    def support(reports, w):
        x = np.uint64(w[0])
        h01 = (_parity_sign(reports.rows.astype(np.uint64) & ((x >> np.uint64(low)) + np.uint64(1))) > 0)
        y = 2 * (int(x) & ((1 << low) - 1)) + h01.astype(np.int64)
        return reports.z.astype(np.int64) == y
    return support


def _sketch_of(params, items) -> np.ndarray:
    """The user's K x M 0/1 sketch of ``items`` (flat, length K M)."""
    sketch = np.zeros(params.K * params.M, dtype=np.int8)
    if len(items):
        sketch[params.cells(np.asarray(items, dtype=np.uint64)).astype(np.int64).ravel()] = 1
    return sketch


def _covering_items(params) -> list:
    """The shortest prefix of ``[0, d)`` whose sketch has the most 1-cells."""
    cells = params.cells(np.arange(params.d, dtype=np.uint64)).astype(np.int64)
    seen, target = set(), np.unique(cells).size
    for x in range(params.d):
        seen.update(cells[x].tolist())
        if len(seen) == target:
            return list(range(x + 1))
    return list(range(params.d))


def _plan(params) -> _Plan:
    pid = params.protocol
    if pid == "grr":
        return _Plan(_values(0, 1), lambda r: (r.y == 0, r.y == 1), ("y = x0", "y = x1"))
    if pid in ("ocms", "olh"):
        from .hadamard import prime_field
        field, m = (params.field, params.m) if pid == "ocms" else (prime_field(), params.g)
        return _Plan(_values(0, 1), _support_events(_hash_support(field, m), [0], [1]),
                     ("H(x0) = z != H(x1)", "H(x1) = z != H(x0)"))
    if pid in ("cms-rappor", "ss", "rhr-original", "hashtogram", "treehist-cs", "npcms"):
        return _baseline_plan(params)
    if pid in ("hrr", "he", "cmshe", "hadaoracle", "hadaheavy", "cmshe-apple"):
        return _Plan(_values(0, 1), _support_events(_layout_support(params), [0], [1]),
                     ("bit = sign(x0) != sign(x1)", "bit = sign(x1) != sign(x0)"))
    if pid == "rhr":
        return _Plan(_values(0, 1), _support_events(_rhr_support(params), [0], [1]),
                     ("z = y(x0) != y(x1)", "z = y(x1) != y(x0)"))
    if pid in ("privsketch", "privsketch-nosmp"):
        cells = _sketch_of(params, [0]).nonzero()[0]
        top = params.K * params.M - cells.size

        def order_events(reports):
            ranks = reports.order.reshape(len(reports.order), -1)[:, cells]
            return np.zeros(len(ranks), dtype=bool), np.all(ranks >= top, axis=1)
        return _Plan(_sets([], [0]), order_events, ("never", "order ranks {0}'s cells on top"))
    if pid in ("privsketch-ldp", "multi-pcms-mean", "multi-pcms-min"):
        full = [0] if pid == "privsketch-ldp" else _covering_items(params)
        sketches = (2 * _sketch_of(params, []) - 1, 2 * _sketch_of(params, full) - 1)
        K, M = params.K, params.M

        def sketch_support(reports, w):
            sk = sketches[w]
            if pid == "privsketch-ldp":
                return reports.bit == sk[reports.k.astype(np.int64) * M + reports.m.astype(np.int64)]
            if pid == "multi-pcms-mean":
                return np.all(reports.bits == sk.reshape(K, M)[reports.row.astype(np.int64)], axis=1)
            return np.all(reports.bits.reshape(len(reports.bits), -1) == sk, axis=1)
        return _Plan(_sets([], full), _support_events(sketch_support, 0, 1),
                     ("bits = sketch(empty) != sketch(x1)", f"bits = sketch({len(full)} items) != sketch(empty)"))
    if pid == "ps-olh":
        items = list(range(1, params.pad_len + 1))
        support = _hash_support(_core.Field.prime(params.field_size), params.g)
        return _Plan(_sets([], items), _support_events(support, [params.d], items),
                     ("H(dummy) = z, no item's", f"an item's H = z (|S| = {len(items)}), not the dummy's"))
    if pid == "svim-items":
        support = _hash_support(_core.Field.prime(params.field_size), params.g)
        return _Plan(_sets([], [0]), _support_events(support, [params.d], [0]),
                     ("H(dummy) = z != H(0)", "H(0) = z != H(dummy)"))
    if pid == "svim-lengths":
        support = _hash_support(_core.Field.prime(params.field_size), params.g)
        return _Plan(_sets([], [params.candidates[0]]), _support_events(support, [0], [1]),
                     ("H(length 0) = z != H(1)", "H(length 1) = z != H(0)"))
    if pid == "svim-padded":
        size = len(params.candidates)
        dummies, items = list(range(size, params.domain)), list(range(min(params.L, size)))
        if params.uses_grr:
            def support(reports, w):
                return np.isin(reports.z, np.asarray(w, dtype=np.uint64))
        else:
            support = _hash_support(_core.Field.prime(params.field_size), params.g)
        return _Plan(_sets([], [params.candidates[i] for i in items]), _support_events(support, dummies, items),
                     ("z is a dummy's (empty set)", f"z is a candidate's ({len(items)} candidates)"))
    raise ParameterError(f"no audit plan for protocol {pid!r}")


def _baseline_plan(params) -> _Plan:
    """Plans for the papers' baselines (rappor_cms, subset_selection, hadamard_variants,
    hashtogram, treehist_cs, npcms): inputs 0 and 1 (nPCMS: two items in different cells),
    each event the report pattern the input's own encoding produces and the other's cannot
    without the noise; every one attains the mechanism's worst-case ratio."""
    from .hadaoracle import _parity_sign
    pid = params.protocol
    if pid == "cms-rappor":
        field = core_field(params.field_size)

        def events(reports):
            n = len(reports.a0)
            h0, h1 = (_core.ocms_hash(field, reports.a0, reports.a1, np.full(n, v, dtype=np.uint64),
                                      params.m).astype(np.int64) for v in (0, 1))
            rows = np.arange(n)
            b0, b1 = reports.bits[rows, h0] == 1, reports.bits[rows, h1] == 1
            apart = h0 != h1
            return apart & b0 & ~b1, apart & b1 & ~b0
        return _Plan(_values(0, 1), events, ("bit h(x0) set, bit h(x1) clear", "bit h(x1) set, bit h(x0) clear"))
    if pid == "ss":
        def events(reports):
            has0, has1 = (np.any(reports.items == v, axis=1) for v in (0, 1))
            return has0 & ~has1, has1 & ~has0
        return _Plan(_values(0, 1), events, ("x0 in S, x1 not", "x1 in S, x0 not"))
    if pid == "rhr-original":
        block = np.uint64(params.B)

        def support(reports, w):
            x = np.uint64(w[0])
            sign = (1 - _parity_sign(reports.rows & (x % block))) // 2
            return reports.z.astype(np.int64) == 2 * int(x // block) + sign.astype(np.int64)
        return _Plan(_values(0, 1), _support_events(support, [0], [1]), ("z = y(x0) != y(x1)", "z = y(x1) != y(x0)"))
    if pid in ("hashtogram", "treehist-cs"):
        def support(reports, w):
            n = len(reports.bits)
            x = np.full(n, w[0], dtype=np.uint64)
            if pid == "treehist-cs":
                x = x >> (params.L - (reports.groups.astype(np.int64) // params.R + 1)).astype(np.uint64)
            bucket, sign = params.hashes(reports.groups, x)
            return sign * _parity_sign(reports.rows.astype(np.uint64) & bucket) == reports.bits
        return _Plan(_values(0, 1), _support_events(support, [0], [1]),
                     ("bit = sign(x0) != sign(x1)", "bit = sign(x1) != sign(x0)"))
    if pid == "npcms":
        if params.L != 1:
            raise ParameterError(f"the nPCMS audit plan needs L = 1 (one slot carries the whole budget), got {params.L}")
        cells = params.cells(np.arange(params.d, dtype=np.uint64)).astype(np.int64)
        other = int(np.flatnonzero(np.any(cells != cells[0], axis=1))[0])
        items = (0, other)

        def onehot(reports, w):
            rows = reports.rows.astype(np.int64)                      # (n, L)
            want = -np.ones(reports.bits.shape, dtype=np.int8)
            cell = cells[items[w]][rows[:, 0]] - rows[:, 0] * params.M
            want[np.arange(len(rows)), 0, cell] = 1
            return np.all(reports.bits.reshape(len(rows), -1) == want.reshape(len(rows), -1), axis=1)
        return _Plan(_sets([0], [other]), _support_events(onehot, 0, 1),
                     ("bits = one-hot(x0) != one-hot(x1)", "bits = one-hot(x1) != one-hot(x0)"))
    raise ParameterError(f"no audit plan for protocol {pid!r}")


# -- the audit -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class AuditResult:
    """``eps_lb``: the lower bound on the privacy loss at ``confidence``; ``epsilon``: the
    claimed one; ``effective_epsilon``: from the samplers' thresholds; ``reports`` per input;
    ``event``: the event that gave ``eps_lb``; ``hits``: its count under the input it
    favours and under the other one."""

    protocol: str
    epsilon: float
    eps_lb: float
    reports: int
    event: str
    hits: Tuple[int, int]
    confidence: float
    effective_epsilon: float


def audit(params, reports: int = DEFAULT_REPORTS, rng: RngLike = None, confidence: float = CONFIDENCE,
          threads: int = 0) -> AuditResult:
    """Audit the client of ``params``' protocol (any registered protocol with a plan, see the
    module docstring): ``reports`` reports per input, events fixed in advance, Clopper-Pearson
    bounds with a union bound over the four bounds used. Returns :class:`AuditResult`.
    ``eps_lb`` is ``-inf`` when no event is more likely under one input than the other bound
    allows (e.g. an event never seen). Clients that warn (not-LDP protocols) warn here too."""
    reports = check_int("reports", reports, 1)
    if isinstance(confidence, bool) or not isinstance(confidence, float) or not 0.5 <= confidence < 1.0:
        raise ParameterError(f"confidence must be a float in [0.5, 1), got {confidence!r}")
    plan = _plan(params)
    proto = protocols()[params.protocol]
    gen = KeySource(rng).generator()
    hits = np.zeros((2, 2), dtype=np.int64)          # hits[input, event]
    for i in (0, 1):
        client = proto.client(params, rng=gen, threads=threads)
        for start in range(0, reports, _CHUNK):
            batch = client.perturb(plan.make(i, min(_CHUNK, reports - start)))
            favours0, favours1 = plan.events(batch)
            hits[i] += (int(np.count_nonzero(favours0)), int(np.count_nonzero(favours1)))
    alpha = (1.0 - confidence) / 4.0
    best = (-math.inf, 0)
    for event in (0, 1):
        favoured, other = hits[event, event], hits[1 - event, event]
        lo, _ = clopper_pearson(favoured, reports, alpha)
        _, hi = clopper_pearson(other, reports, alpha)
        value = math.log(lo / hi) if lo > 0 else -math.inf
        if value > best[0]:
            best = (value, event)
    event = best[1]
    return AuditResult(protocol=params.protocol, epsilon=float(params.epsilon), eps_lb=best[0], reports=reports,
                       event=plan.describe[event], hits=(int(hits[event, event]), int(hits[1 - event, event])),
                       confidence=confidence, effective_epsilon=effective_epsilon(params))


def default_params(protocol: str, epsilon: float, **changes):
    """A small configuration of ``protocol`` for auditing (small domains keep the events
    frequent, so the bound is tight; the mechanisms' privacy does not depend on the size).
    ``changes`` replace fields (e.g. ``reference=True`` for ``svim-padded``,
    ``amplify=True`` for ``ps-olh``)."""
    from . import grr, hadaheavy, hadamard, hadamard_variants, hadaoracle, hashtogram, npcms, ocms, rappor_cms
    from . import privsketch as ps
    from . import subset_selection, treehist_cs
    makers = {
        "ocms": lambda e, **kw: ocms.Params.optimal(e, 16, **kw),
        "grr": lambda e, **kw: grr.Params(e, 4, **kw),
        "hrr": lambda e, **kw: hadamard.HRRParams(e, 4, **kw),
        "he": lambda e, **kw: hadamard.HEParams(e, 4, **kw),
        "cmshe": lambda e, **kw: hadamard.CMSHEParams(e, 16, k=2, m=4, hash_seed=1, **kw),
        "rhr": lambda e, **kw: hadamard.RHRParams(e, 16, **kw),
        "olh": lambda e, **kw: hadamard.OLHParams(e, 16, **kw),
        "hadaoracle": lambda e, **kw: hadaoracle.Params.create(e, 64, 1000, hash_seed=1, **kw),
        "hadaheavy": lambda e, **kw: hadaheavy.Params.create(e, 64, 1000, hash_seed=1, **kw),
        "privsketch": lambda e, **kw: ps.Params.create(epsilon=e, d=64, K=4, M=16, seed=1, **kw),
        "privsketch-nosmp": lambda e, **kw: ps.NoSmpParams.create(epsilon=e, d=64, K=4, M=16, seed=1, **kw),
        "privsketch-ldp": lambda e, **kw: ps.SafeParams.create(epsilon=e, d=64, K=2, M=4, seed=1, **kw),
        "multi-pcms-mean": lambda e, **kw: ps.MultiPCMSMeanParams.create(epsilon=e, d=64, K=2, M=4, seed=1, **kw),
        "multi-pcms-min": lambda e, **kw: ps.MultiPCMSMinParams.create(epsilon=e, d=64, K=2, M=2, seed=1, **kw),
        "ps-olh": lambda e, **kw: ps.PSOLHParams(epsilon=e, d=64, pad_len=4, **kw),
        "svim-items": lambda e, **kw: ps.SVIMItemParams(epsilon=e, d=64, **kw),
        "svim-lengths": lambda e, **kw: ps.SVIMLengthParams(epsilon=e, d=64, candidates=tuple(range(8)), **kw),
        "svim-padded": lambda e, **kw: ps.SVIMPaddedParams(epsilon=e, d=1000, candidates=tuple(range(100, 200)),
                                                           L=5, **kw),
        "cms-rappor": lambda e, **kw: rappor_cms.Params(epsilon=e, d=16, m=4, **kw),
        "ss": lambda e, **kw: subset_selection.Params(epsilon=e, d=4, **kw),
        "cmshe-apple": lambda e, **kw: hadamard_variants.AppleCMSHEParams(e, 16, k=2, m=4, hash_seed=1, **kw),
        "rhr-original": lambda e, **kw: hadamard_variants.RHROriginalParams(epsilon=e, d=16, **kw),
        "hashtogram": lambda e, **kw: hashtogram.Params(epsilon=e, d=64, R=3, T=8, hash_seed=1, **kw),
        "treehist-cs": lambda e, **kw: treehist_cs.Params(epsilon=e, d=64, R=3, T=8, delta=1.0, tau=2.0,
                                                           hash_seed=1, **kw),
        "npcms": lambda e, **kw: npcms.Params.create(epsilon=e, d=64, K=1, M=2, seed=1, L=1, **kw),
    }
    if protocol not in makers:
        raise ParameterError(f"protocol must be one of {sorted(makers)}, got {protocol!r}")
    try:
        return makers[protocol](epsilon, **changes)
    except TypeError as exc:          # an unknown or duplicated parameter name
        raise ParameterError(f"bad parameter for {protocol}: {exc}") from None


def audit_protocol(protocol: str, epsilon: float, reports: int = DEFAULT_REPORTS, rng: RngLike = None,
                   threads: int = 0, confidence: float = CONFIDENCE, **changes) -> AuditResult:
    """:func:`audit` of :func:`default_params` ``(protocol, epsilon, **changes)``."""
    return audit(default_params(protocol, epsilon, **changes), reports, rng=rng, confidence=confidence,
                 threads=threads)
