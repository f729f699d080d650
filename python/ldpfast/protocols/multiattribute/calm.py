"""k-way marginals of categorical attributes: CALM (Zhang, Wang, Li, He, Chen, "CALM:
Consistent Adaptive Local Marginal for Marginal Release under Local Differential Privacy",
CCS 2018) and the baseline of one oracle on the full joint domain.

**CALM** (``calm``): the server fixes a set of marginals (attribute sets; default every
2-way marginal). Each user samples one of them uniformly, and reports which, and its cell of
that marginal through the oracle (OLH by default, as in the paper) with the whole
``epsilon``: the report is a mixture over the marginal, each branch ``epsilon``-LDP, so a
user's whole record costs ``epsilon``. The server estimates each collected marginal from its
group's reports (unbiased; :meth:`CALMServer.estimate` gives these cells), then
post-processes them (:mod:`._consistency`): overall consistency across overlapping marginals
and Norm-Sub alternated. :meth:`CALMServer.marginal` answers a query contained in a collected
marginal by projecting the consistent table (with the standard error of the unbiased
projection), and any other query by the maximum-entropy table matching the collected
marginals' projections (the paper's reconstruction; no standard error). The paper also
chooses the number and size of the marginals from ``n``, ``epsilon`` and ``d`` (its
section 5); here the caller chooses them (``marginals``, :meth:`CALMParams.all_way`).

**Full joint** (``joint``): every user reports its cell of the product of all attributes'
domains through one oracle at ``epsilon`` (GRR by default; at most 2^20 cells); a marginal
is the sum of the joint estimates over the other attributes (unbiased, Norm-Sub applied to
the table's ``estimate``).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...errors import ParameterError, ReportError
from ...estimates import PLUG_IN
from ...postprocessing import norm_sub
from ._consistency import Key, consistent_tables, max_entropy, project
from ._record_hooks import largest_epsilon, register_records
from ._records import MAX_ATTRIBUTES, Oracle, RecordParams, projected_variance
from ._tables import Marginal, marginal_table
from .multifreq import RecordFrequencyServer, RecordReports, SMPReports, SMPClient, SMPServer, SPLClient

__all__ = ["CALMParams", "CALMReports", "CALMClient", "CALMServer", "JointParams", "JointReports", "JointClient",
           "JointServer", "Marginal"]

#: Most marginals a CALM collection may have.
MAX_MARGINALS = 4096


def _query(params: RecordParams, attributes: Any) -> List[int]:
    """The queried attributes' indices, in the query's order (ParameterError naming an
    unknown or repeated attribute)."""
    names = [attributes] if isinstance(attributes, (str, int)) else list(attributes)
    if not names:
        raise ParameterError("attributes must name at least one attribute, got none")
    found = [params.attribute(name) for name in names]
    if len(set(found)) != len(found):
        raise ParameterError(f"attributes must be distinct, got {attributes!r}")
    return found


def _in_query_order(table: np.ndarray, key: Key, query: List[int]) -> np.ndarray:
    """``table`` over the sorted ``key``, its axes put in the query's order, flattened."""
    return np.asarray(np.transpose(table, [key.index(a) for a in query]).ravel())


# -- CALM ------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CALMParams(RecordParams):
    """CALM. ``marginals``: the collected marginals, each a tuple of attributes (names or
    indices; stored as ascending indices); default every 2-way marginal (every attribute
    alone when there is one). ``oracle``: default ``olh`` (the paper's); a report costs the
    server one hash per cell of its marginal."""

    protocol: ClassVar[str] = "calm"
    oracle: str = "olh"
    marginals: Optional[Tuple[Tuple[int, ...], ...]] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        count = len(self.domains)
        chosen = self.marginals
        if chosen is None:
            chosen = tuple(itertools.combinations(range(count), min(2, count)))
        if not isinstance(chosen, (tuple, list)) or not 1 <= len(chosen) <= MAX_MARGINALS:
            raise ParameterError(f"marginals must be a tuple of 1 to {MAX_MARGINALS} attribute tuples, got {chosen!r}")
        resolved = []
        for m in chosen:
            if not isinstance(m, (tuple, list)) or not m:
                raise ParameterError(f"marginals must hold non-empty tuples of attributes, got {m!r}")
            key = tuple(sorted(self.attribute(a) for a in m))
            if len(set(key)) != len(key):
                raise ParameterError(f"a marginal must not repeat an attribute, got {m!r}")
            resolved.append(key)
        if len(set(resolved)) != len(resolved):
            raise ParameterError(f"marginals must be distinct, got {chosen!r}")
        object.__setattr__(self, "marginals", tuple(resolved))
        self._check_units()

    @classmethod
    def all_way(cls, epsilon: float, domains: Sequence[int], way: int, **options: Any) -> "CALMParams":
        """CALM collecting every ``way``-way marginal of the attributes."""
        if isinstance(way, bool) or not isinstance(way, int) or not 1 <= way <= min(len(domains), MAX_ATTRIBUTES):
            raise ParameterError(f"way must be an integer in [1, {len(domains)}] (the attributes), got {way!r}")
        return cls(epsilon=epsilon, domains=tuple(domains),
                   marginals=tuple(itertools.combinations(range(len(domains)), way)), **options)

    @property
    def keys(self) -> Tuple[Key, ...]:
        assert self.marginals is not None
        return self.marginals

    def unit_domains(self) -> List[int]:
        return [int(np.prod([self.domains[a] for a in key])) for key in self.keys]

    @property
    def unit_names(self) -> Tuple[str, ...]:
        return tuple("*".join(self.attribute_names[a] for a in key) for key in self.keys)

    def unit_values(self, records: np.ndarray) -> np.ndarray:
        """Each record's cell of each marginal (C order over its attributes)."""
        out = np.empty((len(records), len(self.keys)), dtype=np.int64)
        for j, key in enumerate(self.keys):
            out[:, j] = np.ravel_multi_index(tuple(records[:, a] for a in key), [self.domains[a] for a in key])
        return out


@dataclasses.dataclass(eq=False)
class CALMReports(SMPReports):
    """CALM reports: the sampled marginal (``group``) and the oracle report of the user's cell."""

    protocol: ClassVar[str] = "calm"


class CALMClient(SMPClient):
    """CALM client: ``perturb(records)``; one uniformly sampled marginal per record."""

    reports_type: ClassVar[type] = CALMReports


class CALMServer(SMPServer):
    """CALM collector: support counts of every collected marginal's cells and the reports per
    marginal; :meth:`tables` the post-processed marginals, :meth:`marginal` any k-way one."""

    protocol: ClassVar[str] = "calm"
    params_type: ClassVar[type] = CALMParams
    reports_type: ClassVar[Optional[type]] = CALMReports
    params: CALMParams

    def _raw_tables(self) -> Dict[Key, np.ndarray]:
        raw, offsets = self._raw_cells(), self.params.offsets
        return {key: raw[offsets[j]:offsets[j + 1]].reshape([self.params.domains[a] for a in key])
                for j, key in enumerate(self.params.keys)}

    def tables(self) -> Dict[Key, np.ndarray]:
        """The collected marginals after consistency and Norm-Sub, by attribute-index tuple
        (computed once per state). A marginal no report sampled is left out. The consistency
        weights are the reports per marginal: a cell's variance is inversely proportional to
        them for OLH (whatever the marginal's size); for GRR and OUE it also grows with the
        cells, so the weights are then an approximation (the result is consistent either way)."""
        cached = getattr(self._st, "consistent", None)
        if cached is None:
            if self.n == 0:
                raise ReportError("cannot estimate marginals from zero reports")
            reports = self._attribute_reports()
            raw = {key: table for j, (key, table) in enumerate(self._raw_tables().items()) if reports[j] > 0}
            weights = {key: float(reports[j]) for j, key in enumerate(self.params.keys) if reports[j] > 0}
            cached = consistent_tables(raw, weights)
            self._st.consistent = cached  # type: ignore[attr-defined]  # a cache, dropped by each commit
        return {key: table.copy() for key, table in cached.items()}

    def marginal(self, attributes: Any, labels: Optional[Mapping[str, Sequence[str]]] = None,
                 confidence: float = 0.95) -> Marginal:
        """The marginal of ``attributes`` (names or indices), labelled
        (:class:`._tables.Marginal`): projected from the smallest collected marginal that
        contains it (``raw``: the unbiased projection, with its closed-form standard error),
        else reconstructed by maximum entropy from the collected ones (no standard error)."""
        query = _query(self.params, attributes)
        key = tuple(sorted(query))
        tables = self.tables()
        covering = [k for k in tables if set(key) <= set(k)]
        if not covering:
            estimate = _in_query_order(max_entropy(key, self.params.domains, tables), key, query)
            nan = np.full(estimate.size, np.nan)
            return marginal_table(self.params, query, estimate, nan, confidence, labels,
                                  "maximum-entropy reconstruction from the collected marginals (CALM); no closed-form "
                                  "standard error", nan)
        best = min(covering, key=lambda k: tables[k].size)
        j = self.params.keys.index(best)
        estimate = _in_query_order(project(tables[best], best, key), key, query)
        raw = _in_query_order(project(self._raw_tables()[best], best, key), key, query)
        n_j, n = float(self._attribute_reports()[j]), float(self.n)
        cells = tables[best].size / estimate.size
        f = np.clip(raw, 0.0, 1.0)
        variance = projected_variance(self._oracles[j], cells, n_j, f) + f * (1 - f) * (n - n_j) / (n_j * max(n - 1, 1))
        return marginal_table(self.params, query, estimate, np.sqrt(variance), confidence, labels,
                              f"consistent projection of the collected marginal {self.params.unit_names[j]!r}; std: "
                              f"{PLUG_IN} of the unbiased projection (raw; _records.projected_variance)", raw)


# -- full joint ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class JointParams(RecordParams):
    """One oracle at ``epsilon`` on the product of the attributes' domains (at most 2^20 cells)."""

    protocol: ClassVar[str] = "joint"

    def unit_domains(self) -> List[int]:
        return [int(np.prod(self.domains))]

    @property
    def unit_names(self) -> Tuple[str, ...]:
        return ("*".join(self.attribute_names),)

    def unit_values(self, records: np.ndarray) -> np.ndarray:
        cells = np.ravel_multi_index(tuple(records.T), self.domains)
        return np.asarray(cells, dtype=np.int64).reshape(-1, 1)


@dataclasses.dataclass(eq=False)
class JointReports(RecordReports):
    protocol: ClassVar[str] = "joint"


class JointClient(SPLClient):
    """Full-joint client: ``perturb(records)``, each record's cell of the product domain."""

    reports_type: ClassVar[type] = JointReports


class JointServer(RecordFrequencyServer):
    """Full-joint collector: the oracle's support counts of every joint cell."""

    protocol: ClassVar[str] = "joint"
    params_type: ClassVar[type] = JointParams
    reports_type: ClassVar[Optional[type]] = JointReports
    params: JointParams

    def marginal(self, attributes: Any, labels: Optional[Mapping[str, Sequence[str]]] = None,
                 confidence: float = 0.95) -> Marginal:
        """The marginal of ``attributes``: the joint estimates summed over the other
        attributes (``raw``, unbiased, with its closed-form standard error), Norm-Sub applied
        for ``estimate``."""
        query = _query(self.params, attributes)
        key = tuple(sorted(query))
        everything = tuple(range(len(self.params.domains)))
        joint = self.estimate().reshape(self.params.domains)
        raw = _in_query_order(project(joint, everything, key), key, query)
        oracle: Oracle = self._oracles[0]
        variance = projected_variance(oracle, joint.size / raw.size, self.n, np.clip(raw, 0.0, 1.0))
        return marginal_table(self.params, query, norm_sub(raw), np.sqrt(variance), confidence, labels,
                              f"sum of the joint estimates (raw); estimate: Norm-Sub of it; std: {PLUG_IN} "
                              f"(_records.projected_variance)", raw)


register_records("calm", CALMParams, CALMReports, CALMServer, CALMClient, True, largest_epsilon, oracle="olh")
register_records("joint", JointParams, JointReports, JointServer, JointClient, False, largest_epsilon)
