"""Registration hooks shared by several built-in protocols (``Protocol`` fields that more
than one family fills the same way): seeded example inputs, wire fields, audit plans,
closed-form variances and simulation runs. A protocol's own hooks live in its module."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Dict, List, Set, Tuple

import numpy as np

from .. import _core
from .._budget import effective, rr_loss
from .._validate import MAX_EPSILON, MIN_EPSILON, rr_effective_epsilon
from ..audit import Plan, hash_support, set_inputs, support_events, value_inputs
from ..errors import ParameterError
from ..estimates import PLUG_IN
from .._base import WireField, bits_for
from ._hadamard_layout import _parity_sign, binary_flip_threshold
from ..uncertainty import TRUE_FREQUENCY, BinomialCounts, MedianOfGroups, PlugIn

#: The codebook of a +-1 column on the wire.
SIGN = (-1, 1)


# -- examples ----------------------------------------------------------------------------------
def zipf_values(d: int, n: int = 4000, seed: int = 1) -> np.ndarray:
    """Zipf-like client values in ``[0, d)``: a few heavy values and a long tail."""
    rng = np.random.default_rng(seed)
    return np.minimum(rng.zipf(1.3, size=n) - 1, d - 1)



def random_sets(d: int, n: int = 800, seed: int = 2) -> List[List[int]]:
    """Set-valued client inputs: ``n`` users holding 0..4 distinct items of ``[0, d)``."""
    rng = np.random.default_rng(seed)
    return [sorted(rng.choice(d, size=int(rng.integers(0, 5)), replace=False).tolist()) for _ in range(n)]


# -- wire fields ---------------------------------------------------------------------------------
def row_bit_wire(p: Any) -> List[WireField]:
    """[WW] Fact 2.1: the Hadamard row the client drew and one bit."""
    return [WireField("rows", bits_for(p.hadamard_size), dtype="uint32"), WireField("bits", 1, SIGN, "int8")]


def olh_wire(p: Any) -> List[WireField]:
    """OLH over ``F_pH``: the hashed value ``z < g`` and the hash ``(a0, a1)``."""
    return [WireField("z", bits_for(p.g)), WireField("a0", bits_for(p.field_size)),
            WireField("a1", bits_for(p.field_size))]


# -- audit plans and effective epsilons -----------------------------------------------------------
def binary_epsilon(params: Any) -> float:
    """The effective epsilon of one binary flip at ``params.epsilon`` (Hadamard family)."""
    return rr_effective_epsilon(binary_flip_threshold(params.epsilon), 2)


def rr_epsilon(symbols: str) -> Callable[[Any], float]:
    """The effective epsilon of one RR over ``params.<symbols>`` symbols."""
    return lambda params: rr_effective_epsilon(params.flip_threshold, getattr(params, symbols))


def parity_sign(x: np.ndarray) -> np.ndarray:
    """``(-1)^popcount(x)``: the Hadamard entry of a row-and-column mask."""
    return np.asarray(_parity_sign(x))


def layout_plan(params: Any) -> Plan:
    """Inputs 0 and 1; a report ``(group, row, bit)`` supports w if bit is w's Hadamard sign there."""
    layout = params.layout()

    def support(reports: Any, w: List[int]) -> np.ndarray:
        n = len(reports.bits)
        groups = np.zeros(n, dtype=np.int64) if reports.groups is None else reports.groups.astype(np.int64)
        y = layout.group_hashes(groups, np.full(n, w[0], dtype=np.uint64))
        col = y + layout.table[groups, 3]
        return np.asarray(parity_sign(reports.rows.astype(np.uint64) & col) == reports.bits)
    return Plan(value_inputs(0, 1), support_events(support, [0], [1]),
                ("bit = sign(x0) != sign(x1)", "bit = sign(x1) != sign(x0)"))


def count_sketch_plan(params: Any) -> Plan:
    """Hashtogram / TreeHist-CS: the report's bit is the sign of w's bucket in its group."""
    pid = params.protocol

    def support(reports: Any, w: List[int]) -> np.ndarray:
        n = len(reports.bits)
        x = np.full(n, w[0], dtype=np.uint64)
        if pid == "treehist-cs":
            x = x >> (params.L - (reports.groups.astype(np.int64) // params.R + 1)).astype(np.uint64)
        bucket, sign = params.hashes(reports.groups, x)
        return np.asarray(sign * parity_sign(reports.rows.astype(np.uint64) & bucket) == reports.bits)
    return Plan(value_inputs(0, 1), support_events(support, [0], [1]),
                ("bit = sign(x0) != sign(x1)", "bit = sign(x1) != sign(x0)"))


def olh_plan(field: Any, g: int, x0: Any, x1: Any, inputs: Any, describe: Tuple[str, str]) -> Plan:
    """A plan whose events are "the report's hash of (one of) ``x0`` is z, of ``x1`` not"."""
    return Plan(inputs, support_events(hash_support(field, g), x0, x1), describe)


def prime_field_of(params: Any) -> Any:
    return _core.Field.prime(params.field_size)


# -- PrivSketch-family sketches --------------------------------------------------------------------
def sketch_epsilon(params: Any) -> float:
    """One flip per sent bit: 1, M or K M bits of the sketch (their losses add exactly)."""
    return effective(params.bits_per_report * rr_loss(params.flip_threshold, 2))


def sketch_of(params: Any, items: Any) -> np.ndarray:
    """The user's K x M 0/1 sketch of ``items`` (flat, length K M)."""
    sketch = np.zeros(params.K * params.M, dtype=np.int8)
    if len(items):
        sketch[params.cells(np.asarray(items, dtype=np.uint64)).astype(np.int64).ravel()] = 1
    return sketch


def covering_items(params: Any) -> List[int]:
    """The shortest prefix of ``[0, d)`` whose sketch has the most 1-cells."""
    cells = params.cells(np.arange(params.d, dtype=np.uint64)).astype(np.int64)
    seen: Set[int] = set()
    target = np.unique(cells).size
    for x in range(params.d):
        seen.update(cells[x].tolist())
        if len(seen) == target:
            return list(range(x + 1))
    return list(range(params.d))


def order_plan(params: Any) -> Plan:
    """PrivSketch's ordering matrix: it ranks the user's 1-cells on top."""
    cells = sketch_of(params, [0]).nonzero()[0]
    top = params.K * params.M - cells.size

    def order_events(reports: Any) -> Tuple[np.ndarray, np.ndarray]:
        ranks = reports.order.reshape(len(reports.order), -1)[:, cells]
        return np.zeros(len(ranks), dtype=bool), np.all(ranks >= top, axis=1)
    return Plan(set_inputs([], [0]), order_events, ("never", "order ranks {0}'s cells on top"))


def sketch_bits_plan(params: Any) -> Plan:
    """The empty set against a set filling the sketch: the sent bits equal one's sketch."""
    pid = params.protocol
    full = [0] if pid == "privsketch-ldp" else covering_items(params)
    sketches = (2 * sketch_of(params, []) - 1, 2 * sketch_of(params, full) - 1)
    K, M = params.K, params.M

    def sketch_support(reports: Any, w: int) -> np.ndarray:
        sk = sketches[w]
        if pid == "privsketch-ldp":
            match = reports.bit == sk[reports.k.astype(np.int64) * M + reports.m.astype(np.int64)]
        elif pid == "multi-pcms-mean":
            match = np.all(reports.bits == sk.reshape(K, M)[reports.row.astype(np.int64)], axis=1)
        else:
            match = np.all(reports.bits.reshape(len(reports.bits), -1) == sk, axis=1)
        return np.asarray(match)
    return Plan(set_inputs([], full), support_events(sketch_support, 0, 1),
                ("bits = sketch(empty) != sketch(x1)", f"bits = sketch({len(full)} items) != sketch(empty)"))


def tracked_candidates(server: Any) -> Any:
    """Servers that count a candidate set answer for it."""
    return server.candidates


# -- closed-form variances (estimates) -------------------------------------------------------------
def theory() -> Any:
    from .. import theory as _theory

    return _theory


def own_variance(server: Any, candidates: Any) -> Tuple[Any, str]:
    """The protocol's ``Params.variance(n, f)``."""
    p, n = server.params, server.n
    return (lambda f: p.variance(n, f)), f"{PLUG_IN} (the protocol's closed form, Params.variance)"


#: Targets of the estimators that hash collisions bias (:attr:`ldpfast.estimates.Estimate.target`).
HASH_BIASED = ("f plus the collision bias of the run's public hash functions: the other values each "
               "function maps onto x's cell, less their expected share (zero on average over the draw of "
               "the functions, fixed once they are drawn)")
COUNT_MEAN = ("fbar: the count-mean sketch frequency, the share of a user's K cells of x that are 1, "
              "averaged over the users (>= f: the other items of a set that share x's cells add to it)")
COUNT_MIN = ("ftilde: the count-min sketch frequency, the share of users all of whose K cells of x are 1 "
             "(>= f: the other items of a set that share x's cells add to it)")


def cmshe_variance(server: Any, candidates: Any) -> PlugIn:
    p, n = server.params, server.n
    return PlugIn(lambda f: theory().cmshe_variance(p.epsilon, n, f, m=p.m), len(candidates),
                  f"{PLUG_IN} (theory.cmshe_variance, given the run's hash functions)", HASH_BIASED)


def median_of_groups(server: Any, candidates: Any, groups: int, scale: float, hashed: bool, signed: bool,
                     correction: float = 1.0) -> MedianOfGroups:
    """The median of ``groups`` group estimates of a Hadamard sketch (HadaOracle, HadaHeavy,
    Hashtogram, TreeHist-CS). A group estimate is ``scale c_eps / n`` times a sum of one
    +-1 term per user (the user is in the group with probability ``1/scale``), with mean
    its share ``theta`` of matching users: variance ``(scale c_eps^2 - theta)/n`` (derived
    here; ``correction`` scales it for a collision correction ``(m E - 1)/(m - 1)``)."""
    from ..theory.hadamard import c_eps

    n, c2 = server.n, c_eps(server.params.epsilon) ** 2
    if not hashed:
        target = TRUE_FREQUENCY
    elif signed:
        target = ("theta: the median over the groups of f plus the signed share sum g(x') g(x) f(x') of the other "
                  "values x' that the group's hash maps onto x's bucket (zero on average over the draw of the "
                  "hashes, fixed once they are drawn)")
    elif correction == 1.0:
        target = ("theta: the median over the groups of f plus the share of users holding another value that the "
                  "group's hash maps onto x's bucket (>= f: collisions add to it)")
    else:
        target = ("theta: the median over the groups of the collision-corrected (m (f + c) - 1)/(m - 1), c the "
                  "share of users holding another value that the group's hash maps onto x's bucket")
    return MedianOfGroups(lambda f: correction * (scale * c2 - np.asarray(f, dtype=np.float64)) / n, groups,
                          len(candidates), f"median of {groups} group estimates of variance (scale c_eps^2 - "
                          f"theta)/n, scale = {scale:g} (ldpfast.uncertainty.MedianOfGroups, "
                          f"{'equal' if not hashed else 'hashed: bounds for any'} group expectations)", target,
                          homogeneous=not hashed)


def olh_variance(server: Any, candidates: Any) -> PlugIn:
    """OLH: the match count ``C(x) = #{i : h_i(x) = z_i}`` is a sum of independent
    Bernoullis, ``p = 1 - t/2^64`` for the holders of ``x`` and ``1/g`` for the others (over
    the draw of each user's hash), so its tests are exact (:class:`BinomialCounts`)."""
    p, n = server.params, server.n
    em1, g = math.expm1(p.epsilon), p.g
    # debias_matches with mu = m = g, inverted: C/n = 1/g + em1 (g - 1)/(g (em1 + g)) fhat
    exact = BinomialCounts(n, 1.0 - p.flip_threshold / 2.0**64, 1.0 / g, (1.0 / g, em1 * (g - 1) / (g * (em1 + g))))
    return PlugIn(lambda f: theory().olh_variance(p.epsilon, n, f, g=g), len(candidates),
                  f"{PLUG_IN} (theory.olh_variance); exact binomial tests of the match counts", counts=exact)


def olh_model(target: str, sampled: bool) -> Callable[[Any, Any], PlugIn]:
    """The ``variance`` hook of an OLH phase whose estimates are unbiased for ``target``
    (SVIM's phases: no exact count test). ``sampled``: each user reports one sampled item,
    so the sampling adds its variance (:func:`ldpfast.theory.sampled_report_variance`)."""
    def variance(server: Any, candidates: Any) -> PlugIn:
        p, n = server.params, server.n
        if not sampled:
            return PlugIn(lambda f: theory().olh_variance(p.epsilon, n, f, g=p.g), len(candidates),
                          f"{PLUG_IN} (theory.olh_variance)", target)
        e = math.exp(p.epsilon)
        return PlugIn(lambda f: theory().sampled_report_variance(e / (e + p.g - 1), 1 / p.g, n, f),
                      len(candidates), f"{PLUG_IN} (theory.sampled_report_variance of OLH)", target)
    return variance


# -- simulation entries -----------------------------------------------------------------------------
def draw(gen: np.random.Generator) -> int:
    return int(gen.integers(0, 2**63))


def simulated_own_variance(params: Any, data: Any, f: Any) -> Any:
    return params.variance(data.n, f)  # the protocol's closed form (ldpfast.theory)


def simulated_own_l2(params: Any, n: int, size: int) -> float:
    # Var is affine in f and sum_x f(x) <= 1 over the values of interest.
    at_zero, at_one = params.variance(n, 0.0), params.variance(n, 1.0)
    return float(size * at_zero + max(0.0, at_one - at_zero))


def simulated_cmshe_variance(params: Any, data: Any, f: Any) -> Any:
    # The family is redrawn every run, so its bias adds PAN Thm 3.10's term to the MSE.
    others = float(np.sum(data.frequencies(np.unique(data.values)) ** 2)) - f * f
    return theory().cmshe_variance(params.epsilon, data.n, f, m=params.m, k=params.k, sum_sq_other=others)


def sketch_simulation(pid: str, label: str, summary: str, **estimate: Any) -> Callable[[], Tuple[Any, ...]]:
    """The ``SetAlgorithm`` of a K x M sketch protocol ([PS] defaults K = 4, M = 128): run
    on set data, estimate the whole domain."""
    def run(eps: float, sets: Any, gen: np.random.Generator, k: int) -> np.ndarray:
        import warnings

        from .._base import protocol
        from ..errors import PrivacyWarning

        proto = protocol(pid)
        params_type: Any = proto.params
        params = params_type.create(epsilon=eps, d=sets.d, seed=draw(gen))
        with warnings.catch_warnings():  # PrivSketch's ordering matrix: simulated on purpose
            warnings.simplefilter("ignore", PrivacyWarning)
            reports = proto.client(params, rng=draw(gen)).perturb(sets)
        return np.asarray(proto.aggregator(params).update(reports).estimate(**estimate), dtype=np.float64)

    def entries() -> Tuple[Any, ...]:
        from .._base import protocol
        from ..experiments import SetAlgorithm

        return (SetAlgorithm(pid, label, protocol(pid).module.replace("ldpfast.", ""), run, summary),)
    return entries


def heavy_params(pid: str, factory: str) -> Callable[..., Any]:
    """``make_params`` of a heavy-hitter simulation of protocol ``pid``: ``Params.<factory>(eps, d, n, beta)``."""
    def make(eps: float, data: Any, beta: float, gen: np.random.Generator) -> Any:
        from .._base import protocol

        return getattr(protocol(pid).params, factory)(eps, data.d, data.n, beta, hash_seed=draw(gen))
    return make


# -- server costs of ldpfast params / ldpfast.recommend (ComparisonRow) ---------------------------

def per_user_hash_cost() -> Dict[str, Any]:
    """``ComparisonRow`` costs of a server that keeps per-user-hash reports ``(z, a0, a1)``
    (OCMS, OLH, BLH): 24 bytes a report, one hashed (report, candidate) pair per report and
    candidate of a query."""
    return {"server_ops": lambda n, q: float(n) * q, "state_bytes": lambda n, q: 24.0 * n}


def counter_cost(cells: int, transform: float = 0.0) -> Dict[str, Any]:
    """``ComparisonRow`` costs of a server holding ``cells`` int64 counters: one update per
    report, ``transform`` steps to decode them (e.g. an FWHT's ``D log2 D``), one step per
    candidate."""
    return {"server_ops": lambda n, q: float(n) + transform + q, "state_bytes": lambda n, q: 8.0 * cells}



# -- extreme parameters --------------------------------------------------------------------------
def edges(**ranges: Tuple[Any, Any]) -> Callable[[Any], List[Any]]:
    """``Protocol.extremes``: the given parameters with each field of ``ranges`` set to each
    end of its ``(smallest, largest)`` range (``epsilon``, where the parameters have one:
    ``[MIN_EPSILON, MAX_EPSILON]`` unless given). An end the parameters refuse given their
    other fields (the largest epsilon randomized response over ``g`` symbols can sample,
    the largest ``d`` a field holds) moves inward to the last value they accept, found by
    bisection from the given value."""
    def extremes(params: Any) -> List[Any]:
        named = {field.name for field in dataclasses.fields(params)}
        spans = {"epsilon": (MIN_EPSILON, MAX_EPSILON)} if "epsilon" in named else {}
        spans.update(ranges)
        return [_last_accepted(params, name, end) for name, ends in spans.items() for end in ends]
    return extremes


def _last_accepted(params: Any, name: str, end: Any) -> Any:
    """``params`` with field ``name`` at ``end``, or at the accepted value nearest to it
    between the current value (accepted) and ``end`` (acceptance is an interval)."""
    def accepted(value: Any) -> Any:
        try:
            return dataclasses.replace(params, **{name: value})
        except ParameterError:
            return None

    found = accepted(end)
    inside, outside = getattr(params, name), end
    while found is None:
        middle = (inside + outside) // 2 if isinstance(end, int) else inside + (outside - inside) / 2
        if middle in (inside, outside):
            return dataclasses.replace(params, **{name: inside})
        if accepted(middle) is None:
            outside = middle
        else:
            inside = middle
    return found
