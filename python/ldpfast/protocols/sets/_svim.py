"""What SVIM's three phases (:mod:`ldpfast.protocols.sets.svim`) share: the defaults of the pipeline, the
OLH range and candidate checks, the OLH parameter base, the client and collector bases (one
count per value of the phase's domain) and the registration hooks (example, simulation)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, List, Mapping, Tuple, Union

import numpy as np

from ... import _core
from ..._base import Aggregator, ClientBase, Delta, Params as _ParamsBase
from ..._delta import _State
from ..._random import KeySource
from ..._validate import candidate_array, check_below, check_int, check_real, check_threads, rr_threshold
from ...errors import FormatError, ParameterError, ReportError
from .._local_hashing import OLHReportColumns, check_olh_reports, debias_matches, default_g
from .._registration import random_sets

if TYPE_CHECKING:
    from .svim import SVIMItemParams, SVIMLengthParams, SVIMPaddedParams


#: SVIM's default user groups G1 / G2 / G3 (candidates / lengths / padded items).
SVIM_SHARES = (0.4, 0.1, 0.5)
#: SVIM's default coverage: L covers this share of the users' ``|S ∩ C|``.
SVIM_COVERAGE = 0.9
#: SVIM's default cap on L (R3 ``find_percentile_set``).
SVIM_MAX_L = 31
#: The smallest coverage: phase 3 divides its estimates, at most ``L 2^31`` in size (the
#: randomized response keeps ``p - q >= 2^-31``, ``_validate.rr_threshold``), by it, so
#: with ``L < 2^64`` they stay below ``2^159``; a coverage of 1e-320 made them infinite.
MIN_COVERAGE = 2.0**-64


def check_coverage(coverage: Any) -> float:
    """``coverage`` (the share of users' ``|S ∩ C|`` that L covers) in ``[MIN_COVERAGE, 1]``."""
    value = check_real("coverage", coverage, 0.0, 1.0, high_closed=True)
    if value < MIN_COVERAGE:
        raise ParameterError(f"coverage must be in [2^-64, 1] (phase 3 divides its estimates by it), got {coverage!r}")
    return value


def svim_g(epsilon: float, g: int) -> int:
    """OLH range in SVIM: ``g`` if given, else OLH's ``round(e^eps) + 1`` (R3's ``fo.lh``
    truncates, ``int(e^eps) + 1``; pass ``g`` to reproduce it)."""
    return check_int("g", g or default_g(epsilon), 2, 2**62)


def check_candidates(candidates: Any, d: int) -> Tuple[int, ...]:
    cand = candidate_array(candidates, d, distinct=True)
    if cand.size == 0:
        raise ParameterError("candidates must not be empty")
    return tuple(int(x) for x in cand)


class SVIMOLHParams(_ParamsBase):
    """OLH over the phase's own domain with the full epsilon and ``g`` of :func:`svim_g`."""

    # Fields of each phase's dataclass, declared here for the properties below.
    epsilon: float
    g: int

    @property
    def flip_probability(self) -> float:
        """GRR flip probability of the hashed value, ``(g-1)/(e^eps + g - 1)``."""
        return (self.g - 1) / (math.exp(self.epsilon) + self.g - 1)

    @property
    def flip_threshold(self) -> int:
        """The 64-bit threshold of that flip (rounded so OLH is at most eps-LDP)."""
        return rr_threshold(self.epsilon, self.g)


class SVIMClientBase(ClientBase):
    """Base of the SVIM clients (each checks the parameters of the protocol it is registered for)."""


def uniform_below(keys: KeySource, n: int, bound: int, threads: int) -> np.ndarray:
    """``n`` independent uniform draws from ``[0, bound)`` from the ChaCha20 stream: k-ary RR
    of the symbol 0 over ``[0, bound]`` that always flips lands uniformly on ``[1, bound]``;
    the threshold ``2^64 - 1`` keeps 0 with probability 2^-64, redrawn (exact rejection)."""
    out = np.zeros(n, dtype=np.uint64)
    todo = np.arange(n)
    while todo.size:
        draw = _core.randomized_response(keys.key(), np.zeros(todo.size, dtype=np.uint64), bound + 1, 2**64 - 1,
                                         threads)
        out[todo] = draw - 1
        todo = todo[draw == 0]
    return out


class SVIMServerBase(Aggregator):
    """Base of the SVIM collectors. State: ``n`` (reports) and ``counts`` (int64 per value of the phase's domain: OLH,
    the users whose hash of the value matches their report; GRR, the reports equal to it)."""

    reports_type: ClassVar[type] = OLHReportColumns
    params: Union[SVIMItemParams, SVIMLengthParams, SVIMPaddedParams]

    def __init__(self, params: Union[SVIMItemParams, SVIMLengthParams, SVIMPaddedParams], threads: int = 0):
        super().__init__(params)
        self.threads = check_threads(threads)
        self._st = _State(n=np.zeros(1, dtype=np.int64), counts=np.zeros(params.domain, dtype=np.int64))

    @classmethod
    def _state_layout(cls, params: Any) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        return {"n": ((1,), "int64"), "counts": ((params.domain,), "int64")}

    @property
    def _counts(self) -> np.ndarray:
        counts: np.ndarray = self._st["counts"]
        return counts

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State({k: np.array(state[k], dtype=np.int64) for k in ("n", "counts")})

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        n, counts = int(state["n"][0]), state["counts"]
        # OLH: a report matches each value at most once; GRR: it counts for one value
        if n < 0 or int(counts.min()) < 0 or int(counts.max()) > n or (
                not self._uses_olh() and float(counts.sum(dtype=np.float64)) != n):
            raise FormatError(f"stored counts do not fit the stored n = {n}")

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    def _uses_olh(self) -> bool:
        return True

    def _validate(self, reports: OLHReportColumns) -> None:
        p = self.params
        if self._uses_olh():
            check_olh_reports(reports, p)
        else:
            check_below(reports.z, p.domain, "z", label="|C| + dummies")
            if np.any(reports.a0) or np.any(reports.a1):
                raise ReportError("GRR reports must have a0 = a1 = 0")

    def _ingest(self, reports: OLHReportColumns) -> Delta:
        p = self.params
        delta = self._delta().add("n", [len(reports)])
        if not self._uses_olh():
            return delta.add_counts("counts", reports.z)
        self._check_call(8 * p.domain, f"matching a batch against the {p.domain} SVIM candidates")
        counts = np.zeros(p.domain, dtype=np.uint64)
        _core.ocms_count_range(_core.Field.prime(p.field_size), reports.z, reports.a0, reports.a1, p.g, 0,
                               counts, self.threads)
        return delta.add_nonzero("counts", counts)

    def _chat(self) -> np.ndarray:
        """Unbiased estimates of how many reporting users hold each value of the domain."""
        if self.n == 0:
            raise ReportError("estimate needs at least one report (n = 0)")
        return self.n * debias_matches(self._counts, self.n, self.params.epsilon, self.params.g)


def svim_example(params_type: Callable[..., _ParamsBase],
                 **kw: Any) -> Callable[[], Tuple[_ParamsBase, List[List[int]]]]:
    return lambda: (params_type(epsilon=2.0, d=60, **kw), random_sets(60))
