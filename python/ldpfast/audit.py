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

Power: :attr:`AuditResult.detectable_excess` is the smallest excess ``Delta`` of the true
loss over ``epsilon`` on an audited event that the run detects (``eps_lb > epsilon``)
with probability 90%, from the observed hit counts ``h_0`` (favoured input) and ``h_1``:
the bound falls ``log(h_0/h_1) - log(lo_0/hi_1)`` below the estimated loss (the
Clopper-Pearson margin), and the estimate itself spreads with standard deviation
``sqrt(s_0^2 + s_1^2)``, ``s_i = sqrt((1 - p_i)/(n p_i))`` (delta method), so
``Delta = margin + z_{0.9} sqrt(s_0^2 + s_1^2)`` (infinite when an event was never seen).
A run whose ``detectable_excess`` exceeds the excess one wants to catch is inconclusive,
not a pass (``ldpfast audit`` exits 3 then).

Memoized (longitudinal) protocols have two budgets, each audited: ``budget="report"``
(``eps_1``, one report from a fresh user) and ``budget="permanent"`` (``eps_inf``: the
permanent randomized response, what unboundedly many reports of one value reveal), the
latter drawn with ``client.permanent(...)`` and the same events.

Only a lower bound: a mechanism can pass (``eps_lb <= epsilon``) and still leak through an
event the audit does not test. :func:`effective_epsilon` gives the exact epsilon implied by
the integer flip thresholds the samplers use.

Randomness: ``rng=None`` draws fresh OS entropy; a seed makes the audit reproducible.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from typing import Any, Callable, Dict, Tuple

import numpy as np

from . import _budget, _core
from ._base import AuditHooks, Params, protocol, protocols
from ._random import KeySource, RngLike
from ._validate import check_int
from .errors import ParameterError

__all__ = ["AuditResult", "audit", "audit_protocol", "default_params", "effective_epsilon", "clopper_pearson",
           "audited", "Plan", "value_inputs", "set_inputs", "support_events", "hash_support", "log_ratio",
           "detectable_excess", "CONFIDENCE", "DEFAULT_REPORTS", "POWER", "BUDGETS"]

#: Default confidence of :func:`audit` (probability that ``eps_lb`` is a true lower bound).
CONFIDENCE = 0.99
#: Default reports per input.
DEFAULT_REPORTS = 1_000_000
#: Probability with which :attr:`AuditResult.detectable_excess` is detected.
POWER = 0.9
#: What :func:`audit` measures: one report (``eps_1`` of memoized protocols, the only budget
#: of the others), or a memoized protocol's permanent response (``eps_inf``).
BUDGETS = ("report", "permanent")
_CHUNK = 1 << 17
#: ``AUDITED`` (a module attribute computed on access): the protocols :func:`default_params`
#: and the CLI's ``all`` cover, every registered protocol with an audit plan.


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


# -- effective epsilon and plans: each protocol's registration (AuditHooks) -----------------------
def effective_epsilon(params: Any) -> float:
    """The epsilon a client with these parameters really satisfies, computed from the integer
    flip thresholds its samplers use (:func:`ldpfast._validate.rr_effective_epsilon`) and the
    mechanism's composition (each protocol's ``AuditHooks.effective_epsilon``): e.g. one RR
    over ``m`` symbols (GRR, OCMS, OLH), one binary flip (Hadamard protocols), ``M`` or
    ``K M`` flipped bits (Multi-PCMS-Mean / -Min). For PrivSketch and PrivSketch-noSmp this
    is only the randomized-response part: their ordering matrix is not LDP at all.

    Raises:
        ParameterError: the protocol registers no audit hooks.
    """
    return _hooks(params.protocol).effective_epsilon(params)


def log_ratio(numerator: int, denominator: int) -> float:
    """``log(numerator/denominator)`` of integers, to 90 digits, then rounded up to a double
    (an effective epsilon is never reported below the exact one)."""
    with decimal.localcontext() as ctx:
        ctx.prec = _budget.PRECISION
        return _budget.effective((decimal.Decimal(numerator) / decimal.Decimal(denominator)).ln())


@dataclasses.dataclass
class Plan:
    """Two client inputs (``make(i, n)`` builds n copies of input i, as the client's
    ``perturb`` takes them), and ``events(reports)`` returning boolean arrays ``(favours
    x0, favours x1)``; ``describe`` names the events."""

    make: Callable[[int, int], Any]
    events: Callable[[Any], Tuple[np.ndarray, np.ndarray]]
    describe: Tuple[str, str]


def value_inputs(x0: int, x1: int) -> Callable[[int, int], np.ndarray]:
    """``make`` of a :class:`Plan` whose inputs are the values ``x0`` and ``x1``."""
    return lambda i, n: np.full(n, (x0, x1)[i], dtype=np.uint64)


def set_inputs(s0: Any, s1: Any) -> Callable[[int, int], Tuple[np.ndarray, np.ndarray]]:
    """``make`` of a :class:`Plan` whose inputs are the item sets ``s0`` and ``s1``."""
    def make(i: int, n: int) -> Tuple[np.ndarray, np.ndarray]:
        s = np.asarray((s0, s1)[i], dtype=np.uint64)
        return np.arange(n + 1, dtype=np.int64) * s.size, np.tile(s, n)
    return make


def support_events(support: Callable[[Any, Any], np.ndarray], w0: Any,
                   w1: Any) -> Callable[[Any], Tuple[np.ndarray, np.ndarray]]:
    """``events`` of a :class:`Plan`: the report supports ``w0`` and not ``w1``, and the
    reverse, for ``support(reports, w) -> bool array``."""
    def events(reports: Any) -> Tuple[np.ndarray, np.ndarray]:
        s0, s1 = support(reports, w0), support(reports, w1)
        return s0 & ~s1, s1 & ~s0
    return events


def hash_support(field: Any, m: int) -> Callable[[Any, Any], np.ndarray]:
    """Report ``(z, a0, a1)`` supports one of the values ``w`` if the user's hash of it is z."""
    def support(reports: Any, w: Any) -> np.ndarray:
        hit = np.zeros(len(reports.z), dtype=bool)
        for v in w:
            x = np.full(len(reports.z), v, dtype=np.uint64)
            hit |= _core.ocms_hash(field, reports.a0, reports.a1, x, m) == reports.z
        return hit
    return support


def _hooks(pid: str) -> AuditHooks:
    hooks = protocol(pid).audit
    if hooks is None:
        raise ParameterError(f"protocol {pid!r} registers no audit plan (Protocol.audit); audited "
                             f"protocols: {list(audited())}")
    return hooks


def _canonical(name: str) -> str:
    """The protocol id of ``name`` (an id or an alias such as ``cms-he``, see
    :func:`ldpfast._registry.aliases`); an unknown name unchanged."""
    try:
        return protocol(name).id
    except ParameterError:
        return name


def audited(budget: str = "report") -> Tuple[str, ...]:
    """The registered protocols with an audit plan (what the CLI's ``all`` audits);
    ``budget="permanent"``: those with a memoized permanent response."""
    _check_budget(budget)
    return tuple(sorted(pid for pid, proto in protocols().items() if proto.audit is not None
                        and (budget == "report" or proto.audit.permanent_epsilon is not None)))


def _check_budget(budget: str) -> None:
    if budget not in BUDGETS:
        raise ParameterError(f"budget must be one of {BUDGETS}, got {budget!r}")


def __getattr__(name: str) -> Tuple[str, ...]:
    if name == "AUDITED":
        return audited()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- the audit -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class AuditResult:
    """``eps_lb``: the lower bound on the privacy loss at ``confidence``; ``epsilon``: the
    claimed one; ``effective_epsilon``: from the samplers' thresholds; ``reports`` per input;
    ``event``: the event that gave ``eps_lb``; ``hits``: its count under the input it
    favours and under the other one; ``detectable_excess``: the smallest excess of the true
    loss over ``epsilon`` this run would detect with probability :data:`POWER` (see the
    module docstring; ``inf`` when the events were too rare)."""

    protocol: str
    epsilon: float
    eps_lb: float
    reports: int
    event: str
    hits: Tuple[int, int]
    confidence: float
    effective_epsilon: float
    detectable_excess: float = math.inf
    budget: str = "report"

    @property
    def violation(self) -> bool:
        """``eps_lb > epsilon``: evidence, at ``confidence``, that the client is not eps-LDP."""
        return self.eps_lb > self.epsilon

    def to_dict(self) -> Dict[str, Any]:
        """The result as JSON-ready values (``inf`` as the string ``"inf"``)."""
        out = dataclasses.asdict(self)
        out["hits"] = list(self.hits)
        out["violation"] = self.violation
        return {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def detectable_excess(hits: Tuple[int, int], reports: int, confidence: float = CONFIDENCE,
                      power: float = POWER) -> float:
    """The smallest excess of the true loss over the claim that an audit with these event
    counts (under the favoured and the other input, ``reports`` each) detects with
    probability ``power`` (module docstring); ``inf`` when either count is 0."""
    from statistics import NormalDist

    favoured, other = int(hits[0]), int(hits[1])
    if min(favoured, other) <= 0:
        return math.inf
    alpha = (1.0 - confidence) / 4.0
    lo, _ = clopper_pearson(favoured, reports, alpha)
    _, hi = clopper_pearson(other, reports, alpha)
    margin = math.log(favoured / other) - math.log(lo / hi)
    spread = math.hypot(*(math.sqrt((1.0 - h / reports) / h) for h in (favoured, other)))
    return margin + NormalDist().inv_cdf(power) * spread


def audit(params: Any, reports: int = DEFAULT_REPORTS, rng: RngLike = None, confidence: float = CONFIDENCE,
          threads: int = 0, budget: str = "report") -> AuditResult:
    """Audit the client of ``params``' protocol (any registered protocol with a plan, see the
    module docstring): ``reports`` reports per input, events fixed in advance, Clopper-Pearson
    bounds with a union bound over the four bounds used. ``budget="permanent"`` audits a
    memoized protocol's permanent response (``eps_inf``, see the module docstring). Returns
    :class:`AuditResult`.
    ``eps_lb`` is ``-inf`` when no event is more likely under one input than the other bound
    allows (e.g. an event never seen). Clients that warn (not-LDP protocols) warn here too."""
    reports = check_int("reports", reports, 1)
    if isinstance(confidence, bool) or not isinstance(confidence, float) or not 0.5 <= confidence < 1.0:
        raise ParameterError(f"confidence must be a float in [0.5, 1), got {confidence!r}")
    _check_budget(budget)
    hooks = _hooks(params.protocol)
    permanent = budget == "permanent"
    effective_of = hooks.effective_epsilon
    if permanent:
        if hooks.permanent_epsilon is None:
            raise ParameterError(f"protocol {params.protocol!r} has no permanent response to audit (not memoized); "
                                 f"memoized protocols: {list(audited('permanent'))}")
        effective_of = hooks.permanent_epsilon
    plan: Plan = hooks.plan(params)
    proto = protocols()[params.protocol]
    gen = KeySource(rng).generator()
    hits = np.zeros((2, 2), dtype=np.int64)          # hits[input, event]
    for i in (0, 1):
        client = proto.client(params, rng=gen, threads=threads)
        draw = client.permanent if permanent else client.perturb
        for start in range(0, reports, _CHUNK):
            batch = draw(plan.make(i, min(_CHUNK, reports - start)))
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
    # the power of the more informative event (the one an excess would show in first)
    detectable = min(detectable_excess((int(hits[e, e]), int(hits[1 - e, e])), reports, confidence)
                     for e in (0, 1))
    claimed = float(params.eps_inf) if permanent else float(params.epsilon)
    effective = effective_of(params)
    return AuditResult(protocol=params.protocol, epsilon=claimed, eps_lb=best[0], reports=reports,
                       event=plan.describe[event], hits=(int(hits[event, event]), int(hits[1 - event, event])),
                       confidence=confidence, effective_epsilon=effective, detectable_excess=detectable,
                       budget=budget)


def default_params(protocol: str, epsilon: float, **changes: Any) -> Params:
    """A small configuration of ``protocol`` for auditing (its ``AuditHooks.params``: small
    domains keep the events frequent, so the bound is tight; the mechanisms' privacy does
    not depend on the size). ``changes`` replace fields (e.g. ``reference=True`` for
    ``svim-padded``, ``amplify=True`` for ``ps-olh``)."""
    known = audited()
    protocol = _canonical(protocol)
    if protocol not in known:
        raise ParameterError(f"protocol must be one of {sorted(known)}, got {protocol!r}")
    try:
        return _hooks(protocol).params(epsilon, **changes)
    except TypeError as exc:          # an unknown or duplicated parameter name
        raise ParameterError(f"bad parameter for {protocol}: {exc}") from None


def audit_protocol(protocol: str, epsilon: float, reports: int = DEFAULT_REPORTS, rng: RngLike = None,
                   threads: int = 0, confidence: float = CONFIDENCE, budget: str = "report",
                   **changes: Any) -> AuditResult:
    """:func:`audit` of :func:`default_params` ``(protocol, epsilon, **changes)``."""
    return audit(default_params(protocol, epsilon, **changes), reports, rng=rng, confidence=confidence,
                 threads=threads, budget=budget)
