"""Projective Geometry Response (PGR; Feldman, Nelson, Nguyen, Talwar, "Private frequency
estimation via projective geometry", ICML 2022): Subset Selection's optimal error with
``log2 K`` bits per report and a fast decoder.

The values ``[0, d)`` are the first ``d`` points of the projective space PG(t-1, q) (``q``
prime; ``K = (q^t - 1)/(q - 1) >= d`` points, :mod:`ldpfast.theory.projective`). A user
holding ``x`` reports one point ``y``: with probability ``e^eps s / (e^eps s + K - s)`` a
uniform point of the hyperplane ``<x, y> = 0`` (``s`` points), otherwise a uniform point off
it, so every point of the hyperplane is ``e^eps`` times as likely as every other point. The
client runs in C++ (ChaCha20 per report, OS entropy by default). The server keeps the
histogram of reported points (``K`` counters, exact merges) and decodes all hyperplane sums
``C(x) = #{i : <x, y_i> = 0}`` at once with a dynamic program over the coordinates
(``O(K q t)`` additions in C++, threads, no ``K x K`` work); ``fhat = (C/n - p')/(p - p')``
is unbiased with the closed-form variance of :func:`ldpfast.theory.pgr_variance`::

    from ldpfast.protocols.frequency import pgr

    params = pgr.PGRParams(epsilon=1.0, d=2**14)        # q = 3, t = 10 by default
    reports = pgr.PGRClient(params).perturb(values)     # one uint32 point per user
    server = pgr.PGRServer(params).update(reports)
    est = server.frequencies()                       # with standard errors

The default ``q`` minimizes the exact variance over a few primes
(:func:`ldpfast.theory.pgr_optimal_q`); with ``t = 2`` (``e^eps`` above ``d``) PGR is
k-ary randomized response over ``q + 1`` symbols. Only prime ``q`` (no prime powers) and no
hybrid variant (the paper's HPG for very large ``e^eps``).
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ... import _core
from ..._base import (Aggregator, AuditHooks, ClientBase, ComparisonRow, Delta, Params as _ParamsBase, Protocol,
                     Reports as _ReportsBase, register_protocol)
from ..._validate import check_array, check_below, check_epsilon, check_int, check_values
from ...errors import FormatError, ParameterError, ReportError
from ...theory import projective as _theory
from ..._base import WireField, bits_for
from .._aliases import deprecated_names
from .._registration import edges, counter_cost, own_variance, simulated_own_l2, simulated_own_variance, zipf_values

__all__ = ["PGRParams", "PGRReports", "PGRClient", "PGRServer", "hyperplane_transform"]

PROTOCOL_ID = "pgr"
_TWO64 = 2**64


@dataclasses.dataclass(frozen=True)
class PGRParams(_ParamsBase):
    """PGR parameters.

    Attributes:
        epsilon: privacy parameter, in [2^-20, 700].
        d: domain size, ``2 <= d < 2^32``.
        q: the field size, a prime below 2^32; ``0`` (default) picks
            :func:`ldpfast.theory.pgr_optimal_q` (least variance within a decoding budget).
            ``t`` is then the smallest dimension with ``(q^t - 1)/(q - 1) >= d`` points
            (fewer than 2^32).
    """

    protocol: ClassVar[str] = PROTOCOL_ID
    epsilon: float
    d: int
    q: int = 0

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        d = check_int("d", self.d, 2, _theory.MAX_PGR_POINTS)
        q = check_int("q", self.q, 0, 2**32 - 1) or _theory.pgr_optimal_q(eps, d)[0]
        if not _theory._is_prime(q):
            raise ParameterError(f"q must be a prime below 2^32 (or 0 for the default), got {q}")
        if _theory.pgr_points(q, _theory.pgr_dimension(q, d)) > _theory.MAX_PGR_POINTS:
            raise ParameterError(f"q = {q} needs {_theory.pgr_points(q, _theory.pgr_dimension(q, d))} points "
                                 f"for d = {d}; PGR supports fewer than 2^32")
        for name, value in (("epsilon", eps), ("d", d), ("q", q)):
            object.__setattr__(self, name, value)
        threshold = self.in_threshold
        if not 2**32 <= threshold <= _TWO64 - 2**32:
            # both branches need probability >= 2^-32 for the 64-bit sampler to be faithful
            odds = math.log(self.points - self.hyperplane) - math.log(self.hyperplane)
            raise ParameterError(f"epsilon must be in [{odds - math.log(2.0**32 - 1):.6g}, "
                                 f"{odds + math.log(2.0**32 - 1):.6g}] for PGR with d={d}, q={q}, t={self.t} (the "
                                 f"64-bit sampler needs both branches >= 2^-32), got {eps!r}")

    @property
    def t(self) -> int:
        """The dimension: points are lines of ``F_q^t``."""
        return _theory.pgr_dimension(self.q, self.d)

    @property
    def points(self) -> int:
        """``K = (q^t - 1)/(q - 1)``: the report alphabet (``K >= d``)."""
        return _theory.pgr_points(self.q, self.t)

    @property
    def hyperplane(self) -> int:
        """``s = (q^(t-1) - 1)/(q - 1)``: the points of one hyperplane."""
        return _theory.pgr_points(self.q, self.t - 1)

    @property
    def in_threshold(self) -> int:
        """64-bit threshold of reporting a point of the user's hyperplane:
        ``floor(2^64 e^eps s / (e^eps s + K - s))`` from 80-digit arithmetic, so the effective
        epsilon never exceeds ``epsilon``."""
        with decimal.localcontext() as ctx:
            ctx.prec = 80
            weight = decimal.Decimal(self.epsilon).exp() * self.hyperplane
            exact = decimal.Decimal(_TWO64) * weight / (weight + (self.points - self.hyperplane))
            return int(exact.to_integral_value(rounding=decimal.ROUND_FLOOR))

    @property
    def probabilities(self) -> Tuple[float, float]:
        """``(p, p')``: probability that a report lies on the hyperplane of the user's own
        value / of another given value."""
        p, po, _ = _theory.pgr_probabilities(self.epsilon, self.q, self.t)
        return p, po

    @property
    def communication_bits(self) -> int:
        """``ceil(log2 K)``."""
        return bits_for(self.points)

    def variance(self, n: int = 1, f: Any = 0.0) -> Any:
        """``Var(fhat)`` at true frequency ``f`` (:func:`ldpfast.theory.pgr_variance`)."""
        return _theory.pgr_variance(self.epsilon, self.q, self.t, n, f)

    def vectors(self, points: Any) -> np.ndarray:
        """The canonical vectors (first nonzero coordinate 1) of ``points``, ``(n, t)`` int64:
        point ``P(m-1) + r`` of the block with ``m`` coordinates from the leading 1 on has
        the digits of ``r`` (big-endian base ``q``) after it."""
        idx = np.asarray(points, dtype=np.int64).ravel()
        q, t = self.q, self.t
        starts = np.array([_theory.pgr_points(q, m) for m in range(t + 1)], dtype=np.int64)
        length = np.searchsorted(starts, idx, side="right")     # P(len - 1) <= idx < P(len)
        rest = idx - starts[length - 1]
        out = np.zeros((idx.size, t), dtype=np.int64)
        out[np.arange(idx.size), t - length] = 1
        for k in range(t - 1, 0, -1):
            digit, rest = rest % q, rest // q
            out[:, k] = np.where(k > t - length, digit, out[:, k])
        return out


@dataclasses.dataclass
class PGRReports(_ReportsBase):
    """PGR reports: one point ``y`` of PG(t-1, q) per user (uint32, ``y < K``)."""

    protocol: ClassVar[str] = PROTOCOL_ID
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"y": ("uint32", 1)}
    y: np.ndarray

    def __post_init__(self) -> None:
        self.y = check_array("y", self.y, np.uint32)


class PGRClient(ClientBase):
    """PGR client (C++; one ChaCha20 keystream per report). ``rng=None`` (default) keys each
    batch from OS entropy, the only setting for real users; a seed is for simulation only."""

    def perturb(self, values: Any) -> PGRReports:
        """One point per value (integers in ``[0, d)``)."""
        p = self.params
        x = check_values(values, p.d)
        return PGRReports(y=_core.pgr_perturb(self._keys.key(), x, p.q, p.t, p.in_threshold, self.threads))


class PGRServer(Aggregator):
    """PGR aggregator: the histogram of reported points (``K`` uint64 counters); estimates
    decode every hyperplane sum at once (C++, cached per state)."""

    protocol: ClassVar[str] = PROTOCOL_ID
    params_type: ClassVar[type] = PGRParams
    reports_type: ClassVar[type] = PGRReports
    # _ingest reads y once (the kernel checks each value it counts; small batches are
    # clamped into their own array, as GRR does), so the template neither copies the batch
    # nor runs _validate first
    _ingest_validates: ClassVar[bool] = True
    _reads_once: ClassVar[bool] = True
    params: PGRParams

    def __init__(self, params: PGRParams, threads: int = 0):
        super().__init__(params)
        self.threads = check_int("threads", threads, 0)
        self._set_state({"counts": np.zeros(params.points, dtype=np.uint64)})

    @classmethod
    def _state_layout(cls, params: _ParamsBase) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        assert isinstance(params, PGRParams)
        return {"counts": ((params.points,), "uint64")}

    def _validate(self, reports: PGRReports) -> None:
        check_below(reports.y, self.params.points, "y", "points in", ReportError)

    def _ingest(self, reports: PGRReports) -> Delta:
        points, n = self.params.points, len(reports.y)
        if 8 * n < points:  # few reports: sparse counts, no histogram of the state's size
            self._check_call(8 * n, lambda: f"counting a batch of {n} PGR reports")
            symbols = np.minimum(reports.y, np.uint32(points))  # the one read of y: values >= K become K
            delta = self._delta().add_counts("counts", symbols, size=points + 1)
            if delta.touches("counts", points):
                first_bad = int(np.argmax(symbols == points))
            else:
                return delta
        else:
            self._check_call(8 * points, lambda: f"counting a batch of {n} PGR reports into {points} points")
            counts = np.zeros(points, dtype=np.uint64)
            first_bad = _core.pgr_update(reports.y, points, counts, self.threads)
            if first_bad == n:
                return self._delta().add_dense("counts", counts, "adding the batch")
        raise ReportError(f"y must be points in [0, {points}) (K for q = {self.params.q}, "
                          f"t = {self.params.t}); report {first_bad} is not")

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        if float(state["counts"].sum(dtype=np.float64)) >= 2.0**63:
            raise FormatError("stored counts sum to 2^63 or more (the report count would wrap)")

    @property
    def n(self) -> int:
        """Number of reports aggregated."""
        return int(self._st["counts"].sum(dtype=np.uint64))

    @property
    def counts(self) -> np.ndarray:
        """The histogram of reported points (a copy)."""
        return np.array(self._st["counts"])

    def hyperplane_counts(self) -> np.ndarray:
        """``C(x) = #{i : <x, y_i> = 0}`` for every point ``x < K`` (uint64, read-only; decoded
        once per state)."""
        state = self._st
        decoded: Optional[np.ndarray] = getattr(state, "_hyperplane_counts", None)
        if decoded is None:
            p = self.params
            decoded = _core.pgr_decode(state["counts"], p.q, p.t, self.threads)
            decoded.flags.writeable = False
            state._hyperplane_counts = decoded  # type: ignore[attr-defined]
        return decoded

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """``fhat(x) = (C(x)/n - p')/(p - p')`` for ``candidates`` (default: all of ``[0, d)``),
        fractions (counts with ``counts=True``)."""
        decoded = getattr(self._st, "_hyperplane_counts", None)
        self._check_query(candidates, 40, self.params.d, "a PGR query",
                          extra=0 if decoded is not None else 8 * self.params.points)
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        p = self.params
        hits = self.hyperplane_counts()
        hits = hits[:p.d] if candidates is None else hits[check_values(candidates, p.d, "candidates", "values in")]
        _, po, gap = _theory.pgr_probabilities(p.epsilon, p.q, p.t)
        est = (hits.astype(np.float64) / n - po) / gap
        return est * n if counts else est

    def _repr_extra(self) -> str:
        return f"t={self.params.t}, K={self.params.points}"


def hyperplane_transform(params: PGRParams, threads: int = 0) -> Any:
    """``g (K,) -> D g`` with ``(D g)(u) = sum of g(v) over the points v with <u, v> = 0``
    (float64; the decoder's hyperplane sums for real weights), in ``O(K q t)`` additions:
    the exact integer decoder (:meth:`PGRServer.hyperplane_counts`) run on ``g`` in 64-bit fixed
    point. Each sign's part is scaled so its sum is ``2^63`` and rounded to integers, which
    moves each of the ``s`` terms of an output by at most ``2^-64`` of that sum: every output
    is within ``s 2^-63 sum|g|`` (``< 2^-31 sum|g|``, and ``1e-14 sum|g|`` at ``K = 10^5``)."""
    from ..._memory import check_allocation

    q, t, points = params.q, params.t, params.points
    check_allocation(48 * points, f"the PGR channel's hyperplane sums over {points} points")

    def sums_of(part: np.ndarray) -> np.ndarray:
        total = float(part.sum())
        if total == 0.0:
            return np.zeros(points)
        scale = 2.0**63 / total
        units = np.rint(part * scale).astype(np.uint64)         # sums to < 2^63 + K: no uint64 wrap
        return np.asarray(_core.pgr_decode(units, q, t, threads).astype(np.float64) / scale)

    def transform(g: np.ndarray) -> np.ndarray:
        weights = np.asarray(g, dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(weights))
        if bad.size:
            raise ParameterError(f"g must hold finite weights, got {weights[bad[0]]!r} at index {bad[0]}")
        if weights.min(initial=0.0) >= 0.0:
            return sums_of(weights)
        return np.asarray(sums_of(np.maximum(weights, 0.0)) - sums_of(np.maximum(-weights, 0.0)))
    return transform


def _channel(server: PGRServer, candidates: Any) -> Any:
    """The IBU/MLE channel (:mod:`ldpfast.estimation`): one reported point per user, with
    probability ``a_in = P_H/s`` for each point of the value's hyperplane and ``a_out =
    (1 - P_H)/(K - s)`` for each other (``P_H``: the sampler's exact threshold), so
    ``A f = a_out sum(f) + (a_in - a_out) D f`` with the hyperplane sums ``D``
    (:func:`hyperplane_transform`, symmetric, so ``A^T`` is the same). Cells: the ``K``
    points' counts, sufficient: the full likelihood. A rest column spreads its mass
    uniformly over the values outside the candidates."""
    from ...estimation import Channel

    p = server.params
    n = server.n
    if n == 0:
        raise ReportError("cannot estimate frequencies from zero reports")
    xs = np.arange(p.d) if candidates is None else \
        check_values(candidates, p.d, "candidates", "values in", distinct=True).astype(np.int64)
    if xs.size == 0:
        raise ParameterError("candidates must not be empty")
    rest = xs.size < p.d
    outside = np.setdiff1d(np.arange(p.d), xs) if rest else xs[:0]
    transform = hyperplane_transform(p, server.threads)
    on = p.in_threshold / _TWO64
    a_in, a_out = on / p.hyperplane, (1.0 - on) / (p.points - p.hyperplane)
    gap, k = a_in - a_out, xs.size

    def forward(f: np.ndarray) -> np.ndarray:
        g = np.zeros(p.points)
        g[xs] = f[:k]
        if rest:
            g[outside] = float(f[k]) / outside.size
        return np.asarray(a_out * float(f.sum()) + gap * transform(g))

    def adjoint(w: np.ndarray) -> np.ndarray:
        sums = transform(np.asarray(w, dtype=np.float64))
        base = a_out * float(w.sum())
        out = base + gap * sums[xs]
        return np.append(out, base + gap * float(sums[outside].mean())) if rest else np.asarray(out)

    observed = server._st["counts"].astype(np.float64)
    rest_note = "; the rest column is uniform over the values outside the candidates" if rest else ""
    return Channel(observed, forward, adjoint, k + int(rest), n, rest, 1.0, "full",
                   f"one reported point per user (hyperplane {a_in:.6g}, off it {a_out:.6g} per point); the "
                   f"histogram of points is sufficient{rest_note}")


def _audit_plan(params: PGRParams) -> Any:
    from ...audit import Plan, support_events, value_inputs

    zero, one = params.vectors([0, 1])

    def support(reports: Any, w: int) -> np.ndarray:
        vectors = params.vectors(reports.y)
        return np.asarray(vectors @ (zero, one)[w] % params.q == 0)
    return Plan(value_inputs(0, 1), support_events(support, 0, 1),
                ("<y, x0> = 0 != <y, x1>", "<y, x1> = 0 != <y, x0>"))


def _effective_epsilon(params: PGRParams) -> float:
    from ...audit import log_ratio

    t = params.in_threshold
    return log_ratio(t * (params.points - params.hyperplane), (_TWO64 - t) * params.hyperplane)


def _compare(epsilon: float, d: int, n: int, f_star: float, **_: Any) -> Sequence[ComparisonRow]:
    """PGR's row; none where PGR has no parameters (d beyond its uint32 reports), so the
    planners leave it out there instead of failing."""
    try:
        p = PGRParams(epsilon=epsilon, d=d)
    except ParameterError:
        return []

    def var(f: Any) -> Any:
        return p.variance(n, f)
    return [ComparisonRow("PGR", p.points, p.communication_bits, var, simulated_own_l2(p, n, d),
                          f"projective geometry response, q = {p.q}, t = {p.t}",
                          **counter_cost(p.points, p.points * p.q * p.t), build=lambda: p)]


def _simulations() -> Tuple[Any, ...]:
    from ...experiments import Algorithm

    return (Algorithm("pgr", "PGR", "protocols.frequency.pgr", lambda eps, data, gen: PGRParams(epsilon=eps, d=data.d),
                      simulated_own_variance, simulated_own_l2,
                      "Projective Geometry Response: log2 K bits, optimal error, O(K q t) decoder"),)


def _wire(params: PGRParams) -> List[WireField]:
    return [WireField("y", bits_for(params.points), dtype="uint32")]


register_protocol(Protocol(
    PROTOCOL_ID, PGRParams, PGRReports, PGRServer, PGRClient,
    extremes=edges(d=(2, 2**20)), example=lambda: (PGRParams(epsilon=1.0, d=200), zipf_values(200, n=2000)),
    wire_fields=_wire, variance=own_variance, compare=_compare, simulations=_simulations, channel=_channel,
    # q = 3 forced: the audit exercises the hyperplane sampler (t = 4) at every epsilon
    audit=AuditHooks(lambda e, **kw: PGRParams(e, 16, **{"q": 3, **kw}), _audit_plan, _effective_epsilon)))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "pgr", {"Params": PGRParams, "Client": PGRClient,
                                                      "Server": PGRServer, "Reports": PGRReports})
