"""Subset Selection (SS): the k-subset mechanism of Ye and Barg (IEEE Trans. IT 2018) and
Wang et al. (2016), one of [PAN]'s comparison algorithms (Table I).

Each user holding ``x in [0, d)`` reports a set of ``k`` distinct values: with probability
``p = k e/(k e + d - k)`` the set contains ``x`` plus ``k - 1`` values drawn uniformly from
the others, otherwise ``k`` values drawn uniformly from the others. Every ``k``-subset that
contains ``x`` is then ``e`` times as likely as one that does not, so the mechanism is
eps-LDP. A value other than ``x`` is in the set with probability
``q = [p (k-1) + (1-p) k]/(d-1)``. The server counts how many sets contain each value and
estimates ``fhat(v) = (C(v)/n - q)/(p - q)`` (unbiased; variance
:func:`ldpfast.theory.subset_selection_variance`). The default ``k`` minimises that
variance at ``f = 0`` and is close to ``d/(e+1)``. A report costs ``k ceil(log2 d)`` bits (or
``d`` bits as a bit vector), which is why [PAN] rules SS out for large dictionaries.

State is the integer histogram of ``d`` counters, so merges are exact.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Mapping, Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike

from ... import _base, _core
from ..._aggregator import _exact_sum
from ..._delta import Delta, _State
from ..._validate import (MIN_EPSILON, check_below, check_epsilon, check_int, check_values,
                         probability_threshold)
from ...errors import FormatError, ParameterError, ReportError
from ...theory import pan_baselines as _pt
from ..._base import AuditHooks, ComparisonRow
from ...audit import Plan, log_ratio, value_inputs
from .._aliases import deprecated_names
from .._registration import edges, own_variance, simulated_own_l2, simulated_own_variance

if TYPE_CHECKING:
    from ..._base import WireField
    from ...estimation import Channel
    from ...experiments import Algorithm
    from ...theory._types import Real, RealLike

__all__ = ["SubsetSelectionParams", "SubsetSelectionReports", "SubsetSelectionClient", "SubsetSelectionServer", "MAX_D"]

#: Largest dictionary: the client draws one random key per value of the dictionary.
MAX_D = 1 << 24
_KEY_RANGE = 1 << 62
#: Random keys drawn per chunk of users (bounds the client's memory).
_CHUNK_KEYS = 1 << 22


@dataclasses.dataclass(frozen=True)
class SubsetSelectionParams(_base.Params):
    """Subset Selection parameters.

    Attributes:
        epsilon: privacy parameter in [2^-20, log((d-k)/k) + 22.18] (the 64-bit sampler
            needs the probability of leaving the user's value out to be at least 2^-32).
        d: dictionary size, ``2 <= d <= 2^24``.
        k: subset size in ``[1, d-1]``; ``0`` (default) picks
            :func:`ldpfast.theory.subset_selection_optimal_k`.
    """

    protocol: ClassVar[str] = "ss"

    epsilon: float
    d: int
    k: int = 0

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        d = check_int("d", self.d, 2)
        if d > MAX_D:
            raise ParameterError(f"d must be in [2, {MAX_D}], got {d}")
        k = check_int("k", self.k, 0) or _pt.subset_selection_optimal_k(eps, d)
        if k >= d:
            raise ParameterError(f"k must be in [1, d-1] = [1, {d - 1}], got {k}")
        for name, value in (("epsilon", eps), ("d", d), ("k", k)):
            object.__setattr__(self, name, value)
        t = self.exclude_threshold
        if not 2**32 <= t <= 2**64 - 2**32:
            # both branches need probability >= 2^-32 for the 64-bit sampler to be faithful
            low = max(MIN_EPSILON, math.log(d - k) - math.log(k) - math.log(2.0**32 - 1))
            high = math.log(d - k) - math.log(k) + math.log(2.0**32 - 1)
            raise ParameterError(f"epsilon must be in [{low:.6g}, {high:.6g}] for Subset Selection with d={d}, "
                                 f"k={k} (the 64-bit sampler needs both branches >= 2^-32), got {eps!r}")

    @property
    def probabilities(self) -> Tuple[float, float]:
        """``(p, q)``: probability that a value is reported when held / when not held."""
        return _pt.subset_selection_probabilities(self.epsilon, self.d, self.k)

    @property
    def exclude_threshold(self) -> int:
        """64-bit threshold of leaving the user's own value out:
        ``ceil(2^64 (d-k)/(k e + d - k))`` from 80-digit arithmetic, so the include
        probability never exceeds the exact one and the effective epsilon never exceeds
        ``epsilon``."""
        with decimal.localcontext() as ctx:
            ctx.prec = 80
            e = decimal.Decimal(self.epsilon).exp()
            exact = decimal.Decimal(2**64 * (self.d - self.k)) / (self.k * e + (self.d - self.k))
            return int(exact.to_integral_value(rounding=decimal.ROUND_CEILING))

    @property
    def communication_bits(self) -> int:
        """``min(d, k ceil(log2 d))``: the set as a bit vector or as ``k`` indices."""
        return min(self.d, self.k * (self.d - 1).bit_length())

    def variance(self, n: float = 1, f: RealLike = 0.0) -> Real:
        """The closed-form variance of an estimate (:func:`ldpfast.theory.subset_selection_variance`)."""
        return _pt.subset_selection_variance(self.epsilon, self.d, self.k, n, f)


@dataclasses.dataclass(eq=False)
class SubsetSelectionReports(_base.Reports):
    """A batch of reports: ``items``, a ``(n, k)`` uint64 array whose rows are strictly
    increasing values in ``[0, d)``."""

    protocol: ClassVar[str] = "ss"
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"items": ("uint64", 2)}

    items: np.ndarray

    def __post_init__(self) -> None:
        items = np.asarray(self.items)
        if items.ndim != 2 or items.dtype.kind not in "iu":
            raise ReportError(f"items must be a 2-D integer array (reports x k), got {items.dtype} {items.shape}")
        if items.dtype.kind == "i" and items.size and items.min() < 0:
            raise ReportError(f"items must be non-negative, got {int(items.min())}")
        self.items = np.ascontiguousarray(items, dtype=np.uint64)

    @classmethod
    def wire_fields(cls, params: Any) -> List[WireField]:
        """The ``k`` values of the subset, ``ceil(log2 d)`` bits each."""
        from ..._base import WireField, bits_for

        return [WireField("items", bits_for(params.d), shape=(params.k,))]

    def validate(self, params: SubsetSelectionParams) -> None:
        """Raise ReportError unless every row is ``k`` strictly increasing values below ``d``."""
        items = self.items
        if items.ndim != 2 or items.shape[1] != params.k:
            raise ReportError(f"items must have k = {params.k} columns, got shape {items.shape}")
        check_below(items.ravel(), params.d, "items", "values in", ReportError)
        if params.k > 1 and items.size:
            bad = ~(items[:, 1:] > items[:, :-1]).all(axis=1)
            if bad.any():
                row = int(np.argmax(bad))
                raise ReportError(f"items must be strictly increasing in each report, got {items[row].tolist()} "
                                  f"in report {row}")


class SubsetSelectionClient(_base.ClientBase):
    """Subset Selection client. ``rng=None`` (default) draws keys from the OS; a seed is for
    simulation only."""

    params: SubsetSelectionParams

    def perturb(self, values: ArrayLike) -> SubsetSelectionReports:
        """One ``k``-subset per value (integers in ``[0, d)``).

        Each user ranks the ``d - 1`` other values by independent uniform 62-bit keys (from
        ChaCha20: randomized response of 0 over ``[0, 2^62)`` that always moves) and takes
        the ``k`` (or, when its own value is included, ``k - 1``) smallest: a uniform subset
        up to key ties (probability below ``d^2 2^-63`` per user)."""
        p = self.params
        x = check_values(values, p.d)
        zeros = np.zeros(x.size, dtype=np.uint64)
        include = ~_core.randomized_response(self._keys.key(), zeros, 2, min(p.exclude_threshold, 2**64 - 1),
                                             self.threads).astype(bool)
        out = np.empty((x.size, p.k), dtype=np.uint64)
        chunk = max(1, _CHUNK_KEYS // (p.d - 1))
        for start in range(0, x.size, chunk):
            stop = min(x.size, start + chunk)
            rows = stop - start
            keys = _core.randomized_response(self._keys.key(), np.zeros(rows * (p.d - 1), dtype=np.uint64),
                                             _KEY_RANGE, probability_threshold(1.0), self.threads)
            order = np.argpartition(keys.reshape(rows, p.d - 1), p.k - 1, axis=1)[:, :p.k].astype(np.uint64)
            mine = x[start:stop, None]
            picked = order + (order >= mine)  # index among the others -> value (skips x)
            picked[include[start:stop], p.k - 1] = x[start:stop][include[start:stop]]
            out[start:stop] = np.sort(picked, axis=1)
        return SubsetSelectionReports(items=out)


class SubsetSelectionServer(_base.Aggregator):
    """Subset Selection aggregator: how many reported sets contain each value, and ``n``."""

    protocol: ClassVar[str] = "ss"
    params_type: ClassVar[type] = SubsetSelectionParams
    reports_type: ClassVar[type] = SubsetSelectionReports
    params: SubsetSelectionParams

    def __init__(self, params: SubsetSelectionParams):
        super().__init__(params)
        self._st = _State(counts=np.zeros(params.d, dtype=np.uint64), n=np.zeros(1, dtype=np.uint64))

    @classmethod
    def _state_layout(cls, params: Any) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        return {"counts": ((params.d,), "uint64"), "n": ((1,), "uint64")}

    @property
    def _counts(self) -> np.ndarray:
        counts: np.ndarray = self._st["counts"]
        return counts

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    @property
    def counts(self) -> np.ndarray:
        return self._counts.copy()

    # -- aggregation (the template is Aggregator.update / merge) -------------------------
    def _validate(self, reports: SubsetSelectionReports) -> None:
        reports.validate(self.params)

    def _ingest(self, reports: SubsetSelectionReports) -> Delta:
        return self._delta().add_counts("counts", reports.items).add("n", [len(reports)])

    def estimate(self, candidates: Optional[ArrayLike] = None, counts: bool = False, *,
                 clip: bool = False) -> np.ndarray:
        """``fhat(v) = (C(v)/n - q)/(p - q)`` for the candidates (default: all of ``[0, d)``);
        ``counts=True`` gives ``n fhat``; ``clip`` clips the fractions to ``[0, 1]``."""
        self._check_query(candidates, 32, self.params.d, "a subset-selection query")
        n = self.n
        if n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        hist = self._counts
        if candidates is not None:
            xs = check_values(candidates, self.params.d, "candidates", "values in")
            hist = hist[xs]
        p, q = self.params.probabilities
        fhat = (hist.astype(np.float64) / n - q) / (p - q)
        fhat = np.clip(fhat, 0.0, 1.0) if clip else fhat
        return fhat * n if counts else fhat

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        counts, n = state["counts"], int(state["n"][0])
        if n >= 2**63:
            raise FormatError(f"stored report count {n} is out of range")
        # every report is a set of exactly k distinct values
        if counts.size and int(counts.max()) > n:
            raise FormatError("stored counts exceed the number of reports")
        total = _exact_sum(counts)
        if total != self.params.k * n:
            raise FormatError(f"stored counts sum to {total}, not k n = {self.params.k * n} "
                              f"(each report holds k = {self.params.k} values)")

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State(counts=np.array(state["counts"], dtype=np.uint64),
                          n=np.array(state["n"], dtype=np.uint64).reshape(1))


def _example() -> Tuple[SubsetSelectionParams, np.ndarray]:
    params = SubsetSelectionParams(epsilon=1.0, d=300)
    rng = np.random.default_rng(1)
    return params, np.minimum(rng.zipf(1.3, size=2000) - 1, 299)


def _effective_epsilon(params: SubsetSelectionParams) -> float:
    # P(include) (d-k) / (P(exclude) k), from the integer threshold
    t = params.exclude_threshold
    return log_ratio((2**64 - t) * (params.d - params.k), t * params.k)


def _audit_plan(params: SubsetSelectionParams) -> Plan:
    def events(reports: SubsetSelectionReports) -> Tuple[np.ndarray, np.ndarray]:
        has0, has1 = (np.any(reports.items == v, axis=1) for v in (0, 1))
        return has0 & ~has1, has1 & ~has0
    return Plan(value_inputs(0, 1), events, ("x0 in S, x1 not", "x1 in S, x0 not"))


def _channel(server: SubsetSelectionServer, candidates: Optional[ArrayLike]) -> Channel:
    from ...estimation import support_channel

    params = server.params
    counts = server._counts
    if candidates is not None:
        counts = counts[check_values(candidates, params.d, "candidates", "values in", distinct=True)]
    p, q = params.probabilities
    return support_channel(counts, server.n, p, q, rest=counts.size < params.d, what="subset membership")


def _compare(epsilon: float, d: int, n: int, f_star: float, **_: Any) -> List[ComparisonRow]:
    from ...theory.ocms import affine_l2

    if d > MAX_D:
        return []
    sp = SubsetSelectionParams(epsilon=epsilon, d=d)
    return [ComparisonRow("SS", sp.k, sp.communication_bits, lambda f: sp.variance(n, f),
                          affine_l2(lambda f: sp.variance(n, f), d),
                          f"k = {sp.k} of d values per report (Ye-Barg / Wang et al.)",
                          server_ops=lambda n_, q: float(n_) * sp.k + d + q, state_bytes=lambda n_, q: 8.0 * d,
                          build=lambda: sp)]


def _simulations() -> Tuple[Algorithm]:
    from ...experiments import Algorithm

    return (Algorithm("ss", "SS", "protocols.frequency.subset_selection",
                      lambda eps, data, gen: SubsetSelectionParams(epsilon=eps, d=data.d),
                      simulated_own_variance, simulated_own_l2,
                      "Subset Selection, k ~ d/(e^eps+1) (O(d) work per user)"),)


_base.register_protocol(_base.Protocol(
    "ss", SubsetSelectionParams, SubsetSelectionReports, SubsetSelectionServer, SubsetSelectionClient,
    example=_example, variance=own_variance, compare=_compare, channel=_channel,
    extremes=edges(d=(2, 2**20), k=(1, 2**20)),
    simulations=_simulations, audit=AuditHooks(lambda e, **kw: SubsetSelectionParams(epsilon=e, d=4, **kw), _audit_plan,
                                               _effective_epsilon)))

if not TYPE_CHECKING:  # the bare names of ldpfast 0.2
    __getattr__ = deprecated_names(__name__, "ss", {
        "Params": SubsetSelectionParams, "Client": SubsetSelectionClient,
        "Server": SubsetSelectionServer, "Reports": SubsetSelectionReports})
