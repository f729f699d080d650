"""Marginal frequencies of several categorical attributes, over a per-attribute frequency
oracle (``grr``, ``oue`` or ``olh``; :mod:`._records`). Three ways to spend one record's budget
``epsilon`` on ``A`` attributes:

* ``spl`` (splitting): every attribute reported with ``epsilon/A``; sequential composition
  makes the whole record ``epsilon``-LDP. Estimator ``(C_j(v)/n - q)/(p - q)``.
* ``smp`` (sampling): each user reports one uniformly sampled attribute, with the whole
  ``epsilon``, and says which. The report is ``epsilon``-LDP for the whole record (the sampled
  index does not depend on the record); the server estimates attribute ``j`` from the
  ``n_j`` users who sampled it.
* ``rsfd`` (random sampling plus fake data, Arcolezi, Couchot, Al Bouna, Xiao, CIKM 2021):
  each user samples one attribute, reports it through the oracle and reports every other
  attribute as the oracle's report of a uniformly drawn fake value, so the sampled attribute is
  not revealed. The oracle's estimate ``fo_j`` over all ``n`` reports estimates
  ``g = f/A + (1 - 1/A)/k_j`` (the true value with probability ``1/A``, a uniform one
  otherwise), hence ``fhat = A fo_j - (A - 1)/k_j``, unbiased.

  **Budget.** With ``amplified=False`` (default) each attribute's oracle runs at ``epsilon``:
  the report is a mixture over the sampled attribute of reports each ``epsilon``-LDP, so the
  whole record is ``epsilon``-LDP. The paper runs the oracle at the amplified
  ``eps' = ln(A (e^epsilon - 1) + 1)`` (``amplified=True``), which bounds by ``epsilon`` only
  the change of *one* attribute: two records differing in every attribute are told apart
  with likelihood ratio ``e^eps'`` (the report supporting the first in every attribute), so
  the whole record then costs ``eps'``. Such parameters emit a :class:`PrivacyWarning`.

Every server holds support counts (``counts``, one per (attribute, value)), the report count
``n`` and for SMP the reports per attribute, so merges are exact. ``estimate()`` gives every
attribute's frequency vector, concatenated (``d = sum(domains)`` cells; attribute ``j``'s
value ``v`` is cell ``offsets[j] + v``); :meth:`RecordFrequencyServer.marginal` one attribute's,
labelled, with standard errors.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ... import _base, _core
from ..._aggregator import _exact_sum
from ..._budget import amplified, split
from ..._delta import _State
from ..._random import KeySource
from ..._validate import MIN_EPSILON, candidate_array, check_array, check_bool
from ...errors import FormatError, ParameterError, PrivacyWarning, ReportError
from ...estimates import PLUG_IN
from ._record_hooks import largest_epsilon, register_records, summed_epsilon
from ._records import Oracle, RecordParams, check_records, state_layout, support_variance
from ._tables import Marginal, marginal_table

__all__ = ["SPLParams", "SMPParams", "RSFDParams", "RecordReports", "SMPReports", "SPLClient", "SMPClient",
           "RSFDClient", "RecordFrequencyServer", "SPLServer", "SMPServer", "RSFDServer", "uniform_below"]


# -- parameters ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SPLParams(RecordParams):
    """SPL: every attribute's oracle at ``epsilon / A`` (the whole record: ``epsilon``)."""

    protocol: ClassVar[str] = "spl"

    def oracle_budgets(self) -> List[float]:
        """``epsilon / A``, rounded down so that the ``A`` budgets add up to at most ``epsilon``."""
        return [split(self.epsilon, len(self.domains))] * len(self.domains)

    @property
    def min_epsilon(self) -> float:
        """The smallest epsilon accepted: every attribute's share at least the oracles' least."""
        return MIN_EPSILON * len(self.domains)


@dataclasses.dataclass(frozen=True)
class SMPParams(RecordParams):
    """SMP: one sampled attribute per user, its oracle at ``epsilon`` (the whole record: ``epsilon``)."""

    protocol: ClassVar[str] = "smp"


@dataclasses.dataclass(frozen=True)
class RSFDParams(RecordParams):
    """RS+FD. ``amplified``: run the oracles at the paper's ``ln(A (e^epsilon - 1) + 1)``,
    which is ``epsilon``-LDP only against a change of one attribute (module doc; a
    PrivacyWarning); default False: at ``epsilon``, the whole record ``epsilon``-LDP."""

    protocol: ClassVar[str] = "rsfd"
    amplified: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "amplified", check_bool("amplified", self.amplified))
        super().__post_init__()
        self._check_units()
        if self.amplified:
            warnings.warn(self.privacy_warning(), PrivacyWarning, stacklevel=3)

    @property
    def oracle_epsilon(self) -> float:
        if not self.amplified:
            return self.epsilon
        return amplified(self.epsilon, len(self.domains))

    @property
    def record_epsilon(self) -> float:
        """What a user's whole record costs: the oracle's budget (module doc)."""
        return self.oracle_epsilon

    def oracle_budgets(self) -> List[float]:
        return [self.oracle_epsilon] * len(self.domains)

    def privacy_warning(self) -> str:
        return (f"RS+FD with amplified=True runs each oracle at eps'={self.oracle_epsilon:.4g}: epsilon="
                f"{self.epsilon:g} bounds only the change of one attribute; a whole record costs eps'")


# -- reports ----------------------------------------------------------------------------------------
@dataclasses.dataclass(eq=False)
class RecordReports(_base.Reports):
    """A report per user of every attribute: ``y``, ``uint64[n, W]``, each attribute's oracle
    report in its ``width`` words, attribute after attribute."""

    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"y": ("uint64", 2)}
    y: np.ndarray

    def __post_init__(self) -> None:
        self.y = check_array("y", self.y, np.uint64, 2, cast=True)


@dataclasses.dataclass(eq=False)
class SPLReports(RecordReports):
    protocol: ClassVar[str] = "spl"


@dataclasses.dataclass(eq=False)
class RSFDReports(RecordReports):
    protocol: ClassVar[str] = "rsfd"


@dataclasses.dataclass(eq=False)
class SMPReports(_base.Reports):
    """Reports of one sampled unit per user: its index ``group`` (SMP: the attribute) and its
    oracle report ``y`` (``uint64[n, W]``, ``W`` the widest unit's words; the unused words 0)."""

    protocol: ClassVar[str] = "smp"
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"group": ("uint64", 1), "y": ("uint64", 2)}
    group: np.ndarray
    y: np.ndarray

    def __post_init__(self) -> None:
        self.group = check_array("group", self.group, np.uint64, 1, cast=True)
        self.y = check_array("y", self.y, np.uint64, 2, cast=True)
        self._check_lengths()


# -- clients ----------------------------------------------------------------------------------------
def uniform_below(keys: KeySource, n: int, bound: int) -> np.ndarray:
    """``n`` uniform draws from ``[0, bound)`` out of the ChaCha20 stream: randomized response
    on ``[0, bound]`` from 0 that always flips lands uniformly on ``[1, bound]`` (threshold
    ``2^64 - 1``: it keeps 0 with probability 2^-64, redrawn)."""
    out = np.zeros(n, dtype=np.uint64)
    todo = np.arange(n)
    while todo.size:
        draw = _core.randomized_response(keys.key(), np.zeros(todo.size, dtype=np.uint64), bound + 1, 2**64 - 1)
        out[todo] = draw - 1
        todo = todo[draw == 0]
    return out


def uniform_digits(keys: KeySource, n: int, radices: Sequence[int]) -> np.ndarray:
    """``n`` rows of independent uniform digits, digit ``j`` in ``[0, radices[j])``
    (``int64[n, len(radices)]``): one :func:`uniform_below` draw over the product of as many
    consecutive radices as fit below 2^62, split into its mixed-radix digits."""
    out = np.empty((n, len(radices)), dtype=np.int64)
    start = 0
    while start < len(radices):
        stop, product = start, 1
        while stop < len(radices) and product * radices[stop] < 2**62:
            product *= radices[stop]
            stop += 1
        draw = uniform_below(keys, n, product)
        for j in range(start, stop):
            draw, digit = np.divmod(draw, np.uint64(radices[j]))
            out[:, j] = digit
        start = stop
    return out


class _RecordClient(_base.ClientBase):
    """A record protocol's client: ``perturb(records)``, records an ``int64[n, A]`` array or a
    mapping of attribute name to column (:func:`._records.check_records`). ``rng=None``
    (default) draws every choice from OS entropy; a seed is for simulation only."""

    params: RecordParams

    def __init__(self, params: Any, rng: Any = None, threads: int = 0):
        super().__init__(params, rng, threads)
        if isinstance(params, RSFDParams) and params.amplified:
            warnings.warn(params.privacy_warning(), PrivacyWarning, stacklevel=2)
        self._oracles = params.oracles()
        self._clients = [oracle.client(self._keys) for oracle in self._oracles]

    def _blocks(self, x: np.ndarray) -> List[np.ndarray]:
        return [o.perturb(c, np.ascontiguousarray(x[:, j], dtype=np.uint64))
                for j, (o, c) in enumerate(zip(self._oracles, self._clients))]

    def _units(self, records: Any) -> np.ndarray:
        return self.params.unit_values(check_records(records, self.params))


class SPLClient(_RecordClient):
    reports_type: ClassVar[type] = SPLReports

    def perturb(self, records: Any) -> RecordReports:
        """Every unit (SPL: attribute) of every record through its oracle (SPL: at ``epsilon / A``)."""
        x = self._units(records)
        reports: RecordReports = self.reports_type(y=np.hstack(self._blocks(x)) if len(x) else _empty(self._oracles))
        return reports


class RSFDClient(_RecordClient):
    def perturb(self, records: Any) -> RSFDReports:
        """The sampled attribute's true value and uniform fake values of the others, each
        through its attribute's oracle."""
        x = self._units(records)
        n = len(x)
        digits = uniform_digits(self._keys, n, [len(self._oracles), *self.params.unit_domains()])
        sampled, mixed = digits[:, 0], digits[:, 1:]
        mixed[sampled[:, None] == np.arange(len(self._oracles))] = x[np.arange(n), sampled]
        return RSFDReports(y=np.hstack(self._blocks(mixed)) if n else _empty(self._oracles))


class SMPClient(_RecordClient):
    reports_type: ClassVar[type] = SMPReports

    def perturb(self, records: Any) -> SMPReports:
        """One uniformly sampled unit (SMP: attribute) per record, through its oracle at ``epsilon``."""
        x = self._units(records)
        n = len(x)
        sampled = uniform_below(self._keys, n, len(self._oracles))
        y = np.zeros((n, max(o.width for o in self._oracles)), dtype=np.uint64)
        for j, (oracle, client) in enumerate(zip(self._oracles, self._clients)):
            rows = np.flatnonzero(sampled == j)
            if rows.size:
                y[rows, :oracle.width] = oracle.perturb(client, np.ascontiguousarray(x[rows, j], dtype=np.uint64))
        reports: SMPReports = self.reports_type(group=sampled, y=y)
        return reports


def _empty(oracles: Sequence[Oracle]) -> np.ndarray:
    return np.zeros((0, sum(o.width for o in oracles)), dtype=np.uint64)


# -- servers ----------------------------------------------------------------------------------------
class RecordFrequencyServer(_base.Aggregator):
    """Support counts per (attribute, value) and the report count. Thread-safe (see
    :class:`ldpfast._base.Aggregator`)."""

    params: RecordParams

    def __init__(self, params: RecordParams):
        super().__init__(params)
        self._oracles = params.oracles()
        self._st = _State({name: np.zeros(shape, dtype=dtype)
                           for name, (shape, dtype) in state_layout(params, self._extra_state(params)).items()})

    @classmethod
    def _extra_state(cls, params: Any) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        """State arrays beside the counts and ``n`` (SMP: the reports per unit)."""
        return {}

    @classmethod
    def _state_layout(cls, params: Any) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        return state_layout(params, cls._extra_state(params))

    @property
    def n(self) -> int:
        return int(self._st["n"][0])

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State({name: np.array(value, dtype=np.uint64) for name, value in state.items()})

    def _blocks(self, y: np.ndarray) -> List[np.ndarray]:
        starts = np.cumsum([0] + [o.width for o in self._oracles])
        return [y[:, starts[j]:starts[j + 1]] for j in range(len(self._oracles))]

    def _validate(self, reports: RecordReports) -> None:
        width = sum(o.width for o in self._oracles)
        if reports.y.shape[1] != width:
            raise ReportError(f"y must have {width} words per report (the attributes' oracle reports), "
                              f"got shape {reports.y.shape}")
        if self.params.oracle == "grr":                # one symbol per unit: checked in one pass
            units = np.broadcast_to(np.arange(len(self._oracles)), reports.y.shape)
            self._check_symbols(reports.y, units)
            return
        for name, oracle, block in zip(self.params.unit_names, self._oracles, self._blocks(reports.y)):
            oracle.check(block, f"the report of {name!r}")

    def _check_symbols(self, symbols: np.ndarray, units: np.ndarray) -> None:
        """GRR: ReportError unless every symbol is below its unit's domain."""
        bad = symbols >= np.asarray(self.params.unit_domains(), dtype=np.uint64)[units]
        if bool(bad.any()):
            row, column = np.unravel_index(int(np.argmax(bad)), bad.shape)
            j = int(units[row, column])
            raise ReportError(f"the report of {self.params.unit_names[j]!r} must be a symbol in "
                              f"[0, {self.params.unit_domains()[j]}), got {int(symbols[row, column])} at report {row}")

    def _grr_counts(self, symbols: np.ndarray, units: np.ndarray) -> np.ndarray:
        """GRR: the support counts of every cell in one pass (a symbol supports only itself)."""
        cells = self.params.offsets[units] + symbols.astype(np.int64)
        return np.bincount(cells.ravel(), minlength=self.params.d).astype(np.uint64)

    def _ingest(self, reports: RecordReports) -> _base.Delta:
        if self.params.oracle == "grr":
            support = self._grr_counts(reports.y, np.broadcast_to(np.arange(len(self._oracles)), reports.y.shape))
        else:
            support = np.concatenate([o.support(b) for o, b in zip(self._oracles, self._blocks(reports.y))])
        return self._delta().add_dense("counts", support, "adding a batch").add("n", [len(reports)])

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        self._check_counts(state, np.full(len(self._oracles), int(state["n"][0]), dtype=object))

    def _check_counts(self, state: Dict[str, np.ndarray], reports: np.ndarray) -> None:
        """Support counts at most the unit's reports (GRR: summing to them)."""
        offsets = self.params.offsets
        for j, name in enumerate(self.params.unit_names):
            cells = state["counts"][offsets[j]:offsets[j + 1]]
            if cells.size and int(cells.max()) > reports[j]:
                raise FormatError(f"a stored count of {name!r} exceeds its {reports[j]} reports")
            if self.params.oracle == "grr" and _exact_sum(cells) != reports[j]:
                raise FormatError(f"stored counts of {name!r} do not sum to its {reports[j]} reports")

    def _attribute_reports(self) -> np.ndarray:
        """The reports each unit's estimate rests on."""
        return np.full(len(self._oracles), float(self.n))

    def _raw_cells(self) -> np.ndarray:
        """Each attribute's oracle estimate ``(C/n_j - q)/(p - q)`` over its reports, concatenated."""
        offsets, counts, n = self.params.offsets, self._st["counts"], self._attribute_reports()
        return np.concatenate([o.debias(counts[offsets[j]:offsets[j + 1]], n[j]) if n[j] else
                               np.full(o.k, np.nan) for j, o in enumerate(self._oracles)])

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Every attribute's estimated frequencies, concatenated (cell ``offsets[j] + v``), or
        those of ``candidates`` (cells in ``[0, d)``); ``counts=True`` gives ``n fhat``. NaN for
        an attribute no report sampled (SMP)."""
        self._check_query(candidates, 40, self.params.d, f"a {self.protocol!r} query")
        if self.n == 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        fhat = self._cells()
        if candidates is not None:
            fhat = fhat[candidate_array(candidates, self.params.d)]
        return np.asarray(fhat * self.n if counts else fhat, dtype=np.float64)

    def _cells(self) -> np.ndarray:
        return self._raw_cells()

    def cell_variance(self, f: Any, cells: np.ndarray) -> np.ndarray:
        """``Var(fhat)`` of ``cells`` at true frequencies ``f`` (closed form, fixed data)."""
        attribute = np.searchsorted(self.params.offsets, cells, side="right") - 1
        p = np.array([o.p for o in self._oracles])[attribute]
        q = np.array([o.q for o in self._oracles])[attribute]
        return support_variance(p, q, self._attribute_reports()[attribute], f)

    def marginal(self, attributes: Any, labels: Optional[Mapping[str, Sequence[str]]] = None,
                 confidence: float = 0.95) -> Marginal:
        """The frequency table of one attribute (a one-item list or a name), labelled, with
        standard errors and ``confidence`` intervals (:class:`._tables.Marginal`). These
        protocols estimate one attribute at a time: a query of several attributes is refused
        (use ``calm`` or ``joint`` for k-way marginals)."""
        names = [attributes] if isinstance(attributes, (str, int)) else list(attributes)
        if len(names) != 1:
            raise ParameterError(f"attributes must name one attribute: {self.protocol!r} estimates one attribute "
                                 f"at a time (calm or joint estimate k-way marginals), got {attributes!r}")
        j = self.params.attribute(names[0])
        cells = np.arange(self.params.offsets[j], self.params.offsets[j + 1])
        values = self.estimate(cells)
        std = np.sqrt(self.cell_variance(np.clip(values, 0.0, 1.0), cells))
        return marginal_table(self.params, [j], values, std, confidence, labels,
                              f"{PLUG_IN} ({self.protocol}: the oracle's closed form at the estimates)")


class SPLServer(RecordFrequencyServer):
    protocol: ClassVar[str] = "spl"
    params_type: ClassVar[type] = SPLParams
    reports_type: ClassVar[Optional[type]] = SPLReports


class RSFDServer(RecordFrequencyServer):
    """RS+FD: ``fhat = A fo_j - (A - 1)/k_j`` from the oracle's estimate ``fo_j`` over all reports."""

    protocol: ClassVar[str] = "rsfd"
    params_type: ClassVar[type] = RSFDParams
    reports_type: ClassVar[Optional[type]] = RSFDReports

    def _cells(self) -> np.ndarray:
        a = len(self.params.domains)
        fake = np.repeat([(a - 1) / k for k in self.params.domains], self.params.domains)  # units: the attributes
        return np.asarray(a * self._raw_cells() - fake)

    def cell_variance(self, f: Any, cells: np.ndarray) -> np.ndarray:
        """``A^2 P(1-P)/(n (p-q)^2) - f(1-f)/n`` with ``P = q + (p - q) g`` the mean support
        probability and ``g = f/A + (1 - 1/A)/k``: each user's support of a value is one
        Bernoulli, its probability ``P_i`` varying by ``(p - q)/A`` between holders and others."""
        a = len(self.params.domains)
        attribute = np.searchsorted(self.params.offsets, cells, side="right") - 1
        p = np.array([o.p for o in self._oracles])[attribute]
        q = np.array([o.q for o in self._oracles])[attribute]
        k = np.array(self.params.domains, dtype=np.float64)[attribute]
        f = np.asarray(f, dtype=np.float64)
        mean = q + (p - q) * (f / a + (1 - 1 / a) / k)
        return np.asarray(a * a * mean * (1 - mean) / (self.n * (p - q) ** 2) - f * (1 - f) / self.n)


class SMPServer(RecordFrequencyServer):
    """SMP: unit (attribute) ``j`` estimated from the ``n_j`` reports that sampled it (``sampled``)."""

    protocol: ClassVar[str] = "smp"
    params_type: ClassVar[type] = SMPParams
    reports_type: ClassVar[Optional[type]] = SMPReports

    @classmethod
    def _extra_state(cls, params: Any) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        return {"sampled": ((len(params.unit_domains()),), "uint64")}

    def _validate(self, reports: SMPReports) -> None:  # type: ignore[override]
        units = len(self._oracles)
        width = max(o.width for o in self._oracles)
        if reports.y.shape[1] != width:
            raise ReportError(f"y must have {width} words per report, got shape {reports.y.shape}")
        if reports.group.size and int(reports.group.max()) >= units:
            bad = int(np.argmax(reports.group >= np.uint64(units)))
            raise ReportError(f"group must be in [0, {units}), got {int(reports.group[bad])} at report {bad}")
        if self.params.oracle == "grr":                # one word per report: checked in one pass
            self._check_symbols(reports.y, reports.group.astype(np.intp).reshape(-1, 1))
            return
        for j, (name, oracle) in enumerate(zip(self.params.unit_names, self._oracles)):
            index = np.flatnonzero(reports.group == j)
            rows = reports.y[index]
            oracle.check(rows[:, :oracle.width], f"the report of {name!r}", index)
            spare = (rows[:, oracle.width:] != 0).any(axis=1)
            if bool(spare.any()):
                raise ReportError(f"the words of a report of {name!r} past its {oracle.width} must be 0, got "
                                  f"{rows[int(np.argmax(spare))].tolist()} at report {int(index[np.argmax(spare)])}")

    def _ingest(self, reports: SMPReports) -> _base.Delta:  # type: ignore[override]
        groups = reports.group.astype(np.intp)
        if self.params.oracle == "grr":
            support = self._grr_counts(reports.y, groups.reshape(-1, 1))
        else:
            support = np.concatenate([o.support(reports.y[groups == j][:, :o.width])
                                      for j, o in enumerate(self._oracles)])
        sampled = np.bincount(groups, minlength=len(self._oracles)).astype(np.uint64)
        return (self._delta().add_dense("counts", support, "adding a batch")
                .add("n", [len(reports)]).add_dense("sampled", sampled, "adding a batch"))

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        _base.Aggregator._check_state(self, state)
        if _exact_sum(state["sampled"]) != int(state["n"][0]):
            raise FormatError("stored reports per group do not sum to n")
        self._check_counts(state, np.array([int(v) for v in state["sampled"]], dtype=object))

    def _attribute_reports(self) -> np.ndarray:
        return np.asarray(self._st["sampled"], dtype=np.float64)

    def cell_variance(self, f: Any, cells: np.ndarray) -> np.ndarray:
        """The oracle's variance over the ``n_j`` reports, plus the sampling of which users
        reported unit ``j``: ``f(1-f)(n - n_j)/(n_j (n - 1))`` (a random subset of the
        users; finite-population correction)."""
        attribute = np.searchsorted(self.params.offsets, cells, side="right") - 1
        n_j, n = self._attribute_reports()[attribute], float(self.n)
        f = np.asarray(f, dtype=np.float64)
        sampling = f * (1 - f) * (n - n_j) / (n_j * max(n - 1.0, 1.0))
        return np.asarray(super().cell_variance(f, cells) + sampling)


# -- registration ------------------------------------------------------------------------------------
register_records("spl", SPLParams, SPLReports, SPLServer, SPLClient, False, summed_epsilon)
register_records("smp", SMPParams, SMPReports, SMPServer, SMPClient, True, largest_epsilon)
register_records("rsfd", RSFDParams, RSFDReports, RSFDServer, RSFDClient, False, largest_epsilon)
